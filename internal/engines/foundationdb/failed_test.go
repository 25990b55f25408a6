package foundationdb

import (
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/fdbsim"
)

func TestNotMembersByProcessGroupConditions(t *testing.T) {
	c, _, e := liveCluster(t, 3, 3)
	withProcessGroups(c)
	st := c.Groups[0].Controller.Object["status"].(map[string]any)
	old := time.Now().Add(-3 * time.Hour).Unix()
	recent := time.Now().Add(-time.Minute).Unix()
	for _, g := range st["processGroups"].([]any) {
		m := g.(map[string]any)
		switch m["processGroupID"] {
		case "storage-10":
			m["processGroupConditions"] = []any{map[string]any{"type": "MissingProcesses", "timestamp": old}}
		case "storage-11":
			m["processGroupConditions"] = []any{map[string]any{"type": "MissingProcesses", "timestamp": recent}}
		case "log-10":
			m["processGroupConditions"] = []any{map[string]any{"type": "MissingProcesses", "timestamp": old}}
			m["removalTimestamp"] = "2026-01-01T00:00:00Z"
		}
	}
	got, err := e.NotMembers(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.Contains(got["myfdb-storage-10"], "MissingProcesses for 3h") {
		t.Fatalf("candidates %v, want only myfdb-storage-10 (older than 7200 s, not marked)", got)
	}
}

// TestHealthShowsExclusionProgress: an excluded storage process reports its stored bytes until
// its data has moved (status's answer to kubectl-fdb's `get exclusion-status`).
func TestHealthShowsExclusionProgress(t *testing.T) {
	c, model, clock, ex := simCluster(t)
	e := newEngine(t, ex)
	// Triple needs three storage zoneids besides the excluded one for its data to move.
	if err := model.AddProcess(fdbsim.ProcessSpec{ID: "storage-13", Address: "10.0.0.4:4501", Class: fdbsim.ClassStorage, Zone: "zone-d"}); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := model.Run(t.Context(), []string{"--exec", "exclude no_wait locality_instance_id:storage-11"}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	h, err := e.Health(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if p := h.Details["exclusionProgress"]; !strings.HasPrefix(p, "storage-11 ") || !strings.Contains(p, "1073741824 bytes stored, roles storage") {
		t.Fatalf("exclusionProgress %q", p)
	}
	clock.Advance(time.Minute)
	if h, _ = e.Health(t.Context(), c); h.Details["exclusionProgress"] != "" {
		t.Fatalf("exclusionProgress after the data moved: %q", h.Details["exclusionProgress"])
	}
}

// TestStatefulSetNotMembers: on the foundationdb-statefulset layout, replace --failed counts a
// pod whose process does not report in status json (its locality_instance_id) as failed; the
// others are not.
func TestStatefulSetNotMembers(t *testing.T) {
	c, model, ex := stsSimCluster(t, 5, 0, 1, 2)
	e := newEngine(t, ex)
	got, err := e.NotMembers(t.Context(), c)
	if err != nil || len(got) != 0 {
		t.Fatalf("all running: %v %v", got, err)
	}
	if err := model.Stop("fdb-3"); err != nil {
		t.Fatal(err)
	}
	got, err = e.NotMembers(t.Context(), c)
	if err != nil || len(got) != 1 || !strings.Contains(got["fdb-3"], "does not report in status json") {
		t.Fatalf("fdb-3 stopped: %v %v", got, err)
	}
}
