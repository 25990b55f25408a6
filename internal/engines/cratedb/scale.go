package cratedb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Journal keys of a scale run.
const (
	// keyExclAdded lists the node names this run added to the allocation
	// exclusions; only those are removed at the end.
	keyExclAdded = "cratedb.scale.excluded"
)

func keyDrainStarted(group string) string { return "cratedb.scale.drain/" + group }

// keyRemovedNodes records the node names a shrink of group removes, as read
// before the pods went, for a resumed run that can no longer read them.
func keyRemovedNodes(group string) string { return "cratedb.scale.nodes/" + group }

// resize is one node group's change.
type resize struct {
	g        *ops.NodeGroup
	from, to int32
	// nodes are the CrateDB nodes of the pods a shrink removes, read from
	// the live cluster (docs/procedures.md, CrateDB: never computed).
	nodes []string
}

func (r resize) grows() bool { return r.to > r.from }

func (r resize) pods(from, to int32) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", ops.StatefulSetName(r.g), i))
	}
	return out
}

// PlanScale implements ops.Scaler: masters first, then growing data
// groups, then shrinking ones (drained first), then expected-nodes,
// exclusions and the node check.
func (e *Engine) PlanScale(ctx context.Context, c *ops.Cluster, req ops.ScaleRequest) (*ops.Plan, error) {
	if req.Replicas != nil || req.Primaries != nil {
		return nil, ops.Usagef("CrateDB clusters scale per node group: use --master N and --data GROUP=N")
	}
	var master *ops.NodeGroup
	var dataNames []string
	for _, g := range c.Groups {
		if g.Role == ops.RoleMaster {
			master = g
		} else {
			dataNames = append(dataNames, g.Name)
		}
	}
	target := map[string]int32{}
	for _, g := range c.Groups {
		target[g.Name] = g.Desired
	}
	var changes []resize
	if req.Masters != nil {
		n := *req.Masters
		if master == nil {
			return nil, ops.Usagef("cluster %s has no dedicated master node group, so --master does not apply; scale its data groups with --data GROUP=N (allowed: %s)",
				c.Name, strings.Join(dataNames, ", "))
		}
		if n < 3 || n%2 == 0 {
			return nil, ops.Usagef("--master %d: masters must be an odd number of at least 3 (allowed: 3, 5, 7, ...)", n)
		}
		target[master.Name] = n
		if n != master.Desired {
			changes = append(changes, resize{g: master, from: master.Desired, to: n})
		}
	}
	// Definition order, whatever the map order.
	for _, name := range slices.Sorted(maps.Keys(req.Data)) {
		g := c.Group(name)
		if g == nil || g.Role == ops.RoleMaster {
			return nil, ops.Usagef("unknown data node group %q for cluster %s; allowed: %s", name, c.Name, strings.Join(dataNames, ", "))
		}
		if n := req.Data[name]; n < 0 {
			return nil, ops.Usagef("--data %s=%d: replicas must not be negative", name, n)
		}
	}
	var ups, downs []resize
	for _, g := range c.Groups {
		n, ok := req.Data[g.Name]
		if !ok || g.Role == ops.RoleMaster {
			continue
		}
		if g.MasterEligible && n < 3 {
			return nil, ops.Usagef("--data %s=%d: %s holds the master-eligible nodes of %s; it needs at least 3", g.Name, n, g.Name, c.Name)
		}
		target[g.Name] = n
		switch {
		case n > g.Desired:
			ups = append(ups, resize{g: g, from: g.Desired, to: n})
		case n < g.Desired:
			downs = append(downs, resize{g: g, from: g.Desired, to: n})
		}
	}
	changes = append(changes, ups...)
	args := scaleArgs(req, master)
	// A run of the same request that crashed after its last resize still
	// owes the clean-up (expected nodes, its exclusions, the node check).
	resuming := req.Journal.Resumable("scale", args)
	if len(changes)+len(downs) == 0 && !resuming {
		// The goal is reached (a repeated request, or a re-run after a run
		// killed after its last step): a success with nothing to do.
		p := ops.NewPlan("scale", c, ops.EngineCrateDB, args)
		p.Notes = []string{fmt.Sprintf("cluster %s already has %s", c.Name, sizes(c, target))}
		return p, nil
	}
	var total, dataTotal int
	for _, g := range c.Groups {
		total += int(target[g.Name])
		if g.Role != ops.RoleMaster {
			dataTotal += int(target[g.Name])
		}
	}
	if dataTotal == 0 {
		return nil, ops.Usagef("scaling every data group of %s to 0 would leave no data node", c.Name)
	}
	// Every resize waits on sys.nodes: a missing Secret must stop the run
	// before the first change.
	if _, err := e.systemPassword(ctx, c); err != nil {
		return nil, err
	}
	// Map pods to nodes before anything is written: a shrink drains and
	// waits for exactly the nodes of the pods it removes.
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
	for i := range changes {
		if changes[i].grows() {
			continue
		}
		if changes[i].nodes, err = removedNodes(c, nodes, changes[i], req.Journal, resuming); err != nil {
			return nil, err
		}
	}
	for i := range downs {
		if downs[i].nodes, err = removedNodes(c, nodes, downs[i], req.Journal, resuming); err != nil {
			return nil, err
		}
	}
	downsFirst := len(changes) == 0
	changes = append(changes, downs...)

	// When the first step is a drain, the cluster it will see is the one
	// seen now: refuse here, before the lock is taken or anything written.
	// (The drain re-checks when it runs.)
	if len(downs) > 0 && downsFirst && !resuming {
		if err := e.checkShrink(ctx, c, downs[0]); err != nil {
			return nil, err
		}
	}
	// A master-eligible node that is down now makes any removal of another
	// one unsafe: refuse before the lock (each removal checks again).
	for i, r := range changes {
		if r.grows() || !isMasterEligible(r.g) {
			continue
		}
		if mrs := masterRemovals(c, nodes, r, target); len(mrs) > 0 {
			if err := e.checkMasterRemoval(ctx, nil, c, mrs[0]); err != nil {
				return nil, err
			}
		}
		// A data-holding master group's drain comes first: checked as a data drain is.
		if i == 0 && r.g.Role == ops.RoleMaster && holdsData(r.g) && !resuming {
			if err := e.checkShrink(ctx, c, r); err != nil {
				return nil, err
			}
		}
	}
	p := ops.NewPlan("scale", c, ops.EngineCrateDB, args)
	// Removing nodes is destructive, master-eligible ones included (as etcd's scale-down).
	p.Destructive = slices.ContainsFunc(changes, func(r resize) bool { return !r.grows() })
	p.Notes = append(p.Notes, "from "+sizes(c, nil)+" to "+sizes(c, target))
	if len(changes) == 0 {
		p.Notes = append(p.Notes, "every size already matches: finishing the interrupted run's clean-up")
	}
	drains := false
	for _, r := range changes {
		switch {
		case r.grows():
			p.Steps = append(p.Steps, e.resizeStep(c, r))
		case isMasterEligible(r.g):
			// One node at a time, each checked for the voting quorum (quorum.go); drained
			// first when the nodes hold data.
			if holdsData(r.g) {
				p.Steps = append(p.Steps, e.drainStep(c, r))
				drains = true
			}
			for _, mr := range masterRemovals(c, nodes, r, target) {
				p.Steps = append(p.Steps, e.masterRemovalStep(c, mr))
			}
		default:
			p.Steps = append(p.Steps, e.drainStep(c, r), e.resizeStep(c, r))
			drains = true
		}
	}
	ver, err := clusterVersion(nodes.rows)
	if err != nil {
		return nil, ops.Preconditionf("cannot scale %s: %v", c.Name, err)
	}
	if st := e.expectedStep(c, gatewayTarget{Total: total, Data: dataTotal, Version: ver}); st != nil {
		for _, g := range c.Groups {
			// A template change under RollingUpdate makes the StatefulSet
			// controller restart every pod by itself, without health gates.
			if sts := ops.StatefulSetOf(g); sts == nil || len(gatewayArgs(sts)) == 0 || sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
				continue
			}
			if !e.cfg.AllowRollingUpdate {
				return nil, ops.Usagef("refusing: statefulset/%s uses updateStrategy %s, so changing its gateway arguments would make the StatefulSet controller restart its pods by itself, without health gates; set updateStrategy OnDelete or confirm with --allow-rolling-update",
					ops.StatefulSetName(g), updateStrategyName(ops.StatefulSetOf(g)))
			}
			p.Notes = append(p.Notes, fmt.Sprintf("statefulset/%s uses updateStrategy %s: the StatefulSet controller will restart its pods by itself after the gateway arguments change (confirmed by --allow-rolling-update)", ops.StatefulSetName(g), updateStrategyName(ops.StatefulSetOf(g))))
		}
		p.Steps = append(p.Steps, st)
	} else {
		p.Notes = append(p.Notes, "no StatefulSet sets -Cgateway.expected_(data_)nodes or -Cgateway.recover_after_(data_)nodes; nothing to update there")
	}
	if drains || resuming {
		p.Steps = append(p.Steps, e.restoreExclusionsStep(c))
	}
	p.Steps = append(p.Steps, e.ackStep(c))
	return p, nil
}

