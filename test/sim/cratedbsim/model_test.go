package cratedbsim

import (
	"fmt"
	"testing"
)

func testModel(masters, data, shardsPerTick int) *model {
	m := newModel(shardsPerTick)
	add := func(name string, master, isData bool) {
		n := &simNode{name: name, master: master, data: isData, member: true, disk: map[shardKey]bool{}, podUID: "u1"}
		n.id = nodeID(name, n.podUID)
		m.nodes[name] = n
		m.setNodeUp(n, true)
	}
	for i := range masters {
		add(fmt.Sprintf("master-%d", i), true, false)
	}
	for i := range data {
		add(fmt.Sprintf("data-hot-%d", i), masters == 0, true)
	}
	return m
}

func settle(m *model, maxTicks int) int {
	for i := range maxTicks {
		if !m.tick() {
			return i
		}
	}
	return maxTicks
}

func TestDesiredReplicas(t *testing.T) {
	for _, tc := range []struct {
		spec string
		data int
		want int
	}{
		{"0", 3, 0}, {"1", 1, 1}, {"2", 3, 2},
		{"0-1", 1, 0}, {"0-1", 3, 1}, {"1-all", 1, 1}, {"1-all", 4, 3},
		{"0-all", 3, 2}, {"0-all", 0, 0}, {"2-3", 2, 2}, {"0-5", 3, 2},
	} {
		if got := desiredReplicas(tc.spec, tc.data); got != tc.want {
			t.Errorf("desiredReplicas(%q, %d) = %d, want %d", tc.spec, tc.data, got, tc.want)
		}
	}
}

func TestHealthScenarios(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas string
		// act changes the settled cluster; it returns the severity expected right after.
		act       func(m *model) int
		wantAfter int // severity after settling again
	}{
		{
			name: "replica node down is yellow", replicas: "1",
			act: func(m *model) int {
				m.setNodeUp(m.nodes["data-hot-0"], false)
				return severityYellow
			},
			wantAfter: severityGreen, // the two remaining nodes hold primary and replica
		},
		{
			name: "no replicas and node down is red", replicas: "0",
			act: func(m *model) int {
				m.setNodeUp(m.nodes["data-hot-0"], false)
				return severityRed
			},
			wantAfter: severityRed,
		},
		{
			name: "node returns with its data", replicas: "0",
			act: func(m *model) int {
				m.setNodeUp(m.nodes["data-hot-0"], false)
				m.setNodeUp(m.nodes["data-hot-0"], true)
				return severityGreen // primaries recover locally at once
			},
			wantAfter: severityGreen,
		},
		{
			name: "node returns without data", replicas: "0",
			act: func(m *model) int {
				n := m.nodes["data-hot-0"]
				m.setNodeUp(n, false)
				m.wipeDisk(n)
				m.setNodeUp(n, true)
				return severityRed
			},
			wantAfter: severityRed,
		},
		{
			name: "rolling restart holds replicas while allocation is primaries", replicas: "1",
			act: func(m *model) int {
				m.transient[settingAllocationEnable] = "primaries"
				n := m.nodes["data-hot-1"]
				m.setNodeUp(n, false)
				m.setNodeUp(n, true)
				settle(m, 50)
				if s := m.maxSeverity(); s != severityYellow {
					panic(fmt.Sprintf("severity with allocation=primaries = %d, want yellow", s))
				}
				delete(m.transient, settingAllocationEnable)
				m.allocate()
				return severityYellow
			},
			wantAfter: severityGreen,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testModel(3, 3, 2)
			m.createTable("doc.t", 6, tc.replicas)
			settle(m, 50)
			if s := m.maxSeverity(); s != severityGreen {
				t.Fatalf("initial severity = %d (%s)", s, m.summary())
			}
			if want, got := tc.act(m), m.maxSeverity(); got != want {
				t.Fatalf("severity after act = %d, want %d (%s)", got, want, m.summary())
			}
			settle(m, 50)
			if got := m.maxSeverity(); got != tc.wantAfter {
				t.Fatalf("severity after settling = %d, want %d (%s)", got, tc.wantAfter, m.summary())
			}
		})
	}
}

func TestRecoveryTakesTicks(t *testing.T) {
	m := testModel(0, 3, 2)
	m.createTable("doc.t", 6, "1")
	if s := m.maxSeverity(); s != severityYellow {
		t.Fatalf("new table severity = %d, want yellow while replicas recover", s)
	}
	if n := settle(m, 50); n != 3 {
		t.Fatalf("6 replicas at 2 per tick settled after %d ticks, want 3", n)
	}
	if s := m.maxSeverity(); s != severityGreen {
		t.Fatalf("severity = %d", s)
	}
}

