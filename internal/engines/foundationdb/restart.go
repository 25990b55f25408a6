package foundationdb

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Restart methods (--method).
const (
	// MethodProcess bounces the fdbserver processes of the batch with `kill; kill <addresses>`
	// (a bare `kill <address>` fails without a prior `kill` in the same fdbcli session,
	// FoundationDB's fdbcli/KillCommand.actor.cpp); the pods keep their UIDs. The default.
	MethodProcess = "process"
	// MethodPod deletes the pods; the operator recreates them under the same names.
	MethodPod = ops.MethodPod
)

// Journal keys of a restart.
const (
	// keyMaintenance holds the zone this run put into maintenance mode, so that a resumed run
	// knows the zone is its own (and clears it), and never takes over anyone else's.
	keyMaintenance = "fdb.maintenance"
	// keyKilled + step ID holds when this run sent the step's kills (unix nanoseconds): a
	// resumed run does not bounce a process that restarted since.
	keyKilled = "fdb.killed/"
)

// maxActiveGenerations is the operator's limit for safe actions (its pkg/fdbstatus
// DefaultSafetyChecks): more generations mean recoveries are piling up.
const maxActiveGenerations = 10

// maintenanceSeconds is how long a batch's maintenance zone lasts if this run dies, unless the
// cluster sets its own (checker.seconds): long enough for a batch, short enough to expire by
// itself (the operator's default too).
const maintenanceSeconds = 600

// pollInterval is how often status json is read while waiting: FoundationDB has no watch.
const pollInterval = time.Second

// PlanRestart plans a rolling restart: the shared procedure's batches (pod, zone or all, by the
// pods' FDB zoneid), the pods holding the master and cluster controller last, each batch gated by
// FDB's health before and after, storage batches in maintenance mode.
func (e *Engine) PlanRestart(ctx context.Context, c *ops.Cluster, opts ops.RestartOptions) (*ops.Plan, error) {
	method := opts.Method
	if method == "" {
		method = MethodProcess
	}
	if method != MethodProcess && method != MethodPod {
		return nil, ops.Usagef("unknown --method %q for engine %s; allowed: %s, %s", method, ops.EngineFoundationDB, MethodProcess, MethodPod)
	}
	if Resource(c) == nil && layoutOf(c) != layoutStatefulSet {
		return nil, ops.Usagef("cluster %s/%s is not a FoundationDBCluster", c.Namespace, c.Name)
	}
	if layoutOf(c) == layoutStatefulSet && method == MethodPod {
		// No operator moves the coordinators when a recreated pod comes back on a new IP, and
		// the sample's cluster file names coordinators by IP.
		return nil, ops.Usagef("--method pod on a FoundationDB StatefulSet would bring pods back on new IPs with no operator to move the coordinators; use --method process (the default)")
	}
	cli := e.cli()
	st, _, err := e.StatusFrom(ctx, cli, c, nil)
	if err != nil {
		return nil, ops.Preconditionf("cannot read the status of %s/%s: %v", c.Namespace, c.Name, err)
	}
	if c, err = withFDBZones(c, st, opts); err != nil {
		return nil, err
	}
	g := &gate{e: e, c: c, method: method, mode: opts.Mode, plan: st, replicas: replicasOf(st), checker: readChecker(Resource(c))}
	if cfg := ReadLockConfig(Resource(c)); Resource(c) != nil && cfg.Use && method == MethodProcess {
		// Only the fdbcli bounces: --method pod deletes pods (a Kubernetes action), and the
		// operator needs its lock to move a coordinator off a recreated pod's new IP, which
		// the next batch's gate waits for.
		g.lock = e.NewFDBLock(c, cfg)
	}
	opts.Method = ""
	p, err := (&ops.RollingRestart{Client: e.client, Gate: g}).Plan(c, ops.EngineFoundationDB, opts)
	if err != nil {
		return nil, err
	}
	if opts.Mode != ops.ModeAll {
		if err := checkBatchDomains(c, p, redundancyOf(st), g.holdsNothing); err != nil {
			return nil, err
		}
	}
	if g.lock != nil {
		// Bounces are global actions: the operator coordinates them through its lock key
		// (fdblock.go), and so does this run.
		p.Companion = g.lock
		p.Notes = append(p.Notes, fmt.Sprintf("the FoundationDB operator's lock key %s is taken as %s before each batch (an fdbcli transaction), renewed with the lock, and cleared at the end",
			printableKey(g.lock.cfg.Key()), LockOwnerID))
	}
	if n := g.recoveryBatches(p); n > 0 {
		p.Notes = append(p.Notes, g.recoveryNote(p, n, opts))
	}
	if ft := st.Cluster.FaultTolerance; ft != nil && ft.Availability == 0 && opts.Mode == ops.ModeZone {
		// FoundationDB says one zone's loss already costs availability: each zone batch is
		// then a short outage, which the plan must not leave unsaid.
		p.Notes = append(p.Notes, "WARNING: status json reports max_zone_failures_without_losing_availability 0: each zone batch takes a whole zone down at once, so the database is unavailable while the zone's processes restart (--mode pod bounces one pod at a time)")
	}
	p.Args += " --method " + method
	p.Notes = append(p.Notes, fmt.Sprintf("method %s: %s", method, map[string]string{
		MethodProcess: "fdbserver processes are bounced with fdbcli kill; pods keep their UIDs",
		MethodPod:     "pods are deleted and the operator recreates them",
	}[method]))
	return p, nil
}

