package etcd

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestStepsRecheckLiveState: a plan made while etcd was fine meets a changed cluster when its
// step runs; each membership step re-reads etcd and the API and refuses, in one line, what
// the plan-time check would have refused, before any membership change or delete. Each case
// is the state one step-time check guards (hack/mutate/mutants.txt, etcd section).
func TestStepsRecheckLiveState(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int            // StatefulSet replicas and pods etcd-0..replicas-1
		setup    func(*fixture) // before planning
		target   int32          // scale --replicas
		change   func(*fixture) // after planning, before the run
		want     string         // the refusal
		also     []string       // more the refusal names
		claim    string         // a PVC that must still exist afterwards
	}{
		{
			// remove/etcd-2's precheck: a member that stays is down, so removing etcd-2
			// would leave one failure from no quorum.
			name: "remaining member down before a scale-down removal", replicas: 3, target: 2,
			change: func(fx *fixture) { fx.etcd.members[1].healthy = false },
			want:   "etcd member etcd-1",
		},
		{
			// add/etcd-3's precheck: a member fails after planning a scale-up; a learner
			// added now would join a cluster one failure from no quorum.
			name: "member down before a scale-up add", replicas: 3, target: 4,
			change: func(fx *fixture) { fx.etcd.members[1].healthy = false },
			want:   "etcd member etcd-1 (",
			also:   []string{"every member must be healthy to add etcd-3"},
		},
		{
			// remove/etcd-2's precheck: both members that stay are down, so no member but
			// the one being removed answers; the step reads etcd through it and refuses,
			// naming the members down, instead of failing with "no member answered".
			name: "quorum lost before a scale-down removal", replicas: 3, target: 2,
			change: func(fx *fixture) { fx.etcd.members[0].healthy, fx.etcd.members[1].healthy = false, false },
			want:   "refusing to remove etcd-2",
			also:   []string{"etcd member etcd-0", "etcd-1", "quorum lost"},
		},
		{
			// The same with member list linearizable (etcd 3.5+): etcd-2 cannot answer
			// either; the refusal names the pods whose members did not answer.
			name: "quorum lost before a scale-down removal, member list linearizable", replicas: 3, target: 2,
			change: func(fx *fixture) {
				fx.etcd.linearizable = true
				fx.etcd.members[0].healthy, fx.etcd.members[1].healthy = false, false
			},
			want: "refusing to remove etcd-2",
			also: []string{"no etcd member answers", "pod etcd-0", "pod etcd-1"},
		},
		{
			// cleanup's action: etcd-2 has no pod (replicas lowered to 2 by hand) but its
			// process still answers; etcd-1 fails after planning. Removing etcd-2 then leaves
			// 2 voters with 1 healthy: etcd would commit the removal and lose quorum.
			name: "stale member whose removal would lose quorum", replicas: 2, target: 2,
			setup: func(fx *fixture) {
				fx.etcd.members = append(fx.etcd.members, &fakeMember{id: 0xa2, name: "etcd-2", peer: "http://127.0.3.3:2380",
					client: "http://127.0.3.3:2379", healthy: true, index: 100})
			},
			change: func(fx *fixture) { fx.etcd.members[1].healthy = false },
			want:   "removing stale etcd member etcd-2 would lose quorum",
		},
		{
			// pvc/etcd-3 (data left by a killed scale-down): replicas raised again meanwhile,
			// so etcd-3 runs on that claim now.
			name: "pod back before its PVC deletion", replicas: 3, target: 3,
			setup: func(fx *fixture) {
				pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-etcd-3", Namespace: testNS}}
				if _, err := fx.client.CoreV1().PersistentVolumeClaims(testNS).Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			change: func(fx *fixture) {
				sts, err := fx.client.AppsV1().StatefulSets(testNS).Get(context.Background(), "etcd", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := fx.client.CoreV1().Pods(testNS).Create(context.Background(), fakecluster.Pod(sts, 3, types.UID("uid-3")), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			want:  "pod etcd-3 exists again",
			claim: "data-etcd-3",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEtcd(tc.replicas, 0)
			fx := newFixture(t, tc.replicas, f, nil)
			if tc.setup != nil {
				tc.setup(fx)
			}
			p, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &tc.target})
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			tc.change(fx)
			fx.client.ClearActions()
			err = (&ops.Executor{LockID: "test"}).Run(testCtx(t), p)
			if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v (exit %d), want exit %d with %q", err, ops.ExitCode(err), ops.ExitPrecondition, tc.want)
			}
			for _, w := range tc.also {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q does not name %s", err, w)
				}
			}
			if m := f.mutations(); len(m) != 0 {
				t.Errorf("refused step changed membership: %v", m)
			}
			for _, w := range fakecluster.Writes(fx.client) {
				if strings.HasPrefix(w, "delete") || strings.HasPrefix(w, "patch statefulsets") || strings.HasPrefix(w, "update statefulsets") {
					t.Errorf("refused step wrote %s (all writes: %v)", w, fakecluster.Writes(fx.client))
				}
			}
			if tc.claim != "" {
				if _, err := fx.client.CoreV1().PersistentVolumeClaims(testNS).Get(context.Background(), tc.claim, metav1.GetOptions{}); err != nil {
					t.Errorf("PVC %s: %v", tc.claim, err)
				}
			}
		})
	}
}

