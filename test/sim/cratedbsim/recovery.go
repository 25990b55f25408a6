package cratedbsim

import (
	"math"
	"strconv"
	"strings"
)

// Peer recovery at a finite rate, modelled on CrateDB (a fork of Elasticsearch 6/7):
//
//   - A replica assigned to a node (a node that rejoined after a restart, or any new copy) is
//     INITIALIZING until the primary's data reached it; only then is it STARTED
//     (server/src/main/java/org/elasticsearch/indices/recovery/PeerRecoveryTargetService.java).
//   - The copying is throttled per node by indices.recovery.max_bytes_per_sec, default 40mb,
//     dynamic; 0 or a negative value disables the throttle
//     (server/src/main/java/org/elasticsearch/indices/recovery/RecoverySettings.java,
//     docs/config/cluster.rst "Recovery").
//   - A node takes at most cluster.routing.allocation.node_concurrent_recoveries (default 2)
//     recoveries at a time; the others wait for a slot
//     (server/src/main/java/org/elasticsearch/cluster/routing/allocation/decider/ThrottlingAllocationDecider.java).
//     The simulator keeps the waiting copies assigned (INITIALIZING, 0 bytes); CrateDB keeps
//     them UNASSIGNED until a slot frees. Either way the table is yellow, not green.
//   - sys.health is green only when every primary and replica is STARTED
//     (server/src/main/java/io/crate/metadata/sys/TableHealth.java); a table is yellow while
//     a replica is initializing (tableHealth counts started replicas only).
//   - sys.shards reports routing_state INITIALIZING and state RECOVERING for a copy being
//     built, RELOCATING (state STARTED) for the source of a relocation
//     (docs/admin/system-information.rst "Shards").
//
// A copy recovers the whole shard (ShardSize bytes), also onto a node that kept an older copy
// on its volume: the simulator does not model operation-based recovery, so it errs on the side
// of recoveries that take longer, which is what a restart gate must wait for.

const (
	settingRecoveryRate         = "indices.recovery.max_bytes_per_sec"
	settingConcurrentRecoveries = "cluster.routing.allocation.node_concurrent_recoveries"
)

// newModelSized is newModel with rate-based recovery when shardSize is positive.
func newModelSized(shardsPerTick int, shardSize int64) *model {
	m := newModel(shardsPerTick)
	m.shardSize = shardSize
	return m
}

// parseByteSize reads a byte size as CrateDB's ByteSizeValue does: a number with an optional
// unit b, k/kb, m/mb, g/gb, t/tb, p/pb (powers of 1024, case-insensitive). ok is false for
// anything else.
func parseByteSize(v string) (float64, bool) {
	s := strings.ToLower(strings.TrimSpace(v))
	mult := 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"pb", 1 << 50}, {"tb", 1 << 40}, {"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10},
		{"p", 1 << 50}, {"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f * mult, true
}

// recoveryRate is the per-node recovery throttle in bytes per second; 0 means unthrottled.
func (m *model) recoveryRate() float64 {
	r, ok := parseByteSize(m.setting(settingRecoveryRate))
	if !ok {
		r, _ = parseByteSize(settingDefault(settingRecoveryRate))
	}
	return max(r, 0)
}

func (m *model) concurrentRecoveries() int {
	n, err := strconv.Atoi(m.setting(settingConcurrentRecoveries))
	if err != nil || n < 1 {
		return 2
	}
	return n
}

// recoverAtRate advances every running recovery by the bytes the time since the last call
// allows: each node's rate is shared by the recoveries it receives (at most
// node_concurrent_recoveries at a time). A copy that has all ShardSize bytes is STARTED
// (a relocation target replaces its source). It reports whether a copy started.
func (m *model) recoverAtRate() bool {
	now := m.now()
	elapsed := 0.0
	if !m.lastRecovery.IsZero() {
		elapsed = now.Sub(m.lastRecovery).Seconds()
	}
	m.lastRecovery = now
	rate, slots := m.recoveryRate(), m.concurrentRecoveries()
	size := float64(m.shardSize)
	type running struct {
		t  *table
		id int
		c  *shardCopy
	}
	// Recoveries per target node, in a stable order (table, shard): the first slots run.
	byNode := map[string][]running{}
	var order []string
	for _, t := range m.sortedTables() {
		for id, copies := range t.copies {
			if !hasStartedPrimary(copies) {
				continue // nothing to recover from
			}
			for _, c := range copies {
				if c.started {
					continue
				}
				if _, ok := byNode[c.node]; !ok {
					order = append(order, c.node)
				}
				byNode[c.node] = append(byNode[c.node], running{t, id, c})
			}
		}
	}
	changed := false
	for _, node := range order {
		active := byNode[node]
		if len(active) > slots {
			active = active[:slots]
		}
		share := math.Inf(1)
		if rate > 0 {
			share = rate * elapsed / float64(len(active))
		}
		for _, r := range active {
			r.c.recovered = min(r.c.recovered+share, size)
			if r.c.recovered >= size {
				r.t.copies[r.id] = m.finishRecovery(shardKey{r.t.name, r.id}, r.t.copies[r.id], r.c)
				changed = true
			}
		}
	}
	return changed
}

// finishRecovery starts copy c of a shard; a relocation target takes the place (and the
// primary role) of its source.
func (m *model) finishRecovery(key shardKey, copies []*shardCopy, c *shardCopy) []*shardCopy {
	c.started = true
	if n := m.nodes[c.node]; n != nil {
		n.disk[key] = true
	}
	if c.relocatingFrom != "" {
		for i, x := range copies {
			if x.node == c.relocatingFrom {
				c.primary = x.primary
				m.removeCopy(key, x)
				copies = append(copies[:i:i], copies[i+1:]...)
				break
			}
		}
		c.relocatingFrom = ""
	}
	return copies
}

// shardStates is each assigned copy's routing_state and state as sys.shards reports them.
type shardRow struct {
	schema, table string
	id            int
	node          string
	primary       bool
	routingState  string
	state         string
}

func (m *model) shardRows() []shardRow {
	var out []shardRow
	for _, t := range m.sortedTables() {
		schema, name, ok := strings.Cut(t.name, ".")
		if !ok {
			schema, name = "doc", t.name
		}
		for id, copies := range t.copies {
			relocating := map[string]bool{}
			for _, c := range copies {
				if c.relocatingFrom != "" {
					relocating[c.relocatingFrom] = true
				}
			}
			for _, c := range copies {
				row := shardRow{schema: schema, table: name, id: id, node: c.node, primary: c.primary, routingState: "STARTED", state: "STARTED"}
				switch {
				case !c.started:
					row.routingState, row.state = "INITIALIZING", "RECOVERING"
				case relocating[c.node]:
					row.routingState = "RELOCATING"
				}
				out = append(out, row)
			}
		}
	}
	return out
}