// withFDBZones returns c with each pod's zone its FoundationDB fault domain: the zoneid its
// processes report in status json (locality_zoneid; FoundationDB's Kubernetes sample sets it to
// the pod name, the operator to the node or its spec.faultDomain). Discovery gives a
// StatefulSet's pods their node's Kubernetes zone label, which is not FDB's fault domain: a
// batch by it could take down processes of several FDB zones at once, and pods on nodes without
// the label would all fall into one batch. A pod whose processes do not report keeps the
// operator's status.processGroups[].faultDomain (operator layout) or has none (StatefulSet
// layout). --mode zone refuses a requested pod with no fault domain.
func withFDBZones(c *ops.Cluster, st *Status, opts ops.RestartOptions) (*ops.Cluster, error) {
	out := *c
	out.Groups = make([]*ops.NodeGroup, len(c.Groups))
	var unknown []string
	for i, g := range c.Groups {
		ng := *g
		ng.Pods = slices.Clone(g.Pods)
		for j := range ng.Pods {
			p := &ng.Pods[j]
			var zones []string
			for _, pr := range st.ByInstance(p.Member) {
				if z := pr.Zone(); z != "" && !slices.Contains(zones, z) {
					zones = append(zones, z)
				}
			}
			switch {
			case len(zones) == 1:
				p.Zone = zones[0]
			case len(zones) > 1:
				p.Zone = "" // one pod's processes in several fault domains: none to batch by
			case layoutOf(c) == layoutStatefulSet:
				p.Zone = ""
			}
			requested := (len(opts.Groups) == 0 || slices.Contains(opts.Groups, g.Name)) && (len(opts.Pods) == 0 || slices.Contains(opts.Pods, p.Name))
			if p.Zone == "" && requested {
				unknown = append(unknown, p.Name)
			}
		}
		out.Groups[i] = &ng
	}
	if opts.Mode == ops.ModeZone && len(unknown) > 0 {
		return nil, ops.Preconditionf("--mode zone batches by FoundationDB's fault domain (locality_zoneid in status json), and pod(s) %s report none (process not running, or no single zoneid); refusing: use --mode pod, or wait for them to report",
			strings.Join(unknown, ", "))
	}
	return &out, nil
}

// checkBatchDomains refuses a plan with a batch (restart --batch N, replace --strategy deletion
// --max-concurrent N) whose pods are in more fault domains than the redundancy mode tolerates
// losing at once, as the replacement refuses (checkRemoval): one fault domain at a time is the
// operator's way (its UpdatePods), more only as far as redundancy.go allows. A pod with no
// zoneid counts as a fault domain of its own. A batch whose pods exempt all says hold no data
// and no coordinator (the stateless transaction-system batch) loses no replica and passes: the
// operator's fault domain checks are about storage, logs and coordinators
// (pkg/fdbstatus/status_checks.go, as checkStatus says). A mixed batch counts every pod.
func checkBatchDomains(c *ops.Cluster, p *ops.Plan, rd redundancy, exempt ...func(ops.Pod) bool) error {
	for _, s := range p.Steps {
		free := len(exempt) > 0
		for _, name := range s.Pods {
			_, pod := c.Pod(name)
			free = free && pod != nil && !slices.ContainsFunc(exempt, func(f func(ops.Pod) bool) bool { return !f(*pod) })
		}
		if free {
			continue
		}
		var zones []string
		for _, name := range s.Pods {
			_, pod := c.Pod(name)
			if pod == nil {
				continue
			}
			z := pod.Zone
			if z == "" {
				z = "(none: pod " + pod.Name + ")"
			}
			if !slices.Contains(zones, z) {
				zones = append(zones, z)
			}
		}
		if len(zones) > max(rd.FaultTolerance, 1) {
			slices.Sort(zones)
			return ops.Preconditionf("batch %s takes down pods in %d fault domains at once (zoneids %s), beyond the fault tolerance of redundancy mode %s, which tolerates losing %d: take at most %d fault domain(s) at a time (a smaller --max-concurrent / --batch, or --mode zone)",
				s.Target, len(zones), strings.Join(zones, ", "), rd.Mode, rd.FaultTolerance, max(rd.FaultTolerance, 1))
		}
	}
	return nil
}

// replicasOf is the configured replication (storage team size) of status' configuration
// (redundancy.go).
func replicasOf(st *Status) int {
	return redundancyOf(st).StorageReplicas
}

// gate is the restart's hooks into the shared procedure (internal/ops/restart.go).
type gate struct {
	e        *Engine
	c        *ops.Cluster
	method   string
	mode     string
	plan     *Status // status json when planning: roles and addresses for the plan view
	replicas int
	checker  checker
	// lock is the operator's FDB lock key, when the cluster uses it (fdblock.go).
	lock *FDBLock
}

// txnRoles are the transaction-system roles whose bounce starts a recovery (FoundationDB's
// ClusterRecovery: the master ends the generation when a log, proxy or resolver of it fails).
var txnRoles = []string{"log", "commit_proxy", "grv_proxy", "resolver"}

// StepRank puts the batches holding transaction-system roles after the others, and the batch
// holding the master or the cluster controller last: each bounce of such a process starts a
// recovery (the master and cluster controller also a new election), so they go together at
// the end rather than interleaved with storage-only batches.
func (g *gate) StepRank(pods []ops.Pod) int {
	rank := 0
	for _, p := range pods {
		for _, pr := range g.plan.ByInstance(p.Member) {
			if pr.HasRole("master") || pr.HasRole("cluster_controller") {
				return 2
			}
			if slices.ContainsFunc(txnRoles, pr.HasRole) {
				rank = 1
			}
		}
	}
	return rank
}

// txnGroup is the GroupKey of the stateless transaction-system pods.
const txnGroup = "transaction-system"

// statelessTxnRoles are the transaction-system roles of stateless processes.
var statelessTxnRoles = []string{"commit_proxy", "grv_proxy", "resolver", "master", "cluster_controller"}

// GroupKey puts every pod whose processes hold a stateless transaction-system role (commit
// proxy, GRV proxy, resolver, master, cluster controller) and no data and no coordinator in one
// batch under --mode pod: each bounce of such a process starts a recovery, so one
// fdbcli kill of them all costs one recovery instead of one per pod, as the operator's bounce
// kills all its addresses in one KillProcesses call (controllers/bounce_processes.go). Logs
// stay in their own batches: a tlog holds the mutations not yet on the storage servers, and a
// recovery must lock enough of the old generation's tlogs, so they keep the fault-domain rule
// (checkBatchDomains). --mode zone bounces a zone's transaction-system processes together
// already, and a zone with a log recovers anyway: taking its stateless pods out would add a
// recovery.
func (g *gate) GroupKey(p ops.Pod) string {
	if !g.holdsNothing(p) {
		return ""
	}
	for _, pr := range g.plan.ByInstance(p.Member) {
		if slices.ContainsFunc(statelessTxnRoles, pr.HasRole) {
			return txnGroup
		}
	}
	return ""
}

