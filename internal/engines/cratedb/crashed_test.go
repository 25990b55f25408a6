package cratedb_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/cratedb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/fakes/cratedbtest"
)

// TestCrashedDataNodeRefusedWithRedTable: a data node whose process crashed (its pod still
// Running, its node gone from sys.nodes, a 0-replica table RED with it) is refused by scale
// and replace with a message naming the red table and the missing node, not the pod's
// identity facts; nothing is written.
func TestCrashedDataNodeRefusedWithRedTable(t *testing.T) {
	groups := []fakecluster.Group{{Name: "master", Role: "master", Replicas: 3}, {Name: "hot", Role: "data", Order: 1, Replicas: 3}}
	tests := []struct {
		name  string
		ready bool
		run   func(e *cratedb.Engine, c *ops.Cluster) error
	}{
		{name: "scale removes it", ready: true, run: func(e *cratedb.Engine, c *ops.Cluster) error {
			_, err := e.PlanScale(context.Background(), c, ops.ScaleRequest{Data: map[string]int32{"hot": 2}})
			return err
		}},
		{name: "replace, pod Ready", ready: true, run: replaceHot2},
		{name: "replace, pod Running not Ready", ready: false, run: replaceHot2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, c, db := setup(t, groups...)
			db.RemoveNodes("data-hot-2")
			db.Do(func(d *cratedbtest.DB) { d.Severity = int32(3) })
			if !tt.ready {
				p, _ := client.CoreV1().Pods("prod").Get(context.Background(), "db-hot-2", metav1.GetOptions{})
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
				if _, err := client.CoreV1().Pods("prod").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			client.ClearActions()
			err := tt.run(engine(client, db, nil), c)
			if err == nil || ops.ExitCode(err) != ops.ExitPrecondition || strings.Contains(err.Error(), "\n") ||
				!strings.Contains(err.Error(), "the CrateDB node of pod db-hot-2 is missing from the cluster") ||
				!strings.Contains(err.Error(), "table(s) doc.t are RED") {
				t.Fatalf("err = %v (exit %d), want a precondition naming the missing node and the red table", err, ops.ExitCode(err))
			}
			if w := fakecluster.Writes(client); len(w) > 0 {
				t.Errorf("refusal wrote to the API: %v", w)
			}
			if w := db.Statements(true); len(w) > 0 {
				t.Errorf("refusal wrote to the database: %v", w)
			}
		})
	}
}

func replaceHot2(e *cratedb.Engine, c *ops.Cluster) error {
	_, err := e.PlanReplacement(context.Background(), c, ops.ReplaceRequest{Pods: []string{"db-hot-2"}, MaxConcurrent: 1, Args: "x"})
	return err
}
