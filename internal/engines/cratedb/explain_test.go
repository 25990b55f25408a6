package cratedb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/fakes/cratedbtest"
)

// TestExplain: green passes; yellow or red fails the health line with how to wait for green;
// allocation and exclusions left over are shown with the statement that resets them. Explain
// runs no write statement.
func TestExplain(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(d *cratedbtest.DB)
		failing string
		want    string // in the named line's detail (or any line's, when nothing fails)
		fix     string
	}{
		{name: "green", want: "green"},
		{name: "red", setup: func(d *cratedbtest.DB) { d.Severity = int32(3) }, failing: "health", want: "red", fix: "--for=healthy"},
		{name: "node missing", setup: func(d *cratedbtest.DB) { d.Nodes = d.Nodes[1:] }, failing: "health", want: "yellow", fix: "--for=healthy"},
		{name: "allocation held", setup: func(d *cratedbtest.DB) { d.Allocation = "primaries" }, want: `RESET GLOBAL "cluster.routing.allocation.enable"`},
		{name: "exclusion left", setup: func(d *cratedbtest.DB) { d.Exclusions = "data-hot-1" }, want: "nodes excluded from allocation: data-hot-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, c, db := setup(t, replGroups...)
			if tt.setup != nil {
				db.Do(tt.setup)
			}
			checks, err := engine(client, db, nil).Explain(context.Background(), c, "restart")
			if err != nil {
				t.Fatal(err)
			}
			if w := db.Statements(true); len(w) > 0 {
				t.Errorf("explain wrote: %v", w)
			}
			found := false
			for _, ch := range checks {
				if ch.Name == tt.failing {
					if ch.OK || !strings.Contains(ch.Fix, tt.fix) {
						t.Errorf("%s = %+v, want failed with fix %q", ch.Name, ch, tt.fix)
					}
				} else if !ch.OK {
					t.Errorf("%s failed: %+v", ch.Name, ch)
				}
				found = found || strings.Contains(ch.Detail, tt.want)
			}
			if !found {
				t.Errorf("no line says %q: %+v", tt.want, checks)
			}
			if ops.ChecksPass(checks) != (tt.failing == "") {
				t.Errorf("ChecksPass = %v: %+v", ops.ChecksPass(checks), checks)
			}
		})
	}
}

// TestDiagnostics: sys.checks and sys.allocations are read with SELECTs only; what the
// database cannot answer is an error for the manifest, not a failure of the bundle.
func TestDiagnostics(t *testing.T) {
	client, c, db := setup(t, replGroups...)
	d := engine(client, db, nil).Diagnostics(context.Background(), c)
	if len(d) != 2 || d[0].Name != "sys.checks.json" || d[1].Name != "sys.allocations.json" {
		t.Fatalf("diagnostics = %+v", d)
	}
	for _, x := range d {
		if x.Err == nil && len(x.Data) == 0 {
			t.Errorf("%s: neither data nor error", x.Name)
		}
	}
	if w := db.Statements(true); len(w) > 0 {
		t.Errorf("diagnostics wrote: %v", w)
	}
}