func TestExclusionRelocates(t *testing.T) {
	m := testModel(3, 3, 1)
	m.createTable("doc.a", 6, "1")
	m.createTable("doc.b", 2, "0")
	settle(m, 100)
	before := m.shardCounts()["data-hot-2"]
	if before == 0 {
		t.Fatalf("no shards on data-hot-2: %s", m.summary())
	}
	m.transient[settingAllocationExclude] = "data-hot-2"
	m.allocate()
	if got := m.shardCounts()["data-hot-2"]; got != before {
		t.Fatalf("shards left data-hot-2 before any tick: %d -> %d", before, got)
	}
	m.tick()
	if got := m.shardCounts()["data-hot-2"]; got != before-1 {
		t.Fatalf("after one tick at 1 shard per tick: %d -> %d", before, got)
	}
	settle(m, 100)
	if got := m.shardCounts()["data-hot-2"]; got != 0 {
		t.Fatalf("data-hot-2 still holds %d copies: %s", got, m.summary())
	}
	if s := m.maxSeverity(); s != severityGreen {
		t.Fatalf("severity after relocation = %d (%s)", s, m.summary())
	}
	// Stopping the drained node changes nothing.
	m.setNodeUp(m.nodes["data-hot-2"], false)
	if s := m.maxSeverity(); s != severityGreen {
		t.Fatalf("severity after removing the drained node = %d", s)
	}
}

func TestMasterElection(t *testing.T) {
	m := testModel(3, 2, 2)
	if m.master != "master-0" {
		t.Fatalf("master = %q", m.master)
	}
	m.setNodeUp(m.nodes["master-0"], false)
	if m.master != "master-1" {
		t.Fatalf("master after master-0 left = %q", m.master)
	}
	m.setNodeUp(m.nodes["master-0"], true)
	if m.master != "master-1" {
		t.Fatalf("master changed when master-0 came back: %q", m.master)
	}
	m.setNodeUp(m.nodes["master-1"], false)
	m.setNodeUp(m.nodes["master-2"], false)
	if m.masterID() != "" {
		t.Fatalf("master without quorum: %q", m.master)
	}
}

func TestExpectedNodesCheck(t *testing.T) {
	m := testModel(3, 3, 2)
	n := m.nodes["data-hot-0"]
	for _, tc := range []struct {
		settings nodeSettings
		want     bool
	}{
		{nodeSettings{}, false}, // not configured: CrateDB fails the check
		{nodeSettings{"gateway.expected_data_nodes": "3"}, true},
		{nodeSettings{"gateway.expected_data_nodes": "4"}, false},
		// The deprecated setting counts every node (3 masters + 3 data).
		{nodeSettings{"gateway.expected_nodes": "3"}, false},
		{nodeSettings{"gateway.expected_nodes": "6"}, true},
	} {
		n.settings = tc.settings
		if got := m.checkPassed(n, checkExpectedNodes); got != tc.want {
			t.Errorf("check 1 with %v = %v, want %v", tc.settings, got, tc.want)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		`CREATE USER "a" WITH (password = 'x''y')`: `CREATE USER "a" WITH (password = '***')`,
		`alter user a set (PASSWORD='p')`:          `alter user a set (PASSWORD='***')`,
		`SET LICENSE 'key';`:                       `SET LICENSE '***';`,
		`CREATE USER "a" WITH (password = $1)`:     `CREATE USER "a" WITH (password = $1)`,
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLexAndMatch(t *testing.T) {
	st := newStatements()
	for _, sql := range []string{
		"select   count(*)\n from SYS.NODES;",
		`SET GLOBAL "cluster.routing.allocation.exclude._name" = 'a,b'`,
		`set global persistent "cluster.routing.allocation.exclude._name" = $1`,
		`SELECT node['name'], count(*) FROM sys.shards WHERE node['name'] = ANY(['a', 'b']) GROUP BY 1`,
		`SELECT node['name'], count(*) FROM sys.shards WHERE node['name'] = ANY($1::text[]) GROUP BY node['name']`,
		`CREATE TABLE IF NOT EXISTS "doc"."t" (a int, b object as (c text)) CLUSTERED INTO 3 SHARDS`,
		`SELECT name FROM sys.users WHERE name = 'crate'`,
	} {
		if _, err := st.prepare(sql); err != nil {
			t.Errorf("prepare(%q): %v", sql, err)
		}
	}
	for _, sql := range []string{"DELETE FROM sys.nodes", "SELECT nope FROM sys.nodes", "SELECT 1; SELECT 2"} {
		if _, err := st.prepare(sql); err == nil {
			t.Errorf("prepare(%q) succeeded", sql)
		}
	}
	got, err := parseArrayLiteral(`{a,"b c",d\,e}`)
	if err != nil || len(got) != 3 || got[1] != "b c" {
		t.Errorf("parseArrayLiteral = %q, %v", got, err)
	}
}

func TestRestartedEmptyNodeGetsShardsBack(t *testing.T) {
	m := testModel(0, 3, 2)
	m.createTable("doc.t", 6, "1")
	settle(m, 50)
	n := m.nodes["data-hot-0"]
	m.setNodeUp(n, false)
	settle(m, 50) // replicas are rebuilt on the two other nodes
	m.setNodeUp(n, true)
	settle(m, 100)
	counts := m.shardCounts()
	if counts["data-hot-0"] < 3 || m.maxSeverity() != severityGreen {
		t.Fatalf("after rebalancing: %s", m.summary())
	}
}
