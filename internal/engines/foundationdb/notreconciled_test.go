package foundationdb

import (
	"context"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestNotReconciledNamesReason: a FoundationDBCluster the operator has not reconciled is refused
// with what the resource says the operator waits for (status.generations' pending fields as
// api/v1beta2 CheckReconciliation sets them, spec.buggify settings, process group conditions),
// every name escaped, never "the operator is changing it"; status shows the same reason. Nothing
// is written.
func TestNotReconciledNamesReason(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   map[string]any
		status map[string]any
		want   []string
	}{
		{"generations and conditions", nil, map[string]any{
			"generations": map[string]any{"reconciled": int64(3), "needsShrink": int64(4), "hasUnhealthyProcess": int64(4)},
			"processGroups": []any{
				map[string]any{"processGroupID": "storage-10", "processClass": "storage",
					"processGroupConditions": []any{map[string]any{"type": "PodPending", "timestamp": int64(1)}}},
				map[string]any{"processGroupID": "log-10", "processClass": "log", "removalTimestamp": "2026-01-01T00:00:00Z"},
				map[string]any{"processGroupID": "log-11", "processClass": "log"},
			}},
			[]string{"is not reconciled (generation 4, reconciled 3): status.generations: hasUnhealthyProcess 4, needsShrink 4; process groups: log-10 marked for removal, storage-10 PodPending; refusing to restart"}},
		{"buggify", map[string]any{"buggify": map[string]any{
			"noSchedule":          []any{"storage-10"},
			"emptyMonitorConf":    true,
			"crashLoopContainers": []any{map[string]any{"containerName": "foundationdb", "targets": []any{"storage-11", "log-10"}}},
			"blockRemoval":        []any{},
		}}, map[string]any{"generations": map[string]any{"reconciled": int64(3)}},
			[]string{"spec.buggify: crashLoopContainers [foundationdb: storage-11,log-10], emptyMonitorConf, noSchedule [storage-10]; refusing"}},
		{"escaped", nil, map[string]any{
			"generations": map[string]any{"reconciled": int64(3), "needs\x1b[2Jx": int64(4)},
			"processGroups": []any{map[string]any{"processGroupID": "storage-\x1b[31m1", "processClass": "storage",
				"processGroupConditions": []any{map[string]any{"type": "Missing\u202eX"}}}}},
			[]string{`needs\x1b[2Jx 4`, `storage-\x1b[31m1 Missing\u202eX`}},
		{"no reason given", nil, map[string]any{"generations": map[string]any{"reconciled": int64(3)}},
			[]string{"(generation 4, reconciled 3): the operator names no reason"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, model, e := liveCluster(t, 4, 3)
			obj := ops.ControllerOf(c.Groups[0]).Object
			obj["status"] = tc.status
			if tc.spec != nil {
				obj["spec"] = tc.spec
			}
			before := len(mutations(model))
			p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
			if err == nil {
				err = p.Preflight(context.Background(), ops.PreflightState{})
			}
			if ops.ExitCode(err) != ops.ExitPrecondition {
				t.Fatalf("got %v, want exit 5", err)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Fatalf("refusal %q, want it to contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "changing it") || strings.ContainsAny(msg, "\x1b\u202e") {
				t.Fatalf("refusal %q: unescaped or not naming the reason", msg)
			}
			if got := mutations(model)[before:]; len(got) != 0 {
				t.Fatalf("refusal ran %q", got)
			}
			h, err := e.Health(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			rec := h.Details["operatorReconciled"]
			for _, w := range tc.want {
				w, _, _ = strings.Cut(w, "; refusing")
				if _, after, ok := strings.Cut(w, "is not reconciled "); ok {
					w = after
				}
				if !strings.Contains(rec, w) {
					t.Fatalf("status operatorReconciled %q, want it to contain %q", rec, w)
				}
			}
		})
	}
}
