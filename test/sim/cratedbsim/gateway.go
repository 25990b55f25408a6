package cratedbsim

import (
	"time"
)

// Chaos makes the simulator behave like a cluster under stress. Everything is off by default.
type Chaos struct {
	// ElectionErrors is how many statements fail with a transient MasterNotDiscovered error
	// after a master-eligible node left the cluster (the election that follows).
	ElectionErrors int
	// ShutdownGrace keeps a node listed in sys.nodes this long after its pod started
	// terminating (or vanished), as the master only drops a node that stopped answering
	// after its fault detection gave up. The node serves no connections meanwhile.
	ShutdownGrace time.Duration
}

// ghost is a stopped node still listed in sys.nodes.
type ghost struct {
	name, id, hostname, ip string
	version                Version
	until                  time.Time
}

// gateway performs the state recovery of a freshly elected master as CrateDB's
// GatewayService does: not before recover_after_nodes (master and data nodes) and
// recover_after_data_nodes have joined; then at once if every configured expected count is
// reached, else after recover_after_time (default 5m when an expected count is set, none
// otherwise). The settings are the master's own.
func (m *model) gateway() {
	master := m.nodes[m.master]
	if m.recovered || master == nil {
		return
	}
	s := master.settings
	nodes, data, masters := 0, 0, 0
	for _, n := range m.nodes {
		if !n.up {
			continue
		}
		if n.master || n.data {
			nodes++
		}
		if n.data {
			data++
		}
		if n.master {
			masters++
		}
	}
	afterNodes := s.int("gateway.recover_after_nodes", -1)
	afterData := s.int("gateway.recover_after_data_nodes", -1)
	afterMasters := s.int("gateway.recover_after_master_nodes", -1)
	if (afterNodes != -1 && nodes < afterNodes) || (afterData != -1 && data < afterData) || (afterMasters != -1 && masters < afterMasters) {
		m.recoverAt = time.Time{}
		return
	}
	expNodes := s.int("gateway.expected_nodes", -1)
	expData := s.int("gateway.expected_data_nodes", -1)
	expMasters := s.int("gateway.expected_master_nodes", -1)
	var after time.Duration
	hasAfter := false
	if v, ok := s["gateway.recover_after_time"]; ok {
		after, hasAfter = parseTimeValue(v), true
	} else if expNodes >= 0 || expData >= 0 || expMasters >= 0 {
		after, hasAfter = 5*time.Minute, true
	}
	enforce := true
	if expNodes != -1 || expData != -1 || expMasters != -1 {
		enforce = (expNodes != -1 && nodes < expNodes) || (expData != -1 && data < expData) || (expMasters != -1 && masters < expMasters)
	}
	if enforce && hasAfter && after > 0 {
		now := m.now()
		if m.recoverAt.IsZero() {
			m.recoverAt = now.Add(after)
		}
		if now.Before(m.recoverAt) {
			return
		}
	}
	m.recovered = true
	m.recoverAt = time.Time{}
	m.allocate()
}

