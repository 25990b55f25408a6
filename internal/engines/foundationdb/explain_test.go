package foundationdb

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// TestExplain: a healthy cluster passes every line; someone else's maintenance zone fails its
// own line with the fdbcli command that clears it, and the restart refusal says how too.
// Explain writes nothing to the database (no mutating fdbcli command in the model's log).
func TestExplain(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, m *fdbsim.Cluster)
		gen     int64
		failing string // name of the failing check, "" for none
		detail  string
		fix     string
	}{
		{name: "healthy", gen: 3},
		{name: "foreign maintenance zone", gen: 3, setup: func(t *testing.T, m *fdbsim.Cluster) {
			runFdbcli(t, m, "maintenance on zone-c 300")
		}, failing: "maintenance-zone", detail: "zone zone-c is in maintenance, set by someone else",
			fix: "-- fdbcli --exec 'maintenance off'"},
		{name: "unavailable", gen: 3, setup: func(t *testing.T, m *fdbsim.Cluster) {
			for _, id := range []string{"log-10", "log-11", "log-12"} {
				if err := m.Stop(id); err != nil {
					t.Fatal(err)
				}
			}
		}, failing: "health", detail: "refusing to restart", fix: "--for=healthy"},
		{name: "not reconciled", gen: 4, failing: "operator", detail: "is not reconciled (generation 4, reconciled 3)", fix: "reconcile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, model, e := liveCluster(t, tt.gen, 3)
			if tt.setup != nil {
				tt.setup(t, model)
			}
			before := len(mutations(model))
			checks, err := e.Explain(context.Background(), c, "restart")
			if err != nil {
				t.Fatal(err)
			}
			if n := len(mutations(model)); n != before {
				t.Errorf("explain changed the database: %v", mutations(model)[before:])
			}
			for _, ch := range checks {
				if ch.Name == tt.failing {
					if ch.OK || !strings.Contains(ch.Detail, tt.detail) || !strings.Contains(ch.Fix, tt.fix) {
						t.Errorf("check %s = %+v; want failed with %q, fix %q", ch.Name, ch, tt.detail, tt.fix)
					}
				} else if !ch.OK {
					t.Errorf("check %s failed: %+v", ch.Name, ch)
				}
			}
			if tt.failing == "" && !ops.ChecksPass(checks) {
				t.Errorf("healthy cluster fails: %+v", checks)
			}
			if tt.failing == "maintenance-zone" {
				// The restart's own refusal says how to clear a stale zone too.
				p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{})
				if err == nil {
					err = p.Preflight(context.Background(), ops.PreflightState{})
				}
				if err == nil || !strings.Contains(err.Error(), "if it is stale") || !strings.Contains(err.Error(), "fdbcli --exec 'maintenance off'") {
					t.Errorf("restart refusal = %v; want how to clear a stale zone", err)
				}
			}
		})
	}
}

// TestDiagnostics: the bundle's status.json is fdbcli's status json, read without changing
// the database.
func TestDiagnostics(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	d := e.Diagnostics(context.Background(), c)
	if len(d) != 1 || d[0].Err != nil || d[0].Name != "status.json" {
		t.Fatalf("diagnostics = %+v", d)
	}
	var st Status
	if err := json.Unmarshal(d[0].Data, &st); err != nil || !st.Available() {
		t.Fatalf("status.json does not parse as an available database: %v", err)
	}
	if m := mutations(model); len(m) != 0 {
		t.Errorf("diagnostics changed the database: %v", m)
	}
}
