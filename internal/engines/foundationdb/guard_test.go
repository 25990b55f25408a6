package foundationdb

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
			sts := c.Groups[0].Object.DeepCopy()
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
