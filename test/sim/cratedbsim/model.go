package cratedbsim

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Settings keys the model interprets; the other runtime settings (settings.go) are stored and
// echoed only.
const (
	settingAllocationEnable  = "cluster.routing.allocation.enable"
	settingAllocationExclude = "cluster.routing.allocation.exclude._name"
	settingRebalanceEnable   = "cluster.routing.rebalance.enable"
)

// Health severities as in sys.health.
const (
	severityGreen  = 1
	severityYellow = 2
	severityRed    = 3
)

// shardKey names one shard of a table.
type shardKey struct {
	table string
	id    int
}

// shardCopy is one copy of a shard assigned to a node.
type shardCopy struct {
	node    string
	primary bool
	started bool
	// relocatingFrom is set on a copy being built to replace the copy on that node.
	relocatingFrom string
	// recovered is how many bytes a recovering copy received so far (recovery.go).
	recovered float64
}

type table struct {
	name     string
	shards   int
	replicas string
	copies   [][]*shardCopy
	// anywhere lets primaries start on any data node: a new table, or one restored from the
	// state file whose data location is unknown.
	anywhere bool
	// partitioned tables hold no shards, their partitions do (partitions.go): a partition has
	// its table's name as parent, its ident and the partition column's value.
	partitioned          bool
	partitionedBy        string
	parent, ident, value string
	// filters are the table's routing.allocation filters: "require._name" -> "a,b".
	filters map[string]string
}

// simNode is the model of one CrateDB node.
type simNode struct {
	name    string
	pod     string
	ordinal int
	master  bool
	data    bool
	// member is false once the node's StatefulSet no longer counts it (scaled down, pod gone).
	member bool
	up     bool
	podUID string
	pvcUID string
	id     string
	// disk holds the shards whose data this node has on its volume (shared with the other
	// names the same pod's volume was started under).
	disk map[shardKey]bool
	// version, settings (its -C arguments), hostname and ip describe the running process.
	version  Version
	settings nodeSettings
	hostname string
	ip       string
	// acked holds sys.node_checks.acknowledged per check id; a restart forgets it.
	acked map[int]bool
	// diskUsed is the share of the node's disk in use, in percent (disk.go).
	diskUsed float64
}

type user struct {
	name      string
	pwHash    string // sha256 hex of the password; empty = no password
	superuser bool
	// privs are the privileges granted or denied to the user (privileges.go).
	privs map[privKey]privEntry
}

// privileged is what user management and SET GLOBAL need: AL on the cluster.
func (u *user) privileged() bool { return u.hasClusterPrivilege("AL") }

func hashPassword(pw string) string {
	sum := sha256.Sum256([]byte(pw))
	return fmt.Sprintf("%x", sum)
}

// model is the simulated cluster. It is not safe for concurrent use; Sim guards it.
type model struct {
	nodes  map[string]*simNode
	tables map[string]*table
	// transient and persistent cluster settings; transient ones win and are lost when the
	// whole cluster restarts.
	transient  map[string]string
	persistent map[string]string
	users      map[string]*user
	license    bool
	master     string // name of the elected master node, "" if none
	// recovered is false until the elected master performed the gateway's state recovery
	// (gateway.go); recoverAt is when a delayed recovery (recover_after_time) runs.
	recovered bool
	recoverAt time.Time
	// ghosts are nodes that stopped but are still listed in sys.nodes (chaos).
	ghosts []ghost
	// voting is the last committed voting configuration: the ids of the master-eligible
	// nodes whose majority elects a master and commits a cluster state (voting.go).
	voting map[string]bool
	// leaving are voting nodes that stopped and that the elected master still lists in
	// sys.nodes until it publishes their departure (voting.go processDepartures).
	leaving []ghost
	// electionErrors is how many statements still fail because of a master election (chaos).
	electionErrors int
	chaos          Chaos
	now            func() time.Time
	// shardsPerTick bounds how many shard copies finish recovering per tick.
	shardsPerTick int
	// shardSize, when positive, replaces shardsPerTick by peer recovery at a finite rate
	// (recovery.go); lastRecovery is when recoveries last advanced.
	shardSize    int64
	lastRecovery time.Time
}

