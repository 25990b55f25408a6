package fdbsim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Process classes the model recruits from (mr-status-json-schemas.rst.inc, class_type).
const (
	ClassStorage   = "storage"
	ClassLog       = "log"
	ClassStateless = "stateless"
	// ClassClusterController is the class the operator's sample cluster runs one process of
	// (processCounts.cluster_controller): the best fit for the cluster controller and the
	// worst for the other transaction roles (fdbrpc/Locality.cpp machineClassFitness; on main
	// fdbserver/core/ProcessClassRecruitment.cpp).
	ClassClusterController = "cluster_controller"
)

// recoveryStates are the recovery_state names in the order a recovery passes them
// (mr-status-json-schemas.rst.inc, recovery_state.name; fdbserver/RecoveryState.h orders them).
var recoveryStates = []string{
	"reading_coordinated_state",
	"locking_coordinated_state",
	"locking_old_transaction_servers",
	"reading_transaction_system_state",
	"recruiting_transaction_servers",
	"initializing_transaction_servers",
	"recovery_transaction",
	"writing_coordinated_state",
	"accepting_commits",
	"all_logs_recruited",
	"storage_recovered",
	"fully_recovered",
}

// acceptingCommits is the first state in which the database accepts commits again.
var acceptingCommits = slices.Index(recoveryStates, "accepting_commits")

// allLogsRecruited is where a recovery waits while the old generation's logs are still needed
// (HoldRecovery).
var allLogsRecruited = slices.Index(recoveryStates, "all_logs_recruited")

// ProcessSpec describes one fdbserver process of the model.
type ProcessSpec struct {
	// ID is the process's locality_instance_id (the operator's process group ID).
	ID string
	// Address is ip:port, with ":tls" when the process listens with TLS.
	Address string
	Class   string
	// Zone is the locality_zoneid, the fault domain.
	Zone string
	// Machine is the locality_machineid; it defaults to Zone.
	Machine string
}

// Config tunes the model. Zero durations take the defaults below.
type Config struct {
	// RedundancyMode is single, double (default) or triple.
	RedundancyMode string
	// Logs, CommitProxies, GrvProxies and Resolvers are the desired counts (status
	// configuration); defaults 3, 2, 1, 1.
	Logs, CommitProxies, GrvProxies, Resolvers int
	// RestartDelay is how long a killed process stays away (fdbmonitor restarting it).
	RestartDelay time.Duration
	// RecoveryStep is how long each recovery state lasts.
	RecoveryStep time.Duration
	// KillFlush is fdbcli's wait after sending kills (KillCommand.actor.cpp: delay(3.0)).
	KillFlush time.Duration
	// DataMove is how long the data of an excluded storage process takes to move away.
	DataMove time.Duration
	// StoredBytes is what each storage process holds (0: 1 GiB); it drains at StoredBytes per
	// DataMove once the process is excluded.
	StoredBytes int64
	// Description and ID make the connection string description:ID@coordinators.
	Description, ID string
	// DNS is the initial DNS table for hostname coordinators (dns.go; SetDNS replaces it).
	DNS map[string]string
	// Version is the fdbserver and fdbcli version (default Version). Below 7.3, `kill <ADDRESS>`
	// returns without waiting for its requests to leave (release-7.1 fdbcli/KillCommand.actor.cpp
	// has no delay(3.0)): the requests are delivered only if the session goes on afterwards.
	Version string
}

func (c *Config) defaults() {
	if c.RedundancyMode == "" {
		c.RedundancyMode = "double"
	}
	if c.Logs == 0 {
		c.Logs = 3
	}
	if c.CommitProxies == 0 {
		c.CommitProxies = 2
	}
	if c.GrvProxies == 0 {
		c.GrvProxies = 1
	}
	if c.Resolvers == 0 {
		c.Resolvers = 1
	}
	if c.RestartDelay == 0 {
		c.RestartDelay = 2 * time.Second
	}
	if c.RecoveryStep == 0 {
		c.RecoveryStep = 200 * time.Millisecond
	}
	if c.KillFlush == 0 {
		c.KillFlush = 3 * time.Second
	}
	if c.Version == "" {
		c.Version = Version
	}
	if c.DataMove == 0 {
		c.DataMove = 5 * time.Second
	}
	if c.Description == "" {
		c.Description = "sim"
	}
	if c.ID == "" {
		c.ID = "simcluster"
	}
}

