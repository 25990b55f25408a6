package foundationdb

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestStatefulSetScaleWritesStopWhenLockLost: each write step of a StatefulSet scale down
// (fdbcli exclude and include, the replicas patch, the PVC deletes) run by a run that lost its
// lock (the executor's write guard refuses) returns the lock error and writes nothing: no
// fdbcli command that changes the cluster, no patch or delete.
func TestStatefulSetScaleWritesStopWhenLockLost(t *testing.T) {
	for _, id := range []string{"exclude", "replicas", "pvcs", "include"} {
		t.Run(id, func(t *testing.T) {
			c, model, ex := stsSimCluster(t, 5, 0, 1, 2)
			e, client := stsEngine(t, c, ex)
			sts := ops.StatefulSetOf(c.Groups[0]).DeepCopy()
			sts.ResourceVersion = ""
			if _, err := client.AppsV1().StatefulSets("demo").Create(t.Context(), sts, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, pod := range []string{"fdb-3", "fdb-4"} {
				pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + pod, Namespace: "demo"}}
				if _, err := client.CoreV1().PersistentVolumeClaims("demo").Create(t.Context(), pvc, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			to := int32(3)
			p, err := e.PlanScale(t.Context(), c, ops.ScaleRequest{Replicas: &to})
			if err != nil {
				t.Fatal(err)
			}
			var step *ops.Step
			for _, s := range p.Steps {
				if s.ID == id {
					step = s
				}
			}
			if step == nil {
				t.Fatalf("no step %s in the plan", id)
			}
			client.ClearActions()
			before := len(model.Log())
			lost := ops.Lockedf("lost the lock on cluster demo/fdb: denied")
			ctx := kube.WithWriteGuard(t.Context(), func() error { return lost })
			err = step.Action(ctx, nil)
			if !errors.Is(err, lost) {
				t.Errorf("step %s with the lock lost: err %v, want the lock error", id, err)
			}
			for _, a := range client.Actions() {
				if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
					t.Errorf("step %s wrote with the lock lost: %s %s", id, v, a.GetResource().Resource)
				}
			}
			for _, l := range model.Log()[before:] {
				if f := strings.Fields(l.Command); len(f) > 0 && f[0] != "status" {
					t.Errorf("step %s ran fdbcli %q with the lock lost", id, l.Command)
				}
			}
		})
	}
}

// TestCRPatchesStopWhenLockLost: every patch of the FoundationDBCluster (scale's counts and
// removals, replace's marks, the operator pause and deny list) run by a run that lost its lock
// (the write guard refuses) returns the lock error and sends no patch.
func TestCRPatchesStopWhenLockLost(t *testing.T) {
	lost := ops.Lockedf("lost the lock on cluster demo/myfdb: denied")
	tests := []struct {
		name  string
		write func(ctx context.Context, r *removal, u *unstructured.Unstructured) error
	}{
		{"scale counts", func(ctx context.Context, r *removal, _ *unstructured.Unstructured) error {
			return r.patchCounts(ctx, nil, map[string]int32{"storage": 2}, map[string]int{"storage": 3}, []string{"storage-11"})
		}},
		{"operator pause", func(ctx context.Context, r *removal, _ *unstructured.Unstructured) error {
			_, err := SetSkip(ctx, r.e.deps.Dynamic, "demo", "myfdb", true, Pause{})
			return err
		}},
		{"operator deny list", func(ctx context.Context, r *removal, u *unstructured.Unstructured) error {
			_, err := SetOperatorDeny(ctx, r.e.deps.Dynamic, u, "other-operator", false)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, e := liveCluster(t, 3, 3)
			withProcessGroups(c)
			obj := liveCR(c).Object
			obj["spec"] = map[string]any{"processCounts": map[string]any{"storage": int64(3)}}
			u := &unstructured.Unstructured{Object: obj}
			dyn := fakeCRClient(u.DeepCopy())
			e.deps.Dynamic = dyn
			r := &removal{e: e, c: c, name: "myfdb", planned: u, field: "processGroupsToRemove"}
			ctx := kube.WithWriteGuard(t.Context(), func() error { return lost })
			if err := tt.write(ctx, r, u); !errors.Is(err, lost) {
				t.Errorf("with the lock lost: err %v, want the lock error", err)
			}
			for _, a := range dyn.Actions() {
				if a.GetVerb() == "patch" {
					t.Errorf("patched with the lock lost: %v", a)
				}
			}
		})
	}
}
