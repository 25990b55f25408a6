package foundationdb

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Journal keys of a replacement.
const (
	// keyGroups holds the process groups this run removes (comma-separated), written before the
	// CR is patched: process groups are what the run tracks, and once removed their pods and
	// names are gone, so a resumed run reads them from here.
	keyGroups = "fdb.replace.groups"
	// keyAddrs + group ID holds the group's addresses (from the CR's status) when it was marked,
	// so the run can check they are included again after the group left the status.
	keyAddrs = "fdb.replace.addrs/"
)

// maxPatchConflicts bounds the re-reads after a resourceVersion conflict: each means someone
// else changed the FoundationDBCluster between our read and our patch.
const maxPatchConflicts = 5

// defaultProcessGroupIDLabel is the operator's process group ID label (api/v1beta2
// foundationdb_labels.go), unless spec.labels.processGroupIDLabels names another.
const defaultProcessGroupIDLabel = "foundationdb.org/fdb-process-group-id"

// defaultClusterNameLabel is the operator's match label when spec.labels.matchLabels is empty
// (api/v1beta2 GetMatchLabels).
const defaultClusterNameLabel = "foundationdb.org/fdb-cluster-name"

// PlanReplacement plans the removal of process groups with replacement, as the operator does it
// (a grow followed by a shrink): the groups are added to spec.processGroupsToRemove (or
// processGroupsToRemoveWithoutExclusion) with a resourceVersion precondition, then each step
// of the operator's removal is verified from the CR's status and `status json`.
func (e *Engine) PlanReplacement(ctx context.Context, c *ops.Cluster, req ops.ReplaceRequest) (*ops.Plan, error) {
	if layoutOf(c) == layoutStatefulSet {
		return e.planReplaceStatefulSet(ctx, c, req)
	}
	u := Resource(c)
	if u == nil {
		return nil, ops.Usagef("replace --strategy replacement for FoundationDB needs a FoundationDBCluster; %s/%s is not one", c.Namespace, c.Name)
	}
	if req.MaxConcurrent < 1 {
		return nil, ops.Usagef("--max-concurrent must be 1 or more, got %d", req.MaxConcurrent)
	}
	if req.NoExclusion && !req.Force {
		return nil, ops.Usagef("--no-exclusion removes process groups without moving their data away first (the operator calls it very dangerous); it needs --force")
	}
	cr := ReadCR(u)
	var groups []string
	resumed := false
	if j := req.Journal; j != nil && j.Data[keyGroups] != "" {
		groups, resumed = strings.Split(j.Data[keyGroups], ","), true
	} else {
		var err error
		if groups, err = resolveGroups(c, cr, req.Pods); err != nil {
			return nil, err
		}
	}
	st, _, err := e.StatusFrom(ctx, e.cli(), c, nil)
	if err != nil {
		return nil, ops.Preconditionf("cannot read the status of %s/%s: %v", c.Namespace, c.Name, err)
	}
	if !resumed {
		if err := checkRemoval(c, cr, st, groups, redundancyOf(st), req.NoExclusion); err != nil {
			return nil, err
		}
	}
	p := ops.NewPlan("replace", c, ops.EngineFoundationDB, req.Args)
	p.Destructive = true
	field := "processGroupsToRemove"
	if req.NoExclusion {
		field = "processGroupsToRemoveWithoutExclusion"
		p.Notes = append(p.Notes, "WARNING: --no-exclusion removes the process groups without excluding them: their data is not moved away first, "+
			"and the operator calls this very dangerous (docs/manual/debugging.md); allowed only for processes that are not running, on an available database")
	}
	for _, id := range groups {
		if why := req.Reasons[id]; why != "" {
			p.Notes = append(p.Notes, id+": "+why)
		}
	}
	p.Notes = append(p.Notes, "the operator does the work (a grow followed by a shrink); each step waits until the CR's status and status json show it done")
	r := &removal{e: e, c: c, name: u.GetName(), field: field, noExclusion: req.NoExclusion, idLabel: idLabel(u), all: groups, planned: u}
	for i := 0; i < len(groups); i += req.MaxConcurrent {
		batch := groups[i:min(i+req.MaxConcurrent, len(groups))]
		r.steps(p, st, cr, batch)
	}
	return p, nil
}