func updateStrategyName(s *appsv1.StatefulSet) string {
	if s.Spec.UpdateStrategy.Type == "" {
		return string(appsv1.RollingUpdateStatefulSetStrategyType) + " (the default)"
	}
	return string(s.Spec.UpdateStrategy.Type)
}

// removedNodes returns the node names of the pods r removes: from the
// live mapping, or, for a resumed run whose pods are already gone, from
// the journal of the run that read them.
func removedNodes(c *ops.Cluster, m *nodeMap, r resize, j *ops.Journal, resuming bool) ([]string, error) {
	if resuming && j != nil {
		if v := splitList(j.Data[keyRemovedNodes(r.g.Name)]); len(v) > 0 {
			return v, nil
		}
	}
	return m.present(c, r.pods(r.to, r.from))
}

// sizes renders group sizes, e.g. "master=3 hot=2 cold=1".
func sizes(c *ops.Cluster, target map[string]int32) string {
	parts := make([]string, 0, len(c.Groups))
	for _, g := range c.Groups {
		n := g.Desired
		if target != nil {
			n = target[g.Name]
		}
		parts = append(parts, g.Name+"="+strconv.Itoa(int(n)))
	}
	return strings.Join(parts, " ")
}

// scaleArgs is the canonical request, the journal's resume key.
func scaleArgs(req ops.ScaleRequest, master *ops.NodeGroup) string {
	var parts []string
	if req.Masters != nil && master != nil {
		parts = append(parts, "--master "+strconv.Itoa(int(*req.Masters)))
	}
	var data []string
	for _, name := range slices.Sorted(maps.Keys(req.Data)) {
		data = append(data, name+"="+strconv.Itoa(int(req.Data[name])))
	}
	if len(data) > 0 {
		parts = append(parts, "--data "+strings.Join(data, ","))
	}
	return strings.Join(parts, " ")
}

