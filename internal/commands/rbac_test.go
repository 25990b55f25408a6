package commands

import (
	"slices"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestRBACPreflight: a run whose plan needs a permission the caller lacks
// is refused before the lock is taken, with one line naming the verb and
// resource and exit 6; nothing is written (no Lease left behind).
func TestRBACPreflight(t *testing.T) {
	restart := []string{"restart", "db", "--rolling", "--yes"}
	replace := []string{"replace", "db", "db-hot-0", "--yes"}
	tests := []struct {
		name   string
		args   []string
		denied string
	}{
		{"restart without delete pods", restart, "delete pods"},
		{"restart without watch pods", restart, "watch pods"},
		{"restart without get pods", restart, "get pods"},
		{"restart without update leases", restart, "update leases.coordination.k8s.io"},
		{"restart without create leases", restart, "create leases.coordination.k8s.io"},
		{"restart without events", restart, "create events"},
		{"replace without delete pvcs", replace, "delete persistentvolumeclaims"},
		{"deny add without update leases", []string{"deny", "add", "db", "bob@example", "--reason", "r"}, "update leases.coordination.k8s.io"},
		{"deny add without create leases", []string{"deny", "add", "db", "bob@example"}, "create leases.coordination.k8s.io"},
		{"replace without delete pods", replace, "delete pods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
			fakecluster.Start(t, h.client, "prod")
			h.denied[tt.denied] = true
			r := h.run(tt.args...)
			if r.code != ops.ExitForbidden {
				t.Fatalf("exit %d, want %d; stderr: %s", r.code, ops.ExitForbidden, r.err)
			}
			if strings.Count(r.err, "\n") != 1 || !strings.Contains(r.err, "permission denied in namespace prod: you may not "+tt.denied+" (for ") {
				t.Errorf("stderr = %q, want one line naming %q", r.err, tt.denied)
			}
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("wrote despite the missing permission: %v", w)
			}
		})
	}

	t.Run("allowed run reviews what its steps declare", func(t *testing.T) {
		h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
		fakecluster.Start(t, h.client, "prod")
		// The fake cluster has no PVCs, so the run itself fails later.
		if r := h.run(replace...); r.code == ops.ExitForbidden {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		for _, want := range []string{"delete pods", "delete persistentvolumeclaims", "update leases.coordination.k8s.io", "create events"} {
			if !slices.Contains(h.reviewed, want) {
				t.Errorf("no access review of %q; reviewed %v", want, h.reviewed)
			}
		}
		// A rolling restart deletes no PVC, so it does not ask for it.
		h.reviewed = nil
		if r := h.run(restart...); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		if slices.Contains(h.reviewed, "delete persistentvolumeclaims") {
			t.Errorf("restart asked for delete persistentvolumeclaims: %v", h.reviewed)
		}
		// Each question once: the check before the lock finds the answers the one before
		// planning asked ahead.
		seen := map[string]bool{}
		for _, r := range h.reviewed {
			if seen[r] {
				t.Errorf("asked %q twice: %v", r, h.reviewed)
			}
			seen[r] = true
		}
	})
	t.Run("dry-run checks only what planning reads", func(t *testing.T) {
		h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
		h.denied["delete pods"] = true
		if r := h.run("restart", "db", "--rolling", "--dry-run"); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		h.denied["get pods"] = true
		r := h.run("restart", "db", "--rolling", "--dry-run")
		if r.code != ops.ExitForbidden || !strings.Contains(r.err, "you may not get pods (for planning from live state)") {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
	})
}

// TestCrateMissingGetPodsIsAPermissionError: without `get pods` the CrateDB
// engine would find "no Ready pod" to connect to; the check before planning
// names the permission instead (exit 6), and nothing is written.
func TestCrateMissingGetPodsIsAPermissionError(t *testing.T) {
	for _, args := range [][]string{
		{"restart", "db", "--rolling", "--yes"},
		{"scale", "db", "--data", "cold=1", "--yes"},
		{"bootstrap", "db", "--yes"},
		{"restart", "db", "--rolling", "--dry-run"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			e := newCrateEnv(t)
			e.denied["get pods"] = true
			r := e.run(args...)
			if r.code != ops.ExitForbidden || strings.Count(r.err, "\n") != 1 || !strings.Contains(r.err, "you may not get pods") {
				t.Fatalf("exit %d, want 6 naming get pods: %s", r.code, r.err)
			}
			if strings.Contains(r.err, "Ready") {
				t.Errorf("reported as a readiness problem: %s", r.err)
			}
			if w := fakecluster.Writes(e.client); len(w) > 0 {
				t.Errorf("wrote: %v", w)
			}
		})
	}
}