// resolveGroups maps the named pods or process groups to process group IDs.
func resolveGroups(c *ops.Cluster, cr CRState, names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		id := ""
		if _, p := c.Pod(n); p != nil && p.Member != "" {
			id = p.Member
		} else if _, ok := cr.Groups[n]; ok {
			id = n
		}
		if id == "" {
			var allowed []string
			for _, p := range c.AllPods() {
				allowed = append(allowed, p.Name)
			}
			for g := range cr.Groups {
				allowed = append(allowed, g)
			}
			sort.Strings(allowed)
			return nil, ops.Usagef("%q is neither a pod nor a process group of FoundationDBCluster %s/%s; %s", n, c.Namespace, c.Name, ops.Allowed(n, allowed))
		}
		if g := cr.Groups[id]; g.Removal {
			return nil, ops.Preconditionf("process group %s of %s/%s is already marked for removal; the operator is removing it", id, c.Namespace, c.Name)
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// checkRemoval refuses a removal the database cannot take (before the lock, nothing written).
// A plain `fdbcli exclude` checks only free space (fdbcli/ExcludeCommand.actor.cpp), so these
// checks are the engine's: the database available and at its configured replication
// (min_replicas_remaining of every team tracker), the groups' storage processes in at most as
// many zoneids as the redundancy mode tolerates losing (redundancy.go), and the storage zoneids
// left, counting one replacement per removed group, at least the storage team size.
func checkRemoval(c *ops.Cluster, cr CRState, st *Status, groups []string, rd redundancy, noExclusion bool) error {
	replicas := rd.StorageReplicas
	if !st.Available() {
		msg := st.Problems()
		if msg == "" {
			msg = "database unavailable"
		}
		return ops.Preconditionf("FoundationDB %s/%s is unavailable (%s); refusing to replace", c.Namespace, c.Name, msg)
	}
	if d := st.Cluster.Data; d != nil {
		for _, tr := range d.TeamTrackers {
			if tr.State.MinReplicasRemaining < replicas {
				return ops.Preconditionf("FoundationDB %s/%s has min_replicas_remaining %d, below the configured %d (data %s); a removal would drop fault tolerance further: refusing to replace",
					c.Namespace, c.Name, tr.State.MinReplicasRemaining, replicas, tr.State.Name)
			}
		}
	}
	removed := map[string]bool{}
	for _, id := range groups {
		removed[id] = true
	}
	// Storage process groups and their zoneids: from status json, and from the CR for groups
	// whose processes do not report.
	storage := map[string]string{}
	for _, pr := range st.Cluster.Processes {
		if pr.ClassType == "storage" && !pr.Excluded {
			storage[pr.InstanceID()] = pr.Zone()
		}
	}
	for id, g := range cr.Groups {
		if _, ok := storage[id]; !ok && g.Class == "storage" && !g.Excluded {
			storage[id] = g.FaultDomain
		}
	}
	zonesRemoved, zonesLeft := map[string]bool{}, map[string]bool{}
	storageRemoved := 0
	for id, zone := range storage {
		if zone == "" && !removed[id] {
			continue // not scheduled yet: no fault domain to count
		}
		if cr.Groups[id].Removal && !removed[id] {
			continue // someone else's removal: it will not hold data
		}
		if removed[id] {
			zonesRemoved[zone] = true
			storageRemoved++
		} else {
			zonesLeft[zone] = true
		}
	}
	if len(zonesRemoved) > rd.FaultTolerance {
		return ops.Preconditionf("the process groups hold storage in %d fault domains (zoneids %s); removing them together would exceed the fault tolerance of redundancy mode %s, which tolerates losing %d at once: replace at most %d fault domain(s) at a time",
			len(zonesRemoved), strings.Join(sortedSet(zonesRemoved), ", "), rd.Mode, rd.FaultTolerance, rd.FaultTolerance)
	}
	if len(zonesRemoved) > 0 && len(zonesLeft)+storageRemoved < replicas {
		return ops.Preconditionf("removing the process groups would leave storage in %d fault domain(s) with at most %d replacement(s), fewer than the %d replicas of the redundancy mode; refusing to replace",
			len(zonesLeft), storageRemoved, replicas)
	}
	if noExclusion {
		for _, id := range groups {
			if procs := st.ByInstance(id); len(procs) > 0 {
				return ops.Preconditionf("process group %s runs (%s): --no-exclusion is only for a process that is not running; refusing", id, procs[0].Address)
			}
		}
	}
	return nil
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// idLabel is the label that carries the process group ID, as the CR configures it.
func idLabel(u *unstructured.Unstructured) string {
	if l, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "labels", "processGroupIDLabels"); len(l) > 0 && l[0] != "" {
		return l[0]
	}
	return defaultProcessGroupIDLabel
}

// removal is the replacement of a set of process groups.
type removal struct {
	e           *Engine
	c           *ops.Cluster
	name        string
	field       string
	noExclusion bool
	idLabel     string
	all         []string
	// planned is the FoundationDBCluster as the plan read it.
	planned *unstructured.Unstructured
}

// steps appends one batch's steps to the plan.
func (r *removal) steps(p *ops.Plan, st *Status, cr CRState, batch []string) {
	key := strings.Join(batch, ",")
	target := "FoundationDBCluster/" + r.name
	crNeeds := ops.Need(ClusterGVR.Group, ClusterGVR.Resource, "", "get")
	execNeeds := ops.Need("", "pods", "exec", "create")
	var details []string
	for _, id := range batch {
		g := cr.Groups[id]
		procs := []string{}
		for _, pr := range st.ByInstance(id) {
			procs = append(procs, fmt.Sprintf("%s %s zoneid %s roles %s", pr.ClassType, pr.Address, dash(pr.Zone()), dash(strings.Join(pr.RoleNames(), ","))))
		}
		if len(procs) == 0 {
			procs = append(procs, "no process reports now")
		}
		details = append(details, fmt.Sprintf("process group %s (class %s): %s", id, dash(g.Class), strings.Join(procs, "; ")))
	}
	add := func(id, desc string, mutating bool, needs []ops.Permission, details []string, action func(context.Context, *ops.StepContext) error, verify func(context.Context, *ops.StepContext) error) {
		p.Steps = append(p.Steps, &ops.Step{ID: id + "/" + key, Group: "process groups " + key, Target: target, Description: desc,
			Mutating: mutating, Needs: needs, Details: details, Action: action, Verify: verify})
	}
	add("mark", fmt.Sprintf("add %s to spec.%s (resourceVersion precondition; on a conflict re-read and re-check, never overwrite); wait until the status marks them for removal", key, r.field),
		true, append(ops.Need(ClusterGVR.Group, ClusterGVR.Resource, "", "get", "patch"), execNeeds...), details,
		func(ctx context.Context, sc *ops.StepContext) error { return r.mark(ctx, sc, batch) },
		func(ctx context.Context, sc *ops.StepContext) error { return r.waitMarked(ctx, sc, batch) })
	add("replacements", "wait until the operator has created the replacement process groups and their processes report (status.processGroups, status json)",
		false, append(crNeeds, execNeeds...), nil, nil,
		func(ctx context.Context, sc *ops.StepContext) error { return r.waitReplacements(ctx, sc, batch) })
	if r.noExclusion {
		add("exclude", "exclusion skipped (--no-exclusion): the operator removes the groups without moving their data", false, crNeeds, nil, nil,
			func(context.Context, *ops.StepContext) error { return nil })
	} else {
		add("exclude", "wait until the operator has excluded the old process groups and their data has moved away (progress from stored_bytes in status json)",
			false, append(crNeeds, execNeeds...), nil, nil,
			func(ctx context.Context, sc *ops.StepContext) error { return r.waitExcluded(ctx, sc, batch) })
	}
	add("coordinators", "wait until no coordinator runs in the old process groups (client.coordinators in status json)",
		false, append(crNeeds, execNeeds...), nil, nil,
		func(ctx context.Context, sc *ops.StepContext) error { return r.waitNoCoordinator(ctx, sc, batch) })
	add("remove", "wait until the old process groups' pods and PVCs are gone and the groups have left status.processGroups",
		false, append(append(crNeeds, ops.Need("", "pods", "", "list", "watch")...), ops.Need("", "persistentvolumeclaims", "", "list")...), nil, nil,
		func(ctx context.Context, sc *ops.StepContext) error { return r.waitRemoved(ctx, sc, batch) })
	add("include", "wait until none of the old groups' addresses or localities is still excluded (configuration.excluded_servers)",
		false, append(crNeeds, execNeeds...), nil, nil,
		func(ctx context.Context, sc *ops.StepContext) error { return r.waitIncluded(ctx, sc, batch) })
	add("healthy", "wait until the FoundationDBCluster is reconciled and healthy, every class at its process count with none marked for removal, and the database healthy",
		false, append(crNeeds, execNeeds...), nil, nil,
		func(ctx context.Context, sc *ops.StepContext) error { return r.waitHealthy(ctx, sc) })
}

// read is the FoundationDBCluster a patch is computed from: first the one the plan was made
// from (its resourceVersion is the precondition, so any change since the plan is a conflict),
// then, after a conflict, the one read now.
func (r *removal) read(ctx context.Context, attempt int) (*unstructured.Unstructured, error) {
	if attempt == 0 && r.planned != nil {
		return r.planned.DeepCopy(), nil
	}
	return r.get(ctx)
}

// get reads the FoundationDBCluster now.
func (r *removal) get(ctx context.Context) (*unstructured.Unstructured, error) {
	dyn := r.e.deps.Dynamic
	if dyn == nil {
		return nil, fmt.Errorf("no dynamic client to read FoundationDBCluster %s/%s", r.c.Namespace, r.name)
	}
	u, err := dyn.Resource(ClusterGVR).Namespace(r.c.Namespace).Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading FoundationDBCluster %s/%s: %w", r.c.Namespace, r.name, err)
	}
	return u, nil
}

// mark adds the batch to the spec's list in one merge patch carrying the resourceVersion it was
// computed from: the API server refuses it if anyone changed the CR meanwhile, and the run
// then reads the CR again, checks the groups again and computes the list again.
func (r *removal) mark(ctx context.Context, sc *ops.StepContext, batch []string) error {
	if sc.Get(keyGroups) == "" {
		if err := sc.Set(ctx, keyGroups, strings.Join(r.all, ",")); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		u, err := r.read(ctx, attempt)
		if err != nil {
			return err
		}
		cr := ReadCR(u)
		list, _, _ := unstructured.NestedStringSlice(u.Object, "spec", r.field)
		next := slices.Clone(list)
		for _, id := range batch {
			g, ok := cr.Groups[id]
			if !ok && !slices.Contains(list, id) {
				if sc.Get(keyAddrs+id) != "" {
					continue // removed already: this run marked it before it was interrupted
				}
				return ops.Preconditionf("process group %s is no longer in the status of FoundationDBCluster %s/%s; refusing to mark it", id, r.c.Namespace, r.name)
			}
			if sc.Get(keyAddrs+id) == "" {
				if err := sc.Set(ctx, keyAddrs+id, strings.Join(g.Addresses, ",")); err != nil {
					return err
				}
			}
			if !slices.Contains(next, id) {
				next = append(next, id)
			}
		}
		if len(next) == len(list) {
			return nil // marked already (a resumed run)
		}
		if attempt > 0 {
			// The CR changed since the plan (someone else's removal, say): plan again, with
			// the checks the plan made, on what is there now.
			st, why := r.status(ctx, u)
			if st == nil {
				return ops.Preconditionf("FoundationDBCluster %s/%s changed since the plan and cannot be checked again (%s); refusing to mark", r.c.Namespace, r.name, why)
			}
			if err := checkRemoval(r.c, cr, st, next[len(list):], redundancyOf(st), r.noExclusion); err != nil {
				return fmt.Errorf("FoundationDBCluster %s/%s changed since the plan; checked again: %w", r.c.Namespace, r.name, err)
			}
		}
		err = patchCR(ctx, r.e.deps.Dynamic, u, map[string]any{r.field: next}, nil)
		switch {
		case err == nil:
			sc.Audit(ctx, ops.ObjectRef{Kind: "FoundationDBCluster", APIVersion: ClusterGVR.GroupVersion().String(), Namespace: r.c.Namespace, Name: r.name, UID: string(u.GetUID())},
				"DbopsReplaceProcessGroups", fmt.Sprintf("added %s to spec.%s", strings.Join(batch, ","), r.field))
			return nil
		case apierrors.IsConflict(err) && attempt < maxPatchConflicts:
			sc.Waiting("FoundationDBCluster changed since it was read (resourceVersion conflict): reading it again")
			continue
		case apierrors.IsConflict(err):
			return ops.Preconditionf("FoundationDBCluster %s/%s keeps changing (%d resourceVersion conflicts); refusing to overwrite it", r.c.Namespace, r.name, attempt+1)
		default:
			return fmt.Errorf("patching spec.%s of FoundationDBCluster %s/%s: %w", r.field, r.c.Namespace, r.name, err)
		}
	}
}

// poll calls f with the FoundationDBCluster until it is done, reporting what it waits for: at
// once when the resource changes (a watch), else on a backoff from the poll interval, for what
// f reads of status json (backoff.go).
func (r *removal) poll(ctx context.Context, sc *ops.StepContext, f func(u *unstructured.Unstructured) (bool, string, error)) error {
	return r.pollBlocked(ctx, sc, f, nil)
}

// blocker is what a wait is blocked on (ops.Blocked's kind, object and how to unblock it).
type blocker struct{ kind, on, toUnblock string }

// pollBlocked is poll for a wait that can say what it is blocked on: when blocked returns a
// blocker after a reading, the reading is published with it (sc.Block, on every reading: it
// carries the ETA of a step that moves data) in place of a waiting line on a change.
func (r *removal) pollBlocked(ctx context.Context, sc *ops.StepContext, f func(u *unstructured.Unstructured) (bool, string, error), blocked func() *blocker) error {
	changed, stop := r.e.watchCR(ctx, r.c.Namespace, r.name)
	defer stop()
	bo := backoff{base: r.e.poll}
	last := ""
	for {
		u, err := r.get(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		done, reason, err := f(u)
		if err != nil || done {
			return err
		}
		var b *blocker
		if blocked != nil {
			b = blocked()
		}
		switch {
		case b != nil:
			sc.Block(ctx, b.kind, b.on, b.toUnblock, reason)
			last = reason
		case reason != last:
			if sc != nil {
				sc.Waiting(reason)
			}
			last = reason
		}
		select {
		case <-ctx.Done():
			if last != "" {
				return fmt.Errorf("waiting for %s: %w", last, ctx.Err())
			}
			return ctx.Err()
		case <-r.e.after(bo.next(reason)):
		case _, ok := <-changed:
			if !ok {
				changed = nil // the watch ended: the backoff alone from here
			}
		}
	}
}

// status runs status json in a pod whose process group the CR u still lists and does not
// remove: the planned cluster's other pods are going or gone (this run's groups, or someone
// else's removal), and fdbcli in them would fail.
func (r *removal) status(ctx context.Context, u *unstructured.Unstructured) (*Status, string) {
	cr := ReadCR(u)
	skip := func(p ops.Pod) bool {
		g, ok := cr.Groups[p.Member]
		return !ok || g.Removal
	}
	st, _, err := r.e.StatusFrom(ctx, r.e.cli(), r.c, skip)
	if err != nil {
		return nil, "status json: " + err.Error()
	}
	return st, ""
}

func (r *removal) waitMarked(ctx context.Context, sc *ops.StepContext, batch []string) error {
	return r.poll(ctx, sc, func(u *unstructured.Unstructured) (bool, string, error) {
		cr := ReadCR(u)
		for _, id := range batch {
			if g, ok := cr.Groups[id]; ok && !g.Removal {
				return false, "the operator to mark process group " + id + " for removal", nil
			}
		}
		return true, "", nil
	})
}

// waitReplacements waits until every class of the batch has its process count of groups not
// marked for removal, each running and reporting. Groups gone already have nothing to wait for.
func (r *removal) waitReplacements(ctx context.Context, sc *ops.StepContext, batch []string) error {
	return r.poll(ctx, sc, func(u *unstructured.Unstructured) (bool, string, error) {
		cr := ReadCR(u)
		classes := map[string]bool{}
		for _, id := range batch {
			if g, ok := cr.Groups[id]; ok {
				classes[g.Class] = true
			}
		}
		if len(classes) == 0 {
			return true, "", nil // removed already
		}
		counts := ProcessCounts(u.Object)
		st, why := r.status(ctx, u)
		if st == nil {
			return false, why, nil
		}
		for _, class := range sortedSet(classes) {
			want := counts[class]
			var ready []string
			for id, g := range cr.Groups {
				if g.Class != class || g.Removal {
					continue
				}
				if len(g.Conditions) > 0 || len(st.ByInstance(id)) == 0 {
					return false, fmt.Sprintf("replacement process group %s (%s) to run and report", id, dash(strings.Join(g.Conditions, ","))), nil
				}
				ready = append(ready, id)
			}
			if len(ready) < want {
				return false, fmt.Sprintf("the operator to create the replacements: %d of %d %s process groups not marked for removal", len(ready), want, class), nil
			}
		}
		return true, "", nil
	})
}

// classSet is the classes of either map.
func classSet(a, b map[string]int) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func int64Of(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	return 0
}

// waitExcluded waits until the batch's processes are excluded and hold no role but coordinator
// (the operator's "safe to remove"), reporting the data moved from their stored_bytes.
func (r *removal) waitExcluded(ctx context.Context, sc *ops.StepContext, batch []string) error {
	var total int64
	lastLeft := int64(-1)
	var moving *blocker
	return r.pollBlocked(ctx, sc, func(u *unstructured.Unstructured) (bool, string, error) {
		moving = nil
		cr := ReadCR(u)
		st, why := r.status(ctx, u)
		if st == nil {
			return false, why, nil
		}
		var left int64
		var waiting, unexcluded []string
		for _, id := range batch {
			if g, ok := cr.Groups[id]; ok && g.Excluded {
				continue
			}
			for _, pr := range st.ByInstance(id) {
				busy := !pr.Excluded
				if !pr.Excluded {
					unexcluded = append(unexcluded, id)
				}
				for _, ro := range pr.Roles {
					if ro.Role != "coordinator" {
						busy = true
					}
					left += ro.StoredBytes
				}
				if busy {
					waiting = append(waiting, id)
				}
			}
		}
		if len(unexcluded) > 0 {
			return false, notExcludedReason(st, unexcluded), nil
		}
		total = max(total, left)
		if total > 0 && left != lastLeft {
			sc.Progress(total-left, total, "bytes", fmt.Sprintf("data moved off %s", strings.Join(batch, ",")))
			lastLeft = left
		}
		if len(waiting) > 0 {
			// What is left feeds the step's ETA (left over the rate it shrinks at).
			sc.Remaining(left, ops.UnitBytes)
			if short := storageSpreadShort(st, redundancyOf(st)); short != "" {
				return false, fmt.Sprintf("the exclusion of %s (%s left to move) is stalled; waiting for %s", strings.Join(slices.Compact(waiting), ","), ops.FormatBytes(left), short), nil
			}
			ids := strings.Join(slices.Compact(waiting), ",")
			moving = &blocker{kind: ops.BlockedProcess, on: "the data on excluded process group(s) " + ids,
				toUnblock: "nothing while it moves: FoundationDB's data distribution moves it to the other storage processes (fdbcli --exec 'status' shows the data moving)"}
			return false, fmt.Sprintf("the exclusion of %s: %s left to move", ids, ops.FormatBytes(left)), nil
		}
		return true, "", nil
	}, func() *blocker { return moving })
}

// notExcludedReason: the operator has not excluded these groups yet. Besides a replacement
// to run, it waits until the last recovery is old enough (its
// --minimum-recovery-time-for-exclusion, 120 s by default).
func notExcludedReason(st *Status, ids []string) string {
	return fmt.Sprintf("the operator to exclude %s (it excludes only once the last recovery is old enough, 120s by default%s)",
		strings.Join(slices.Compact(ids), ","), st.lastRecovery())
}

// addrsOf are the batch's process addresses now (status json); a group gone holds none.
func addrsOf(st *Status, batch []string) map[string]bool {
	out := map[string]bool{}
	for _, id := range batch {
		for _, pr := range st.ByInstance(id) {
			out[strings.TrimSuffix(pr.Address, ":tls")] = true
		}
	}
	return out
}

func (r *removal) waitNoCoordinator(ctx context.Context, sc *ops.StepContext, batch []string) error {
	return r.poll(ctx, sc, func(u *unstructured.Unstructured) (bool, string, error) {
		st, why := r.status(ctx, u)
		if st == nil {
			return false, why, nil
		}
		// By the coordinator role of the batch's processes: with DNS names in the cluster
		// file, client.coordinators names hosts, not these addresses.
		for _, id := range batch {
			for _, pr := range st.ByInstance(id) {
				if st.IsCoordinator(pr.Address) {
					return false, "the operator to move coordinator " + pr.Address + " (process group " + id + ") off the removed process groups" + coordinatorPacing(st), nil
				}
			}
		}
		addrs := addrsOf(st, batch)
		for _, co := range st.Client.Coordinators.Coordinators {
			if addrs[strings.TrimSuffix(co.Address, ":tls")] {
				return false, "the operator to move coordinator " + co.Address + " off the removed process groups" + coordinatorPacing(st), nil
			}
		}
		return true, "", nil
	})
}

// coordinatorPacing: the operator changes coordinators right after excluding one, otherwise
// only once the last recovery is old enough (5 minutes by default for an undesired one).
func coordinatorPacing(st *Status) string {
	return " (it changes coordinators right after excluding one, else only once the last recovery is old enough" + st.lastRecovery() + ")"
}

func (r *removal) waitRemoved(ctx context.Context, sc *ops.StepContext, batch []string) error {
	return r.poll(ctx, sc, func(u *unstructured.Unstructured) (bool, string, error) {
		return r.removed(ctx, sc, u, batch)
	})
}

// groupSelector selects the pods and PVCs of process group id of the cluster u: its match
// labels AND the process group ID label (the operator's GetPodMatchLabels). Another cluster in
// the namespace may use the same process group IDs.
func (r *removal) groupSelector(u *unstructured.Unstructured, id string) string {
	set := labels.Set{}
	match, _, _ := unstructured.NestedStringMap(u.Object, "spec", "labels", "matchLabels")
	if len(match) == 0 {
		match = map[string]string{defaultClusterNameLabel: u.GetName()}
	}
	for k, v := range match {
		set[k] = v
	}
	set[r.idLabel] = id
	return labels.SelectorFromSet(set).String()
}

// removed reports whether the batch's pods, PVCs and status entries are gone, and what it
// waits for when not.
func (r *removal) removed(ctx context.Context, sc *ops.StepContext, u *unstructured.Unstructured, batch []string) (bool, string, error) {
	for _, id := range batch {
		sel := r.groupSelector(u, id)
		pods, err := ops.ListPods(ctx, sc, r.e.client, r.c.Namespace, sel)
		if err != nil {
			return false, "", err
		}
		for name := range pods {
			return false, fmt.Sprintf("pod %s of process group %s to be deleted", name, id), nil
		}
		pvcs, err := r.e.client.CoreV1().PersistentVolumeClaims(r.c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, "", fmt.Errorf("listing PVCs of process group %s: %w", id, err)
		}
		if len(pvcs.Items) > 0 {
			return false, fmt.Sprintf("PVC %s of process group %s to be deleted", pvcs.Items[0].Name, id), nil
		}
		if g, ok := ReadCR(u).Groups[id]; ok {
			return false, "process group " + id + " to leave status.processGroups" + inclusionPacing(g), nil
		}
	}
	return true, "", nil
}

// inclusionPacing: a removed group whose resources are gone (ResourcesTerminating) stays in the
// status until the operator includes it again, only once the last recovery is old enough
// (--minimum-recovery-time-for-inclusion, 600 s by default) and waitBetweenRemovalsSeconds (60 s
// by default) after the removal.
func inclusionPacing(g CRGroup) string {
	if !slices.Contains(g.Conditions, "ResourcesTerminating") {
		return ""
	}
	return " (resources terminating: the operator includes removed groups only once the last recovery is old enough, 600s by default, " +
		"and spec.automationOptions.waitBetweenRemovalsSeconds after the removal, 60s by default)"
}

func (r *removal) waitIncluded(ctx context.Context, sc *ops.StepContext, batch []string) error {
	return r.poll(ctx, sc, func(u *unstructured.Unstructured) (bool, string, error) {
		st, why := r.status(ctx, u)
		if st == nil {
			return false, why, nil
		}
		ex := map[string]bool{}
		for _, e := range st.Exclusions() {
			ex[e] = true
		}
		for _, id := range batch {
			keys := []string{"locality_instance_id:" + id}
			for _, a := range strings.Split(sc.Get(keyAddrs+id), ",") {
				if a != "" {
					keys = append(keys, a)
				}
			}
			for _, k := range keys {
				if ex[k] {
					return false, "the operator to include " + k + " again", nil
				}
				for e := range ex {
					if strings.HasPrefix(e, k+":") {
						return false, "the operator to include " + e + " again", nil
					}
				}
			}
		}
		return true, "", nil
	})
}

func (r *removal) waitHealthy(ctx context.Context, sc *ops.StepContext) error {
	return r.poll(ctx, sc, func(u *unstructured.Unstructured) (bool, string, error) {
		cr := ReadCR(u)
		switch {
		case cr.Reconciled < cr.Generation:
			return false, fmt.Sprintf("the FoundationDBCluster to be reconciled (generation %d, reconciled %d: %s)", cr.Generation, cr.Reconciled, cr.NotReconciledReason()), nil
		case !cr.Available || !cr.Healthy:
			return false, fmt.Sprintf("the FoundationDBCluster's health (available=%t healthy=%t)", cr.Available, cr.Healthy), nil
		}
		// The operator's counts: unset or 0 is its default, -1 none (a class it runs no group of).
		counts := ProcessCounts(u.Object)
		have := map[string]int{}
		for id, g := range cr.Groups {
			if g.Removal {
				return false, "process group " + id + " is still marked for removal", nil
			}
			have[g.Class]++
		}
		for _, class := range sortedSet(classSet(counts, have)) {
			if want := counts[class]; have[class] != want {
				return false, fmt.Sprintf("%d %s process groups, want %d", have[class], class, want), nil
			}
		}
		st, why := r.status(ctx, u)
		if st == nil {
			return false, why, nil
		}
		// Done only when storage spans the zoneids a team needs again: a replacement placed in
		// a zoneid already in use leaves the data short of replicas for good.
		if short := storageSpreadShort(st, redundancyOf(st)); short != "" {
			return false, short, nil
		}
		if !healthy(st) {
			return false, "the database to be healthy and fully recovered", nil
		}
		for class, want := range counts {
			n := 0
			for _, pr := range st.Cluster.Processes {
				if pr.ClassType == class && !pr.Excluded {
					n++
				}
			}
			if n < want {
				return false, fmt.Sprintf("%d of %d %s processes reporting", n, want, class), nil
			}
		}
		return true, "", nil
	})
}
