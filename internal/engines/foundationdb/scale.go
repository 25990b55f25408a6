package foundationdb

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// ProcessClasses are the process classes spec.processCounts takes (the operator's
// api/v1beta2 foundationdb_database_configuration.go ProcessCounts), in help order.
var ProcessClasses = []string{"storage", "log", "transaction", "stateless", "cluster_controller", "commit_proxy", "grv_proxy",
	"proxy", "resolution", "master", "ratekeeper", "data_distributor", "coordinator", "router", "storage_cache", "backup",
	"fast_restore", "test", "tester", "unset"}

// minimumCount is the fewest storage or log processes a redundancy mode can run with: one per
// replica of a team (storage team size and log replication factor, redundancy.go); other
// classes have no minimum here.
func minimumCount(mode, class string) int {
	r, _ := redundancyFor(mode, 0, 0, nil, 1)
	switch class {
	case "storage":
		return r.StorageReplicas
	case "log":
		return r.LogReplicas
	}
	return 0
}

// redundancyMode is the CR's configured mode (the operator's default is double).
func redundancyMode(u *unstructured.Unstructured) string {
	if m, _, _ := unstructured.NestedString(u.Object, "spec", "databaseConfiguration", "redundancy_mode"); m != "" {
		return m
	}
	return "double"
}

// processCounts is spec.processCounts.
func processCounts(u *unstructured.Unstructured) map[string]int {
	out := map[string]int{}
	m, _, _ := unstructured.NestedMap(u.Object, "spec", "processCounts")
	for k, v := range m {
		out[k] = int(int64Of(v))
	}
	return out
}

// PlanScale plans `scale --processes CLASS=N`: one patch of spec.processCounts with the
// resourceVersion it was computed from, then waits until each class has N process groups,
// none marked for removal, the CR reconciled and healthy and N processes reporting. The
// operator does the growing and the shrinking (with exclusion, as for replace).
func (e *Engine) PlanScale(ctx context.Context, c *ops.Cluster, req ops.ScaleRequest) (*ops.Plan, error) {
	if layoutOf(c) == layoutStatefulSet {
		return e.planScaleStatefulSet(ctx, c, req)
	}
	if req.Masters != nil || len(req.Data) > 0 || req.Replicas != nil || req.Primaries != nil {
		return nil, ops.Usagef("FoundationDB scales by process class: --processes CLASS=N[,CLASS=N] (not --master, --data, --replicas or --primaries)")
	}
	if len(req.Processes) == 0 {
		return nil, ops.Usagef("nothing to scale: give --processes CLASS=N[,CLASS=N] (classes: %s)", strings.Join(ProcessClasses, ", "))
	}
	u := Resource(c)
	if u == nil {
		return nil, ops.Usagef("scale --processes needs a FoundationDBCluster; %s/%s is not one", c.Namespace, c.Name)
	}
	mode := redundancyMode(u)
	from := processCounts(u)
	// The operator reads 0 (or unset) as its default for the redundancy mode and -1 as none
	// (api/v1beta2 GetProcessCountsWithDefaults): the groups each class ends with are the
	// defaults of the spec with the new counts in it.
	before := ProcessCounts(u.Object)
	after := countsAfter(u, req.Processes)
	var classes []string
	for class, n := range req.Processes {
		if m := minimumCount(mode, class); after[class] < m {
			return nil, ops.Preconditionf("%s=%d leaves %d %s processes, below the %d redundancy mode %s needs; refusing to scale", class, n, after[class], class, m, mode)
		}
		classes = append(classes, class)
	}
	sort.Strings(classes)
	var args []string
	for _, class := range classes {
		args = append(args, fmt.Sprintf("%s=%d", class, req.Processes[class]))
	}
	remove, err := namedRemovals(c, ReadCR(u), req, after)
	if err != nil {
		return nil, err
	}
	arg := "--processes " + strings.Join(args, ",")
	if len(remove) > 0 {
		arg += " --remove " + strings.Join(remove, ",")
	}
	p := ops.NewPlan("scale", c, ops.EngineFoundationDB, arg)
	r := &removal{e: e, c: c, name: u.GetName(), idLabel: idLabel(u), planned: u, field: "processGroupsToRemove"}
	var changes []string
	for _, class := range classes {
		changes = append(changes, fmt.Sprintf("%s %s -> %s", class, countText(from[class], before[class]), countText(int(req.Processes[class]), after[class])))
	}
	what := "set spec.processCounts: " + strings.Join(changes, ", ")
	if len(remove) > 0 {
		// kubectl-fdb names the groups to go in spec.processGroupsToRemove; with the lower count
		// in the same patch the operator removes those groups rather than ones it picks.
		what += " and add " + strings.Join(remove, ", ") + " to spec.processGroupsToRemove, in one patch"
	}
	crNeeds := ops.Need(ClusterGVR.Group, ClusterGVR.Resource, "", "get")
	execNeeds := ops.Need("", "pods", "exec", "create")
	target := "FoundationDBCluster/" + r.name
	p.Steps = append(p.Steps, &ops.Step{ID: "processCounts", Target: target, Mutating: true,
		Description: what + " (resourceVersion precondition; a class someone else changed since the plan is refused, never overwritten)",
		Needs:       ops.Need(ClusterGVR.Group, ClusterGVR.Resource, "", "get", "patch"),
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			return r.patchCounts(ctx, sc, req.Processes, from, remove)
		}})
	if len(remove) > 0 {
		p.Steps = append(p.Steps, &ops.Step{ID: "removed", Target: target, Needs: crNeeds,
			Description: "wait until process groups " + strings.Join(remove, ", ") + " are gone from the FoundationDBCluster's status (the operator excludes them, then deletes their pods and PVCs)",
			Verify: func(ctx context.Context, sc *ops.StepContext) error {
				return r.poll(ctx, sc, func(u *unstructured.Unstructured) (bool, string, error) {
					cr := ReadCR(u)
					for _, id := range remove {
						if g, ok := cr.Groups[id]; ok {
							return false, "process group " + id + " to be removed by the operator" + inclusionPacing(g), nil
						}
					}
					return true, "", nil
				})
			}})
	}
	for _, class := range classes {
		want := after[class]
		p.Steps = append(p.Steps, &ops.Step{ID: "converge/" + class, Target: target, Needs: append(crNeeds, execNeeds...),
			Description: fmt.Sprintf("wait until class %s has %d process groups, none marked for removal, each reporting (the operator grows first; shrinking excludes, then removes)", class, want),
			Verify: func(ctx context.Context, sc *ops.StepContext) error {
				return r.waitClass(ctx, sc, class, want)
			}})
	}
	p.Steps = append(p.Steps, &ops.Step{ID: "healthy", Target: target, Needs: append(crNeeds, execNeeds...),
		Description: "wait until the FoundationDBCluster is reconciled and healthy, every class at its count, and the database healthy",
		Verify:      r.waitHealthy})
	return p, nil
}

