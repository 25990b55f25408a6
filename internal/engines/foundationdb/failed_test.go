package foundationdb

import (
	"strings"
	"testing"
	"time"
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