// replicas is the storage team size and the log replication factor of a redundancy mode
// (fdbclient/DatabaseConfiguration.cpp, setDefaultReplicationPolicy).
func replicas(mode string) int {
	switch mode {
	case "single":
		return 1
	case "triple", "three_data_hall":
		return 3
	}
	return 2
}

type process struct {
	spec ProcessSpec
	// processID is the hex key of the process in status json; it lives in the data directory
	// and so survives kills.
	processID string
	started   time.Time
	// up is false while the process is killed or its pod is gone.
	up bool
	// backAt is when a killed process returns (zero when it is away until Start).
	backAt time.Time
	// removedData: an excluded storage process whose data has moved away holds no storage role.
	removedData bool
	// failedUnprotected: a storage process data distribution saw fail outside a maintenance
	// zone while it is away; movingUntil is when the relocations that failure queued end.
	failedUnprotected bool
	movingUntil       time.Time
	// drainFrom is when the data of an excluded storage process started to move away (zero
	// while it cannot: too few fault domains left to build a team, see teamsBuildable);
	// stalled records that it could not, so that the move starts when it becomes possible.
	drainFrom time.Time
	stalled   bool
}

type recovery struct {
	start time.Time
	// oldGeneration: the recovery replaces a running generation (active_generations 2 until it
	// is fully recovered).
	oldGeneration bool
	// stalled: recruitment found no process for a required role; it restarts when one
	// returns.
	stalled bool
	// held: the recovery started under HoldRecovery and waits at all_logs_recruited.
	held bool
}

type exclusion struct {
	key    string // as written: ip, ip:port or locality_<name>:<value>
	failed bool
	at     time.Time
}

// Cluster is the model of one FoundationDB cluster. All methods are safe for concurrent use.
type Cluster struct {
	mu    sync.Mutex
	clock Clock
	cfg   Config

	procs []*process // in the order given
	// coordinators are the entries of the connection string: addresses or hostnames (dns.go).
	coordinators []string
	// dns is the DNS table hostname entries resolve through (SetDNS).
	dns map[string]string

	generation int
	// recoveries counts the recoveries started since New (Recoveries).
	recoveries int
	rec        recovery
	// role holders chosen at the start of the current recovery (process IDs).
	cc, master string
	txnRoles   map[string][]string // process ID -> roles other than storage and coordinator

	maintZone  string
	maintUntil time.Time

	exclusions []exclusion
	// kv holds the keys written with set (kv.go): the operator's maintenance list lives here.
	kv map[string][]byte
	// versions are the commit versions of the keys' last writes (txn.go), for conflicts.
	versions kvVersions
	// unprotected records every storage failure data distribution saw outside a maintenance
	// zone (DegradedStorage).
	unprotected []string
	// log is every command the shell ran, with its result, in order.
	log []LogEntry
	// load is what the clients' workload does to data movement and QoS (SetLoad).
	load Load
	// holdRestarts keeps killed processes away (HoldRestarts).
	holdRestarts bool
	// holdRecovery keeps recoveries that start from reaching fully_recovered (HoldRecovery).
	holdRecovery bool
}

// HoldRecovery makes the recoveries that start while hold is set wait at all_logs_recruited,
// accepting commits with two active generations, until released: the old generation's logs
// are still needed because storage servers have not pulled their data yet. FoundationDB
// writes fully_recovered only once the core state has no old log data left and every log set
// is recruited (fdbserver/ClusterRecovery.actor.cpp, trackTlogRecovery: finalUpdate is
// !newState.oldTLogData.size() && allLogs). Released, a held recovery goes on at once.
func (c *Cluster) HoldRecovery(hold bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holdRecovery = hold
	if !hold {
		c.rec.held = false
	}
}

// Recoveries is how many recoveries started since New: one each time the cluster controller
// or master saw a transaction-system process of the current generation fail (a kill of several
// at once in one rebootWorker round is one), or a process left by exclusion
// (fdbserver/ClusterController.actor.cpp, fdbserver/ClusterRecovery.actor.cpp). A recovery that
// stalled for want of a quorum or a log and starts again counts once.
func (c *Cluster) Recoveries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recoveries
}