// TestPlanRefusesUnsafeRemovals: a plan that removes a member is refused before any write
// when etcd has no quorum, when a member that stays is down, or when the removal would leave
// etcd without a voter: replacing the only member of a one-member cluster (its data is the
// only copy), and scaling down to a member that is still a learner (an interrupted repair of
// etcd-0).
func TestPlanRefusesUnsafeRemovals(t *testing.T) {
	one := int32(1)
	for _, tc := range []struct {
		name string
		fake func() *fakeEtcd
		n    int
		plan func(*fixture) error
		want string
	}{
		{
			name: "replace the only member", n: 1,
			fake: func() *fakeEtcd { return newFakeEtcd(1, 0) },
			plan: func(fx *fixture) error {
				_, err := fx.eng.PlanReplacement(context.Background(), fx.c, ops.ReplaceRequest{Pods: []string{"etcd-0"}})
				return err
			},
			want: "removing etcd member etcd-0 would lose quorum",
		},
		{
			name: "scale down to a learner", n: 2,
			fake: func() *fakeEtcd {
				f := newFakeEtcd(2, 1)
				f.members[0].learner = true
				return f
			},
			plan: func(fx *fixture) error {
				_, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &one})
				return err
			},
			want: "removing etcd member etcd-1 would lose quorum",
		},
		{
			name: "replace with another member down: no quorum", n: 3,
			fake: func() *fakeEtcd {
				f := newFakeEtcd(3, 2)
				f.members[0].healthy, f.members[1].healthy = false, false
				return f
			},
			plan: func(fx *fixture) error {
				_, err := fx.eng.PlanReplacement(context.Background(), fx.c, ops.ReplaceRequest{Pods: []string{"etcd-1"}})
				return err
			},
			want: "etcd has no quorum",
		},
		{
			name: "replace with another member down", n: 3,
			fake: func() *fakeEtcd {
				f := newFakeEtcd(3, 2)
				f.members[0].healthy = false
				return f
			},
			plan: func(fx *fixture) error {
				_, err := fx.eng.PlanReplacement(context.Background(), fx.c, ops.ReplaceRequest{Pods: []string{"etcd-1"}})
				return err
			},
			want: "etcd member etcd-0",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fake()
			fx := newFixture(t, tc.n, f, nil)
			err := tc.plan(fx)
			if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v (exit %d), want exit %d with %q", err, ops.ExitCode(err), ops.ExitPrecondition, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("refusal is not one line: %q", err)
			}
			if w := fakecluster.Writes(fx.client); len(w) != 0 {
				t.Errorf("refused plan wrote %v", w)
			}
			if m := f.mutations(); len(m) != 0 {
				t.Errorf("refused plan changed membership: %v", m)
			}
		})
	}
}
