package testbed

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The reaper deletes terminating pods on kwok nodes only, each with grace
// period 0 and its own UID as precondition (so a pod recreated under the
// same name can never be hit), and leaves real nodes' pods to their kubelets.
func TestReaperDeletesWithUIDPrecondition(t *testing.T) {
	now := metav1.Now()
	pod := func(name, node string, uid types.UID, terminating bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid}, Spec: corev1.PodSpec{NodeName: node}}
		if terminating {
			p.DeletionTimestamp = &now
		}
		return p
	}
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-node-0", Annotations: map[string]string{KwokNodeAnnotation: "fake"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "realnode-1"}},
		pod("web-0", "kwok-node-0", "old-uid", true),
		pod("web-1", "kwok-node-0", "uid-1", false),
		pod("etcd-0", "realnode-1", "uid-2", true),
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := RunReaper(ctx, client, t.Logf); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var deletes []k8stesting.DeleteActionImpl
	for time.Now().Before(deadline) {
		deletes = deletes[:0]
		for _, a := range client.Actions() {
			if d, ok := a.(k8stesting.DeleteActionImpl); ok {
				deletes = append(deletes, d)
			}
		}
		if len(deletes) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(deletes) != 1 || deletes[0].GetName() != "web-0" {
		t.Fatalf("deletes = %+v, want exactly web-0", deletes)
	}
	o := deletes[0].DeleteOptions
	if o.GracePeriodSeconds == nil || *o.GracePeriodSeconds != 0 || o.Preconditions == nil || o.Preconditions.UID == nil || *o.Preconditions.UID != "old-uid" {
		t.Errorf("delete options = %+v, want grace 0 and UID precondition old-uid", o)
	}
}
