package fdbop

import (
	"maps"
	"testing"
)

// TestStandInGenerationsNameReasons: status.generations says what is left to do as the
// operator's CheckReconciliation (api/v1beta2 foundationdbcluster_types.go) does: a cluster not
// configured yet needs its configuration; a process group with a condition sets
// hasUnhealthyProcess; a class above its count and a group marked for removal set needsShrink;
// each reason leaves once done, and reconciled moves only when none is left.
func TestStandInGenerationsNameReasons(t *testing.T) {
	b := newBed(t, sandboxSpec())
	gens := func() map[string]int64 { return b.status(t).Generations }
	want := func(step string, w map[string]int64) {
		t.Helper()
		if g := gens(); !maps.Equal(g, w) {
			t.Fatalf("%s: generations %v, want %v", step, g, w)
		}
	}
	b.reconcile(t)
	want("pods not running", map[string]int64{"needsConfigurationChange": 2})
	b.kubelet(t)
	b.reconcile(t)
	want("running", map[string]int64{"reconciled": 2})

	b.setSpec(t, int64(4), "processCounts", "storage")
	b.reconcile(t) // the new group's pod is not running yet
	want("grown, pod pending", map[string]int64{"reconciled": 2, "hasUnhealthyProcess": 3})
	b.kubelet(t)
	b.reconcile(t)
	want("grown", map[string]int64{"reconciled": 3})

	b.setSpec(t, int64(3), "processCounts", "storage")
	b.reconcile(t) // marked and excluded, not removed yet
	want("shrinking", map[string]int64{"reconciled": 3, "needsShrink": 4})
}
