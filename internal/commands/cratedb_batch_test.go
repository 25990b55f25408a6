package commands

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/fakes/cratedbtest"
)

const sqlStartedCopies = `SELECT schema_name, table_name, partition_ident, id, node['name'] FROM sys.shards WHERE routing_state IN ('STARTED', 'RELOCATING')`

// TestCrateZoneRestartKeepsAStartedCopy: --mode zone restarts a zone's pods together; a
// zone that holds every started copy of a shard is refused (before the lock when it does
// so already, before its batch when shards moved there meanwhile), as the table would go
// red. Pods run on node-<ordinal%3> in zone-a..c: zone-a is db-master-0, db-hot-0,
// db-cold-0. Before batch.go CrateDB had no such check and restarted the zone.
func TestCrateZoneRestartKeepsAStartedCopy(t *testing.T) {
	spread := [][]any{{"doc", "t", "", int32(0), "data-hot-0"}, {"doc", "t", "", int32(0), "data-hot-1"},
		{"doc", "t", "", int32(1), "data-cold-0"}, {"doc", "t", "", int32(1), "data-cold-1"}}
	zoneA := [][]any{{"doc", "t", "", int32(0), "data-hot-0"}, {"doc", "t", "", int32(0), "data-cold-0"},
		{"doc", "t", "", int32(1), "data-hot-1"}}
	zoneB := [][]any{{"doc", "t", "0400", int32(2), "data-hot-1"}, {"doc", "t", "0400", int32(2), "data-cold-1"},
		{"doc", "t", "", int32(1), "data-hot-0"}}
	tests := []struct {
		name string
		// copies at the start; later replaces them once zone-a's first pod is deleted.
		copies, later [][]any
		code          int
		want          string
		deleted       []string
	}{
		{name: "copies spread over zones", copies: spread, code: 0,
			deleted: []string{"db-master-0", "db-hot-0", "db-cold-0", "db-master-1", "db-hot-1", "db-cold-1", "db-master-2"}},
		{name: "a zone holds every copy", copies: zoneA, code: ops.ExitPrecondition,
			want: "restarting db-master-0, db-hot-0, db-cold-0 together would take every started copy of shard 0 of table doc.t (on data-hot-0, data-cold-0) away"},
		{name: "shards moved into a zone during the run", copies: spread, later: zoneB, code: ops.ExitPrecondition,
			want:    "restarting db-master-1, db-hot-1, db-cold-1 together would take every started copy of shard 2 of table doc.t (partition 0400) (on data-hot-1, data-cold-1) away",
			deleted: []string{"db-master-0", "db-hot-0", "db-cold-0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newCrateEnv(t)
			ctrl := fakecluster.Start(t, e.client, "prod")
			e.db.Do(func(d *cratedbtest.DB) { d.Copies = tc.copies })
			if tc.later != nil {
				e.client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					e.db.Do(func(d *cratedbtest.DB) { d.Copies = tc.later })
					return false, nil, nil
				})
			}
			r := e.run("restart", "db", "--rolling", "--mode", "zone", "--health-checks", "1", "--health-interval", "1ms", "--yes", "--lock-id", "ci@test")
			if r.code != tc.code || !strings.Contains(r.err, tc.want) {
				t.Fatalf("exit %d, want %d with %q: %s", r.code, tc.code, tc.want, r.err)
			}
			if got := ctrl.Deleted(); !slices.Equal(got, tc.deleted) {
				t.Errorf("deleted %v, want %v", got, tc.deleted)
			}
			if tc.code != 0 && tc.deleted == nil {
				// Refused while planning: nothing written, not even the lock.
				if w := fakecluster.Writes(e.client); len(w) > 0 {
					t.Errorf("refused restart wrote to the API: %v", w)
				}
				if w := e.db.Statements(true); len(w) > 0 {
					t.Errorf("refused restart wrote to the database: %v", w)
				}
			}
			// The copies are read before every batch's first delete (and by the preflight).
			reads := 0
			for _, c := range e.db.Calls() {
				if c.SQL == sqlStartedCopies {
					reads++
				}
			}
			// zone-c has one pod: a batch of one is not a batch.
			if tc.code == 0 && reads != 2+2 {
				t.Errorf("started copies read %d times, want twice by the preflight and once per batch of zone-a and zone-b", reads)
			}
		})
	}
}

// TestCrateBatchKeepsAMasterMajority: replacing two of the three masters together (deletion,
// --max-concurrent 2) would leave no majority of the voting configuration while they are
// down: refused before anything is written.
func TestCrateBatchKeepsAMasterMajority(t *testing.T) {
	e := newCrateEnv(t)
	ctrl := fakecluster.Start(t, e.client, "prod")
	r := e.run("replace", "db", "db-master-0", "db-master-1", "--strategy", "deletion", "--max-concurrent", "2", "--health-checks", "1", "--health-interval", "1ms", "--yes", "--lock-id", "ci@test")
	want := "restarting db-master-0, db-master-1 together would take 2 of the 3 master-eligible nodes down at once"
	if r.code != ops.ExitPrecondition || !strings.Contains(r.err, want) {
		t.Fatalf("exit %d, want 5 with %q: %s", r.code, want, r.err)
	}
	if got := ctrl.Deleted(); len(got) > 0 {
		t.Errorf("deleted %v", got)
	}
	if w := fakecluster.Writes(e.client); len(w) > 0 {
		t.Errorf("refused replace wrote to the API: %v", w)
	}
	if w := e.db.Statements(true); len(w) > 0 {
		t.Errorf("refused replace wrote to the database: %v", w)
	}
}
