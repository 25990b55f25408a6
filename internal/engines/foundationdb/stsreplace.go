package foundationdb

import (
	"context"
	"slices"
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
	if len(c.Groups) != 1 || ops.StatefulSetName(c.Groups[0]) == "" {
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
	// The operator layout's fault-tolerance refusal (checkRemoval), per batch: the database
	// available at its configured replication, a batch's storage in at most the tolerated zoneids,
	// and enough storage zoneids left. A plain `fdbcli exclude` checks only free space. A
	// resumed run's batches are partly done already, so it is not checked again.
	if req.Journal == nil {
		n := max(req.MaxConcurrent, 1)
		for i := 0; i < len(req.Pods); i += n {
			if err := checkRemoval(c, CRState{}, st, req.Pods[i:min(i+n, len(req.Pods))], redundancyOf(st), false); err != nil {
				return nil, err
			}
		}
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
	return append([]*ops.Step{gate}, h.s.excludeSteps(suffix, ops.BatchTarget(batch), h.st, names, true)...)
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

// PodsOfClass chooses the pods of `replace --process-class` (ops.ClassPodChooser): on a
// FoundationDBCluster every pod of the classes' node groups (the operator groups pods by
// class); on the foundationdb-statefulset layout the pods whose process reports one of classes
// in status json (class_type): the layout has one node group, so the classes are the
// processes' own. reasons says why each was chosen. A class with no pod (no process) is
// refused with the classes there are.
func (e *Engine) PodsOfClass(ctx context.Context, c *ops.Cluster, classes []string) ([]string, map[string]string, error) {
	if Resource(c) != nil {
		var pods []string
		reasons := map[string]string{}
		for _, class := range classes {
			g := c.Group(class)
			if g == nil {
				return nil, nil, ops.Usagef("no process class %q in %s/%s; allowed: %s", class, c.Namespace, c.Name, strings.Join(c.GroupNames(), ", "))
			}
			for _, p := range g.Pods {
				pods = append(pods, p.Name)
				reasons[p.Name] = "process class " + class
			}
		}
		return pods, reasons, nil
	}
	st, _, err := e.StatusFrom(ctx, e.cli(), c, nil)
	if err != nil {
		return nil, nil, ops.Preconditionf("cannot read the database's status to choose pods by process class: %v", err)
	}
	var pods []string
	reasons := map[string]string{}
	seen := map[string]bool{}
	for _, p := range c.AllPods() {
		for _, pr := range st.ByInstance(p.Name) {
			seen[pr.ClassType] = true
			if slices.Contains(classes, pr.ClassType) && !slices.Contains(pods, p.Name) {
				pods = append(pods, p.Name)
				reasons[p.Name] = "process class " + pr.ClassType
			}
		}
	}
	for _, class := range classes {
		if !seen[class] {
			have := make([]string, 0, len(seen))
			for k := range seen {
				have = append(have, k)
			}
			slices.Sort(have)
			return nil, nil, ops.Usagef("no process of class %q in %s/%s; classes: %s", class, c.Namespace, c.Name, strings.Join(have, ", "))
		}
	}
	return pods, reasons, nil
}
