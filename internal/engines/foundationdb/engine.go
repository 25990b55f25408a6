// Package foundationdb is the kubectl-dbops engine for FoundationDB clusters run by the
// FoundationDB operator (FoundationDB/fdb-kubernetes-operator): a FoundationDBCluster
// (apps.foundationdb.org/v1beta2) from which the operator creates one pod per process group,
// without StatefulSets. Its recognizer (recognize.go) makes each process class a node group
// whose pods the FoundationDBCluster recreates, and each pod's zone its FDB zoneid.
//
// Conventions:
//   - every database access is `fdbcli --exec '…' --timeout N` in the `foundationdb` container
//     of a Ready pod, through the exec seam (kube.Executor); the pod's environment names the
//     cluster file and TLS files, so no flag carries them. No FDB client library is linked.
//   - `status json` may be preceded by warning lines and is partial while the database is
//     unavailable (ParseStatus; every reader of Status checks what is there).
//   - the engine never edits what the operator owns (the FoundationDBCluster, its pods' specs).
package foundationdb

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Options are the engine's settings.
type Options struct {
	// Timeout is fdbcli's --timeout in seconds (0: DefaultTimeout).
	Timeout int
	// PollInterval is how often status json is read while a step waits (0: one second).
	PollInterval time.Duration
}

// Engine is the FoundationDB engine.
type Engine struct {
	client  kubernetes.Interface
	deps    ops.EngineDeps
	timeout int
	poll    time.Duration
	// afterFunc replaces time.After in waits (tests); nil in use.
	afterFunc func(time.Duration) <-chan time.Time
}

// New builds the engine from the cluster's clients and the exec seam.
func New(deps ops.EngineDeps, opts Options) (*Engine, error) {
	if opts.Timeout < 0 {
		return nil, ops.Usagef("fdbcli timeout must not be negative, got %d", opts.Timeout)
	}
	poll := opts.PollInterval
	if poll <= 0 {
		poll = pollInterval
	}
	return &Engine{client: deps.Client, deps: deps, timeout: opts.Timeout, poll: poll}, nil
}

// Name returns "foundationdb".
func (*Engine) Name() string { return ops.EngineFoundationDB }

func (e *Engine) cli() *CLI { return &CLI{Exec: e.deps.Executor(), Timeout: e.timeout} }

// ReadyPods are the cluster's Ready pods, not being deleted, in group order.
func ReadyPods(c *ops.Cluster, skip func(ops.Pod) bool) []ops.Pod {
	var out []ops.Pod
	for _, p := range c.AllPods() {
		if p.Ready && !p.Deleting && (skip == nil || !skip(p)) {
			out = append(out, p)
		}
	}
	return out
}

// StatusFrom runs `status json` in the first Ready pod that answers (skip excludes pods, such
// as a batch being restarted). It returns the pod that answered.
func (e *Engine) StatusFrom(ctx context.Context, cli *CLI, c *ops.Cluster, skip func(ops.Pod) bool) (*Status, string, error) {
	pods := ReadyPods(c, skip)
	if len(pods) == 0 && skip != nil {
		// Every pod is in the batch (--mode all): fdbcli is only a client, any pod will do.
		pods = ReadyPods(c, nil)
	}
	if len(pods) == 0 {
		return nil, "", fmt.Errorf("no Ready pod of %s/%s to run fdbcli in", c.Namespace, c.Name)
	}
	var errs []string
	for _, p := range pods {
		st, err := cli.Status(ctx, c.Namespace, p.Name)
		if err == nil {
			return st, p.Name, nil
		}
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		errs = append(errs, err.Error())
		if len(errs) == 2 {
			break // two pods failing the same way is the database, not the pod
		}
	}
	return nil, "", fmt.Errorf("status json: %s", strings.Join(errs, "; "))
}

// Resource is the FoundationDBCluster as discovery read it (nil for another layout).
func Resource(c *ops.Cluster) *unstructured.Unstructured {
	for _, g := range c.Groups {
		if ref := ops.ControllerOf(g); ref != nil && ref.Kind == "FoundationDBCluster" && ref.Object != nil {
			return &unstructured.Unstructured{Object: ref.Object}
		}
	}
	return nil
}

