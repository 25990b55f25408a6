package cratedb

import (
	"context"
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
