package etcd

import (
	"context"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// PlanReplacement is `kubectl dbops replace` for etcd: member repair of each
// pod in turn (remove, fresh PVC, add as learner, promote), one member at a
// time to keep quorum.
func (e *Engine) PlanReplacement(ctx context.Context, c *ops.Cluster, req ops.ReplaceRequest) (*ops.Plan, error) {
	if req.MaxConcurrent > 1 {
		return nil, ops.Usagef("engine %s replaces one member at a time; --max-concurrent must be 1", c.Engine)
	}
	var out *ops.Plan
	for _, name := range req.Pods {
		p, err := e.PlanRepair(ctx, c, name)
		if err != nil {
			return nil, err
		}
		if why := req.Reasons[name]; why != "" {
			p.Notes = append(p.Notes, name+": "+why)
		}
		if out == nil {
			out = p
			continue
		}
		out.Steps = append(out.Steps, p.Steps...)
		out.Notes = append(out.Notes, p.Notes...)
	}
	if out != nil {
		out.Operation, out.Args = "replace", req.Args
	}
	return out, nil
}