func stsRef(c *ops.Cluster, g *ops.NodeGroup) ops.ObjectRef {
	ref := ops.ObjectRef{Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: c.Namespace, Name: ops.StatefulSetName(g)}
	if ops.StatefulSetOf(g) != nil {
		ref.UID = string(ops.StatefulSetOf(g).UID)
	}
	return ref
}

// liveTotals sums the live StatefulSets' spec.replicas: all nodes and
// data nodes.
func (e *Engine) liveTotals(ctx context.Context, c *ops.Cluster) (total, data int64, err error) {
	for _, g := range c.Groups {
		s, err := e.client.AppsV1().StatefulSets(c.Namespace).Get(ctx, ops.StatefulSetName(g), metav1.GetOptions{})
		if err != nil {
			return 0, 0, fmt.Errorf("reading StatefulSet %s/%s: %w", c.Namespace, ops.StatefulSetName(g), err)
		}
		n := int64(1)
		if s.Spec.Replicas != nil {
			n = int64(*s.Spec.Replicas)
		}
		total += n
		if g.Role != ops.RoleMaster {
			data += n
		}
	}
	return total, data, nil
}

// resizeStep sets a StatefulSet's replicas and waits for the result:
// new pods Ready and their nodes in sys.nodes, or removed pods gone and
// their nodes out of sys.nodes.
func (e *Engine) resizeStep(c *ops.Cluster, r resize) *ops.Step {
	ns := c.Namespace
	s := &ops.Step{ID: "replicas/" + r.g.Name, Group: r.g.Name, Target: "statefulset/" + ops.StatefulSetName(r.g), Mutating: true}
	s.Details = []string{fmt.Sprintf("spec.replicas: %d -> %d (a patch of spec.replicas alone)", r.from, r.to)}
	if r.grows() {
		s.Description = fmt.Sprintf("scale %s up from %d to %d, wait for the new pods and nodes", r.g.Name, r.from, r.to)
		s.Details = append(s.Details,
			"wait: pods "+strings.Join(r.pods(r.from, r.to), ", ")+" Ready (watch)",
			fmt.Sprintf("wait: their nodes in sys.nodes, matched by -Cnode.name, hostname and IP (%s)", sqlNodes))
	} else {
		s.Description = fmt.Sprintf("scale %s down from %d to %d, wait for the pods and nodes to go", r.g.Name, r.from, r.to)
		s.Details = append(s.Details,
			"wait: pods "+strings.Join(r.pods(r.to, r.from), ", ")+" gone (watch)",
			fmt.Sprintf("wait: nodes %s out of sys.nodes (%s)", strings.Join(r.nodes, ", "), sqlNodes))
	}
	s.Action = func(ctx context.Context, sc *ops.StepContext) error {
		changed, err := setReplicas(ctx, e.client, ns, r.g, r.to)
		if err != nil {
			return err
		}
		if changed {
			sc.Audit(ctx, stsRef(c, r.g), "DbopsScale", fmt.Sprintf("scaled node group %s from %d to %d replicas", r.g.Name, r.from, r.to))
		}
		return nil
	}
	s.Verify = func(ctx context.Context, sc *ops.StepContext) error {
		if r.grows() {
			return e.waitGrown(ctx, sc, c, r)
		}
		return e.waitShrunk(ctx, sc, c, r)
	}
	return s
}

