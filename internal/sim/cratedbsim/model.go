package cratedbsim

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Settings keys the model interprets; any other SET GLOBAL key is stored and echoed only.
const (
	settingAllocationEnable  = "cluster.routing.allocation.enable"
	settingAllocationExclude = "cluster.routing.allocation.exclude._name"
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
}

type table struct {
	name     string
	shards   int
	replicas string
	copies   [][]*shardCopy
	// anywhere lets primaries start on any data node: a new table, or one restored from the
	// state file whose data location is unknown.
	anywhere bool
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
	// disk holds the shards whose data this node has on its volume.
	disk map[shardKey]bool
}

type user struct {
	name      string
	pwHash    string // sha256 hex of the password; empty = no password
	superuser bool
	granted   bool
}

func (u *user) privileged() bool { return u.superuser || u.granted }

func hashPassword(pw string) string {
	sum := sha256.Sum256([]byte(pw))
	return fmt.Sprintf("%x", sum)
}

// model is the simulated cluster. It is not safe for concurrent use; Sim guards it.
type model struct {
	nodes    map[string]*simNode
	tables   map[string]*table
	settings map[string]string
	users    map[string]*user
	license  bool
	// checkAcked is sys.node_checks.acknowledged of check 1 (expected nodes).
	checkAcked bool
	// expected is the expected node count from the StatefulSets (0 = unknown) and whether it
	// counts data nodes only (gateway.expected_data_nodes).
	expected     int
	expectedData bool
	master       string // name of the elected master node, "" if none
	// shardsPerTick bounds how many shard copies finish recovering per tick.
	shardsPerTick int
}

func newModel(shardsPerTick int) *model {
	if shardsPerTick <= 0 {
		shardsPerTick = 2
	}
	return &model{
		nodes:         map[string]*simNode{},
		tables:        map[string]*table{},
		settings:      map[string]string{},
		users:         map[string]*user{"crate": {name: "crate", superuser: true}},
		shardsPerTick: shardsPerTick,
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

func (m *model) setting(key string) string {
	if v, ok := m.settings[key]; ok {
		return v
	}
	if key == settingAllocationEnable {
		return "all"
	}
	return ""
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

// desiredReplicas resolves number_of_replicas ("1", "0-1", "1-all", "all") for the number
// of data nodes that can hold copies.
func desiredReplicas(spec string, dataNodes int) int {
	avail := max(dataNodes-1, 0)
	lo, hi, ok := strings.Cut(spec, "-")
	if !ok {
		if spec == "all" {
			return avail
		}
		n, _ := strconv.Atoi(spec)
		return n
	}
	minR, _ := strconv.Atoi(lo)
	maxR := avail
	if hi != "all" {
		maxR, _ = strconv.Atoi(hi)
	}
	return max(minR, min(avail, maxR))
}

// validReplicas reports whether spec is a number_of_replicas value CrateDB accepts.
func validReplicas(spec string) bool {
	if spec == "all" {
		return true
	}
	lo, hi, ok := strings.Cut(spec, "-")
	if _, err := strconv.Atoi(lo); err != nil {
		return false
	}
	if !ok {
		return true
	}
	if hi == "all" {
		return true
	}
	_, err := strconv.Atoi(hi)
	return err == nil
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
func (m *model) pickNode(key shardKey, copies []*shardCopy, load map[string]int) *simNode {
	var best *simNode
	for _, n := range m.sortedNodes() {
		if !m.eligible(n) || holds(copies, n.name) {
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
	if enable == "none" {
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
					if n.up && n.data && !holds(copies, n.name) && (n.disk[key] || (t.anywhere && !m.excluded(n.name))) {
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
			if enable != "all" {
				continue
			}
			// Relocate copies off excluded nodes.
			for _, c := range slices.Clone(copies) {
				if !m.excluded(c.node) || !c.started {
					continue
				}
				if slices.ContainsFunc(copies, func(x *shardCopy) bool { return x.relocatingFrom == c.node }) {
					continue
				}
				if n := m.pickNode(key, copies, load); n != nil {
					copies = append(copies, &shardCopy{node: n.name, relocatingFrom: c.node})
					load[n.name]++
				}
			}
			// Add or remove replicas.
			replicas := 0
			for _, c := range copies {
				if !c.primary && c.relocatingFrom == "" {
					replicas++
				}
			}
			for ; replicas < desired; replicas++ {
				n := m.pickNode(key, copies, load)
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
	if enable == "all" {
		m.rebalance(load)
	}
}

// rebalance starts one relocation from the most to the least loaded eligible node when they
// differ by more than one copy and no recovery is running, as CrateDB's balancer does; so a
// node that came back empty gets shards again.
func (m *model) rebalance(load map[string]int) {
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
			if holds(copies, least.name) || !hasStartedPrimary(copies) {
				continue
			}
			for _, c := range copies {
				if c.node == most.name {
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

// electMaster keeps the current master while it runs, otherwise elects the first running
// master-eligible node if a majority of the master-eligible members runs.
func (m *model) electMaster() {
	members, up := 0, 0
	var first *simNode
	for _, n := range m.sortedNodes() {
		if !n.master || !n.member {
			continue
		}
		members++
		if n.up {
			up++
			if first == nil {
				first = n
			}
		}
	}
	if up == 0 || up*2 <= members {
		m.master = ""
		return
	}
	if cur := m.nodes[m.master]; cur != nil && cur.up && cur.master {
		return
	}
	m.master = first.name
}

// masterID is sys.cluster.master_node, "" when no master is elected.
func (m *model) masterID() string {
	if n := m.nodes[m.master]; n != nil && n.up {
		return n.id
	}
	return ""
}

// expectedNodesPassed is sys.node_checks "passed" of check 1.
func (m *model) expectedNodesPassed() bool {
	if m.expected <= 0 {
		return true
	}
	count := 0
	for _, n := range m.nodes {
		if n.up && (!m.expectedData || n.data) {
			count++
		}
	}
	return count == m.expected
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