// HoldRestarts keeps killed processes away while hold is set, as a slow fdbmonitor or a
// pod under pressure does; released, those due back return at once.
func (c *Cluster) HoldRestarts(hold bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holdRestarts = hold
	if !hold {
		now := c.clock.Now()
		for _, p := range c.procs {
			if !p.up && !p.backAt.IsZero() && p.backAt.Before(now) {
				p.backAt = now
			}
		}
		c.advance(now)
	}
}

// Load is what a workload does to the cluster's status that the model cannot derive from its
// processes: a busy cluster's data distribution keeps relocating shards (moving_data never
// reaches 0), and storage servers and logs fall behind under write load (qos lags and queues,
// fdbserver/Status.actor.cpp workloadStatusFetcher reads them from the ratekeeper and the
// storage servers).
type Load struct {
	// InFlightBytes is data distribution's background relocation (rebalancing, shard splits).
	InFlightBytes int64
	// DataLag and DurabilityLag are the worst storage server's lags.
	DataLag, DurabilityLag time.Duration
	// LogQueueBytes and StorageQueueBytes are the worst queues.
	LogQueueBytes, StorageQueueBytes int64
}

// SetLoad sets the workload's effect on status json (zero: an idle cluster).
func (c *Cluster) SetLoad(l Load) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load = l
}

// LogEntry is one command an fdbcli session ran against the model.
type LogEntry struct {
	Time time.Time
	// Client is who ran it: the pod of the fdbcli shim, "operator", or "" for a direct Run.
	Client  string
	Command string
	OK      bool
}

// New builds a running, fully recovered cluster. Coordinators are addresses of processes.
func New(clock Clock, cfg Config, specs []ProcessSpec, coordinators []string) (*Cluster, error) {
	cfg.defaults()
	c := &Cluster{clock: clock, cfg: cfg, txnRoles: map[string][]string{}}
	seen := map[string]bool{}
	for _, s := range specs {
		if s.ID == "" || s.Zone == "" {
			return nil, fmt.Errorf("process %q: ID and zone are required", s.ID)
		}
		if !validAddress(s.Address) {
			return nil, fmt.Errorf("process %s: invalid address %q", s.ID, s.Address)
		}
		if seen[s.ID] || seen[s.Address] {
			return nil, fmt.Errorf("process %s: duplicate ID or address", s.ID)
		}
		seen[s.ID], seen[s.Address] = true, true
		switch s.Class {
		case ClassStorage, ClassLog, ClassStateless, ClassClusterController:
		default:
			return nil, fmt.Errorf("process %s: unsupported class %q", s.ID, s.Class)
		}
		if s.Machine == "" {
			s.Machine = s.Zone
		}
		sum := sha256.Sum256([]byte(s.ID))
		c.procs = append(c.procs, &process{spec: s, processID: hex.EncodeToString(sum[:16]), started: clock.Now(), up: true})
	}
	c.dns = cfg.DNS
	for _, a := range coordinators {
		if c.coordinatorProcess(a) == nil {
			return nil, fmt.Errorf("coordinator %s is not a process of the cluster", a)
		}
	}
	if len(coordinators) == 0 {
		return nil, fmt.Errorf("no coordinators")
	}
	c.coordinators = slices.Clone(coordinators)
	now := clock.Now()
	c.generation = 1
	c.startRecovery(now, false)
	// A new model starts fully recovered.
	c.rec.start = now.Add(-time.Duration(len(recoveryStates)) * c.cfg.RecoveryStep)
	return c, nil
}

// validAddress accepts ip:port and ip:port:tls (flow/network.cpp, NetworkAddress::parse).
func validAddress(a string) bool {
	a = strings.TrimSuffix(a, ":tls")
	host, port, err := net.SplitHostPort(a)
	if err != nil || net.ParseIP(host) == nil {
		return false
	}
	p, err := strconv.Atoi(port)
	return err == nil && p > 0 && p < 65536
}

func (c *Cluster) byAddress(a string) *process {
	for _, p := range c.procs {
		if p.spec.Address == a {
			return p
		}
	}
	return nil
}

func (c *Cluster) byID(id string) *process {
	for _, p := range c.procs {
		if p.spec.ID == id {
			return p
		}
	}
	return nil
}

