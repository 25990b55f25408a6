package cratedbsim

import (
	"fmt"
	"strings"
	"testing"
)

// TestDiskWatermarkHoldsDrain: with the nodes that remain above the low watermark, copies on
// an excluded node stay there (DiskThresholdDecider.canAllocate says NO), sys.allocations
// lists each with CrateDB's move explanation and, per other node, the watermark decision;
// freeing disk (or raising the watermark) lets the drain finish and empties sys.allocations.
func TestDiskWatermarkHoldsDrain(t *testing.T) {
	for _, release := range []string{"free disk", "raise watermark", "disable threshold"} {
		t.Run(release, func(t *testing.T) {
			m := testModel(3, 4, 2)
			m.createTable("doc.a", 6, "1")
			settle(m, 100)
			before := m.shardCounts()["data-hot-3"]
			if before == 0 {
				t.Fatalf("no shards on data-hot-3: %s", m.summary())
			}
			for i := range 3 {
				m.nodes[fmt.Sprintf("data-hot-%d", i)].diskUsed = 88
			}
			m.transient[settingAllocationExclude] = "data-hot-3"
			m.allocate()
			settle(m, 100)
			if got := m.shardCounts()["data-hot-3"]; got != before {
				t.Fatalf("copies left data-hot-3 although every other node is above the low watermark: %d -> %d", before, got)
			}
			rows := m.allocationRows()
			if len(rows) != before {
				t.Fatalf("sys.allocations has %d rows, want one per copy on data-hot-3 (%d): %v", len(rows), before, rows)
			}
			for _, r := range rows {
				if r[0] != "doc" || r[1] != "a" || r[2] != nil || r[4] != m.nodes["data-hot-3"].id || r[6] != "STARTED" ||
					r[7] != "cannot move shard to another node, even though it is not allowed to remain on its current node" {
					t.Fatalf("row %v", r)
				}
				ds := r[8].([]any)
				if len(ds) != 3 {
					t.Fatalf("decisions %v, want the three other data nodes", ds)
				}
				for _, d := range ds {
					ex := fmt.Sprint(d.(map[string]any)["explanations"])
					if !strings.Contains(ex, "the node is above the low watermark cluster setting [cluster.routing.allocation.disk.watermark.low=85%], using more disk space than the maximum allowed [85.0%], actual free: [12.0%]") {
						t.Fatalf("decision %v lacks the watermark", d)
					}
				}
			}
			switch release {
			case "free disk":
				for i := range 3 {
					m.nodes[fmt.Sprintf("data-hot-%d", i)].diskUsed = 40
				}
			case "raise watermark":
				m.transient[settingDiskWatermarkLow] = "0.9"
			case "disable threshold":
				m.transient[settingDiskThresholdEnabled] = "false"
			}
			m.allocate() // the next tick of the simulator does
			settle(m, 100)
			if got := m.shardCounts()["data-hot-3"]; got != 0 {
				t.Fatalf("data-hot-3 still holds %d copies after %s: %s", got, release, m.summary())
			}
			if rows := m.allocationRows(); len(rows) != 0 {
				t.Fatalf("sys.allocations after the drain: %v", rows)
			}
		})
	}
}

// TestSysAllocationsOverSQL: sys.allocations answers the documented columns and rejects
// others, and SetDiskUsage checks its input.
func TestSysAllocationsOverSQL(t *testing.T) {
	sim := startStatic(t)
	if _, err := sim.Exec("t", "crate", `SELECT table_schema, table_name, partition_ident, shard_id, node_id, current_state, explanation, decisions FROM sys.allocations`); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Exec("t", "crate", `SELECT node_name FROM sys.allocations`); err == nil {
		t.Fatal("sys.allocations has no column node_name (it is decisions['node_name']); want an error")
	}
	if err := sim.SetDiskUsage("data-hot-0", 101); err == nil {
		t.Fatal("101% disk usage accepted")
	}
	if err := sim.SetDiskUsage("no-such-node", 50); err == nil {
		t.Fatal("unknown node accepted")
	}
}
