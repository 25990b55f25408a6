package cratedb

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// replaceExclKey lists, per batch, the node names this replacement added
// to the allocation exclusion list, so only those are dropped afterwards.
func replaceExclKey(batch string) string { return "cratedb.replace.excluded/" + batch }

// replaceDrainKey marks a batch whose exclusion was set: a resumed run
// skips the up-front checks, the cluster is legitimately in flux then.
func replaceDrainKey(batch string) string { return "cratedb.replace.drain/" + batch }

// PlanReplacement implements ops.PodReplacer: per batch, exclude the nodes
// from allocation and wait for zero shards on them, delete pods and PVCs,
// wait for the nodes to rejoin sys.nodes, drop only this exclusion, wait
// for green N times in a row. Every pod is mapped to its node first; a pod
// whose node cannot be told refuses the run before anything is written.
func (e *Engine) PlanReplacement(ctx context.Context, c *ops.Cluster, req ops.ReplaceRequest) (*ops.Plan, error) {
	if _, err := e.systemPassword(ctx, c); err != nil {
		return nil, err
	}
	nodes, err := e.mapNodes(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	if err := e.readRed(ctx, c, nodes); err != nil {
		return nil, err
	}
	if err := nodes.problem(c); err != nil {
		return nil, err
	}
	for _, name := range req.Pods {
		if err := checkReplaceable(c, nodes, name); err != nil {
			return nil, err
		}
	}
	h := &replaceHooks{e: e, nodes: nodes, drains: map[string][]ops.Pod{}}
	p, err := (&ops.Replacement{Client: e.client, Hooks: h}).Plan(c, ops.EngineCrateDB, req)
	if err != nil {
		return nil, err
	}
	// The drain's own check, before the lock: a refusal (red, too few data
	// nodes for a table's replicas) must write nothing, not even the Lease.
	// A resumed run skips it as the drain does: its exclusion may hold the
	// cluster in flux on purpose.
	p.Preflight = func(ctx context.Context, st ops.PreflightState) error {
		next := p.NextStep(st)
		if next == nil || st.Resuming {
			return nil
		}
		batch, ok := h.drains[next.ID]
		if !ok {
			return nil
		}
		names, _ := h.present(batch)
		return e.checkReplace(ctx, c, batch, podNames(batch), names)
	}
	return p, nil
}

func podNames(batch []ops.Pod) []string {
	out := make([]string, 0, len(batch))
	for _, p := range batch {
		out = append(out, p.Name)
	}
	return out
}

// checkReplaceable refuses to replace (and so wipe the data of) a pod
// whose node is not known: a Ready pod must have its node in sys.nodes;
// a pod that is not Ready (not in the cluster) may be replaced only when
// every node in sys.nodes belongs to some pod, so none could be its.
func checkReplaceable(c *ops.Cluster, m *nodeMap, pod string) error {
	pn := m.pods[pod]
	switch {
	case pn == nil:
		return nil // gone: the replacement recreates it, with nothing to drain
	case pn.Row != nil:
		return nil
	}
	if err := m.missingWithRed(pod); err != nil {
		return err
	}
	switch {
	case pn.Facts.Ready:
		return ops.Usagef("refusing: pod %s is Ready but has no CrateDB node in sys.nodes (looked for %s; nodes: %s); its data could be anywhere",
			pod, pn.Facts.describe(), m.rowNames())
	}
	if un := m.unclaimed(); len(un) > 0 {
		return ops.Usagef("refusing: pod %s has no node in sys.nodes, and nodes %s match no pod; one of them may hold its data",
			pod, strings.Join(un, ", "))
	}
	return nil
}

// NotMembers implements ops.MemberChecker: Ready pods whose CrateDB node
// is not in sys.nodes (or cannot be told).
func (e *Engine) NotMembers(ctx context.Context, c *ops.Cluster) (map[string]string, error) {
	m, err := e.mapNodes(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range c.AllPods() {
		pn := m.pods[p.Name]
		switch {
		case pn == nil || !pn.Facts.Ready:
		case pn.Problem != "":
			out[p.Name] = pn.Problem
		case pn.Row == nil:
			out[p.Name] = fmt.Sprintf("no CrateDB node in sys.nodes matches it (%s)", pn.Facts.describe())
		}
	}
	return out, nil
}

type replaceHooks struct {
	e *Engine
	// nodes is the mapping read before anything was deleted.
	nodes *nodeMap
	// drains maps each drain step's ID to its batch, for the preflight.
	drains map[string][]ops.Pod
}

// present lists the nodes of the batch that are in sys.nodes (to drain),
// and the IDs they have (a replaced node comes back with a new one).
func (h *replaceHooks) present(batch []ops.Pod) (names []string, ids map[string]string) {
	ids = map[string]string{}
	for _, p := range batch {
		if pn := h.nodes.pods[p.Name]; pn != nil && pn.Row != nil {
			names = append(names, pn.Row.Name)
			ids[p.Name] = pn.Row.ID
		}
	}
	return names, ids
}

func (h *replaceHooks) labels(batch []ops.Pod) []string {
	out := make([]string, 0, len(batch))
	for _, p := range batch {
		out = append(out, h.nodes.label(p.Name))
	}
	return out
}

// Before implements ops.ReplaceHooks: the drain.
func (h *replaceHooks) Before(c *ops.Cluster, batch []ops.Pod) []*ops.Step {
	e := h.e
	id := ops.BatchID(batch)
	nodes, _ := h.present(batch)
	list := strings.Join(nodes, ",")
	pods := podNames(batch)
	desc := fmt.Sprintf("move all shards off %s (allocation exclusion) and wait until none are left", strings.Join(nodes, ", "))
	if len(nodes) == 0 {
		desc = "check that the cluster can take the replacement (no node of the batch is in sys.nodes, so nothing to drain)"
	}
	if h.drains != nil {
		h.drains["replace/drain/"+id] = batch
	}
	s := &ops.Step{ID: "replace/drain/" + id, Target: ops.BatchTarget(batch), Mutating: true,
		Description: desc,
		Preconditions: []string{
			"no primary shard missing (cluster not red)",
			"max(number_of_replicas) + 1 <= data nodes that remain",
		},
		Details: []string{
			sqlMaxSeverity, sqlReplicas, sqlExclusions,
			sqlSetExclusions("<current>," + list),
			sqlShardsOn + "  -- $1 = {" + list + "}, until no rows",
		},
	}
	s.Precheck = func(ctx context.Context, sc *ops.StepContext) (bool, error) {
		if sc.Get(replaceDrainKey(id)) != "" {
			return false, nil
		}
		return false, e.checkRetried(ctx, sc, func() error { return e.checkReplace(ctx, c, batch, pods, nodes) })
	}
	s.Action = func(ctx context.Context, sc *ops.StepContext) error {
		rows, err := e.queryDB(ctx, sc, c, pods, sqlExclusions)
		if err != nil {
			return err
		}
		cur := splitList(cellString(rows, 0))
		added := splitList(sc.Get(replaceExclKey(id)))
		var add []string
		for _, n := range nodes {
			if !slices.Contains(cur, n) {
				add = append(add, n)
				if !slices.Contains(added, n) {
					added = append(added, n)
				}
			}
		}
		// Journal first: after a crash the re-run must know these are ours
		// to drop, even if the SET went through.
		if err := sc.Set(ctx, replaceExclKey(id), strings.Join(added, ",")); err != nil {
			return err
		}
		if err := sc.Set(ctx, replaceDrainKey(id), "1"); err != nil {
			return err
		}
		if len(add) == 0 {
			return nil
		}
		q := sqlSetExclusions(strings.Join(append(cur, add...), ","))
		if err := e.execDB(ctx, sc, c, pods, q); err != nil {
			return sqlErr(q, err)
		}
		for _, p := range batch {
			if pn := h.nodes.pods[p.Name]; pn != nil && pn.Row != nil {
				sc.Audit(ctx, podRef(c, p), "DbopsExcludeNodes", fmt.Sprintf("excluded node %s from shard allocation before replacing pod %s", pn.Row.Name, p.Name))
			}
		}
		return nil
	}
	s.Verify = func(ctx context.Context, sc *ops.StepContext) error {
		if len(nodes) == 0 {
			return nil
		}
		return e.waitDrained(ctx, sc, c, nodes, pods, "cannot replace "+id, func(ctx context.Context) error {
			if _, err := e.dropExclusions(ctx, sc, c, splitList(sc.Get(replaceExclKey(id)))); err != nil {
				return err
			}
			if err := sc.Set(ctx, replaceExclKey(id), ""); err != nil {
				return err
			}
			return sc.Set(ctx, replaceDrainKey(id), "")
		})
	}
	return []*ops.Step{s}
}

// checkReplace refuses a replacement that would lose data: red now, or a
// table whose replicas need more data nodes than remain while the batch
// is out.
func (e *Engine) checkReplace(ctx context.Context, c *ops.Cluster, batch []ops.Pod, avoid, nodes []string) error {
	hs, err := e.readHealth(ctx, c, expectedNodes(c), avoid)
	if err != nil {
		return err
	}
	if hs.MaxSeverity >= 3 {
		return ops.Preconditionf("cannot replace %s: cluster is red (%s); primaries are missing", ops.BatchID(batch), hs)
	}
	_, data, err := e.liveTotals(ctx, c)
	if err != nil {
		return err
	}
	for _, p := range batch {
		if g := c.Group(p.Group); g != nil && g.Role != ops.RoleMaster {
			data--
		}
	}
	rows, err := e.session(c).query(ctx, avoid, sqlReplicas)
	if err != nil {
		return sqlErr(sqlReplicas, err)
	}
	for _, row := range rows {
		v := ""
		if len(row) > 0 {
			v = toString(row[0])
		}
		n, bounded, err := replicaCount(v)
		if err != nil {
			return ops.Preconditionf("cannot replace %s: %v", ops.BatchID(batch), err)
		}
		if !bounded || int64(n)+1 > data {
			need := "a copy on every node"
			if bounded {
				need = strconv.Itoa(n+1) + " data nodes"
			}
			return ops.Preconditionf("cannot replace %s: a table has number_of_replicas = '%s', which needs %s, and only %d data nodes remain while it is out; lower --max-concurrent or that table setting",
				ops.BatchID(batch), v, need, data)
		}
	}
	return e.checkDrainable(ctx, c, avoid, "cannot replace "+ops.BatchID(batch), nodes)
}

// After implements ops.ReplaceHooks: rejoin, drop this exclusion, green.
func (h *replaceHooks) After(c *ops.Cluster, batch []ops.Pod) []*ops.Step {
	e := h.e
	id := ops.BatchID(batch)
	drained, oldIDs := h.present(batch)
	pods := podNames(batch)
	rejoin := &ops.Step{ID: "replace/rejoin/" + id, Target: ops.BatchTarget(batch),
		Description: fmt.Sprintf("wait for %s to rejoin sys.nodes (new node IDs, fresh data)", strings.Join(h.labels(batch), ", ")),
		Details:     []string{sqlNodes + "  -- matched to the new pods by -Cnode.name, hostname and IP"},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			_, err := e.waitPodNodes(ctx, sc, c, pods, oldIDs)
			return err
		},
	}
	include := &ops.Step{ID: "replace/include/" + id, Target: ops.BatchTarget(batch), Mutating: true,
		Description: "drop only the allocation exclusions this replacement added, wait for green",
		Details: []string{sqlExclusions,
			sqlSetExclusions("<current without "+strings.Join(drained, ",")+">") + "  -- or, when none remain:",
			sqlResetExclusion,
			fmt.Sprintf("wait: green %d times in a row, %s apart", e.cfg.HealthChecks, e.cfg.HealthInterval)},
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			added := splitList(sc.Get(replaceExclKey(id)))
			if len(added) == 0 {
				return nil
			}
			changed, err := e.dropExclusions(ctx, sc, c, added)
			if err != nil {
				return err
			}
			if changed {
				for _, p := range batch {
					sc.Audit(ctx, livePodRef(sc, e.client, c, p), "DbopsRestoreExclusions", fmt.Sprintf("dropped allocation exclusion of %s after replacing pod %s", h.nodes.label(p.Name), p.Name))
				}
			}
			return sc.Set(ctx, replaceExclKey(id), "")
		},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			return e.greenInARow(ctx, sc, c, expectedNodes(c))
		},
	}
	return []*ops.Step{rejoin, include}
}