// advance brings the model to now: killed processes whose delay is over return, an expired
// maintenance zone disappears, data of excluded storage processes finishes moving.
func (c *Cluster) advance(now time.Time) {
	for _, p := range c.procs {
		if !p.up && !p.backAt.IsZero() && !now.Before(p.backAt) && !c.holdRestarts {
			c.bringUp(p, p.backAt)
		}
	}
	if c.maintZone != "" && !now.Before(c.maintUntil) {
		c.setMaintenance("", time.Time{})
	}
	buildable := c.teamsBuildable()
	for _, p := range c.procs {
		if p.spec.Class != ClassStorage || p.removedData {
			continue
		}
		e, ok := c.excludedBy(p)
		switch {
		case !ok:
			p.drainFrom, p.stalled = time.Time{}, false
			continue
		case !buildable:
			// No team of the mode's size in distinct zones can take the data: it stays.
			p.drainFrom, p.stalled = time.Time{}, true
			continue
		case p.drainFrom.IsZero() && p.stalled:
			p.drainFrom, p.stalled = now, false
		case p.drainFrom.IsZero():
			p.drainFrom = e.at
		}
		if !now.Before(p.drainFrom.Add(c.cfg.DataMove)) {
			p.removedData = true
		}
	}
}

// teamsBuildable: data distribution can build storage teams, which need the mode's replicas in
// distinct zoneids among the healthy, not excluded storage servers
// (fdbserver/datadistributor/DDTeamCollection.cpp buildTeams: with uniqueMachines, the
// distinct zoneIds of servers that are not unhealthy, below storageTeamSize it builds no team
// and traces BuildTeamsLastBuildTeamsFailed "Do not have enough unique machines"; an excluded
// server is undesired, so unhealthy). Without a team to move to, an excluded server's data
// stays where it is and its exclusion never completes.
func (c *Cluster) teamsBuildable() bool {
	return len(c.healthyStorageZones()) >= replicas(c.cfg.RedundancyMode)
}

// healthyStorageZones are the distinct zoneids of storage servers that are up (or shielded by
// the maintenance zone) and not excluded.
func (c *Cluster) healthyStorageZones() map[string]bool {
	zones := map[string]bool{}
	for _, p := range c.procs {
		if p.spec.Class != ClassStorage || p.removedData || (!p.up && p.spec.Zone != c.maintZone) || c.isExcluded(p) {
			continue
		}
		zones[p.spec.Zone] = true
	}
	return zones
}

func (c *Cluster) bringUp(p *process, at time.Time) {
	p.up, p.backAt, p.started = true, time.Time{}, at
	// Data distribution marked the server failed and queued relocations of its shards
	// (fdbserver/DDTeamCollection.actor.cpp storageServerFailureTracker -> teamTracker ->
	// RelocateShard); they run on after the server returns, so moving_data.in_flight_bytes
	// stays above 0 for a while after a restart outside maintenance.
	if p.failedUnprotected {
		p.failedUnprotected = false
		p.movingUntil = at.Add(c.cfg.DataMove)
	}
	// A recovery that found no quorum, no cluster controller or no log starts again once a
	// process returns.
	if c.rec.stalled {
		c.startRecovery(at, true)
	}
}

// quorum: a majority of the coordinators' processes run.
func (c *Cluster) quorum() bool {
	n := 0
	for _, a := range c.coordinators {
		if p := c.coordinatorProcess(a); p != nil && p.up {
			n++
		}
	}
	return n > len(c.coordinators)/2
}