func newModel(shardsPerTick int) *model {
	if shardsPerTick <= 0 {
		shardsPerTick = 2
	}
	return &model{
		nodes:         map[string]*simNode{},
		tables:        map[string]*table{},
		transient:     map[string]string{},
		persistent:    map[string]string{},
		users:         map[string]*user{"crate": {name: "crate", superuser: true}},
		shardsPerTick: shardsPerTick,
		now:           time.Now,
	}
}

func nodeID(name, podUID string) string {
	sum := sha256.Sum256([]byte(name + "/" + podUID))
	return base64.RawURLEncoding.EncodeToString(sum[:])[:22]
}

func (m *model) sortedNodes() []*simNode {
	out := make([]*simNode, 0, len(m.nodes))
	for _, n := range m.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (m *model) sortedTables() []*table {
	out := make([]*table, 0, len(m.tables))
	for _, t := range m.tables {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// upNodes returns the nodes listed in sys.nodes, sorted by name.
func (m *model) upNodes() []*simNode {
	var out []*simNode
	for _, n := range m.sortedNodes() {
		if n.up {
			out = append(out, n)
		}
	}
	return out
}

// setting is the effective value of a cluster setting: transient, else persistent, else the
// default.
func (m *model) setting(key string) string {
	if v, ok := m.transient[key]; ok {
		return v
	}
	if v, ok := m.persistent[key]; ok {
		return v
	}
	return settingDefault(key)
}

func (m *model) excluded(name string) bool {
	for _, x := range strings.Split(m.setting(settingAllocationExclude), ",") {
		if strings.TrimSpace(x) == name {
			return true
		}
	}
	return false
}

func (m *model) eligible(n *simNode) bool { return n.up && n.data && !m.excluded(n.name) }

func (m *model) eligibleCount() int {
	c := 0
	for _, n := range m.nodes {
		if m.eligible(n) {
			c++
		}
	}
	return c
}

// desiredReplicas resolves a valid number_of_replicas ("1", "0-1", "1-all") for the number
// of data nodes that can hold copies, as CrateDB's auto-expansion does.
func desiredReplicas(spec string, dataNodes int) int {
	lo, hi, ok := strings.Cut(spec, "-")
	if !ok {
		n, _ := strconv.Atoi(spec)
		return n
	}
	minR, _ := strconv.Atoi(lo)
	maxR := max(dataNodes-1, 0)
	if hi != "all" {
		h, _ := strconv.Atoi(hi)
		maxR = min(maxR, h)
	}
	return max(minR, min(dataNodes-1, maxR))
}

var replicaRange = regexp.MustCompile(`^\d+-(all|\d+)$`)

// validateReplicas checks number_of_replicas as CrateDB does: a non-negative integer or a
// range "min-max" / "min-all" with min <= max ("all" alone is not valid).
func validateReplicas(spec string) error {
	if n, err := strconv.Atoi(spec); err == nil {
		if n < 0 {
			return errIllegal("Failed to parse value [%s] for setting [number_of_replicas] must be >= 0", spec)
		}
		return nil
	}
	if !replicaRange.MatchString(spec) {
		return errIllegal("The \"number_of_replicas\" range \"%s\" isn't valid", spec)
	}
	lo, hi, _ := strings.Cut(spec, "-")
	if hi != "all" {
		l, _ := strconv.Atoi(lo)
		h, _ := strconv.Atoi(hi)
		if l > h {
			return errIllegal("[index.auto_expand_replicas] minReplicas must be =< maxReplicas but wasn't %d > %d", l, h)
		}
	}
	return nil
}

// setNodeUp changes whether a node is running. A node going down loses its place in the
// routing table (its volume keeps the data).
func (m *model) setNodeUp(n *simNode, up bool) {
	if n.up == up {
		return
	}
	n.up = up
	if !up {
		m.dropCopiesOn(n.name)
		m.nodeLeft(n)
	} else {
		n.acked = map[int]bool{}
		// A node that joins again replaces the instance the master still listed.
		m.ghosts = slices.DeleteFunc(m.ghosts, func(g ghost) bool { return g.name == n.name || g.id == n.id })
		m.leaving = slices.DeleteFunc(m.leaving, func(g ghost) bool { return g.name == n.name || g.id == n.id })
	}
	m.electMaster()
	m.allocate()
}

// wipeDisk forgets a node's data (its volume was replaced).
func (m *model) wipeDisk(n *simNode) { n.disk = map[shardKey]bool{} }

// dropCopiesOn removes every copy assigned to node, promoting replicas where needed.
func (m *model) dropCopiesOn(node string) {
	for _, t := range m.tables {
		for i, copies := range t.copies {
			var keep []*shardCopy
			lostPrimary := false
			for _, c := range copies {
				if c.node == node {
					lostPrimary = lostPrimary || c.primary
					continue
				}
				if c.relocatingFrom == node {
					// The source is gone: the copy being built is now a plain recovery.
					c.relocatingFrom = ""
				}
				keep = append(keep, c)
			}
			if lostPrimary {
				promote(keep)
			}
			t.copies[i] = keep
		}
	}
}

// promote makes the first started copy primary; unstarted copies cannot recover without
// a primary and are dropped when none is left.
func promote(copies []*shardCopy) []*shardCopy {
	for _, c := range copies {
		if c.started {
			c.primary = true
			return copies
		}
	}
	return copies
}

func hasStartedPrimary(copies []*shardCopy) bool {
	for _, c := range copies {
		if c.primary && c.started {
			return true
		}
	}
	return false
}

func holds(copies []*shardCopy, node string) bool {
	return slices.ContainsFunc(copies, func(c *shardCopy) bool { return c.node == node })
}

// copiesPerNode counts assigned copies per node, to spread new copies evenly.
func (m *model) copiesPerNode() map[string]int {
	out := map[string]int{}
	for _, t := range m.tables {
		for _, copies := range t.copies {
			for _, c := range copies {
				out[c.node]++
			}
		}
	}
	return out
}

// pickNode chooses an eligible node without a copy of the shard, preferring one that has the
// shard's data on disk, then the least loaded one.
func (m *model) pickNode(t *table, key shardKey, copies []*shardCopy, load map[string]int, from string) *simNode {
	var best *simNode
	for _, n := range m.sortedNodes() {
		if !m.eligibleFor(t, n) || holds(copies, n.name) || !m.awarenessAllows(t, copies, n, from) || m.diskRefuses(n) != "" {
			continue
		}
		if best == nil {
			best = n
			continue
		}
		if n.disk[key] != best.disk[key] {
			if n.disk[key] {
				best = n
			}
			continue
		}
		if load[n.name] < load[best.name] {
			best = n
		}
	}
	return best
}

// allocate assigns unassigned primaries and replicas and starts relocations away from
// excluded nodes, as far as the allocation settings allow. Recoveries it starts finish in
// later ticks.
func (m *model) allocate() {
	enable := m.setting(settingAllocationEnable)
	if enable == "none" || !m.recovered {
		// Before the gateway recovered the state there is no routing table to allocate.
		return
	}
	load := m.copiesPerNode()
	eligible := m.eligibleCount()
	for _, t := range m.sortedTables() {
		desired := desiredReplicas(t.replicas, eligible)
		for i := range t.copies {
			key := shardKey{t.name, i}
			copies := t.copies[i]
			if !hasStartedPrimary(copies) {
				promote(copies)
			}
			if !hasStartedPrimary(copies) {
				// Primaries recover locally from a node that has the data, instantly.
				var from *simNode
				for _, n := range m.sortedNodes() {
					if n.up && n.data && !holds(copies, n.name) && (n.disk[key] || (t.anywhere && m.eligibleFor(t, n))) {
						if from == nil || (n.disk[key] && !from.disk[key]) || (n.disk[key] == from.disk[key] && load[n.name] < load[from.name]) {
							from = n
						}
					}
				}
				if from == nil {
					continue
				}
				// Copies still recovering had no source left; start over from the primary.
				copies = slices.DeleteFunc(copies, func(c *shardCopy) bool { return !c.started })
				copies = append(copies, &shardCopy{node: from.name, primary: true, started: true})
				from.disk[key] = true
				load[from.name]++
				t.copies[i] = copies
			}
			if enable != "all" && enable != "primaries" {
				continue
			}
			// Relocate copies off excluded nodes. Under "primaries" CrateDB still allocates
			// (and so moves) primaries, only replicas stay where they are.
			for _, c := range slices.Clone(copies) {
				if !m.mustMove(t, c.node) || !c.started || (enable == "primaries" && !c.primary) {
					continue
				}
				if slices.ContainsFunc(copies, func(x *shardCopy) bool { return x.relocatingFrom == c.node }) {
					continue
				}
				if n := m.pickNode(t, key, copies, load, c.node); n != nil {
					copies = append(copies, &shardCopy{node: n.name, relocatingFrom: c.node})
					load[n.name]++
				}
			}
			if enable != "all" {
				t.copies[i] = copies
				continue
			}
			// Add or remove replicas.
			replicas := 0
			for _, c := range copies {
				if !c.primary && c.relocatingFrom == "" {
					replicas++
				}
			}
			for ; replicas < desired; replicas++ {
				n := m.pickNode(t, key, copies, load, "")
				if n == nil {
					break
				}
				copies = append(copies, &shardCopy{node: n.name})
				load[n.name]++
			}
			for replicas > desired {
				idx := slices.IndexFunc(copies, func(c *shardCopy) bool { return !c.primary && c.relocatingFrom == "" && !c.started })
				if idx < 0 {
					idx = slices.IndexFunc(copies, func(c *shardCopy) bool { return !c.primary && c.relocatingFrom == "" })
				}
				m.removeCopy(key, copies[idx])
				copies = slices.Delete(copies, idx, idx+1)
				replicas--
			}
			t.copies[i] = copies
		}
		if hasAllPrimaries(t) {
			t.anywhere = false
		}
	}
	if reb := m.setting(settingRebalanceEnable); reb != "none" && (enable == "all" || enable == "primaries") {
		m.rebalance(load, enable == "primaries" || reb == "primaries", reb == "replicas")
	}
}

// rebalance starts one relocation from the most to the least loaded eligible node when they
// differ by more than one copy and no recovery is running, as CrateDB's balancer does; so a
// node that came back empty gets shards again.
// primariesOnly and replicasOnly restrict which copies may move (allocation or rebalance
// limited to primaries or replicas).
func (m *model) rebalance(load map[string]int, primariesOnly, replicasOnly bool) {
	var most, least *simNode
	for _, n := range m.sortedNodes() {
		if !m.eligible(n) {
			continue
		}
		if most == nil || load[n.name] > load[most.name] {
			most = n
		}
		if least == nil || load[n.name] < load[least.name] {
			least = n
		}
	}
	if most == nil || load[most.name]-load[least.name] <= 1 {
		return
	}
	for _, t := range m.tables {
		for _, copies := range t.copies {
			for _, c := range copies {
				if !c.started || c.relocatingFrom != "" {
					return // a recovery runs: wait until the cluster is quiet
				}
			}
		}
	}
	for _, t := range m.sortedTables() {
		for i, copies := range t.copies {
			if holds(copies, least.name) || !hasStartedPrimary(copies) || !t.filtersAllow(least) || !m.awarenessAllows(t, copies, least, most.name) || m.diskRefuses(least) != "" {
				continue
			}
			for _, c := range copies {
				if c.node == most.name && (!primariesOnly || c.primary) && (!replicasOnly || !c.primary) {
					t.copies[i] = append(copies, &shardCopy{node: least.name, relocatingFrom: most.name})
					return
				}
			}
		}
	}
}

func hasAllPrimaries(t *table) bool {
	for _, copies := range t.copies {
		if !hasStartedPrimary(copies) {
			return false
		}
	}
	return true
}

// removeCopy forgets the data of a copy that was deliberately removed from its node.
func (m *model) removeCopy(key shardKey, c *shardCopy) {
	if n := m.nodes[c.node]; n != nil {
		delete(n.disk, key)
	}
}

// tick advances recoveries: up to shardsPerTick copies finish, then allocation runs again.
// It reports whether anything changed.
func (m *model) tick() bool {
	m.processDepartures()
	if !m.recovered && m.master != "" {
		m.gateway() // a delayed state recovery may be due
	}
	if m.shardSize > 0 {
		changed := m.recoverAtRate()
		m.allocate()
		return changed
	}
	budget := m.shardsPerTick
	changed := false
	for _, t := range m.sortedTables() {
		for i := range t.copies {
			key := shardKey{t.name, i}
			if budget == 0 {
				break
			}
			copies := t.copies[i]
			if !hasStartedPrimary(copies) {
				continue
			}
			for _, c := range slices.Clone(copies) {
				if c.started || budget == 0 {
					continue
				}
				budget--
				changed = true
				c.started = true
				if n := m.nodes[c.node]; n != nil {
					n.disk[key] = true
				}
				if c.relocatingFrom != "" {
					idx := slices.IndexFunc(copies, func(x *shardCopy) bool { return x.node == c.relocatingFrom })
					if idx >= 0 {
						c.primary = copies[idx].primary
						m.removeCopy(key, copies[idx])
						copies = slices.Delete(copies, idx, idx+1)
					}
					c.relocatingFrom = ""
				}
			}
			t.copies[i] = copies
		}
	}
	m.allocate()
	return changed
}

// tableHealth returns severity, missing primaries and under-replicated shards of a table.
func (m *model) tableHealth(t *table) (severity, missing, under int) {
	desired := desiredReplicas(t.replicas, m.eligibleCount())
	severity = severityGreen
	for _, copies := range t.copies {
		if !hasStartedPrimary(copies) {
			missing++
			continue
		}
		started := 0
		for _, c := range copies {
			if c.started && !c.primary {
				started++
			}
		}
		if started < desired {
			under++
		}
	}
	switch {
	case missing > 0:
		severity = severityRed
	case under > 0:
		severity = severityYellow
	}
	return severity, missing, under
}

// maxSeverity is SELECT max(severity) FROM sys.health: 0 when there are no tables (NULL).
func (m *model) maxSeverity() int {
	worst := 0
	for _, t := range m.tables {
		s, _, _ := m.tableHealth(t)
		worst = max(worst, s)
	}
	return worst
}

// createTable adds a table; all primaries start at once on the eligible data nodes.
func (m *model) createTable(name string, shards int, replicas string) {
	t := &table{name: name, shards: shards, replicas: replicas, copies: make([][]*shardCopy, shards), anywhere: true}
	m.tables[name] = t
	m.allocate()
}

func (m *model) dropTable(name string) {
	t := m.tables[name]
	if t == nil {
		return
	}
	m.dropPartitions(name)
	for i := range t.copies {
		for _, n := range m.nodes {
			delete(n.disk, shardKey{name, i})
		}
	}
	delete(m.tables, name)
}

// shardCounts counts copies (in any state) per node for sys.shards.
func (m *model) shardCounts() map[string]int {
	return m.copiesPerNode()
}
