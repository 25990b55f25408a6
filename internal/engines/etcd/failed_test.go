package etcd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestFailedNeverCallsAHealthyMemberFailed: replace --failed reads "not in the database" from
// the member list. When the members' names and peer URLs do not map to the pods (a chart that
// names its members otherwise, a peer URL template that does not match), every healthy voter
// would read as missing and have its PVC wiped: refused (exit 5) instead, naming the members.
func TestFailedNeverCallsAHealthyMemberFailed(t *testing.T) {
	tests := []struct {
		name string
		// rename changes the fake members; nil keeps etcd-<o> on the template's URLs.
		rename  func(f *fakeEtcd)
		want    []string // candidates
		wantErr string
	}{{
		name: "members named like the pods",
	}, {
		name: "member names and peer URLs the pods do not give",
		rename: func(f *fakeEtcd) {
			f.memberOfPod = map[string]string{}
			for i, m := range f.members {
				f.memberOfPod[m.name] = "infra" + string(rune('0'+i))
				m.name = "infra" + string(rune('0'+i))
				m.peer = "http://10.9.0." + string(rune('1'+i)) + ":2380"
			}
		},
		wantErr: "infra0",
	}, {
		name: "one pod's member really gone, the others map",
		rename: func(f *fakeEtcd) {
			f.members = f.members[:2]
		},
		want: []string{"etcd-2"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEtcd(3, 0)
			if tt.rename != nil {
				tt.rename(f)
			}
			fx := newFixture(t, 3, f, func(*corev1.Container, map[string]string) {})
			for _, p := range fx.c.AllPods() {
				pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: p.PVCs[0], Namespace: testNS}}
				if _, err := fx.client.CoreV1().PersistentVolumeClaims(testNS).Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ops.FindFailed(context.Background(), fx.client, fx.c, ops.FailedOptions{Threshold: time.Hour, Now: time.Now()}, fx.eng)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ops.ErrPrecondition) || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("FindFailed = %v, %v; want a one-line refusal naming %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var pods []string
			for _, c := range got {
				pods = append(pods, c.Pod)
			}
			if strings.Join(pods, ",") != strings.Join(tt.want, ",") {
				t.Errorf("candidates %v, want %v", got, tt.want)
			}
		})
	}
}