// startRecovery recruits a new transaction system from the processes up at `at`
// (fdbserver/ClusterRecovery.actor.cpp: the cluster controller recruits the master, which
// recruits logs, proxies and resolvers; stateless processes take the stateless roles).
func (c *Cluster) startRecovery(at time.Time, oldGeneration bool) {
	if oldGeneration && !c.rec.stalled {
		c.recoveries++ // a stalled recovery starting again is the same recovery
	}
	c.rec = recovery{start: at, oldGeneration: oldGeneration, held: c.holdRecovery && oldGeneration}
	c.txnRoles = map[string][]string{}
	if !c.quorum() {
		c.rec.stalled = true
		c.cc, c.master = "", ""
		return
	}
	var stateless, logs, storage, controllers []*process
	for _, p := range c.procs {
		if !p.up {
			continue
		}
		if _, ex := c.excludedBy(p); ex {
			continue
		}
		switch p.spec.Class {
		case ClassStateless:
			stateless = append(stateless, p)
		case ClassLog:
			logs = append(logs, p)
		case ClassStorage:
			storage = append(storage, p)
		case ClassClusterController:
			controllers = append(controllers, p)
		}
	}
	// A storage process is the worst fit for the transaction roles, yet still a fit
	// (fdbclient/ProcessClass.cpp machineClassFitness: WorstFit, not NeverAssign): a cluster of
	// storage processes only, as FoundationDB's Kubernetes sample runs, recruits them there.
	if len(stateless) == 0 {
		stateless = storage
	}
	if len(logs) == 0 {
		logs = storage
	}
	// An excluded process has the worst fitness for every role, the cluster controller's too
	// (fdbclient/ProcessClass: ExcludeFit), so a recovery elects the controller elsewhere.
	if ccp := c.byID(c.cc); ccp == nil || !ccp.up || c.isExcluded(ccp) {
		c.cc = ""
		if len(controllers) > 0 {
			c.cc = controllers[0].spec.ID // BestFit
		} else if len(stateless) > 0 {
			c.cc = stateless[0].spec.ID
		}
	}
	if c.cc == "" || len(logs) == 0 {
		c.rec.stalled = true
		c.master = ""
		return
	}
	c.generation++
	c.txnRoles[c.cc] = append(c.txnRoles[c.cc], "cluster_controller")
	// The master goes to a stateless process other than the cluster controller when there is one.
	others := []*process{}
	for _, p := range stateless {
		if p.spec.ID != c.cc {
			others = append(others, p)
		}
	}
	if len(others) == 0 {
		others = stateless
	}
	c.master = others[0].spec.ID
	c.txnRoles[c.master] = append(c.txnRoles[c.master], "master")
	i := 1
	next := func() string {
		p := others[i%len(others)]
		i++
		return p.spec.ID
	}
	for range c.cfg.CommitProxies {
		id := next()
		c.txnRoles[id] = append(c.txnRoles[id], "commit_proxy")
	}
	for range c.cfg.GrvProxies {
		id := next()
		c.txnRoles[id] = append(c.txnRoles[id], "grv_proxy")
	}
	for range c.cfg.Resolvers {
		id := next()
		c.txnRoles[id] = append(c.txnRoles[id], "resolver")
	}
	for _, r := range []string{"ratekeeper", "data_distributor"} {
		id := next()
		c.txnRoles[id] = append(c.txnRoles[id], r)
	}
	for j, p := range logs {
		if j >= c.cfg.Logs {
			break
		}
		c.txnRoles[p.spec.ID] = append(c.txnRoles[p.spec.ID], "log")
	}
}

// recoveryIndex is the index of the current recovery state at now.
func (c *Cluster) recoveryIndex(now time.Time) int {
	if c.rec.stalled {
		return 0
	}
	i := int(now.Sub(c.rec.start) / c.cfg.RecoveryStep)
	if c.rec.held {
		i = min(i, allLogsRecruited)
	}
	return min(max(i, 0), len(recoveryStates)-1)
}

// available: the coordinators have a quorum and the recovery accepts commits.
func (c *Cluster) available(now time.Time) bool {
	return c.quorum() && c.cc != "" && !c.rec.stalled && c.recoveryIndex(now) >= acceptingCommits
}

// ccReachable: a client finds a cluster controller (coordinators' quorum and a running CC).
func (c *Cluster) ccReachable() bool {
	if !c.quorum() || c.cc == "" {
		return false
	}
	p := c.byID(c.cc)
	return p != nil && p.up
}

// down takes p away at `at`; back is when it returns (zero: until Start).
func (c *Cluster) down(p *process, at, back time.Time) {
	wasUp := p.up
	c.lose(p, back)
	if !wasUp {
		return
	}
	// Losing the cluster controller, the master, a proxy, a resolver or a log starts a new
	// recovery (fdbserver/ClusterController.actor.cpp, fdbserver/ClusterRecovery.actor.cpp).
	if len(c.txnRoles[p.spec.ID]) > 0 || !c.quorum() {
		c.startRecovery(at, true)
	}
}

// lose takes p away until back (zero: until Start). A storage server failing outside the
// maintenance zone ends the maintenance (MaintenanceCommand.actor.cpp help: "or after a
// storage server with a different ZONEID fails").
func (c *Cluster) lose(p *process, back time.Time) {
	if p.up && p.spec.Class == ClassStorage && !p.removedData {
		if c.maintZone != "" && p.spec.Zone != c.maintZone {
			c.setMaintenance("", time.Time{})
		}
		if p.spec.Zone != c.maintZone {
			p.failedUnprotected = true
			c.unprotected = append(c.unprotected, fmt.Sprintf("%s: storage process %s (zone %s) failed outside a maintenance zone",
				c.clock.Now().Format(time.RFC3339Nano), p.spec.ID, p.spec.Zone))
		}
	}
	p.up, p.backAt = false, back
}

