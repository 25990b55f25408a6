package etcd

import (
	"context"
	"fmt"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Preflight implements ops.RestartPreflighter. A rolling restart starts only
// when every member is healthy: with a member down, restarting any other
// one leaves a three-member cluster one failure from losing quorum, and the
// down member's own restart cannot be told apart from a member that will
// never come back. So it refuses, before the lock, and says how to bring
// the member back first (replace repairs it; --strategy deletion only
// restarts its pod). A resumed run may find the member it was restarting
// still on its way back: then only quorum is required, and each step's gate
// waits for health as usual.
func (g *restartGate) Preflight(ctx context.Context, c *ops.Cluster, st ops.PreflightState) error {
	status, err := g.e.status(ctx, nil, g.s, "")
	if err != nil {
		return &ops.CodedError{Kind: ops.ErrPrecondition, Msg: fmt.Sprintf("cannot read etcd health of %s/%s before the rolling restart: %v", c.Namespace, c.Name, err), Err: err}
	}
	if !status.HasQuorum {
		return ops.Refusef(ops.ReasonQuorumAtRisk, "etcd has no quorum (%s); refusing to start a rolling restart of %s/%s", status.Summary(), c.Namespace, c.Name)
	}
	if st.Resuming {
		return nil
	}
	if bad := status.Unhealthy(nil); len(bad) > 0 {
		m := bad[0]
		pod := m.Pod
		if pod == "" {
			pod = "POD"
		}
		return ops.Refusef(ops.ReasonMemberUnhealthy, "etcd member %s is not healthy%s; a rolling restart needs every member healthy first: repair it with `kubectl dbops replace %s %s -n %s` (or restart only its pod with --strategy deletion)",
			m.label(), errSuffix(m.Error), c.Name, pod, c.Namespace)
	}
	return nil
}