// countsAfter is the operator's counts once the classes of want are set in spec.processCounts.
func countsAfter(u *unstructured.Unstructured, want map[string]int32) map[string]int {
	next := u.DeepCopy()
	for class, n := range want {
		_ = unstructured.SetNestedField(next.Object, int64(n), "spec", "processCounts", class)
	}
	return ProcessCounts(next.Object)
}

// countText is a spec.processCounts value as the operator reads it: N, or 0 as its default
// (effective groups), or -1 as none.
func countText(spec, effective int) string {
	switch {
	case spec == 0:
		return fmt.Sprintf("%d (unset: the operator's default)", effective)
	case spec < 0:
		return fmt.Sprintf("%d (none)", spec)
	}
	return fmt.Sprint(spec)
}

// namedRemovals resolves --remove (process group IDs or their pods) and checks it against
// --processes: each group of a class --processes lowers, not marked for removal already, and
// for each such class exactly as many named as the new count removes (kubectl-fdb's
// processGroupsToRemove with the lower processCounts; more named would be replaced, fewer
// would leave the operator to pick the rest).
func namedRemovals(c *ops.Cluster, cr CRState, req ops.ScaleRequest, after map[string]int) ([]string, error) {
	if len(req.Remove) == 0 {
		return nil, nil
	}
	ids, err := resolveGroups(c, cr, req.Remove)
	if err != nil {
		return nil, err
	}
	named := map[string][]string{}
	for _, id := range ids {
		class := cr.Groups[id].Class
		if _, ok := req.Processes[class]; !ok {
			return nil, ops.Usagef("--remove %s: it is a %s process group, and --processes does not scale %s", id, class, class)
		}
		named[class] = append(named[class], id)
	}
	for class, list := range named {
		have := 0
		for _, g := range cr.Groups {
			if g.Class == class && !g.Removal {
				have++
			}
		}
		if goes := have - after[class]; goes != len(list) {
			return nil, ops.Usagef("--remove names %d %s process group(s) (%s), but --processes %s=%d removes %d of the %d there are: name exactly that many",
				len(list), class, strings.Join(list, ", "), class, req.Processes[class], max(goes, 0), have)
		}
	}
	return ids, nil
}

