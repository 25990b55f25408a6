package cratedbsim

import (
	"slices"
	"testing"
)

// runSQL runs one statement on a model as the superuser.
func runSQL(t *testing.T, m *model, sql string) *result {
	t.Helper()
	p, err := newStatements().prepare(sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	res, err := p.run(&execCtx{m: m, user: "crate"})
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return res
}

// copiesOn counts the copies of the tables named (model keys) on node.
func copiesOn(m *model, node string, tables ...string) int {
	n := 0
	for _, name := range tables {
		for _, copies := range m.tables[name].copies {
			for _, c := range copies {
				if c.node == node {
					n++
				}
			}
		}
	}
	return n
}

// TestPartitionReplicas: ALTER TABLE ONLY changes the template only, so a partition keeps
// replicas the table no longer shows (information_schema.tables vs table_partitions); with
// one node excluded, its copies of that partition have nowhere to go.
func TestPartitionReplicas(t *testing.T) {
	m := testModel(0, 3, 4)
	runSQL(t, m, `CREATE TABLE doc.p (d TEXT, v INT) CLUSTERED INTO 2 SHARDS PARTITIONED BY (d) WITH (number_of_replicas = '2')`)
	runSQL(t, m, `INSERT INTO doc.p (d) VALUES ('2026-01')`)
	runSQL(t, m, `ALTER TABLE ONLY doc.p SET (number_of_replicas = '0')`)
	runSQL(t, m, `INSERT INTO doc.p (d) VALUES ('2026-02')`)
	settle(m, 100)
	tables := runSQL(t, m, `SELECT table_name, number_of_replicas FROM information_schema.tables`)
	if len(tables.rows) != 1 || tables.rows[0][1] != "0" {
		t.Fatalf("information_schema.tables: %v, want the template's replicas only", tables.rows)
	}
	parts := runSQL(t, m, `SELECT table_name, partition_ident, number_of_replicas FROM information_schema.table_partitions`)
	var reps []string
	for _, r := range parts.rows {
		reps = append(reps, r[2].(string))
	}
	slices.Sort(reps)
	if !slices.Equal(reps, []string{"0", "2"}) {
		t.Fatalf("partition replicas %v, want [0 2]", reps)
	}
	old := partitionKey("doc.p", partitionIdent("2026-01"))
	runSQL(t, m, `SET GLOBAL "cluster.routing.allocation.exclude._name" = 'data-hot-2'`)
	settle(m, 100)
	if n := copiesOn(m, "data-hot-2", old); n != 2 {
		t.Fatalf("%d copies of the 2-replica partition on the excluded node, want 2 (no node can take them): %s", n, m.summary())
	}
	runSQL(t, m, `ALTER TABLE doc.p PARTITION (d = '2026-01') SET (number_of_replicas = '1')`)
	// tick reports finished recoveries only: the relocation allocate starts after the removed
	// replica needs a second round.
	settle(m, 100)
	settle(m, 100)
	if n := copiesOn(m, "data-hot-2", old); n != 0 {
		t.Fatalf("%d copies left on the excluded node after lowering the partition's replicas: %s", n, m.summary())
	}
}

// TestAllocationFilters: a table's require._name filter keeps its copies on the named
// nodes, also when those are excluded; changing the filter moves them.
func TestAllocationFilters(t *testing.T) {
	m := testModel(0, 3, 4)
	runSQL(t, m, `CREATE TABLE doc.f (a INT) CLUSTERED INTO 3 SHARDS WITH (number_of_replicas = '0')`)
	runSQL(t, m, `ALTER TABLE doc.f SET ("routing.allocation.require._name" = 'data-hot-2')`)
	settle(m, 100)
	if n := copiesOn(m, "data-hot-2", "doc.f"); n != 3 {
		t.Fatalf("%d copies on data-hot-2, want all 3 there: %s", n, m.summary())
	}
	runSQL(t, m, `SET GLOBAL "cluster.routing.allocation.exclude._name" = 'data-hot-2'`)
	settle(m, 100)
	if n := copiesOn(m, "data-hot-2", "doc.f"); n != 3 {
		t.Fatalf("%d copies on the excluded data-hot-2, want 3 (the filter allows no other node): %s", n, m.summary())
	}
	res := runSQL(t, m, `SELECT table_name, settings['routing']['allocation']['require'] FROM information_schema.tables`)
	if got := res.rows[0][1].(map[string]any)["_name"]; got != "data-hot-2" {
		t.Fatalf("settings['routing']['allocation']['require'] = %v", res.rows[0][1])
	}
	runSQL(t, m, `ALTER TABLE doc.f SET ("routing.allocation.require._name" = 'data-hot-*')`)
	settle(m, 100)
	if n := copiesOn(m, "data-hot-2", "doc.f"); n != 0 {
		t.Fatalf("%d copies left on data-hot-2 after widening the filter: %s", n, m.summary())
	}
}

// TestAllocationEnableKeepsReplicas: under new_primaries and none nothing moves off an
// excluded node; under primaries only primaries do (CrateDB's EnableAllocationDecider).
func TestAllocationEnableKeepsReplicas(t *testing.T) {
	for _, tc := range []struct {
		enable             string
		primaries, replica bool // whether they stay on the excluded node
	}{{"none", true, true}, {"new_primaries", true, true}, {"primaries", false, true}, {"all", false, false}} {
		t.Run(tc.enable, func(t *testing.T) {
			m := testModel(0, 3, 4)
			runSQL(t, m, `CREATE TABLE doc.t (a INT) CLUSTERED INTO 6 SHARDS WITH (number_of_replicas = '1')`)
			settle(m, 100)
			runSQL(t, m, `SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = '`+tc.enable+`'`)
			runSQL(t, m, `SET GLOBAL "cluster.routing.allocation.exclude._name" = 'data-hot-2'`)
			settle(m, 100)
			var prim, repl bool
			for _, copies := range m.tables["doc.t"].copies {
				for _, c := range copies {
					if c.node == "data-hot-2" {
						prim = prim || c.primary
						repl = repl || !c.primary
					}
				}
			}
			if prim != tc.primaries || repl != tc.replica {
				t.Fatalf("primaries stay %v (want %v), replicas stay %v (want %v): %s", prim, tc.primaries, repl, tc.replica, m.summary())
			}
		})
	}
}

// TestAwarenessKeepsCopiesInTheirZone: with awareness on zone and two zones, each zone holds
// one copy of a shard with one replica; the only node of zone b excluded, its copies have no
// node in b to go to and stay, while without awareness they move.
func TestAwarenessKeepsCopiesInTheirZone(t *testing.T) {
	for _, tc := range []struct {
		name      string
		awareness bool
		stay      bool
	}{{"awareness on zone", true, true}, {"no awareness", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			m := testModel(0, 3, 4)
			for name, zone := range map[string]string{"data-hot-0": "a", "data-hot-1": "a", "data-hot-2": "b"} {
				m.nodes[name].settings = nodeSettings{"node.attr.zone": zone}
				if tc.awareness {
					m.nodes[name].settings[settingAwarenessAttributes] = "zone"
				}
			}
			// Not a runtime setting: CrateDB refuses to SET it.
			if p, err := newStatements().prepare(`SET GLOBAL PERSISTENT "cluster.routing.allocation.awareness.attributes" = 'zone'`); err == nil {
				if _, err := p.run(&execCtx{m: m, user: "crate"}); err == nil {
					t.Fatal("SET GLOBAL of the awareness attributes was accepted; CrateDB does not change them at runtime")
				}
			}
			runSQL(t, m, `CREATE TABLE doc.t (a INT) CLUSTERED INTO 4 SHARDS WITH (number_of_replicas = '1')`)
			settle(m, 100)
			settle(m, 100)
			if tc.awareness {
				if n := copiesOn(m, "data-hot-2", "doc.t"); n != 4 {
					t.Fatalf("%d copies in zone b (data-hot-2), want one of each of the 4 shards: %s", n, m.summary())
				}
			}
			runSQL(t, m, `SET GLOBAL "cluster.routing.allocation.exclude._name" = 'data-hot-2'`)
			settle(m, 100)
			settle(m, 100)
			if got := copiesOn(m, "data-hot-2", "doc.t") > 0; got != tc.stay {
				t.Fatalf("copies stay on the excluded node: %v, want %v: %s", got, tc.stay, m.summary())
			}
			res := runSQL(t, m, `SELECT name, attributes FROM sys.nodes`)
			if z := res.rows[2][1].(map[string]any)["zone"]; z != "b" {
				t.Fatalf("sys.nodes attributes of %v: %v", res.rows[2][0], res.rows[2][1])
			}
		})
	}
}