// parseTimeValue reads a CrateDB time value ("30s", "5m", "500ms", "1h"; a bare number is
// milliseconds).
func parseTimeValue(v string) time.Duration {
	if d, err := time.ParseDuration(v); err == nil {
		return d
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	return time.Duration(n) * time.Millisecond
}

// nodeLeft is called when a running node stops: chaos may keep it listed for a while, and
// the loss of a master-eligible node starts an election.
func (m *model) nodeLeft(n *simNode) {
	if m.chaos.ShutdownGrace > 0 {
		m.ghosts = append(m.ghosts, ghost{name: n.name, id: n.id, hostname: n.hostname, ip: n.ip, version: n.version, until: m.now().Add(m.chaos.ShutdownGrace)})
	}
	if n.master && m.chaos.ElectionErrors > 0 {
		m.electionErrors = m.chaos.ElectionErrors
	}
	if n.master && m.voting[n.id] && m.master != "" {
		// The elected master still lists the node until it publishes its departure
		// (voting.go processDepartures).
		m.leaving = append(m.leaving, ghost{name: n.name, id: n.id, hostname: n.hostname, ip: n.ip, version: n.version})
	}
}

// liveGhosts drops expired ghosts and returns the others.
func (m *model) liveGhosts() []ghost {
	now := m.now()
	keep := m.ghosts[:0]
	for _, g := range m.ghosts {
		if now.Before(g.until) {
			keep = append(keep, g)
		}
	}
	m.ghosts = keep
	return keep
}

// Node checks of sys.node_checks, with CrateDB's ids, descriptions and severities
// (io.crate.expression.reference.sys.check.node in CrateDB's source).
const (
	checkExpectedNodes = 1
	checkRecoverAfter  = 2
	checkRecoverTime   = 3
	checkHighWatermark = 5
	checkLowWatermark  = 6
	checkFloodStage    = 7
	checkMaxShards     = 8
)

type nodeCheck struct {
	id          int
	severity    int
	description string
}

func nodeChecks() []nodeCheck {
	return []nodeCheck{
		{checkExpectedNodes, 2, "It has been detected that the 'gateway.expected_data_nodes' setting (or the deprecated 'gateway.recovery_after_nodes' setting) is not configured or it does not match the actual number of (data) nodes in the cluster."},
		{checkRecoverAfter, 2, "The cluster setting 'gateway.recover_after_data_nodes' (or the deprecated `gateway.recovery_after_nodes` setting) is not configured or it is set to a value that seems low in relation to the the maximum/expected number of (data) nodes in the cluster."},
		{checkRecoverTime, 2, "If any of the \"expected data nodes\" recovery settings are set (or the deprecated \"expected nodes\" settings),the value of 'gateway.recover_after_time' must not be zero. Otherwise the \"expected (data) nodes\" setting wouldn't have any effect."},
		{checkHighWatermark, 3, "The high disk watermark is exceeded on the node. The cluster will attempt to relocate shards to another node. Please check the node disk usage."},
		{checkLowWatermark, 3, "The low disk watermark is exceeded on the node. The cluster will not allocate new shards to the node. Please check the node disk usage."},
		{checkFloodStage, 3, "The flood stage disk watermark is exceeded on the node. Tables that reside on an affected disk on this node have been made read-only. Please check the node disk usage."},
		{checkMaxShards, 2, "The amount of shards on the node reached 90 % of the limit of the cluster setting `cluster.max_shards_per_node`. Creating new tables or partitions which would push the number of shards beyond 100 % of the limit will be rejected."},
	}
}

// checkPassed evaluates one node check with the node's own settings, as CrateDB does. Disk
// checks always pass: the simulated disks never fill.
func (m *model) checkPassed(n *simNode, id int) bool {
	allNodes, dataNodes := 0, 0
	for _, x := range m.nodes {
		if x.up {
			allNodes++
			if x.data {
				dataNodes++
			}
		}
	}
	s := n.settings
	switch id {
	case checkExpectedNodes:
		actual, expected := dataNodes, s.int("gateway.expected_data_nodes", -1)
		if expected == -1 {
			actual, expected = allNodes, s.int("gateway.expected_nodes", -1)
		}
		return actual == 1 || actual == expected
	case checkRecoverAfter:
		actual := dataNodes
		after, expected := s.int("gateway.recover_after_data_nodes", -1), s.int("gateway.expected_data_nodes", -1)
		if after == -1 || expected == -1 {
			actual = allNodes
			after, expected = s.int("gateway.recover_after_nodes", -1), s.int("gateway.expected_nodes", -1)
		}
		return actual == 1 || (expected/2 < after && after <= expected)
	case checkRecoverTime:
		after, expected := s.int("gateway.recover_after_data_nodes", -1), s.int("gateway.expected_data_nodes", -1)
		if after == -1 || expected == -1 {
			after, expected = s.int("gateway.recover_after_nodes", -1), s.int("gateway.expected_nodes", -1)
		}
		var t time.Duration
		if v, ok := s["gateway.recover_after_time"]; ok {
			t = parseTimeValue(v)
		} else if s.int("gateway.expected_nodes", -1) >= 0 || s.int("gateway.expected_data_nodes", -1) >= 0 {
			t = 5 * time.Minute
		}
		return after <= expected && (expected == -1 || t > 0)
	case checkMaxShards:
		limit := 1000
		if v := m.setting("cluster.max_shards_per_node"); v != "" {
			if l := (nodeSettings{"x": v}).int("x", 1000); l > 0 {
				limit = l
			}
		}
		return float64(m.shardCounts()[n.name])/float64(limit) < 0.9
	}
	return true
}

// nodeCheckRows are the rows of sys.node_checks: one per running node and check.
func (m *model) nodeCheckRows() [][]any {
	var out [][]any
	for _, n := range m.upNodes() {
		for _, c := range nodeChecks() {
			out = append(out, []any{int32(c.id), n.id, c.description, int32(c.severity), m.checkPassed(n, c.id), n.acked[c.id]})
		}
	}
	return out
}

// masterID is sys.cluster.master_node, "" when no master is elected.
func (m *model) masterID() string {
	if n := m.nodes[m.master]; n != nil && n.up {
		return n.id
	}
	return ""
}