// patchCounts writes the wanted counts, and adds the groups named to go (remove) to
// spec.processGroupsToRemove, in one merge patch carrying the resourceVersion read. A
// conflict means the CR changed: it is read again; a class whose count someone else changed
// since the plan (from) is refused, anything else is patched again on the fresh version.
func (r *removal) patchCounts(ctx context.Context, sc *ops.StepContext, want map[string]int32, from map[string]int, remove []string) error {
	for attempt := 0; ; attempt++ {
		u, err := r.read(ctx, attempt)
		if err != nil {
			return err
		}
		cur := processCounts(u)
		counts := map[string]any{}
		for class, n := range want {
			switch c := cur[class]; {
			case c == int(n):
			case c != from[class]:
				return ops.Preconditionf("spec.processCounts.%s of FoundationDBCluster %s/%s was changed by someone else since the plan (%d, now %d); refusing to overwrite it: plan again",
					class, r.c.Namespace, r.name, from[class], c)
			default:
				counts[class] = int64(n)
			}
		}
		spec := map[string]any{}
		if len(counts) > 0 {
			spec["processCounts"] = counts
		}
		if len(remove) > 0 {
			// A merge patch replaces the list: the list read, plus the named groups still in
			// the status (one gone already was removed after an earlier run marked it).
			list, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "processGroupsToRemove")
			next := slices.Clone(list)
			cr := ReadCR(u)
			for _, id := range remove {
				if _, ok := cr.Groups[id]; ok && !slices.Contains(next, id) {
					next = append(next, id)
				}
			}
			if len(next) > len(list) {
				spec["processGroupsToRemove"] = next
			}
		}
		if len(spec) == 0 {
			return nil // set already (a resumed run)
		}
		err = patchCR(ctx, r.e.deps.Dynamic, u, spec, nil)
		switch {
		case err == nil:
			if sc != nil { // nil in unit tests of the patch alone
				sc.Audit(ctx, ops.ObjectRef{Kind: "FoundationDBCluster", APIVersion: ClusterGVR.GroupVersion().String(), Namespace: r.c.Namespace, Name: r.name, UID: string(u.GetUID())},
					"DbopsScaleProcessCounts", auditScale(spec))
			}
			return nil
		case apierrors.IsConflict(err) && attempt < maxPatchConflicts:
			if sc != nil {
				sc.Waiting("FoundationDBCluster changed since it was read (resourceVersion conflict): reading it again")
			}
		case apierrors.IsConflict(err):
			return ops.Preconditionf("FoundationDBCluster %s/%s keeps changing (%d resourceVersion conflicts); refusing to overwrite it", r.c.Namespace, r.name, attempt+1)
		default:
			return fmt.Errorf("patching spec.processCounts of FoundationDBCluster %s/%s: %w", r.c.Namespace, r.name, err)
		}
	}
}

// auditScale says what the scale patch set.
func auditScale(spec map[string]any) string {
	var parts []string
	if c, ok := spec["processCounts"]; ok {
		parts = append(parts, fmt.Sprintf("set spec.processCounts %v", c))
	}
	if l, ok := spec["processGroupsToRemove"]; ok {
		parts = append(parts, fmt.Sprintf("set spec.processGroupsToRemove %v", l))
	}
	return strings.Join(parts, "; ")
}

// waitClass waits until the class has want process groups, none marked for removal, each
// without conditions and reporting a process.
func (r *removal) waitClass(ctx context.Context, sc *ops.StepContext, class string, want int) error {
	return r.poll(ctx, sc, func(u *unstructured.Unstructured) (bool, string, error) {
		cr := ReadCR(u)
		n, marked := 0, 0
		for _, g := range cr.Groups {
			if g.Class != class {
				continue
			}
			if g.Removal {
				marked++
				continue
			}
			n++
		}
		if n != want || marked > 0 {
			return false, fmt.Sprintf("%s: %d process groups, %d marked for removal (want %d, none marked)", class, n, marked, want), nil
		}
		st, why := r.status(ctx, u)
		if st == nil {
			return false, why, nil
		}
		for id, g := range cr.Groups {
			if g.Class == class && (len(g.Conditions) > 0 || len(st.ByInstance(id)) == 0) {
				return false, fmt.Sprintf("process group %s to run and report", id), nil
			}
		}
		if short := storageSpreadShort(st, redundancyOf(st)); class == "storage" && short != "" {
			return false, short, nil
		}
		sc.Progress(int64(n), int64(want), "process groups", class)
		return true, "", nil
	})
}