func (e *Engine) waitGrown(ctx context.Context, sc *ops.StepContext, c *ops.Cluster, r resize) error {
	pods := r.pods(r.from, r.to)
	for i, pod := range pods {
		sc.Progress(int64(i), int64(len(pods)), "pods", "waiting for pod "+pod+" to be Ready")
		if _, err := ops.WaitPod(ctx, sc, e.client, c.Namespace, pod, func(p *corev1.Pod) (bool, error) { return ops.PodReady(p), nil }); err != nil {
			return err
		}
	}
	_, err := e.waitPodNodes(ctx, sc, c, pods, nil)
	return err
}

func (e *Engine) waitShrunk(ctx context.Context, sc *ops.StepContext, c *ops.Cluster, r resize) error {
	pods := r.pods(r.to, r.from)
	for i, pod := range pods {
		sc.Progress(int64(i), int64(len(pods)), "pods", "waiting for pod "+pod+" to be gone")
		if _, err := ops.WaitPod(ctx, sc, e.client, c.Namespace, pod, func(p *corev1.Pod) (bool, error) { return p == nil, nil }); err != nil {
			return err
		}
	}
	return e.waitNodes(ctx, sc, c, r.nodes, false, pods)
}

// waitNodes polls sys.nodes until all names are present (present=true) or
// all are gone.
func (e *Engine) waitNodes(ctx context.Context, sc *ops.StepContext, c *ops.Cluster, names []string, present bool, avoid []string) error {
	err := e.pollDB(ctx, sc, func() (bool, error) {
		rows, err := e.nodesPresent(ctx, c, avoid, names)
		if err != nil {
			return false, err
		}
		if present {
			sc.Progress(int64(len(rows)), int64(len(names)), "nodes", "nodes joined (sys.nodes)")
			return len(rows) == len(names), nil
		}
		sc.Progress(int64(len(names)-len(rows)), int64(len(names)), "nodes", "nodes left (sys.nodes)")
		return len(rows) == 0, nil
	})
	if err != nil {
		verb := "join"
		if !present {
			verb = "leave"
		}
		return fmt.Errorf("waiting for nodes %s to %s sys.nodes: %w", strings.Join(names, ", "), verb, err)
	}
	return nil
}

