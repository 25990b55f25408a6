package foundationdb

import (
	"context"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// PlanRestart refuses: the gated FoundationDB restart (bounce by `kill; kill <addresses>` or pod
// deletion, maintenance mode, master and cluster controller last) is not in this build. A plain
// pod-by-pod restart would skip FDB's own health gate, so none is offered in its place.
func (e *Engine) PlanRestart(context.Context, *ops.Cluster, ops.RestartOptions) (*ops.Plan, error) {
	return nil, ops.Usagef("restart is not available for engine %s yet: only status is", ops.EngineFoundationDB)
}