// setMaintenance changes the maintenance zone. Storage processes still down in a zone whose
// maintenance ends become failures data distribution acts on (DDTeamCollection: the healthy
// zone no longer shields them), recorded as such.
func (c *Cluster) setMaintenance(zone string, until time.Time) {
	if old := c.maintZone; old != "" && old != zone {
		for _, p := range c.procs {
			if !p.up && p.spec.Class == ClassStorage && !p.removedData && p.spec.Zone == old {
				p.failedUnprotected = true
				c.unprotected = append(c.unprotected, fmt.Sprintf("%s: maintenance of zone %s ended while storage process %s was down",
					c.clock.Now().Format(time.RFC3339Nano), old, p.spec.ID))
			}
		}
	}
	c.maintZone, c.maintUntil = zone, until
}

// DegradedStorage lists every storage failure that happened outside a maintenance zone, or
// that a maintenance zone stopped covering while the process was still down: the moments data
// distribution started re-replicating. A rolling restart by zone must leave it empty.
func (c *Cluster) DegradedStorage() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.unprotected)
}

// kill reboots the processes at the addresses (rebootWorker): each goes away now and comes back
// after RestartDelay with a new uptime. Addresses of processes that are already away are
// ignored, as a reboot request to a dead address is.
func (c *Cluster) kill(addrs []string) {
	now := c.clock.Now()
	c.advance(now)
	var victims []*process
	for _, a := range addrs {
		// rebootWorker is given fdbcli's kill-list keys: addresses without ":tls"
		// (fdbcli/Util.actor.cpp addInterfacesFromKVs).
		for _, p := range c.procs {
			if strings.TrimSuffix(p.spec.Address, ":tls") == a && p.up {
				victims = append(victims, p)
			}
		}
	}
	// All requests are sent at once (KillCommand.actor.cpp joins the addresses into one
	// rebootWorker call): recovery starts once, after all are down.
	needRecovery := false
	for _, p := range victims {
		if len(c.txnRoles[p.spec.ID]) > 0 {
			needRecovery = true
		}
		c.lose(p, now.Add(c.cfg.RestartDelay))
	}
	if needRecovery || (len(victims) > 0 && !c.quorum()) {
		c.startRecovery(now, true)
	}
}

// Stop takes a process away until Start: its pod was deleted.
func (c *Cluster) Stop(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.advance(now)
	p := c.byID(id)
	if p == nil {
		return fmt.Errorf("no process %s", id)
	}
	c.down(p, now, time.Time{})
	return nil
}

// Start brings a stopped process back, at address (its new pod's IP may differ; empty keeps
// the old address). Its uptime starts now.
func (c *Cluster) Start(id, address string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.advance(now)
	p := c.byID(id)
	if p == nil {
		return fmt.Errorf("no process %s", id)
	}
	if address != "" && address != p.spec.Address {
		if !validAddress(address) {
			return fmt.Errorf("invalid address %q", address)
		}
		if q := c.byAddress(address); q != nil {
			if q.up {
				return fmt.Errorf("address %s is in use by %s", address, q.spec.ID)
			}
			// A stopped process listens nowhere: its pod's IP went to a new pod (IPs are
			// reused). It gets an address again when it starts.
			q.spec.Address = ""
		}
		p.spec.Address = address
	}
	if !p.up {
		c.bringUp(p, now)
	}
	return nil
}

// Process is what tests and the test bed read of a process.
type Process struct {
	ID, Address, Class, Zone string
	Up                       bool
	Started                  time.Time
	Roles                    []string
}

// Processes lists the processes at the model's now.
func (c *Cluster) Processes() []Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.advance(now)
	var out []Process
	for _, p := range c.procs {
		out = append(out, Process{ID: p.spec.ID, Address: p.spec.Address, Class: p.spec.Class, Zone: p.spec.Zone,
			Up: p.up, Started: p.started, Roles: c.roles(p)})
	}
	return out
}

// Log returns the commands the shell ran so far.
func (c *Cluster) Log() []LogEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// MaintenanceZone is the zone under maintenance and its end ("" when none).
func (c *Cluster) MaintenanceZone() (string, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(c.clock.Now())
	return c.maintZone, c.maintUntil
}

