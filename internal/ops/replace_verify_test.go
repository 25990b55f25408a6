package ops

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
)

// TestReplacementVerifiesTheNewPVC: a replaced pod counts only once it is Ready on a NEW PVC.
// Back Ready with its PVC missing, or on the old PVC (its delete never took effect), the run
// refuses (precondition) instead of reporting a replacement that did not happen, and touches
// no further pod.
func TestReplacementVerifiesTheNewPVC(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, c *Cluster, client *k8stesting.Fake)
		message string
	}{
		{name: "PVC missing", message: "pod db-hot-0 is Ready but its PVC data-db-hot-0 does not exist"},
		{name: "old PVC kept", setup: func(t *testing.T, _ *Cluster, client *k8stesting.Fake) {
			// The delete is accepted and does nothing (a finalizer no one removes).
			client.PrependReactor("delete", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, nil
			})
		}, message: "pod db-hot-0 came back on its old PVC data-db-hot-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, client := zonedCluster()
			ctx := context.Background()
			for _, g := range c.Groups {
				for i := range g.Pods {
					name := "data-" + g.Pods[i].Name
					g.Pods[i].PVCs = []string{name}
					if _, err := client.CoreV1().PersistentVolumeClaims("prod").Create(ctx,
						&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", UID: types.UID(name + "-uid0")}},
						metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.setup != nil {
				tc.setup(t, c, &client.Fake)
			}
			ctrl := fakecluster.Start(t, client, "prod")
			p, err := (&Replacement{Client: client}).Plan(c, EngineGeneric, ReplaceRequest{Pods: []string{"db-hot-0", "db-hot-1"}, MaxConcurrent: 1})
			if err != nil {
				t.Fatal(err)
			}
			err = (&Executor{Locker: &memLocker{id: "a@b"}, Timeout: time.Minute}).Run(ctx, p)
			if ExitCode(err) != ExitPrecondition || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err %v, want the precondition %q", err, tc.message)
			}
			if d := ctrl.Deleted(); len(d) != 1 || d[0] != "db-hot-0" {
				t.Fatalf("deleted %v, want only db-hot-0", d)
			}
		})
	}
}

// TestReplacementRefusesWhileAnotherPodIsNotReady: a batch starts only while every pod of the
// cluster it does not replace is Ready; a pod that went down since the previous batch (after
// the preflight) stops the run before the next batch deletes anything.
func TestReplacementRefusesWhileAnotherPodIsNotReady(t *testing.T) {
	c, client := zonedCluster()
	ctx := context.Background()
	ctrl := fakecluster.Start(t, client, "prod")
	p, err := (&Replacement{Client: client}).Plan(c, EngineGeneric, ReplaceRequest{Pods: []string{"db-hot-0", "db-hot-1"}, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	// db-cold-0 fails while the first batch runs (after the preflight): its pod is deleted.
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.DeleteAction).GetName() != "db-hot-0" {
			return false, nil, nil
		}
		gvr := corev1.SchemeGroupVersion.WithResource("pods")
		obj, err := client.Tracker().Get(gvr, "prod", "db-cold-0")
		if err != nil {
			return true, nil, err
		}
		bad := obj.(*corev1.Pod).DeepCopy()
		bad.Status.Conditions[0].Status = corev1.ConditionFalse
		return false, nil, client.Tracker().Update(gvr, bad, "prod")
	})
	err = (&Executor{Locker: &memLocker{id: "a@b"}, Timeout: time.Minute}).Run(ctx, p)
	if ReasonOf(err) != ReasonPodNotReady || !strings.Contains(err.Error(), "pod db-cold-0 is not Ready; replacing db-hot-1 now would leave more pods unavailable") {
		t.Fatalf("err %v, want the refusal naming db-cold-0", err)
	}
	if d := ctrl.Deleted(); len(d) != 1 || d[0] != "db-hot-0" {
		t.Fatalf("deleted %v, want only db-hot-0", d)
	}
}