// holdsNothing: the pod's processes all report, and none is of a storage or log class, holds a
// storage or log role, or is a coordinator.
func (g *gate) holdsNothing(p ops.Pod) bool {
	procs := g.plan.ByInstance(p.Member)
	if len(procs) == 0 {
		return false
	}
	for _, pr := range procs {
		switch {
		case pr.ClassType == "storage" || pr.ClassType == "log" || pr.ClassType == "transaction",
			pr.HasRole("storage") || pr.HasRole("log") || pr.HasRole("coordinator"),
			g.plan.IsCoordinator(pr.Address):
			return false
		}
	}
	return true
}

// recoveryNote says how many batches start a recovery, and that the stateless
// transaction-system processes go in one.
func (g *gate) recoveryNote(p *ops.Plan, n int, opts ops.RestartOptions) string {
	grouped := ""
	for _, s := range p.Steps {
		if len(s.Pods) < 2 {
			continue
		}
		all := true
		for _, name := range s.Pods {
			_, q := g.c.Pod(name)
			all = all && q != nil && g.GroupKey(*q) == txnGroup
		}
		if all && (opts.Mode == "" || opts.Mode == ops.ModePod) && opts.BatchSize <= 1 {
			grouped = fmt.Sprintf("; the %d pods of stateless transaction-system processes (commit proxy, GRV proxy, resolver, master, cluster controller) go together in %s: 1 recovery for them all, not one per pod", len(s.Pods), s.Target)
		}
	}
	return fmt.Sprintf("%d of %d batches hold transaction-system processes (log, commit proxy, GRV proxy, resolver, master, cluster controller): the bounce of each such batch starts one recovery, %d in all; they go last, the master's and cluster controller's batch at the end (where those roles are now: every recovery may move them, so a later plan can order the batches differently)%s; logs keep one fault domain per batch; fewer batches (--mode zone or all) mean fewer recoveries",
		n, len(p.Steps), n, grouped)
}

// recoveryBatches counts the plan's steps whose bounce starts a recovery.
func (g *gate) recoveryBatches(p *ops.Plan) int {
	n := 0
	for _, s := range p.Steps {
		var pods []ops.Pod
		for _, name := range s.Pods {
			if _, q := g.c.Pod(name); q != nil {
				pods = append(pods, *q)
			}
		}
		if g.StepRank(pods) > 0 {
			n++
		}
	}
	return n
}

// Describe shows a pod's processes and roles in the plan.
func (g *gate) Describe(p ops.Pod) (pre, details []string) {
	pre = []string{"database available, fully recovered, at most 10 active generations, can_clean_bounce not false",
		fmt.Sprintf("min_replicas_remaining of every team tracker at the configured %d, log fault tolerance at replication - 1", g.replicas),
		"every coordinator reachable, the FoundationDBCluster reconciled, no maintenance zone set by someone else"}
	procs := g.plan.ByInstance(p.Member)
	if len(procs) == 0 {
		return pre, []string{fmt.Sprintf("process group %s: no process reports now", dash(p.Member))}
	}
	for _, pr := range procs {
		details = append(details, fmt.Sprintf("process group %s: %s %s zoneid %s roles %s", p.Member, pr.ClassType, pr.Address,
			dash(pr.Zone()), dash(strings.Join(pr.RoleNames(), ","))))
	}
	return pre, details
}

// batchInfo is what a step needs of its pods' processes now.
type batchInfo struct {
	addrs   []string
	storage bool
	zones   []string
	coords  int
	missing []string // process groups with no process reporting
	// killAddrs are the batch's addresses as fdbcli's kill list names them: the status json
	// address without the ":tls" flag (see killCommand).
	killAddrs []string
	// versions are the fdbserver versions the batch's processes report.
	versions []string
	// storageGroups are the process groups with a storage process (the operator's
	// maintenance list holds these).
	storageGroups []string
	instance      map[string]bool
}

func (g *gate) batch(st *Status, pods []ops.Pod) batchInfo {
	b := batchInfo{instance: map[string]bool{}}
	for _, p := range pods {
		b.instance[p.Member] = true
		procs := st.ByInstance(p.Member)
		if len(procs) == 0 {
			b.missing = append(b.missing, p.Member)
		}
		for _, pr := range procs {
			b.addrs = append(b.addrs, pr.Address)
			b.killAddrs = append(b.killAddrs, strings.TrimSuffix(pr.Address, ":tls"))
			if !slices.Contains(b.versions, pr.Version) {
				b.versions = append(b.versions, pr.Version)
			}
			if pr.ClassType == "storage" || pr.HasRole("storage") {
				b.storage = true
				if !slices.Contains(b.storageGroups, p.Member) {
					b.storageGroups = append(b.storageGroups, p.Member)
				}
			}
			if z := pr.Zone(); z != "" && !slices.Contains(b.zones, z) {
				b.zones = append(b.zones, z)
			}
			if st.IsCoordinator(pr.Address) {
				b.coords++
			}
		}
	}
	slices.Sort(b.addrs)
	slices.Sort(b.killAddrs)
	return b
}

// killCommand is the fdbcli line that bounces the batch. fdbcli keys its kill list by the address
// without ":tls", so a TLS process is named ip:port (an ip:port:tls token is "not recognized" and
// kills nothing). Before 7.3, kill returns without waiting for its requests to leave, so the
// session sleeps 5 s after it as the operator's kill command does; a version that is not reported
// or not understood gets the sleep too. See docs/procedures.md.
func (b batchInfo) killCommand() string {
	cmd := "kill; kill " + strings.Join(b.killAddrs, " ")
	for _, v := range b.versions {
		if !versionAtLeast(v, 7, 3) {
			return cmd + "; sleep 5"
		}
	}
	return cmd
}

// versionAtLeast reports whether v (major.minor[.patch]) is at least major.minor.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// maintenanceZone is the zone a batch puts into maintenance: a batch with storage processes,
// all in one zone (maintenance covers one zone at a time).
func (b batchInfo) maintenanceZone() string {
	if b.storage && len(b.zones) == 1 {
		return b.zones[0]
	}
	return ""
}