// CRState is what the FoundationDBCluster says of itself.
type CRState struct {
	Generation, Reconciled int64
	// NeedsCoordinatorChange is status.generations.needsCoordinatorChange: the generation at
	// which the operator found its coordinators invalid (0: none pending). The operator leaves
	// generations.reconciled as it was meanwhile.
	NeedsCoordinatorChange int64
	Available, Healthy     bool
	FullReplication        bool
	Locks                  []string
	Skip                   bool
	// Pending are the fields of status.generations other than reconciled that the operator
	// set, each naming what it has left to do ("needsShrink 5"), sorted.
	Pending []string
	// Buggify are the settings of spec.buggify in use ("noSchedule [storage-1]"): faults
	// injected on purpose, which keep the operator from reconciling.
	Buggify []string
	// Groups by process group ID: conditions and removal.
	Groups map[string]CRGroup
}

// CRGroup is one entry of status.processGroups.
type CRGroup struct {
	Class       string
	FaultDomain string
	Addresses   []string
	Conditions  []string
	Removal     bool
	Excluded    bool
}

// ReadCR reads the fields of a FoundationDBCluster the engine uses.
func ReadCR(u *unstructured.Unstructured) CRState {
	s := CRState{Generation: u.GetGeneration(), Groups: map[string]CRGroup{}}
	s.Reconciled, _, _ = unstructured.NestedInt64(u.Object, "status", "generations", "reconciled")
	s.NeedsCoordinatorChange, _, _ = unstructured.NestedInt64(u.Object, "status", "generations", "needsCoordinatorChange")
	s.Available, _, _ = unstructured.NestedBool(u.Object, "status", "health", "available")
	s.Healthy, _, _ = unstructured.NestedBool(u.Object, "status", "health", "healthy")
	s.FullReplication, _, _ = unstructured.NestedBool(u.Object, "status", "health", "fullReplication")
	s.Locks, _, _ = unstructured.NestedStringSlice(u.Object, "status", "locks", "lockDenyList")
	s.Skip, _, _ = unstructured.NestedBool(u.Object, "spec", "skip")
	gens, _, _ := unstructured.NestedMap(u.Object, "status", "generations")
	for k, v := range gens {
		if n, ok := v.(int64); k != "reconciled" && (!ok || n != 0) {
			s.Pending = append(s.Pending, fmt.Sprintf("%s %v", k, v))
		}
	}
	sort.Strings(s.Pending)
	s.Buggify = readBuggify(u)
	groups, _, _ := unstructured.NestedSlice(u.Object, "status", "processGroups")
	for _, g := range groups {
		m, _ := g.(map[string]any)
		id, _ := m["processGroupID"].(string)
		var cg CRGroup
		cg.Class, _ = m["processClass"].(string)
		cg.FaultDomain, _ = m["faultDomain"].(string)
		cg.Addresses, _, _ = unstructured.NestedStringSlice(m, "addresses")
		_, cg.Removal = m["removalTimestamp"]
		_, cg.Excluded = m["exclusionTimestamp"]
		conds, _, _ := unstructured.NestedSlice(m, "processGroupConditions")
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if t, _ := cm["type"].(string); t != "" {
				cg.Conditions = append(cg.Conditions, t)
			}
		}
		s.Groups[id] = cg
	}
	return s
}

// readBuggify lists the settings of spec.buggify in use, by field name, with the process
// groups (or containers and groups) they name.
func readBuggify(u *unstructured.Unstructured) []string {
	b, _, _ := unstructured.NestedMap(u.Object, "spec", "buggify")
	keys := make([]string, 0, len(b))
	for k := range b {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		switch v := b[k].(type) {
		case bool:
			if v {
				out = append(out, k)
			}
		case []any:
			var ids []string
			for _, x := range v {
				switch x := x.(type) {
				case string:
					ids = append(ids, x)
				case map[string]any: // crashLoopContainers: {containerName, targets}
					name, _ := x["containerName"].(string)
					t, _, _ := unstructured.NestedStringSlice(x, "targets")
					ids = append(ids, name+": "+strings.Join(t, ","))
				}
			}
			if len(ids) > 0 {
				out = append(out, k+" ["+strings.Join(ids, "; ")+"]")
			}
		case nil:
		default:
			out = append(out, fmt.Sprintf("%s %v", k, v))
		}
	}
	return out
}