// Coordinators are the addresses of the connection string.
func (c *Cluster) Coordinators() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.coordinators)
}

// ConnectionString is description:ID@coordinators, the content of the cluster file.
func (c *Cluster) ConnectionString() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connectionString()
}

func (c *Cluster) connectionString() string {
	return c.cfg.Description + ":" + c.cfg.ID + "@" + strings.Join(c.coordinators, ",")
}

// roles a process holds now (status json processes.roles).
func (c *Cluster) roles(p *process) []string {
	if !p.up {
		return nil
	}
	var r []string
	if p.spec.Class == ClassStorage && !p.removedData {
		r = append(r, "storage")
	}
	r = append(r, c.txnRoles[p.spec.ID]...)
	if c.isCoordinator(p.spec.Address) {
		r = append(r, "coordinator")
	}
	return r
}

// excludedBy returns the exclusion that matches p: its IP, its IP:port, or a locality
// (fdbclient/ManagementAPI: addressExcluded; locality_<name>:<value> matching the process's
// locality).
func (c *Cluster) excludedBy(p *process) (exclusion, bool) {
	addr := strings.TrimSuffix(p.spec.Address, ":tls")
	ip, _, _ := net.SplitHostPort(addr)
	for _, e := range c.exclusions {
		if e.key == addr || e.key == ip {
			return e, true
		}
		if name, val, ok := strings.Cut(strings.TrimPrefix(e.key, "locality_"), ":"); ok && strings.HasPrefix(e.key, "locality_") {
			if v, has := c.locality(p)[name]; has && v == val {
				return e, true
			}
		}
	}
	return exclusion{}, false
}

func (c *Cluster) locality(p *process) map[string]string {
	return map[string]string{
		"instance_id": p.spec.ID,
		"zoneid":      p.spec.Zone,
		"machineid":   p.spec.Machine,
		"processid":   p.processID,
	}
}

// storageState computes data.state the way data distribution reports it: a storage server
// that is down makes its teams lose a replica, except inside the maintenance zone, whose
// failures data distribution ignores (fdbserver/DDTeamCollection.actor.cpp,
// storageServerFailureTracker: servers in the healthy zone are not marked failed). The names
// and replica counts are fdbserver/clustercontroller/Status.cpp dataStatusFetcher's mapping of
// the highest team priority (DDTeamCollection teamTracker): a team with 2 or 1 servers left is
// PRIORITY_TEAM_2_LEFT / _1_LEFT, "healing" with min_replicas_remaining 2 / 1; a team holding
// an excluded (wrong configuration) server is PRIORITY_TEAM_UNHEALTHY, "healing" ("Restoring
// replication factor") with min_replicas_remaining the team size.
//
// Teams span distinct zoneids, so the replicas left are also bounded by the zoneids the data
// is in: once the servers of a zone are gone for good (removed), data distribution cannot
// re-replicate into a zone already holding a replica, and with fewer zoneids than the team size
// the data stays short of replicas ("healing", min_replicas_remaining the zoneids holding it).
// An exclusion that cannot drain (teamsBuildable false) leaves its teams unhealthy: "healing",
// not healthy, min_replicas_remaining the team size while the excluded server runs.
func (c *Cluster) storageState() (name string, healthy bool, minReplicas int, downZones int) {
	r := replicas(c.cfg.RedundancyMode)
	zones := map[string]bool{}
	dataZones := map[string]bool{}
	removing, stuck := false, false
	buildable := c.teamsBuildable()
	for _, p := range c.procs {
		if p.spec.Class != ClassStorage || p.removedData {
			continue
		}
		if _, ex := c.excludedBy(p); ex {
			removing = true
			stuck = stuck || !buildable
		}
		if !p.up && p.spec.Zone != c.maintZone {
			zones[p.spec.Zone] = true
		} else {
			dataZones[p.spec.Zone] = true
		}
	}
	downZones = len(zones)
	minReplicas = max(min(r-downZones, len(dataZones)), 0)
	switch {
	case minReplicas == 0:
		return "missing_data", false, 0, downZones
	case minReplicas < r:
		return "healing", false, minReplicas, downZones
	case stuck:
		return "healing", false, minReplicas, downZones
	case removing:
		return "healthy_removing_server", true, minReplicas, 0
	default:
		return "healthy", true, minReplicas, 0
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