// nodesPresent returns which of names are in sys.nodes.
func (e *Engine) nodesPresent(ctx context.Context, c *ops.Cluster, avoid, names []string) ([]string, error) {
	rows, err := e.readNodes(ctx, c, avoid)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rows {
		if slices.Contains(names, r.Name) && !slices.Contains(out, r.Name) {
			out = append(out, r.Name)
		}
	}
	return out, nil
}

// drainStep checks that shrinking is safe, excludes the nodes to remove
// from shard allocation and waits until their shards have moved away.
func (e *Engine) drainStep(c *ops.Cluster, r resize) *ops.Step {
	nodes := r.nodes
	list := strings.Join(nodes, ",")
	s := &ops.Step{ID: "drain/" + r.g.Name, Group: r.g.Name, Target: "nodegroup/" + r.g.Name, Mutating: true,
		Description: fmt.Sprintf("move all shards off %s (allocation exclusion) and wait until none are left", strings.Join(nodes, ", ")),
		Preconditions: []string{
			"cluster green and sum(StatefulSet replicas) == count(sys.nodes)",
			"max(number_of_replicas) + 1 <= data nodes that remain",
		},
		Details: []string{
			sqlNodeCount, sqlMaxSeverity, sqlMasterNode,
			sqlReplicas,
			sqlExclusions,
			sqlSetExclusions("<current>," + list),
			sqlShardsOn + "  -- $1 = {" + list + "}, until no rows",
		},
	}
	s.Precheck = func(ctx context.Context, sc *ops.StepContext) (bool, error) {
		if sc.Get(keyDrainStarted(r.g.Name)) != "" {
			// Resumed after the exclusion was set: the checks were done,
			// and live counts are legitimately in flux now.
			return false, nil
		}
		return false, e.checkRetried(ctx, sc, func() error { return e.checkShrink(ctx, c, r) })
	}
	s.Action = func(ctx context.Context, sc *ops.StepContext) error {
		rows, err := e.queryDB(ctx, sc, c, nil, sqlExclusions)
		if err != nil {
			return err
		}
		cur := splitList(cellString(rows, 0))
		var add []string
		for _, n := range nodes {
			if !slices.Contains(cur, n) {
				add = append(add, n)
			}
		}
		// Journal first: after a crash the re-run must know these are
		// ours to remove, even if the SET went through.
		added := splitList(sc.Get(keyExclAdded))
		for _, n := range add {
			if !slices.Contains(added, n) {
				added = append(added, n)
			}
		}
		if err := sc.Set(ctx, keyExclAdded, strings.Join(added, ",")); err != nil {
			return err
		}
		if err := sc.Set(ctx, keyRemovedNodes(r.g.Name), strings.Join(nodes, ",")); err != nil {
			return err
		}
		if err := sc.Set(ctx, keyDrainStarted(r.g.Name), "1"); err != nil {
			return err
		}
		if len(add) == 0 {
			return nil
		}
		q := sqlSetExclusions(strings.Join(append(cur, add...), ","))
		if err := e.execDB(ctx, sc, c, nil, q); err != nil {
			return sqlErr(q, err)
		}
		sc.Audit(ctx, stsRef(c, r.g), "DbopsExcludeNodes", "excluded nodes "+strings.Join(add, ",")+" from shard allocation before scaling down")
		return nil
	}
	s.Verify = func(ctx context.Context, sc *ops.StepContext) error {
		return e.waitDrained(ctx, sc, c, nodes, nil, fmt.Sprintf("cannot scale %s down", r.g.Name), func(ctx context.Context) error {
			// Give back only this group's nodes that this run excluded; a re-run checks again.
			added := splitList(sc.Get(keyExclAdded))
			mine := slices.DeleteFunc(slices.Clone(added), func(n string) bool { return !slices.Contains(nodes, n) })
			if _, err := e.dropExclusions(ctx, sc, c, mine); err != nil {
				return err
			}
			rest := slices.DeleteFunc(added, func(n string) bool { return slices.Contains(nodes, n) })
			if err := sc.Set(ctx, keyExclAdded, strings.Join(rest, ",")); err != nil {
				return err
			}
			return sc.Set(ctx, keyDrainStarted(r.g.Name), "")
		})
	}
	return s
}