// PlanStep makes each step of --method process a bounce instead of a pod deletion, and lists
// the fdbcli commands it runs.
func (g *gate) PlanStep(s *ops.Step, pods []ops.Pod) error {
	b := g.batch(g.plan, pods)
	var cmds []string
	zone := b.maintenanceZone()
	if zone != "" {
		cmds = append(cmds, "fdbcli --exec '"+g.checker.maintenanceOn(zone, b.storageGroups, time.Time{})+"'")
	}
	if g.lock != nil {
		cmds = append([]string{fmt.Sprintf("fdbcli --exec 'writemode on; option on ACCESS_SYSTEM_KEYS; begin; get %s; …; set %s <(%s, start, end)>; commit' (take or extend the operator's lock key)",
			escapeToken(g.lock.cfg.Key()), escapeToken(g.lock.cfg.Key()), LockOwnerID)}, cmds...)
	}
	if g.method == MethodProcess {
		cmds = append(cmds, "fdbcli --exec '"+b.killCommand()+"'")
	}
	if zone != "" && g.checker.on {
		cmds = append(cmds, "fdbcli --exec '"+g.checker.maintenanceOff(b.storageGroups)+"' (once the batch reports again and storage lags and queues are within the operator's limits, unless the operator's maintenance checker cleared the zone first)")
	} else if zone != "" {
		cmds = append(cmds, "fdbcli --exec 'maintenance off' (once the batch reports again and storage lags and queues are within the operator's limits)")
	}
	for _, c := range cmds {
		s.Details = append(s.Details, "run: "+c)
	}
	s.Needs = append(s.Needs, ops.Need("", "pods", "exec", "create")...)
	s.Needs = append(s.Needs, ops.Need(ClusterGVR.Group, ClusterGVR.Resource, "", "get")...)
	if g.method == MethodPod {
		return nil
	}
	s.Description = fmt.Sprintf("bounce the fdbserver processes of %d pod(s) with fdbcli kill (pods keep their UIDs); wait until they report again and the database is fully recovered", len(pods))
	s.Preconditions = slices.DeleteFunc(s.Preconditions, func(p string) bool { return strings.Contains(p, "is Ready") })
	s.Needs = slices.DeleteFunc(s.Needs, func(p ops.Permission) bool { return p.Verb == "delete" })
	s.Prepare = nil
	bp := &bounce{g: g, pods: pods}
	s.Precheck, s.Action, s.Verify = bp.precheck, bp.action, bp.verify
	return nil
}

// bounce is one --method process step.
type bounce struct {
	g    *gate
	pods []ops.Pod
}

func (bp *bounce) skip() func(ops.Pod) bool {
	return func(p ops.Pod) bool {
		return slices.ContainsFunc(bp.pods, func(q ops.Pod) bool { return q.Name == p.Name })
	}
}

