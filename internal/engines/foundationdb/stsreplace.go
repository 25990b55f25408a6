package foundationdb

import (
	"context"
	"strings"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// planReplaceStatefulSet plans `replace POD…` on the foundationdb-statefulset layout: per batch,
// the scale down's exclusion sequence (gate, exclude and wait until they hold nothing,
// coordinators moved off them), then the pods and PVCs deleted and awaited back on new claims,
// then their processes reporting, then include.
func (e *Engine) planReplaceStatefulSet(ctx context.Context, c *ops.Cluster, req ops.ReplaceRequest) (*ops.Plan, error) {
	if req.NoExclusion {
		return nil, ops.Usagef("--no-exclusion applies to FoundationDBClusters only")
	}
	if len(c.Groups) != 1 || c.Groups[0].StatefulSet == "" {
		return nil, ops.Usagef("replace needs one FoundationDB StatefulSet; %s/%s has %d node groups", c.Namespace, c.Name, len(c.Groups))
	}
	st, _, err := e.StatusFrom(ctx, e.cli(), c, nil)
	if err != nil {
		return nil, ops.Preconditionf("cannot read the database's status to plan the replacement: %v", err)
	}
	mode := "double"
	if st.Cluster.Configuration != nil && st.Cluster.Configuration.RedundancyMode != "" {
		mode = st.Cluster.Configuration.RedundancyMode
	}
	// While a batch is excluded its data must fit on the others: a storage team of the mode's
	// size among the pods that stay.
	if m := minimumCount(mode, "storage"); len(c.AllPods())-min(req.MaxConcurrent, len(req.Pods)) < m {
		return nil, ops.Preconditionf("replacing %d pod(s) at once leaves %d of %d pods, below the %d redundancy mode %s needs to hold the data while they are excluded; refusing",
			min(req.MaxConcurrent, len(req.Pods)), len(c.AllPods())-min(req.MaxConcurrent, len(req.Pods)), len(c.AllPods()), m, mode)
	}
	h := &stsReplaceHooks{s: &stsScale{e: e, c: c, g: c.Groups[0], away: req.Pods}, st: st}
	return (&ops.Replacement{Client: e.client, Hooks: h}).Plan(c, ops.EngineFoundationDB, req)
}

type stsReplaceHooks struct {
	s  *stsScale
	st *Status
}

func (h *stsReplaceHooks) Before(_ *ops.Cluster, batch []ops.Pod) []*ops.Step {
	names := podNames(batch)
	suffix := "/" + ops.BatchID(batch)
	gate := &ops.Step{ID: "gate" + suffix, Target: ops.BatchTarget(batch), Needs: execNeed,
		Description: "wait until the database is available and healthy (status json: data healthy, fully recovered)",
		Verify:      h.s.waitHealthy}
	return append([]*ops.Step{gate}, h.s.excludeSteps(suffix, ops.BatchTarget(batch), h.st, names)...)
}

func (h *stsReplaceHooks) After(_ *ops.Cluster, batch []ops.Pod) []*ops.Step {
	names := podNames(batch)
	suffix := "/" + ops.BatchID(batch)
	back := &ops.Step{ID: "report" + suffix, Target: ops.BatchTarget(batch), Needs: execNeed,
		Description: "wait until the processes of " + strings.Join(names, ", ") + " report again in status json",
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			return h.s.poll(ctx, sc, func(st *Status) (bool, string) {
				for _, pod := range names {
					if len(st.ByInstance(pod)) == 0 {
						return false, "the process of " + pod + " to report"
					}
				}
				return true, ""
			})
		}}
	return []*ops.Step{back, h.s.includeStep(suffix, ops.BatchTarget(batch), names)}
}

func podNames(batch []ops.Pod) []string {
	out := make([]string, 0, len(batch))
	for _, p := range batch {
		out = append(out, p.Name)
	}
	return out
}
