package cratedb_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/fakes/cratedbtest"
)

// TestDrainRefusesWhatTheRemainingNodesCannotHold: a scale-down whose remaining data nodes
// have room for every copy by count, but not once a table's allocation filter or an
// exclusion set by someone else is counted, or while someone holds allocation, is refused while planning (exit 5), naming the
// table and what keeps its copies off, with nothing written.
func TestDrainRefusesWhatTheRemainingNodesCannotHold(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(d *cratedbtest.DB)
		want  string
	}{
		{"fits", func(d *cratedbtest.DB) { d.Replicas = []string{"1"} }, ""},
		{"a require filter leaves one node", func(d *cratedbtest.DB) {
			d.Replicas = []string{"1"}
			d.Require = map[string]map[string]any{"t0": {"_name": "data-hot-1,data-hot-2"}}
		}, "table doc.t0 has number_of_replicas = '1' and routing.allocation.require._name = 'data-hot-1,data-hot-2', which leave it 1 of the 2 data nodes that remain, and it needs 2"},
		{"allocation held to primaries by someone else", func(d *cratedbtest.DB) {
			d.Replicas = []string{"1"}
			d.Allocation = "primaries"
		}, "cluster.routing.allocation.enable is 'primaries', so shards cannot all move off data-hot-2"},
		{"a node excluded by someone else", func(d *cratedbtest.DB) {
			d.Replicas = []string{"1"}
			d.Exclusions = "data-hot-0"
		}, "table doc.t0 has number_of_replicas = '1', which needs 2 data nodes, and only 1 would remain"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3}, fakecluster.Group{Name: "hot", Role: "data", Order: 1, Replicas: 3})
			fakecluster.Start(t, client, "prod")
			// Dedicated masters: the hot nodes are the only data nodes.
			ops.StatefulSetOf(c.Groups[0]).Spec.Template.Spec.Containers[0].Args = []string{"-Cnode.data=false"}
			db.Do(tt.setup)
			client.ClearActions()
			_, err := engine(client, db, nil).PlanScale(context.Background(), c, ops.ScaleRequest{Data: map[string]int32{"hot": 2}})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("plan: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ops.ErrPrecondition) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("plan err = %v, want one line, exit 5, with %q", err, tt.want)
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
