package cratedb

import (
	"context"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Preflight implements ops.RestartPreflighter: a rolling restart starts only
// on a green cluster (the same gate scale applies), so a yellow or red
// cluster is refused before the lock instead of losing a pod and then
// waiting for green until the timeout. A resumed run may find the cluster
// yellow because of the pod it was restarting; its steps wait for green.
func (g *restartGate) Preflight(ctx context.Context, c *ops.Cluster, st ops.PreflightState) error {
	if st.Resuming {
		return nil
	}
	h, err := g.e.readHealth(ctx, c, expectedNodes(c), nil)
	if err != nil {
		return &ops.CodedError{Kind: ops.ErrPrecondition, Msg: "cannot read CrateDB health of " + c.Namespace + "/" + c.Name + " before the rolling restart: " + err.Error(), Err: err}
	}
	if !h.Green() {
		return ops.Refusef(ops.ReasonNotGreen, "CrateDB cluster %s/%s is %s (%s); a rolling restart needs it green first", c.Namespace, c.Name, h.Status(), h)
	}
	// A batch that holds every copy of a shard now is refused before the lock; each
	// batch checks again before it goes (BeforeBatch), as shards move meanwhile.
	for _, b := range g.batches {
		if err := g.checkBatch(ctx, c, b); err != nil {
			return err
		}
	}
	return nil
}
