package cratedbsim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Disk-based shard allocation, after Elasticsearch's DiskThresholdDecider, which CrateDB keeps
// (server/src/main/java/org/elasticsearch/cluster/routing/allocation/decider/DiskThresholdDecider.java,
// canAllocate; docs/config/cluster.rst, "Disk-based shard allocation"): a node whose disk usage
// is above cluster.routing.allocation.disk.watermark.low (default 85%) takes no copy of a shard
// that already has data (a replica, or a relocation of a started copy), so a drain whose
// remaining nodes are that full leaves the copies on the excluded node, and sys.allocations
// says why. Only percentage (and ratio) watermarks are modelled: the simulator has no disk
// sizes, so a watermark given in bytes never refuses (never stricter than asked for).
// cluster.routing.allocation.disk.threshold_enabled = false turns the decider off. The high
// watermark's force-move off a full node and the flood stage's read-only block are not
// modelled. A node's usage is a test knob (Sim.SetDiskUsage): 0 until set.

const (
	settingDiskThresholdEnabled = "cluster.routing.allocation.disk.threshold_enabled"
	settingDiskWatermarkLow     = "cluster.routing.allocation.disk.watermark.low"
)

// SetDiskUsage sets the share of node's disk in use, in percent (0..100), as the master's
// cluster info would report it: above the low watermark the node takes no more shard copies.
func (s *Sim) SetDiskUsage(node string, percent float64) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("cratedbsim: disk usage %v%% of node %s is not within 0..100", percent, node)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.m.nodes[node]
	if n == nil {
		return fmt.Errorf("cratedbsim: unknown node %q", node)
	}
	n.diskUsed = percent
	return nil
}

// lowWatermarkPercent parses the low watermark as a used-disk percentage: "85%" or a ratio
// "0.85" (DiskThresholdSettings.thresholdPercentageFromWatermark); ok is false for a bytes
// value, which the model does not apply.
func lowWatermarkPercent(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	if p, found := strings.CutSuffix(v, "%"); found {
		f, err := strconv.ParseFloat(p, 64)
		return f, err == nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, false
	}
	return f * 100, true
}

// diskRefuses is the DiskThresholdDecider's NO for a copy with data on n, in its words; ""
// when n may take it.
func (m *model) diskRefuses(n *simNode) string {
	if strings.EqualFold(m.setting(settingDiskThresholdEnabled), "false") {
		return ""
	}
	raw := m.setting(settingDiskWatermarkLow)
	low, ok := lowWatermarkPercent(raw)
	if !ok || n.diskUsed <= low {
		return ""
	}
	return fmt.Sprintf("the node is above the low watermark cluster setting [%s=%s], using more disk space than the maximum allowed [%.1f%%], actual free: [%.1f%%]",
		settingDiskWatermarkLow, raw, low, 100-n.diskUsed)
}

// allocationsVirtualTable is sys.allocations (docs/admin/system-information.rst, "Allocations";
// io/crate/expression/reference/sys/shard/SysAllocation.java): a row per shard copy whose
// move decision is taken, i.e. a started copy that may not remain on its node (excluded, or
// its table's filters no longer allow it). explanation is MoveDecision.getExplanation's: the
// copy is relocating ("force-moved", current_state RELOCATING) or no node takes it ("cannot
// move", STARTED); decisions lists, for a copy that cannot move, every other data node with
// the explanations of the deciders that said NO there (SysAllocationNodeDecision). Copies
// that may remain (rebalance decisions) and unassigned copies are not listed: the simulator
// has no balancer to explain.
func allocationsVirtualTable() virtualTable {
	cols := []column{{"table_schema", oidVarchar}, {"table_name", oidVarchar}, {"partition_ident", oidVarchar},
		{"shard_id", oidInt4}, {"node_id", oidVarchar}, {"primary", oidBool}, {"current_state", oidVarchar},
		{"explanation", oidVarchar}, {"decisions", oidJSONArray}}
	return virtualTable{cols: cols, rows: func(m *model) [][]any { return m.allocationRows() }}
}

// oidJSONArray is the type CrateDB's PostgreSQL protocol uses for ARRAY(OBJECT) values
// (PGTypes: json array).
const oidJSONArray uint32 = 199

func (m *model) allocationRows() [][]any {
	var out [][]any
	for _, t := range m.sortedTables() {
		schema, name := t.schemaName()
		var ident any
		if t.parent != "" {
			ident = t.ident
		}
		for id, copies := range t.copies {
			for _, c := range copies {
				n := m.nodes[c.node]
				if n == nil || !n.up || !c.started || !m.mustMove(t, c.node) {
					continue
				}
				state, why := "RELOCATING", "shard cannot remain on this node and is force-moved to another node"
				var decisions any
				if !slices.ContainsFunc(copies, func(x *shardCopy) bool { return x.relocatingFrom == c.node }) {
					state, why = "STARTED", "cannot move shard to another node, even though it is not allowed to remain on its current node"
					decisions = m.nodeDecisions(t, copies, c.node)
				}
				out = append(out, []any{schema, name, ident, int32(id), n.id, c.primary, state, why, decisions})
			}
		}
	}
	return out
}

// nodeDecisions is, for every other data node that is up, why it does not take the copy
// leaving from: the NO explanations of the deciders the model has (same shard, filters,
// awareness, disk). The disk watermark's is DiskThresholdDecider's wording; the filter and
// awareness ones are shortened forms of FilterAllocationDecider's and
// AwarenessAllocationDecider's (without their counts and filter values).
func (m *model) nodeDecisions(t *table, copies []*shardCopy, from string) []any {
	var out []any
	for _, n := range m.sortedNodes() {
		if !n.up || !n.data || n.name == from {
			continue
		}
		var why []any
		if holds(copies, n.name) {
			why = append(why, "a copy of this shard is already allocated to this node")
		}
		if m.excluded(n.name) {
			why = append(why, fmt.Sprintf("node matches cluster setting [cluster.routing.allocation.exclude] filters [_name:\"%s\"]", m.setting(settingAllocationExclude)))
		}
		if !t.filtersAllow(n) {
			why = append(why, "node does not match index setting [index.routing.allocation] filters")
		}
		if !m.awarenessAllows(t, copies, n, from) {
			why = append(why, "there are too many copies of the shard allocated to nodes with the same awareness attribute value")
		}
		if d := m.diskRefuses(n); d != "" {
			why = append(why, d)
		}
		out = append(out, map[string]any{"node_id": n.id, "node_name": n.name, "explanations": why})
	}
	return out
}
