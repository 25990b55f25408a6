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

// TestBatchRestartRefusesAPodWithoutANode: a batch of pods restarted together needs every
// pod's CrateDB node, to tell whether each shard keeps a started copy outside the batch; a
// pod whose node is not in sys.nodes refuses the batch restart before the lock (exit 5),
// with nothing written. One pod at a time needs no such check.
func TestBatchRestartRefusesAPodWithoutANode(t *testing.T) {
	for _, tt := range []struct {
		name  string
		batch int
		want  string
	}{
		{"two at a time", 2, "the CrateDB node of pod db-hot-1 is not known, so whether every shard keeps a copy outside the batch cannot be checked"},
		{"one at a time", 1, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3}, fakecluster.Group{Name: "hot", Role: "data", Order: 1, Replicas: 2})
			db.Do(func(d *cratedbtest.DB) { d.Hosts["data-hot-1"] = "somewhere-else" })
			p, err := engine(client, db, nil).PlanRestart(context.Background(), c, ops.RestartOptions{Groups: []string{"hot"}, BatchSize: tt.batch})
			if err != nil {
				t.Fatal(err)
			}
			client.ClearActions()
			if p.Preflight == nil {
				t.Fatal("the plan has no preflight")
			}
			err = p.Preflight(context.Background(), ops.PreflightState{})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("preflight: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ops.ErrPrecondition) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("preflight = %v, want one line, exit 5, with %q", err, tt.want)
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

// TestRestartPreflightNeedsGreen: a rolling restart of a yellow or red cluster is refused
// before the lock (exit 5), naming the health, with nothing written; green passes.
func TestRestartPreflightNeedsGreen(t *testing.T) {
	for _, tt := range []struct {
		severity int32
		want     string
	}{
		{1, ""},
		{2, "CrateDB cluster prod/db is yellow"},
		{3, "CrateDB cluster prod/db is red"},
	} {
		client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3}, fakecluster.Group{Name: "hot", Role: "data", Order: 1, Replicas: 2})
		p, err := engine(client, db, nil).PlanRestart(context.Background(), c, ops.RestartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		db.Do(func(d *cratedbtest.DB) { d.Severity = tt.severity })
		client.ClearActions()
		err = p.Preflight(context.Background(), ops.PreflightState{})
		if tt.want == "" {
			if err != nil {
				t.Errorf("green: %v", err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ops.ErrPrecondition) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "needs it green first") {
			t.Errorf("severity %d: preflight = %v, want exit 5 with %q", tt.severity, err, tt.want)
		}
		if w := fakecluster.Writes(client); len(w) > 0 {
			t.Errorf("refusal wrote to the API: %v", w)
		}
		if w := db.Statements(true); len(w) > 0 {
			t.Errorf("refusal wrote to the database: %v", w)
		}
	}
}
