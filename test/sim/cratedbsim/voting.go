package cratedbsim

import (
	"maps"
	"slices"
	"sort"
	"time"
)

// The voting configuration, as CrateDB's cluster coordination (the Elasticsearch-derived
// code in crate/crate server/src/main/java/org/elasticsearch/cluster/coordination/, and
// docs/concepts/clustering.rst) keeps it:
//
//   - A master is elected, and a cluster state committed, only with the votes of a majority
//     of the last committed voting configuration (CoordinationState.isElectionQuorum,
//     VotingConfiguration.hasQuorum): a set of master-eligible node ids, not the nodes the
//     StatefulSets still count.
//   - A node that stops stays in that configuration until the elected master has published
//     its departure (the node-left task after fault detection) and then a reconfiguration
//     (Coordinator.improveConfiguration / scheduleReconfigurationIfNeeded); until then
//     sys.nodes still lists it. Several nodes that stop at once leave in one such round.
//   - The reconfiguration (Reconfigurator.reconfigure, cluster.auto_shrink_voting_configuration
//     true by default) prefers live nodes, then nodes of the current configuration, then the
//     master, then the node id; it aims at the largest odd number of live master-eligible
//     nodes, never below 3 once the configuration has 3 or more; and it is applied only when
//     the new configuration has a live majority, else the current one stays.
//   - Without a majority of the configuration alive nothing can be committed: the master
//     steps down and no node can win an election (the cluster stays masterless until enough
//     of those nodes return, or someone runs crate-node unsafe-bootstrap).
//
// The simulator processes departures once per tick (its fault detection), so pods that a
// StatefulSet with Parallel pod management removes together leave together.

// liveMasters returns the running master-eligible nodes, sorted by name.
func (m *model) liveMasters() []*simNode {
	var out []*simNode
	for _, n := range m.sortedNodes() {
		if n.up && n.master {
			out = append(out, n)
		}
	}
	return out
}

// hasQuorum tells whether more than half of cfg is among the live ids.
func hasQuorum(cfg map[string]bool, live map[string]bool) bool {
	votes := 0
	for id := range cfg {
		if live[id] {
			votes++
		}
	}
	return votes*2 > len(cfg)
}

func idSet(nodes []*simNode) map[string]bool {
	out := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		out[n.id] = true
	}
	return out
}

// electMaster keeps the current master while a majority of the voting configuration runs,
// otherwise elects a running master-eligible node if one can gather that majority. A cluster
// forming for the first time bootstraps its configuration from the running master-eligible
// nodes once a majority of the StatefulSets' master-eligible members runs (the operator's
// cluster.initial_master_nodes lists them all). When no master-eligible node runs any more,
// the cluster state lives on disk only: the next master must recover it through the
// gateway, and transient settings are gone. Joins reconfigure at once; departures wait for
// the master's fault detection (processDepartures).
func (m *model) electMaster() {
	live := m.liveMasters()
	if len(live) == 0 {
		if m.recovered || len(m.transient) > 0 {
			m.recovered = false
			m.recoverAt = time.Time{}
			m.transient = map[string]string{}
		}
		m.master = ""
		return
	}
	liveIDs := idSet(live)
	if len(m.voting) == 0 {
		members := 0
		for _, n := range m.nodes {
			if n.master && n.member {
				members++
			}
		}
		if len(live)*2 <= members {
			m.master = ""
			return
		}
		m.voting = maps.Clone(liveIDs)
	}
	if !hasQuorum(m.voting, liveIDs) {
		m.master = ""
		return
	}
	if cur := m.nodes[m.master]; cur == nil || !cur.up || !cur.master {
		// Prefer a node of the configuration, as its vote counts.
		m.master = live[0].name
		for _, n := range live {
			if m.voting[n.id] {
				m.master = n.name
				break
			}
		}
	}
	if m.allVotersLive(liveIDs) {
		m.reconfigure(live)
	}
	m.gateway()
}

func (m *model) allVotersLive(live map[string]bool) bool {
	for id := range m.voting {
		if !live[id] {
			return false
		}
	}
	return true
}

// processDepartures is the master's fault detection: it publishes the departure of every
// voting node that stopped since the last round (they leave sys.nodes) and then shrinks the
// voting configuration. Both publications need a majority of the configuration; without it
// the master steps down (electMaster).
func (m *model) processDepartures() {
	m.electMaster()
	if m.master == "" {
		return
	}
	m.leaving = nil
	m.reconfigure(m.liveMasters())
}

// reconfigure applies Reconfigurator.reconfigure with auto-shrink on and no retired nodes.
func (m *model) reconfigure(live []*simNode) {
	type candidate struct {
		id                    string
		live, master, current bool
	}
	liveIDs := idSet(live)
	masterID := ""
	if n := m.nodes[m.master]; n != nil {
		masterID = n.id
	}
	var cands []candidate
	for _, n := range live {
		cands = append(cands, candidate{id: n.id, live: true, master: n.id == masterID, current: m.voting[n.id]})
	}
	for id := range m.voting {
		if !liveIDs[id] {
			cands = append(cands, candidate{id: id, current: true})
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.live != b.live {
			return a.live
		}
		if a.current != b.current {
			return a.current
		}
		if a.master != b.master {
			return a.master
		}
		return a.id < b.id
	})
	inConfig := 0
	for _, c := range cands {
		if c.current {
			inConfig++
		}
	}
	minSize := 3
	if inConfig < 3 {
		minSize = 1
	}
	target := max(roundDownToOdd(len(live)), minSize)
	next := map[string]bool{}
	for _, c := range cands[:min(target, len(cands))] {
		next[c.id] = true
	}
	if hasQuorum(next, liveIDs) {
		m.voting = next
	}
}

func roundDownToOdd(n int) int {
	if n%2 == 0 {
		return n - 1
	}
	return n
}

// votingNames returns the voting configuration as node names (ids of nodes the simulator no
// longer knows by name stay ids), sorted.
func (m *model) votingNames() []string {
	var out []string
	for id := range m.voting {
		name := id
		for _, n := range m.nodes {
			if n.id == id {
				name = n.name
				break
			}
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// VotingConfiguration returns the node names of the last committed voting configuration
// (ids for nodes the simulator does not know by name), sorted, and the elected master's
// name ("" when none is elected), read together.
func (s *Sim) VotingConfiguration() (voters []string, master string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m.masterID() != "" {
		master = s.m.master
	}
	return s.m.votingNames(), master
}