// dropExclusions removes the nodes in added from the allocation exclusion
// list, leaving everyone else's; it reports whether the list changed.
func (e *Engine) dropExclusions(ctx context.Context, sc *ops.StepContext, c *ops.Cluster, added []string) (bool, error) {
	if len(added) == 0 {
		return false, nil
	}
	rows, err := e.queryDB(ctx, sc, c, nil, sqlExclusions)
	if err != nil {
		return false, err
	}
	cur := splitList(cellString(rows, 0))
	keep := slices.DeleteFunc(slices.Clone(cur), func(n string) bool { return slices.Contains(added, n) })
	if len(keep) == len(cur) {
		return false, nil
	}
	q := sqlResetExclusion
	if len(keep) > 0 {
		q = sqlSetExclusions(strings.Join(keep, ","))
	}
	if err := e.execDB(ctx, sc, c, nil, q); err != nil {
		return false, sqlErr(q, err)
	}
	return true, nil
}

// waitDrained polls sys.shards until no shard is left on nodes, reporting
// "shards left" progress; queries avoid the pods in avoid (being removed).
// While shards are left, each poll also checks what would keep them from
// moving (checkDrainable); when something does, undo gives the exclusion
// back and the drain stops with that refusal instead of waiting out the timeout.
func (e *Engine) waitDrained(ctx context.Context, sc *ops.StepContext, c *ops.Cluster, nodes, avoid []string, what string, undo func(context.Context) error) error {
	var first int64
	sized := false // the last reading fed bytes to the ETA
	sess := e.session(c)
	list := strings.Join(nodes, ", ")
	var stalled error
	err := e.pollDB(ctx, sc, func() (bool, error) {
		rows, err := sess.query(ctx, avoid, sqlShardsOn, nodes)
		if err != nil {
			return false, sqlErr(sqlShardsOn, err)
		}
		var left, bytes int64
		for _, row := range rows {
			if len(row) > 1 {
				left += toInt(row[1])
			}
			if len(row) > 2 {
				bytes += toInt(row[2]) // NULL (no size known) counts 0
			}
		}
		first = max(first, left)
		// The step's ETA: the bytes left over the rate they leave at, or the shards when
		// CrateDB knows no size for any of them (then a small and a large shard count alike).
		sized = sized && left == 0 || bytes > 0
		if sized {
			sc.Remaining(bytes, ops.UnitBytes)
		} else {
			sc.Remaining(left, ops.UnitShards)
		}
		size := ""
		if bytes > 0 {
			size = " (" + ops.FormatBytes(bytes) + ")"
		}
		if left > 0 {
			// Named before the progress, so the views keep both (a progress ends a plain wait):
			// the copy CrateDB will not move, when sys.allocations names one, else the count.
			// A failed read of sys.allocations only costs the name.
			if s, err := e.stuckShard(ctx, c, avoid, nodes); err == nil && s != nil {
				sc.Block(ctx, ops.BlockedShard, s.on(), s.toUnblock(), fmt.Sprintf("shards to move off %s", list))
			} else {
				sc.Block(ctx, ops.BlockedShard, fmt.Sprintf("%d shard(s)%s on %s (sys.shards)", left, size, list),
					hintAllocations, fmt.Sprintf("shards to move off %s", list))
			}
		}
		sc.Progress(first-left, first, "shards", fmt.Sprintf("%d shards%s left on %s", left, size, list))
		if len(rows) == 0 {
			return true, nil
		}
		if err := e.checkDrainable(ctx, c, avoid, what, nodes); err != nil {
			if errors.Is(err, ops.ErrPrecondition) {
				stalled = err
				return true, nil
			}
			return false, err
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for shards to leave %s: %w", list, err)
	}
	if stalled != nil {
		if err := undo(ctx); err != nil {
			return fmt.Errorf("%w; removing this run's allocation exclusion of %s failed too (remove it by hand): %v", stalled, list, err)
		}
		return fmt.Errorf("%w (the drain stopped; this run's allocation exclusion of %s was removed)", stalled, list)
	}
	return nil
}

// checkShrink refuses a shrink the cluster cannot take now.
func (e *Engine) checkShrink(ctx context.Context, c *ops.Cluster, r resize) error {
	total, data, err := e.liveTotals(ctx, c)
	if err != nil {
		return err
	}
	h, err := e.readHealth(ctx, c, total, nil)
	if err != nil {
		return err
	}
	if h.Nodes != total {
		return ops.Preconditionf("cannot scale %s down: the StatefulSets want %d nodes but sys.nodes has %d; wait for the cluster to settle",
			r.g.Name, total, h.Nodes)
	}
	if !h.Green() {
		return ops.Refusef(ops.ReasonNotGreen, "cannot scale %s down: cluster is %s (%s); it must be green", r.g.Name, h.Status(), h)
	}
	rows, err := e.session(c).query(ctx, nil, sqlReplicas)
	if err != nil {
		return sqlErr(sqlReplicas, err)
	}
	remaining := data - int64(r.from-r.to)
	if r.g.Role == ops.RoleMaster {
		// data counts only data groups: a master group that holds data keeps r.to nodes.
		remaining = data + int64(r.to)
	}
	for _, row := range rows {
		v := ""
		if len(row) > 0 {
			v = toString(row[0])
		}
		n, bounded, err := replicaCount(v)
		if err != nil {
			return ops.Preconditionf("cannot scale %s down: %v", r.g.Name, err)
		}
		if !bounded || int64(n)+1 > remaining {
			need := "a copy on every node"
			if bounded {
				need = strconv.Itoa(n+1) + " data nodes"
			}
			return ops.Preconditionf("cannot scale %s down to %d: a table has number_of_replicas = '%s', which needs %s, and only %d data nodes would remain; lower that table setting first",
				r.g.Name, r.to, v, need, remaining)
		}
	}
	return e.checkDrainable(ctx, c, nil, fmt.Sprintf("cannot scale %s down to %d", r.g.Name, r.to), r.nodes)
}

// expectedStep sets every StatefulSet's gateway arguments (expected
// nodes and the recover-after quorum) to the new totals; nil when no
// StatefulSet has any.
func (e *Engine) expectedStep(c *ops.Cluster, t gatewayTarget) *ops.Step {
	var details []string
	var groups []*ops.NodeGroup
	for _, g := range c.Groups {
		if ops.StatefulSetOf(g) == nil {
			continue
		}
		args := gatewayArgs(ops.StatefulSetOf(g))
		if len(args) == 0 {
			continue
		}
		var to []string
		seen := map[string]bool{}
		for _, a := range args {
			// Each setting once, as setGatewayArgs leaves it.
			if w := t.rewriteWord(a); !seen[gatewayKey(w)] {
				seen[gatewayKey(w)] = true
				to = append(to, w)
			}
		}
		details = append(details, fmt.Sprintf("statefulset/%s: %s", ops.StatefulSetName(g), strings.Join(to, " ")))
		groups = append(groups, g)
	}
	if len(groups) == 0 {
		return nil
	}
	details = append(details, fmt.Sprintf("(recover-after = quorum N/2+1; setting names for CrateDB %s; pod template only: takes effect when each pod next restarts)", t.Version))
	return &ops.Step{ID: "expected-nodes", Target: "cluster/" + c.Name, Mutating: true,
		Description: "set the expected-nodes and recover-after arguments of every StatefulSet to the new totals",
		Details:     details,
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			for _, g := range groups {
				changed, err := updateStatefulSet(ctx, e.client, c.Namespace, ops.StatefulSetName(g), func(s *appsv1.StatefulSet) bool {
					return setGatewayArgs(s, t)
				})
				if err != nil {
					return err
				}
				if changed {
					sc.Audit(ctx, stsRef(c, g), "DbopsExpectedNodes",
						fmt.Sprintf("set expected nodes to %d (data nodes %d) and recover-after to their quorum after scaling", t.Total, t.Data))
				}
			}
			return nil
		}}
}

// restoreExclusionsStep removes the exclusions this run added, keeping
// any that were there before.
func (e *Engine) restoreExclusionsStep(c *ops.Cluster) *ops.Step {
	return &ops.Step{ID: "exclusions", Target: "cluster/" + c.Name, Mutating: true,
		Description: "remove only the allocation exclusions this run added",
		Details: []string{sqlExclusions,
			sqlSetExclusions("<current without the nodes this run added>") + "  -- or, when none remain:",
			sqlResetExclusion},
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			added := splitList(sc.Get(keyExclAdded))
			if len(added) == 0 {
				return nil
			}
			changed, err := e.dropExclusions(ctx, sc, c, added)
			if err != nil {
				return err
			}
			if changed {
				sc.Audit(ctx, ops.ObjectRef{Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: c.Namespace, Name: ops.StatefulSetName(c.Groups[0])},
					"DbopsRestoreExclusions", "removed allocation exclusions "+strings.Join(added, ",")+" added by this scale")
			}
			return sc.Set(ctx, keyExclAdded, "")
		}}
}

// ackStep acknowledges the expected-nodes and recover-after node checks,
// which fire after any change of the node count until every node has
// restarted with the new arguments.
func (e *Engine) ackStep(c *ops.Cluster) *ops.Step {
	return &ops.Step{ID: "ack-node-check", Target: "cluster/" + c.Name, Mutating: true,
		Description: "acknowledge the expected-nodes and recover-after node checks",
		Details:     []string{sqlAckNodeCheck, sqlAckRecoverCheck},
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			for _, q := range []string{sqlAckNodeCheck, sqlAckRecoverCheck} {
				if err := e.execDB(ctx, sc, c, nil, q); err != nil {
					return sqlErr(q, err)
				}
			}
			sc.Audit(ctx, stsRef(c, c.Groups[0]), "DbopsAckNodeCheck", "acknowledged the expected-nodes and recover-after node checks")
			return nil
		}}
}