func (bp *bounce) killedAt(sc *ops.StepContext) time.Time {
	v := sc.Get(keyKilled + sc.Step.ID)
	n, err := strconv.ParseInt(v, 10, 64)
	if v == "" || err != nil {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// restartedSince: every process of the batch reports with an uptime shorter than the time
// from t to now (both the API server's time: the kill stamps are).
func restartedSince(st *Status, b batchInfo, pods []ops.Pod, t, now time.Time) bool {
	since := now.Sub(t).Seconds()
	for _, p := range pods {
		procs := st.ByInstance(p.Member)
		if len(procs) == 0 {
			return false
		}
		for _, pr := range procs {
			if pr.UptimeSeconds >= since {
				return false
			}
		}
	}
	return true
}

func (bp *bounce) precheck(ctx context.Context, sc *ops.StepContext) (bool, error) {
	if !bp.killedAt(sc).IsZero() {
		// An interrupted run sent this batch's kills: the action decides from uptimes.
		return false, nil
	}
	// A zone someone else set since the last batch's gate is waited out, as that gate waits
	// for it; every other refusal stands.
	return false, bp.g.waitOutForeignZone(ctx, sc, func() error { return bp.g.check(ctx, sc, bp.skip(), "") })
}

// waitOutForeignZone calls check until it passes, or fails for another reason than a
// maintenance zone someone else set: that zone is waited for (never taken over), bounded by
// the step's timeout and published as what the step is blocked on. A run meets it only
// between batches: the preflight refuses one present before the lock, and the action still
// refuses one that appears between this wait and its own maintenance on.
func (g *gate) waitOutForeignZone(ctx context.Context, sc *ops.StepContext, check func() error) error {
	return g.poll(ctx, sc, func() (bool, string, error) {
		err := check()
		switch {
		case err == nil:
			return true, "", nil
		case errors.Is(err, errForeignZone):
			return false, err.Error(), nil
		}
		return false, "", err
	})
}

func (bp *bounce) action(ctx context.Context, sc *ops.StepContext) error {
	g := bp.g
	cli := g.e.cli()
	st, via, err := g.e.StatusFrom(ctx, cli, g.c, bp.skip())
	if err != nil {
		if !bp.killedAt(sc).IsZero() {
			return nil // bounced by the interrupted run, status json not back yet: the verify waits
		}
		return err
	}
	b := g.batch(st, bp.pods)
	if t := bp.killedAt(sc); !t.IsZero() {
		if restartedSince(st, b, bp.pods, t, g.e.deps.Now()) || len(b.addrs) < len(bp.pods) || !st.Available() {
			// Bounced by the interrupted run (or still coming back, or the recovery its
			// bounce started still running): never twice. The verify waits for the batch.
			return nil
		}
	}
	if len(b.missing) > 0 {
		return ops.Preconditionf("process group(s) %s report no process; refusing to bounce a batch that is not all running", strings.Join(b.missing, ", "))
	}
	if err := g.takeLock(ctx); err != nil {
		return err
	}
	if err := g.maintenanceOn(ctx, sc, cli, via, st, b); err != nil {
		return err
	}
	// Kill stamps are the API server's time: a resumed run, maybe on another workstation with
	// another clock, compares them with the processes' uptimes.
	killed := g.e.deps.Now()
	if err := ctx.Err(); err != nil {
		return g.undoMaintenance(ctx, sc, cli, via, b, err)
	}
	if err := sc.Set(ctx, keyKilled+sc.Step.ID, strconv.FormatInt(killed.UnixNano(), 10)); err != nil {
		return g.undoMaintenance(ctx, sc, cli, via, b, err)
	}
	if _, err = cli.Run(ctx, g.c.Namespace, via, b.killCommand()); err != nil {
		// The kill may or may not have gone out (a timeout): the zone stays only if a process
		// of the batch restarted since, or status json cannot tell (read a few times: one
		// failed read must not leave the zone for its whole duration).
		var serr error
		for range 3 {
			var st *Status
			if st, _, serr = g.e.StatusFrom(context.WithoutCancel(ctx), cli, g.c, bp.skip()); serr == nil {
				if !anyRestartedSince(st, bp.pods, killed, g.e.deps.Now()) {
					return g.undoMaintenance(ctx, sc, cli, via, b, err)
				}
				return fmt.Errorf("%w (a process of the batch restarted since: the maintenance zone stays until the batch reports again or it expires)", err)
			}
		}
		return fmt.Errorf("%w (status json unreadable afterwards: %v; the maintenance zone stays until it expires or a re-run clears it)", err, serr)
	}
	return nil
}

// anyRestartedSince: some process of the pods reports an uptime shorter than the time from t
// to now.
func anyRestartedSince(st *Status, pods []ops.Pod, t, now time.Time) bool {
	since := now.Sub(t).Seconds()
	for _, p := range pods {
		for _, pr := range st.ByInstance(p.Member) {
			if pr.UptimeSeconds < since {
				return true
			}
		}
	}
	return false
}

// undoMaintenance ends the maintenance zone this run set for a batch it then did not bounce
// (interrupted or failed before the kill went out), so no zone of a run outlives it for
// nothing; cause is returned, with what happened to the zone.
func (g *gate) undoMaintenance(ctx context.Context, sc *ops.StepContext, cli *CLI, via string, b batchInfo, cause error) error {
	zone := sc.Get(keyMaintenance)
	if zone == "" {
		return cause
	}
	// The run may be interrupted: the cleanup gets its own short bound.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := cli.Run(cctx, g.c.Namespace, via, g.checker.maintenanceOff(b.storageGroups)); err != nil {
		return fmt.Errorf("%w (and ending maintenance zone %s failed: %v; it expires within %d s, re-running the same command clears it)", cause, zone, err, g.checker.seconds)
	}
	if err := sc.Set(cctx, keyMaintenance, ""); err != nil {
		return fmt.Errorf("%w (maintenance zone %s ended; journal: %v)", cause, zone, err)
	}
	return fmt.Errorf("%w (nothing was bounced; maintenance zone %s ended)", cause, zone)
}

func (bp *bounce) verify(ctx context.Context, sc *ops.StepContext) error {
	return bp.g.afterBatch(ctx, sc, bp.pods, bp.killedAt(sc), bp.skip())
}

// maintenanceOn puts the batch's zone into maintenance, journaling it first. A zone someone
// else set is never taken over.
func (g *gate) maintenanceOn(ctx context.Context, sc *ops.StepContext, cli *CLI, via string, st *Status, b batchInfo) error {
	zone := b.maintenanceZone()
	if zone == "" || g.mode == ops.ModeAll {
		return nil
	}
	if cur := st.Cluster.MaintenanceZone; cur != "" && cur != sc.Get(keyMaintenance) {
		return foreignZone(st)
	}
	if g.checker.on && len(b.storageGroups) > 0 {
		if err := g.waitListable(ctx, sc, cli, b); err != nil {
			return err
		}
	}
	if err := sc.Set(ctx, keyMaintenance, zone); err != nil {
		return err
	}
	_, err := cli.Run(ctx, g.c.Namespace, via, g.checker.maintenanceOn(zone, b.storageGroups, g.e.deps.Now()))
	return err
}

// minListedUptime is how long a storage process must have been up before this run lists it
// under the operator's maintenance prefix. The operator counts a listed process as restarted
// when now minus its uptime in whole seconds is after the entry's whole-second time, so a
// process up for less than a second or two at listing time counts as restarted at once, and
// the operator ends the zone before the batch goes down. Up for 2 s when listed, its start
// is at least a second before the entry's (truncated) time.
const minListedUptime = 2 * time.Second

// waitListable waits, reading status json, until every storage process of the batch has been
// up for minListedUptime (a process that just restarted, crashed or was bounced by someone
// else).
func (g *gate) waitListable(ctx context.Context, sc *ops.StepContext, cli *CLI, b batchInfo) error {
	return g.poll(ctx, sc, func() (bool, string, error) {
		st, _, err := g.e.StatusFrom(ctx, cli, g.c, nil)
		if err != nil {
			return false, "status json: " + err.Error(), nil
		}
		for _, id := range b.storageGroups {
			for _, pr := range st.ByInstance(id) {
				if up := time.Duration(pr.UptimeSeconds * float64(time.Second)); up < minListedUptime {
					return false, fmt.Sprintf("process %s up for %s only; the operator's maintenance checker would count it as restarted already", pr.Address, up.Round(100*time.Millisecond)), nil
				}
			}
		}
		return true, "", nil
	})
}

func foreignZone(st *Status) error {
	left := 0
	if st.Cluster.MaintenanceSecondsRemaining != nil {
		left = int(*st.Cluster.MaintenanceSecondsRemaining)
	}
	// How to clear a stale one is part of the refusal: a zone left by a crashed tool blocks every
	// restart until it expires (kubectl dbops explain shows the pod to run it in).
	return foreignZoneError{ops.Preconditionf("zone %s is in maintenance, set by someone else (%d seconds remaining); refusing to take it over: wait for it to end, or, if it is stale (no one works on that zone), clear it with fdbcli --exec 'maintenance off'",
		st.Cluster.MaintenanceZone, left)}
}

// errForeignZone marks foreignZone's refusal, which a run between batches waits out.
var errForeignZone = errors.New("a maintenance zone set by someone else")

// foreignZoneError is foreignZone's refusal: exit 5 as a precondition, and errForeignZone.
type foreignZoneError struct{ error }

func (e foreignZoneError) Unwrap() []error { return []error{e.error, errForeignZone} }

// afterBatch waits until the batch's processes report again (restarted after since), the
// database is fully recovered, then clears this run's maintenance zone once data movement is
// quiet, and waits for the gate to pass again.
func (g *gate) afterBatch(ctx context.Context, sc *ops.StepContext, pods []ops.Pod, since time.Time, skip func(ops.Pod) bool) error {
	cli := g.e.cli()
	var via string
	err := g.poll(ctx, sc, func() (bool, string, error) {
		st, v, err := g.e.StatusFrom(ctx, cli, g.c, skip)
		if err != nil {
			return false, "status json: " + err.Error(), nil
		}
		via = v
		b := g.batch(st, pods)
		switch {
		case !since.IsZero() && !restartedSince(st, b, pods, since, g.e.deps.Now()):
			return false, "processes of the batch to report again", nil
		case since.IsZero() && len(b.missing) > 0:
			return false, "process group(s) " + strings.Join(b.missing, ", ") + " to report", nil
		case !st.Available():
			return false, "the database to be available", nil
		case st.RecoveryName() != "fully_recovered":
			return false, "recovery: " + st.RecoveryName(), nil
		}
		if own := sc.Get(keyMaintenance); own != "" {
			if why := canEndMaintenance(st); why != "" {
				return false, why + " before maintenance off", nil
			}
			if st.Cluster.MaintenanceZone == own {
				if _, err := cli.Run(ctx, g.c.Namespace, via, g.checker.maintenanceOff(b.storageGroups)); err != nil {
					return false, "maintenance off: " + err.Error(), nil
				}
			}
			if err := sc.Set(ctx, keyMaintenance, ""); err != nil {
				return false, "", err
			}
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	// The gate after the batch: wait until the cluster is fit for the next one.
	return g.poll(ctx, sc, func() (bool, string, error) {
		if err := g.check(ctx, sc, skip, ""); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

// Limits of the operator's checks before it ends a maintenance zone (its pkg/fdbstatus
// CanSafelyRemoveMaintenanceMode: DefaultSafetyChecks, then CheckQosStatus).
const (
	maxDataLagSeconds = 60.0
	maxQueueBytes     = 250 << 20
)

// canEndMaintenance is why this run's maintenance zone must stay on a little longer ("" when
// it may end): the operator's checks, not a wait for data movement to reach 0, which a busy
// cluster never does. The wait is bounded by the step's timeout.
func canEndMaintenance(st *Status) string {
	if n := st.ActiveGenerations(); n > maxActiveGenerations {
		return fmt.Sprintf("active generations (%d) to drop to %d", n, maxActiveGenerations)
	}
	q := st.Cluster.Qos
	if q == nil {
		return "status json to report qos"
	}
	switch {
	case q.WorstDataLagStorageServer.Seconds > maxDataLagSeconds:
		return fmt.Sprintf("the worst storage data lag (%.1f s) to drop to %.0f s", q.WorstDataLagStorageServer.Seconds, maxDataLagSeconds)
	case q.WorstDurabilityLagStorageServer.Seconds > maxDataLagSeconds:
		return fmt.Sprintf("the worst storage durability lag (%.1f s) to drop to %.0f s", q.WorstDurabilityLagStorageServer.Seconds, maxDataLagSeconds)
	case q.WorstQueueBytesLogServer > maxQueueBytes:
		return fmt.Sprintf("the worst log queue (%s) to drop to %s", ops.FormatBytes(q.WorstQueueBytesLogServer), ops.FormatBytes(maxQueueBytes))
	case q.WorstQueueBytesStorageServer > maxQueueBytes:
		return fmt.Sprintf("the worst storage queue (%s) to drop to %s", ops.FormatBytes(q.WorstQueueBytesStorageServer), ops.FormatBytes(maxQueueBytes))
	}
	return ""
}

// poll calls f until it is done, reporting what it waits for, on a backoff from the poll
// interval (backoff.go).
func (g *gate) poll(ctx context.Context, sc *ops.StepContext, f func() (bool, string, error)) error {
	bo := backoff{base: g.e.poll}
	last := ""
	for {
		done, reason, err := f()
		if err != nil || done {
			return err
		}
		if reason != last && sc != nil {
			kind, on, unblock := g.blocker(sc, reason)
			sc.Block(ctx, kind, on, unblock, reason)
			last = reason
		}
		select {
		case <-ctx.Done():
			// An interrupted run leaves its maintenance zone to expire by itself (it was set
			// for checker.seconds); say so, a resumed run clears it.
			note := ""
			if sc != nil {
				if z := sc.Get(keyMaintenance); z != "" {
					note = fmt.Sprintf(" (maintenance zone %s of this run is left to expire within %d s; re-running the same command clears it)", z, g.checker.seconds)
				}
			}
			if last != "" {
				return fmt.Errorf("waiting for %s%s: %w", last, note, ctx.Err())
			}
			if note != "" {
				return fmt.Errorf("interrupted%s: %w", note, ctx.Err())
			}
			return ctx.Err()
		case <-g.e.after(bo.next(reason)):
		}
	}
}

// foreignZoneRe reads the zone out of foreignZone's refusal.
var foreignZoneRe = regexp.MustCompile(`zone (\S+) is in maintenance`)

// blocker names what a restart wait that says reason is blocked on, and how to unblock it.
func (g *gate) blocker(sc *ops.StepContext, reason string) (kind, on, toUnblock string) {
	ns, name := g.c.Namespace, g.c.Name
	details := fmt.Sprintf("look at fdbcli --exec 'status details' in a pod of %s/%s", ns, name)
	switch {
	case foreignZoneRe.MatchString(reason):
		zone := foreignZoneRe.FindStringSubmatch(reason)[1]
		return ops.BlockedZone, "maintenance zone " + zone + " (set by someone else)",
			"wait for it to expire, or when it is stale end it with fdbcli --exec 'maintenance off'"
	case strings.Contains(reason, "before maintenance off"):
		return ops.BlockedZone, "maintenance zone " + sc.Get(keyMaintenance) + " (this run's)",
			"wait: this run ends its zone once storage lags and queues are within the operator's limits; " + details
	case strings.Contains(reason, "to report") || strings.HasPrefix(reason, "process "):
		return ops.BlockedProcess, "fdbserver processes of " + sc.Ref.Target,
			fmt.Sprintf("check that they run: kubectl logs -n %s POD -c foundationdb; %s", ns, details)
	case strings.Contains(reason, "FoundationDBCluster"):
		return ops.BlockedOperator, fmt.Sprintf("reconciliation of FoundationDBCluster %s/%s", ns, name),
			fmt.Sprintf("kubectl describe foundationdbcluster -n %s %s, and the operator's logs", ns, name)
	}
	return ops.BlockedCluster, fmt.Sprintf("FoundationDB %s/%s (%s)", ns, name, "availability and recovery"), details
}

// check is the gate: FDB's health from status json and the FoundationDBCluster's. ownZone is
// a maintenance zone this run may hold (also read from the journal when sc is set).
func (g *gate) check(ctx context.Context, sc *ops.StepContext, skip func(ops.Pod) bool, ownZone string) error {
	if sc != nil && ownZone == "" {
		ownZone = sc.Get(keyMaintenance)
	}
	st, _, err := g.e.StatusFrom(ctx, g.e.cli(), g.c, skip)
	if err != nil {
		return ops.Preconditionf("cannot read the status of %s/%s: %v", g.c.Namespace, g.c.Name, err)
	}
	if err := g.checkStatus(st, ownZone); err != nil {
		return err
	}
	if err := g.checkCR(ctx); err != nil {
		return err
	}
	return g.checkReporting(st)
}

// checkReporting refuses while a process group of the cluster has no process in status json
// (its fdbserver down, or not back yet), naming it: before the first batch as before every
// other, so a group found down at its own batch has not let the batches before it bounce.
// It comes after the status checks, whose reasons say more when they fail (a stopped storage
// or log process lowers the fault tolerance they read); they pass meanwhile when a stateless
// process is down once its roles moved.
func (g *gate) checkReporting(st *Status) error {
	var missing []string
	for _, p := range g.c.AllPods() {
		if p.Member != "" && len(st.ByInstance(p.Member)) == 0 {
			missing = append(missing, p.Member)
		}
	}
	if len(missing) > 0 {
		return ops.Preconditionf("process group(s) %s report no process in status json of %s/%s (fdbserver down, or not back yet); refusing to restart: bring them back (or replace them) first",
			strings.Join(missing, ", "), g.c.Namespace, g.c.Name)
	}
	return nil
}

func (g *gate) checkStatus(st *Status, ownZone string) error {
	c := g.c
	if !st.Available() {
		msg := st.Problems()
		if msg == "" {
			msg = "database unavailable"
		}
		return ops.Preconditionf("FoundationDB %s/%s is unavailable (%s); refusing to restart", c.Namespace, c.Name, msg)
	}
	if z := st.Cluster.MaintenanceZone; z != "" && z != ownZone {
		return foreignZone(st)
	}
	if n := st.ActiveGenerations(); n > maxActiveGenerations {
		return ops.Preconditionf("FoundationDB %s/%s has %d active generations (more than %d); refusing to restart", c.Namespace, c.Name, n, maxActiveGenerations)
	}
	if r := st.RecoveryName(); r != "fully_recovered" {
		return ops.Preconditionf("FoundationDB %s/%s is recovering (%s); refusing to restart", c.Namespace, c.Name, r)
	}
	if b := st.Cluster.BounceImpact; b != nil && b.CanCleanBounce != nil && !*b.CanCleanBounce {
		return ops.Preconditionf("FoundationDB %s/%s cannot bounce cleanly (%s); refusing to restart", c.Namespace, c.Name, b.Reason)
	}
	// The operator's fault domain checks (pkg/fdbstatus/status_checks.go
	// DoStorageServerFaultDomainCheckOnStatus, DoLogServerFaultDomainCheckOnStatus,
	// DoCoordinatorFaultDomainCheckOnStatus): every team tracker keeps the configured replicas,
	// every log set (primary, remote and satellite) tolerates replication-1 failures, every
	// coordinator is reachable.
	d := st.Cluster.Data
	if d == nil || len(d.TeamTrackers) == 0 {
		return ops.Preconditionf("FoundationDB %s/%s reports no team trackers; refusing to restart", c.Namespace, c.Name)
	}
	for _, tr := range d.TeamTrackers {
		if tr.State.MinReplicasRemaining < g.replicas {
			return ops.Preconditionf("FoundationDB %s/%s has min_replicas_remaining %d, below the configured %d (data %s); refusing to restart",
				c.Namespace, c.Name, tr.State.MinReplicasRemaining, g.replicas, tr.State.Name)
		}
	}
	if len(st.Cluster.Logs) == 0 {
		return ops.Preconditionf("FoundationDB %s/%s reports no log servers; refusing to restart", c.Namespace, c.Name)
	}
	for _, l := range st.Cluster.Logs {
		if l.LogReplicationFactor != 0 && l.LogFaultTolerance+1 != l.LogReplicationFactor {
			return ops.Preconditionf("FoundationDB %s/%s log fault tolerance is %d, below replication %d - 1; refusing to restart",
				c.Namespace, c.Name, l.LogFaultTolerance, l.LogReplicationFactor)
		}
		if l.RemoteLogReplicationFactor != 0 && l.RemoteLogFaultTolerance+1 != l.RemoteLogReplicationFactor {
			return ops.Preconditionf("FoundationDB %s/%s remote log fault tolerance is %d, below replication %d - 1; refusing to restart",
				c.Namespace, c.Name, l.RemoteLogFaultTolerance, l.RemoteLogReplicationFactor)
		}
		if l.SatelliteLogReplicationFactor != 0 && l.SatelliteLogFaultTolerance+1 != l.SatelliteLogReplicationFactor {
			return ops.Preconditionf("FoundationDB %s/%s satellite log fault tolerance is %d, below replication %d - 1; refusing to restart",
				c.Namespace, c.Name, l.SatelliteLogFaultTolerance, l.SatelliteLogReplicationFactor)
		}
	}
	if !st.Client.Coordinators.QuorumReachable {
		return ops.Preconditionf("FoundationDB %s/%s: the coordinators' quorum is not reachable; refusing to restart", c.Namespace, c.Name)
	}
	for _, co := range st.Client.Coordinators.Coordinators {
		if !co.Reachable {
			return ops.Preconditionf("coordinator %s of %s/%s is unreachable; refusing to restart", co.Address, c.Namespace, c.Name)
		}
	}
	return nil
}

// checkCR refuses a FoundationDBCluster the operator has not reconciled: it may be changing the
// cluster (a restart would race it), or be stuck on something a restart does not fix; the
// refusal names what the resource says it waits for.
func (g *gate) checkCR(ctx context.Context) error {
	u := Resource(g.c)
	if u == nil {
		return nil // a StatefulSet of FoundationDB's sample: no operator to race
	}
	if dyn := g.e.deps.Dynamic; dyn != nil {
		fresh, err := dyn.Resource(ClusterGVR).Namespace(g.c.Namespace).Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading FoundationDBCluster %s/%s: %w", g.c.Namespace, u.GetName(), err)
		}
		u = fresh
	}
	s := ReadCR(u)
	if p := ReadPause(u); p.Paused {
		// The operator reconciles nothing while paused: say so, and how to end it.
		return ops.Preconditionf("FoundationDBCluster %s/%s: %s; refusing to restart; resume it with: %s",
			g.c.Namespace, u.GetName(), p.Describe(time.Now()), p.ResumeCommand(g.c.Namespace, u.GetName()))
	}
	if s.Reconciled < s.Generation {
		return ops.Preconditionf("FoundationDBCluster %s/%s is not reconciled (generation %d, reconciled %d): %s; refusing to restart",
			g.c.Namespace, u.GetName(), s.Generation, s.Reconciled, s.NotReconciledReason())
	}
	if s.NeedsCoordinatorChange != 0 && s.NeedsCoordinatorChange >= s.Generation {
		// The operator is about to change the coordinators (a recovery of its own), as soon as
		// its pacing allows: the last recovery 2 minutes old with a coordinator missing, 5 with
		// one undesired, by default.
		return ops.Preconditionf("FoundationDBCluster %s/%s has a coordinator change pending (status.generations.needsCoordinatorChange): "+
			"the operator changes them once the last recovery is old enough (2 min with a coordinator missing, 5 min otherwise, by default); refusing to restart",
			g.c.Namespace, u.GetName())
	}
	return nil
}

// Preflight runs the gate before the lock is taken (and in --dry-run): a refusal writes
// nothing. A resumed run may find its own maintenance zone still set.
func (g *gate) Preflight(ctx context.Context, c *ops.Cluster, st ops.PreflightState) error {
	if g.lock != nil {
		// Another holder of the operator's lock key refuses the run here, with nothing written.
		if err := g.lock.Check(ctx); err != nil {
			return err
		}
	}
	if step := bouncedUnfinished(st); step != "" {
		// The interrupted run of this request bounced a batch whose step is not done: its
		// processes (coordinators among them) may still be coming back and the recovery its
		// bounce started still running. That is this run's own work: the step waits for the
		// batch (bounded by its timeout, reported as what it waits for) instead of the gate
		// refusing it. Only a zone someone else set refuses here.
		s, _, err := g.e.StatusFrom(ctx, g.e.cli(), c, nil)
		if err != nil {
			return nil // the step reads status json again and waits for it
		}
		if z := s.Cluster.MaintenanceZone; z != "" && z != st.Data[keyMaintenance] {
			return foreignZone(s)
		}
		return nil
	}
	return g.check(ctx, nil, nil, st.Data[keyMaintenance])
}

// bouncedUnfinished is the ID of a step whose batch an interrupted run of this request bounced
// (its kill journaled) and did not finish, or "".
func bouncedUnfinished(st ops.PreflightState) string {
	for k, v := range st.Data {
		if id, ok := strings.CutPrefix(k, keyKilled); ok && v != "" && (st.Done == nil || !st.Done(id)) {
			return id
		}
	}
	return ""
}

// Before runs before each pod of a --method pod batch is deleted: the gate and maintenance
// mode for the batch (on its first pod), and the coordinator rule.
func (g *gate) Before(ctx context.Context, sc *ops.StepContext, p ops.Pod) error {
	if sc.Step.Pods[0] != p.Name {
		return nil
	}
	skip := func(q ops.Pod) bool { return slices.Contains(sc.Step.Pods, q.Name) }
	cli := g.e.cli()
	var st *Status
	var via string
	err := g.waitOutForeignZone(ctx, sc, func() error {
		var err error
		if st, via, err = g.e.StatusFrom(ctx, cli, g.c, skip); err != nil {
			return ops.Preconditionf("cannot read the status of %s/%s: %v", g.c.Namespace, g.c.Name, err)
		}
		if err := g.checkStatus(st, sc.Get(keyMaintenance)); err != nil {
			return err
		}
		return g.checkCR(ctx)
	})
	if err != nil {
		return err
	}
	var pods []ops.Pod
	for _, name := range sc.Step.Pods {
		if _, q := g.c.Pod(name); q != nil {
			pods = append(pods, *q)
		}
	}
	b := g.batch(st, pods)
	// A coordinator's pod goes only while a majority of the coordinators runs elsewhere.
	if n := len(st.Client.Coordinators.Coordinators); b.coords > 0 && n-b.coords <= n/2 {
		return ops.Preconditionf("the batch holds %d of %d coordinators; deleting its pods would leave no majority running", b.coords, n)
	}
	if err := sc.Set(ctx, keyKilled+sc.Step.ID, strconv.FormatInt(g.e.deps.Now().UnixNano(), 10)); err != nil {
		return err
	}
	return g.maintenanceOn(ctx, sc, cli, via, st, b)
}

// takeLock takes (or extends) the operator's lock key before a batch's global actions, as the
// operator does before each of its own (docs/procedures.md).
func (g *gate) takeLock(ctx context.Context) error {
	if g.lock == nil {
		return nil
	}
	return g.lock.Take(ctx)
}

// After runs once each new pod is Ready; on the batch's last pod it waits for the processes
// and the database, and ends the maintenance.
func (g *gate) After(ctx context.Context, sc *ops.StepContext, p ops.Pod) error {
	if sc.Step.Pods[len(sc.Step.Pods)-1] != p.Name {
		return nil
	}
	var pods []ops.Pod
	for _, name := range sc.Step.Pods {
		if _, q := g.c.Pod(name); q != nil {
			pods = append(pods, *q)
		}
	}
	skip := func(q ops.Pod) bool { return slices.Contains(sc.Step.Pods, q.Name) }
	var since time.Time
	if v, err := strconv.ParseInt(sc.Get(keyKilled+sc.Step.ID), 10, 64); err == nil {
		since = time.Unix(0, v)
	}
	return g.afterBatch(ctx, sc, pods, since, skip)
}
