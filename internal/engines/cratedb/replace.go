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
// for green N times in a row.
func (e *Engine) PlanReplacement(ctx context.Context, c *ops.Cluster, req ops.ReplaceRequest) (*ops.Plan, error) {
	if _, err := e.systemPassword(ctx, c); err != nil {
		return nil, err
	}
	return (&ops.Replacement{Client: e.client, Hooks: &replaceHooks{e: e}}).Plan(c, ops.EngineCrateDB, req)
}

// NotMembers implements ops.MemberChecker: Ready pods whose CrateDB node
// is missing from sys.nodes.
func (e *Engine) NotMembers(ctx context.Context, c *ops.Cluster) (map[string]string, error) {
	var names []string
	for _, p := range c.AllPods() {
		names = append(names, podNode(c, p))
	}
	present, err := e.nodesPresent(ctx, c, nil, names)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range c.AllPods() {
		if n := podNode(c, p); p.Ready && !slices.Contains(present, n) {
			out[p.Name] = fmt.Sprintf("CrateDB node %s is not in sys.nodes", n)
		}
	}
	return out, nil
}

func podNode(c *ops.Cluster, p ops.Pod) string {
	role := ops.RoleData
	if g := c.Group(p.Group); g != nil {
		role = g.Role
	}
	return nodeName(role, p.Group, p.Ordinal)
}

func podNodes(c *ops.Cluster, batch []ops.Pod) []string {
	out := make([]string, 0, len(batch))
	for _, p := range batch {
		out = append(out, podNode(c, p))
	}
	return out
}

type replaceHooks struct{ e *Engine }

// Before implements ops.ReplaceHooks: the drain.
func (h *replaceHooks) Before(c *ops.Cluster, batch []ops.Pod) []*ops.Step {
	e := h.e
	id := ops.BatchID(batch)
	nodes := podNodes(c, batch)
	list := strings.Join(nodes, ",")
	pods := make([]string, 0, len(batch))
	for _, p := range batch {
		pods = append(pods, p.Name)
	}
	s := &ops.Step{ID: "replace/drain/" + id, Target: ops.BatchTarget(batch), Mutating: true,
		Description: fmt.Sprintf("move all shards off %s (allocation exclusion) and wait until none are left", strings.Join(nodes, ", ")),
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
		return false, e.checkReplace(ctx, c, batch, pods)
	}
	s.Action = func(ctx context.Context, sc *ops.StepContext) error {
		sess := e.session(c)
		rows, err := sess.query(ctx, pods, sqlExclusions)
		if err != nil {
			return sqlErr(sqlExclusions, err)
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
		if err := sess.exec(ctx, pods, q); err != nil {
			return sqlErr(q, err)
		}
		for _, p := range batch {
			sc.Audit(ctx, podRef(c, p), "DbopsExcludeNodes", fmt.Sprintf("excluded node %s from shard allocation before replacing pod %s", podNode(c, p), p.Name))
		}
		return nil
	}
	s.Verify = func(ctx context.Context, sc *ops.StepContext) error {
		return e.waitDrained(ctx, sc, c, nodes, pods)
	}
	return []*ops.Step{s}
}

// checkReplace refuses a replacement that would lose data: red now, or a
// table whose replicas need more data nodes than remain while the batch
// is out.
func (e *Engine) checkReplace(ctx context.Context, c *ops.Cluster, batch []ops.Pod, avoid []string) error {
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
	return nil
}

// After implements ops.ReplaceHooks: rejoin, drop this exclusion, green.
func (h *replaceHooks) After(c *ops.Cluster, batch []ops.Pod) []*ops.Step {
	e := h.e
	id := ops.BatchID(batch)
	nodes := podNodes(c, batch)
	rejoin := &ops.Step{ID: "replace/rejoin/" + id, Target: ops.BatchTarget(batch),
		Description: fmt.Sprintf("wait for %s to rejoin sys.nodes", strings.Join(nodes, ", ")),
		Details:     []string{sqlNodeNames},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			return e.waitNodes(ctx, sc, c, nodes, true, nil)
		},
	}
	include := &ops.Step{ID: "replace/include/" + id, Target: ops.BatchTarget(batch), Mutating: true,
		Description: "drop only the allocation exclusions this replacement added, wait for green",
		Details: []string{sqlExclusions,
			sqlSetExclusions("<current without "+strings.Join(nodes, ",")+">") + "  -- or, when none remain:",
			sqlResetExclusion,
			fmt.Sprintf("wait: green %d times in a row, %s apart", e.cfg.HealthChecks, e.cfg.HealthInterval)},
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			added := splitList(sc.Get(replaceExclKey(id)))
			if len(added) == 0 {
				return nil
			}
			changed, err := e.dropExclusions(ctx, c, added)
			if err != nil {
				return err
			}
			if changed {
				for _, p := range batch {
					sc.Audit(ctx, podRef(c, p), "DbopsRestoreExclusions", fmt.Sprintf("dropped allocation exclusion of node %s after replacing pod %s", podNode(c, p), p.Name))
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
