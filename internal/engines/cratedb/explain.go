package cratedb

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Explain implements ops.Explainer: the health the restart preflight and scale gate on (green,
// Preflight in preflight.go, from the same readHealth), and the allocation settings a crashed
// run can leave behind (allocation.enable held at primaries, node exclusions), read-only.
// Whether a batch holds every copy of a shard needs the plan: explain's preflight line has it.
func (e *Engine) Explain(ctx context.Context, c *ops.Cluster, _ string) ([]ops.Check, error) {
	h, err := e.readHealth(ctx, c, expectedNodes(c), nil)
	if err != nil {
		return []ops.Check{{Name: "health", Detail: fmt.Sprintf("cannot read CrateDB health of %s/%s: %v", c.Namespace, c.Name, err),
			Fix: "check the connection flags (--pg-host, --system-password-secret) and that a pod is Ready"}}, nil
	}
	out := []ops.Check{{Name: "health", OK: h.Green(), Detail: h.Status() + ": " + h.String(),
		Fix: "wait until green: kubectl dbops wait " + c.Name + " --for=healthy (sys.health names the tables that are not)"}}
	alloc := ""
	if rows, err := e.session(c).query(ctx, nil, sqlAllocEnable); err == nil {
		alloc = strings.ToLower(cellString(rows, 0))
	}
	// "primaries" is what a restart step holds while its node is away; left set by a run
	// that died, no replica is ever allocated again.
	switch alloc {
	case "", "all":
		out = append(out, ops.Check{Name: "allocation", OK: true, Detail: "cluster.routing.allocation.enable is all"})
	default:
		out = append(out, ops.Check{Name: "allocation", OK: true, Detail: "cluster.routing.allocation.enable is " + alloc +
			" (a restart step sets primaries and resets it; left over from a stopped run it keeps replicas unassigned: " + sqlAllocReset + ")"})
	}
	if h.Exclusions != "" {
		out = append(out, ops.Check{Name: "exclusions", OK: true, Detail: "nodes excluded from allocation: " + h.Exclusions +
			" (scale-down and replace set this while draining; stuck after a stopped run: " + sqlResetExclusion + ")"})
	} else {
		out = append(out, ops.Check{Name: "exclusions", OK: true, Detail: "no node excluded from allocation"})
	}
	return out, nil
}

// Diagnostics implements ops.Diagnoser: sys.checks (cluster checks) and sys.allocations (why
// each shard is where it is, or unassigned), as rows of JSON, read-only.
func (e *Engine) Diagnostics(ctx context.Context, c *ops.Cluster) []ops.Diagnostic {
	queries := []struct{ name, sql string }{
		{"sys.checks.json", `SELECT id, severity, description, passed FROM sys.checks ORDER BY id`},
		{"sys.allocations.json", `SELECT table_schema, table_name, partition_ident, shard_id, node_id, "primary", current_state, explanation FROM sys.allocations ORDER BY 1, 2, 3, 4`},
	}
	var out []ops.Diagnostic
	for _, q := range queries {
		rows, err := e.session(c).query(ctx, nil, q.sql)
		if err != nil {
			out = append(out, ops.Diagnostic{Name: q.name, Err: sqlErr(q.sql, err)})
			continue
		}
		b, err := json.MarshalIndent(map[string]any{"query": q.sql, "rows": rows}, "", "  ")
		out = append(out, ops.Diagnostic{Name: q.name, Data: b, Err: err})
	}
	return out
}