// maxReasonGroups bounds the process groups a not-reconciled reason lists by name.
const maxReasonGroups = 5

// NotReconciledReason says why the operator has not reconciled the cluster, from what it wrote
// in the resource: the pending fields of status.generations, the spec.buggify settings in use,
// and the process groups with conditions or marked for removal. Every name the resource holds
// is escaped (ops.Printable). A paused operator (spec.skip) is told by Pause.Describe.
func (s CRState) NotReconciledReason() string {
	var parts []string
	if len(s.Pending) > 0 {
		parts = append(parts, "status.generations: "+strings.Join(ops.PrintableAll(s.Pending), ", "))
	}
	if len(s.Buggify) > 0 {
		parts = append(parts, "spec.buggify: "+strings.Join(ops.PrintableAll(s.Buggify), ", "))
	}
	ids := make([]string, 0, len(s.Groups))
	for id, g := range s.Groups {
		if len(g.Conditions) > 0 || g.Removal {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var groups []string
	for i, id := range ids {
		if i == maxReasonGroups {
			groups = append(groups, fmt.Sprintf("and %d more", len(ids)-i))
			break
		}
		g := s.Groups[id]
		conds := ops.PrintableAll(g.Conditions)
		if g.Removal {
			conds = append(conds, "marked for removal")
		}
		groups = append(groups, ops.Printable(id)+" "+strings.Join(conds, ","))
	}
	if len(groups) > 0 {
		parts = append(parts, "process groups: "+strings.Join(groups, ", "))
	}
	if len(parts) == 0 {
		return "the operator names no reason (status.generations, spec.buggify and process group conditions are clear)"
	}
	return strings.Join(parts, "; ")
}

// Health reports the database as status json and the FoundationDBCluster see it.
func (e *Engine) Health(ctx context.Context, c *ops.Cluster) (*ops.Health, error) {
	details := map[string]string{}
	var cr *CRState
	if u := Resource(c); u != nil {
		s := ReadCR(u)
		cr = &s
		rec := "yes"
		if s.Reconciled < s.Generation {
			rec = fmt.Sprintf("no (generation %d, reconciled %d): %s", s.Generation, s.Reconciled, s.NotReconciledReason())
		} else if s.NeedsCoordinatorChange != 0 && s.NeedsCoordinatorChange >= s.Generation {
			rec = "no (a coordinator change pending: status.generations.needsCoordinatorChange)"
		}
		if len(s.Buggify) > 0 {
			details["operatorBuggify"] = strings.Join(ops.PrintableAll(s.Buggify), ", ")
		}
		details["operatorReconciled"] = rec
		details["operatorHealth"] = fmt.Sprintf("available=%t healthy=%t fullReplication=%t", s.Available, s.Healthy, s.FullReplication)
		if len(s.Locks) > 0 {
			details["operatorLockDenyList"] = strings.Join(s.Locks, ",")
		}
		if p := ReadPause(u); p.Paused {
			details["operatorSkip"] = "true (the operator leaves this cluster alone): " + p.Describe(time.Now()) + "; resume it with: " + p.ResumeCommand(c.Namespace, u.GetName())
		}
	}
	st, via, err := e.StatusFrom(ctx, e.cli(), c, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return &ops.Health{Status: "unreachable", Message: err.Error(), Details: details}, nil
	}
	details["via"] = via
	h := &ops.Health{Details: details}
	summary := []string{}
	switch {
	case !st.Available():
		h.Status = "unavailable"
		if p := st.Problems(); p != "" {
			summary = append(summary, p)
		}
	case !healthy(st):
		h.Status = "degraded"
	default:
		h.Status = "healthy"
	}
	details["available"] = strconv.FormatBool(st.Available())
	if st.Cluster.Data != nil {
		d := st.Cluster.Data.State
		details["data"] = d.Name
		if d.MinReplicasRemaining != nil {
			details["minReplicasRemaining"] = strconv.Itoa(*d.MinReplicasRemaining)
		}
		if !d.Healthy {
			summary = append(summary, "data "+d.Name)
		}
	}
	if ft := st.Cluster.FaultTolerance; ft != nil {
		details["faultTolerance"] = fmt.Sprintf("data %d, availability %d zone failures", ft.Data, ft.Availability)
	}
	if r := st.Cluster.RecoveryState; r != nil {
		details["recovery"] = fmt.Sprintf("%s (%d active generations)", r.Name, r.ActiveGenerations)
		if r.Name != "fully_recovered" {
			summary = append(summary, "recovery "+r.Name)
		}
	}
	if st.Cluster.Generation > 0 {
		details["generation"] = strconv.Itoa(st.Cluster.Generation)
	}
	if z := st.Cluster.MaintenanceZone; z != "" {
		left := 0.0
		if st.Cluster.MaintenanceSecondsRemaining != nil {
			left = *st.Cluster.MaintenanceSecondsRemaining
		}
		details["maintenance"] = fmt.Sprintf("zone %s, %d seconds remaining", z, int(math.Ceil(left)))
		// No seconds here: Message is not Volatile (status --watch prints a document when it
		// changes); they are in Details.
		summary = append(summary, fmt.Sprintf("maintenance %s: restarts, exclusions and replacements of other zones wait until it ends; if no one is working on zone %s, end it with fdbcli --exec 'maintenance off'",
			ops.Printable(z), ops.Printable(z)))
		if h.Status == "healthy" {
			// Data distribution ignores the zone's storage failures while it lasts, and every
			// procedure (this tool's and the operator's) waits for it to end: "healthy" would
			// let `wait --for=healthy` and `list` pass a cluster no restart can start on.
			h.Status = "maintenance"
		}
	} else {
		details["maintenance"] = "none"
	}
	if b := st.Cluster.BounceImpact; b != nil && b.CanCleanBounce != nil && !*b.CanCleanBounce {
		details["canCleanBounce"] = "false: " + b.Reason
	}
	reach := 0
	for _, co := range st.Client.Coordinators.Coordinators {
		if co.Reachable {
			reach++
		}
	}
	details["coordinators"] = fmt.Sprintf("%d/%d reachable", reach, len(st.Client.Coordinators.Coordinators))
	ex := st.Exclusions()
	details["exclusions"] = strconv.Itoa(len(ex))
	if len(ex) > 0 {
		details["exclusions"] += " (" + strings.Join(ex, ", ") + ")"
	}
	if p := exclusionProgress(st); p != "" {
		details["exclusionProgress"] = p
	}
	if cr != nil && cr.Skip {
		summary = append(summary, "operator paused (spec.skip)")
	}
	h.Message = strings.Join(summary, ", ")
	h.Values = healthValues(st, cr, reach, ex)
	h.Table = processTable(c, st, cr)
	h.Volatile = []string{"maintenance"} // its seconds remaining; the zone is in Message
	return h, nil
}

// healthValues are Health's facts as typed JSON for pipelines (status -o json "values"): the
// same readings as Details, as numbers, booleans and objects.
func healthValues(st *Status, cr *CRState, reachable int, exclusions []string) map[string]any {
	v := map[string]any{
		"available":    st.Available(),
		"coordinators": map[string]any{"reachable": reachable, "total": len(st.Client.Coordinators.Coordinators)},
		"exclusions":   append([]string{}, exclusions...),
		"maintenance":  nil,
	}
	if d := st.Cluster.Data; d != nil {
		v["data"] = map[string]any{"state": d.State.Name, "healthy": d.State.Healthy}
		if d.State.MinReplicasRemaining != nil {
			v["minReplicasRemaining"] = *d.State.MinReplicasRemaining
		}
	}
	if ft := st.Cluster.FaultTolerance; ft != nil {
		v["faultTolerance"] = map[string]any{"data": ft.Data, "availability": ft.Availability}
	}
	if r := st.Cluster.RecoveryState; r != nil {
		v["recovery"] = map[string]any{"state": r.Name, "activeGenerations": r.ActiveGenerations}
	}
	if st.Cluster.Generation > 0 {
		v["generation"] = st.Cluster.Generation
	}
	if z := st.Cluster.MaintenanceZone; z != "" {
		m := map[string]any{"zone": z}
		if left := st.Cluster.MaintenanceSecondsRemaining; left != nil {
			m["secondsRemaining"] = int(math.Ceil(*left))
		}
		v["maintenance"] = m
	}
	if b := st.Cluster.BounceImpact; b != nil && b.CanCleanBounce != nil {
		v["canCleanBounce"] = *b.CanCleanBounce
	}
	if cr != nil {
		v["operator"] = map[string]any{"generation": cr.Generation, "reconciled": cr.Reconciled,
			"upToDate": cr.Reconciled >= cr.Generation, "skip": cr.Skip,
			"available": cr.Available, "healthy": cr.Healthy, "fullReplication": cr.FullReplication}
	}
	return v
}

// watchPollInterval is how often `status --watch` reads status json again: FoundationDB has
// no change feed for it (the operator, too, reads it on every reconcile).
const watchPollInterval = 2 * time.Second

// HealthPollInterval implements ops.HealthPoller.
func (e *Engine) HealthPollInterval() time.Duration { return watchPollInterval }

// healthy: available, data healthy, fully recovered.
func healthy(st *Status) bool {
	if st.Cluster.Data == nil || !st.Cluster.Data.State.Healthy {
		return false
	}
	return st.RecoveryName() == "fully_recovered"
}

// processTable lists every pod with its process group and processes, and processes that
// report without a pod of the cluster.
func processTable(c *ops.Cluster, st *Status, cr *CRState) *ops.Table {
	t := &ops.Table{Title: "Processes", Columns: []string{"POD", "PROCESS GROUP", "CLASS", "ZONEID", "ADDRESS", "COORDINATOR", "EXCLUDED", "ROLES", "UPTIME", "CONDITIONS"},
		VolatileColumns: []int{8}}
	seen := map[string]bool{}
	for _, p := range c.AllPods() {
		var conds []string
		if cr != nil {
			g := cr.Groups[p.Member]
			conds = slices.Clone(g.Conditions)
			if g.Removal {
				conds = append(conds, "MarkedForRemoval")
			}
		}
		procs := st.ByInstance(p.Member)
		if len(procs) == 0 {
			t.Rows = append(t.Rows, []string{p.Name, dash(p.Member), p.Group, dash(p.Zone), "-", "-", "-", "-", "-", dash(strings.Join(conds, ","))})
			continue
		}
		for _, pr := range procs {
			seen[pr.Address] = true
			t.Rows = append(t.Rows, processRow(p.Name, p.Member, st, pr, conds))
		}
	}
	var rest []Process
	for _, pr := range st.Cluster.Processes {
		if !seen[pr.Address] {
			rest = append(rest, pr)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i].Address < rest[j].Address })
	for _, pr := range rest {
		t.Rows = append(t.Rows, processRow("-", pr.InstanceID(), st, pr, nil))
	}
	return t
}

func processRow(pod, member string, st *Status, pr Process, conds []string) []string {
	coord := "no"
	if st.IsCoordinator(pr.Address) {
		coord = "yes"
	}
	excluded := "no"
	if pr.Excluded {
		excluded = "yes"
	}
	roles := pr.RoleNames()
	roles = slices.DeleteFunc(roles, func(r string) bool { return r == "coordinator" })
	if pr.UnderMaintenance {
		conds = append(conds, "UnderMaintenance")
	}
	return []string{pod, dash(member), pr.ClassType, dash(pr.Zone()), pr.Address, coord, excluded,
		dash(strings.Join(roles, ",")), fmt.Sprintf("%ds", int(pr.UptimeSeconds)), dash(strings.Join(conds, ","))}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
