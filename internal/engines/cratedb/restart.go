package cratedb

import (
	"context"
	"fmt"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// restartGate wraps each pod restart: hold allocation to primaries, and
// once the pod is back, wait for its node, re-enable allocation and wait
// for green N times in a row.
type restartGate struct {
	e *Engine
	c *ops.Cluster
}

// gateKey marks, in the journal, a pod whose Before ran but whose After
// has not finished: a resumed run must still re-enable allocation.
func gateKey(pod string) string { return "cratedb.gate/" + pod }

func (g *restartGate) node(p ops.Pod) string {
	grp := g.c.Group(p.Group)
	role := ops.RoleData
	if grp != nil {
		role = grp.Role
	}
	return nodeName(role, p.Group, p.Ordinal)
}

// Describe implements ops.RestartGate.
func (g *restartGate) Describe(p ops.Pod) ([]string, []string) {
	n := g.e.cfg.HealthChecks
	return []string{"a database connection through another Ready pod"},
		[]string{
			sqlAllocPrimaries,
			fmt.Sprintf("wait: node %s back in sys.nodes (%s)", g.node(p), sqlNodeNames),
			sqlAllocReset,
			fmt.Sprintf("wait: green %d times in a row, %s apart (%s; %s; %s)", n, g.e.cfg.HealthInterval, sqlNodeCount, sqlMaxSeverity, sqlMasterNode),
		}
}

// Before implements ops.RestartGate.
func (g *restartGate) Before(ctx context.Context, sc *ops.StepContext, p ops.Pod) error {
	if err := sc.Set(ctx, gateKey(p.Name), "pending"); err != nil {
		return err
	}
	// Never talk through the pod about to be deleted.
	if err := g.e.session(g.c).exec(ctx, []string{p.Name}, sqlAllocPrimaries); err != nil {
		return sqlErr(sqlAllocPrimaries, err)
	}
	sc.Audit(ctx, podRef(g.c, p), "DbopsAllocationPrimaries",
		fmt.Sprintf("set cluster.routing.allocation.enable=primaries before restarting pod %s", p.Name))
	return nil
}

// After implements ops.RestartGate.
func (g *restartGate) After(ctx context.Context, sc *ops.StepContext, p ops.Pod) error {
	e, s := g.e, g.e.session(g.c)
	node := g.node(p)
	sc.Waiting(fmt.Sprintf("waiting for node %s to rejoin (sys.nodes)", node))
	err := wait(ctx, e.cfg.PollInterval, func() (bool, error) {
		present, err := e.nodesPresent(ctx, g.c, nil, []string{node})
		return len(present) == 1, err
	})
	if err != nil {
		return fmt.Errorf("waiting for node %s in sys.nodes: %w", node, err)
	}
	if err := s.exec(ctx, nil, sqlAllocReset); err != nil {
		return sqlErr(sqlAllocReset, err)
	}
	sc.Audit(ctx, podRef(g.c, p), "DbopsAllocationEnabled",
		fmt.Sprintf("reset cluster.routing.allocation.enable after pod %s rejoined as %s", p.Name, node))
	if err := e.greenInARow(ctx, sc, g.c, expectedNodes(g.c)); err != nil {
		return err
	}
	return sc.Set(ctx, gateKey(p.Name), "")
}

// wrapPrecheck makes a step that an earlier, interrupted run completed up
// to the pod's return still finish the gate (re-enable allocation, wait
// for green) before it counts as done.
func (g *restartGate) wrapPrecheck(s *ops.Step, p ops.Pod) {
	inner := s.Precheck
	s.Precheck = func(ctx context.Context, sc *ops.StepContext) (bool, error) {
		done, err := inner(ctx, sc)
		if err != nil || !done || sc.Get(gateKey(p.Name)) == "" {
			return done, err
		}
		if err := g.After(ctx, sc, p); err != nil {
			return false, err
		}
		return true, nil
	}
}

// greenInARow waits for HealthChecks consecutive green readings,
// HealthInterval apart; any other reading starts the count again.
func (e *Engine) greenInARow(ctx context.Context, sc *ops.StepContext, c *ops.Cluster, expected int64) error {
	need := e.cfg.HealthChecks
	streak := 0
	last := ""
	err := wait(ctx, e.cfg.HealthInterval, func() (bool, error) {
		h, err := e.readHealth(ctx, c, expected, nil)
		if err != nil {
			return false, err
		}
		if !h.Green() {
			streak = 0
			if msg := fmt.Sprintf("cluster %s (%s); waiting for green", h.Status(), h); msg != last {
				last = msg
				sc.Waiting(msg)
			}
			return false, nil
		}
		streak++
		last = ""
		sc.Progress(int64(streak), int64(need), "checks", fmt.Sprintf("green %d/%d", streak, need))
		return streak >= need, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for green %d times in a row: %w", need, err)
	}
	return nil
}

func podRef(c *ops.Cluster, p ops.Pod) ops.ObjectRef {
	return ops.ObjectRef{Kind: "Pod", APIVersion: "v1", Namespace: c.Namespace, Name: p.Name, UID: string(p.UID)}
}
