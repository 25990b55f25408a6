package cratedbsim

import (
	"fmt"
	"testing"
	"time"
)

func TestParseByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"40mb", 40 << 20, true}, {"40MB", 40 << 20, true}, {"512kb", 512 << 10, true}, {"1g", 1 << 30, true},
		{"1.5mb", 1.5 * (1 << 20), true}, {"100", 100, true}, {"100b", 100, true}, {"0", 0, true}, {"-1", -1, true},
		{"fast", 0, false}, {"", 0, false}, {"mb", 0, false},
	} {
		got, ok := parseByteSize(tc.in)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseByteSize(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// recoveryModel is a settled 3-data-node cluster with one table of 6 shards and 1 replica,
// shards of 10 MiB recovering at 10 MiB/s per node, on a fake clock.
func recoveryModel(t *testing.T) (*model, func(time.Duration)) {
	t.Helper()
	m := testModel(0, 3, 2)
	m.shardSize = 10 << 20
	m.transient[settingRecoveryRate] = "10mb"
	now := time.Unix(1_700_000_000, 0)
	m.now = func() time.Time { return now }
	advance := func(d time.Duration) {
		now = now.Add(d)
		m.tick()
	}
	m.createTable("doc.events", 6, "1")
	for range 1000 {
		if m.maxSeverity() == severityGreen && initializing(m) == 0 {
			break
		}
		advance(100 * time.Millisecond)
	}
	if m.maxSeverity() != severityGreen || initializing(m) != 0 {
		t.Fatalf("cluster did not settle: %s", m.summary())
	}
	return m, advance
}

func initializing(m *model) int {
	n := 0
	for _, r := range m.shardRows() {
		if r.routingState == "INITIALIZING" || r.routingState == "RELOCATING" {
			n++
		}
	}
	return n
}

// minStarted is the fewest STARTED copies any shard has.
func minStarted(m *model) int {
	least := -1
	for _, t := range m.tables {
		for _, copies := range t.copies {
			n := 0
			for _, c := range copies {
				if c.started {
					n++
				}
			}
			if least < 0 || n < least {
				least = n
			}
		}
	}
	return least
}

// A rejoined node's replicas are INITIALIZING (state RECOVERING) and the table yellow for as
// long as the bytes take at the node's recovery rate; green only once every copy STARTED.
func TestRecoveryTakesShardSizeOverRate(t *testing.T) {
	m, advance := recoveryModel(t)
	n := m.nodes["data-hot-0"]
	held := m.copiesPerNode()[n.name]
	m.transient[settingAllocationEnable] = "primaries"
	m.setNodeUp(n, false)
	m.setNodeUp(n, true)
	delete(m.transient, settingAllocationEnable)
	m.allocate()
	rows := m.shardRows()
	recovering := 0
	for _, r := range rows {
		if r.node == n.name && r.routingState == "INITIALIZING" && r.state == "RECOVERING" {
			recovering++
		}
	}
	if recovering != held {
		t.Fatalf("after the rejoin %d copies on %s are INITIALIZING/RECOVERING, want the %d it held: %+v", recovering, n.name, held, rows)
	}
	// 10 MiB at 10 MiB/s, two at a time: held/2 rounds of 2 s each.
	need := time.Duration((held+1)/2) * 2 * time.Second
	elapsed := time.Duration(0)
	for m.maxSeverity() != severityGreen {
		if initializing(m) == 0 {
			t.Fatalf("yellow with no copy recovering at +%s: %s", elapsed, m.summary())
		}
		advance(100 * time.Millisecond)
		elapsed += 100 * time.Millisecond
		if elapsed > time.Minute {
			t.Fatalf("never green: %s", m.summary())
		}
	}
	if elapsed < need {
		t.Errorf("green after %s of simulated time, want at least %s (%d copies of 10 MiB at 10 MiB/s, 2 at a time)", elapsed, need, held)
	}
	// Green does not mean quiet: the balancer may now move copies (RELOCATING), which a
	// restart gate must see in sys.shards, not in sys.health.

	// Without the throttle (rate 0, SET GLOBAL) only the concurrency bounds a recovery: the
	// same rejoin is green within a few ticks of 1 ms.
	m.transient[settingRecoveryRate] = "0"
	m.transient[settingAllocationEnable] = "primaries"
	m.setNodeUp(n, false)
	m.setNodeUp(n, true)
	delete(m.transient, settingAllocationEnable)
	m.allocate()
	for i := 0; m.maxSeverity() != severityGreen; i++ {
		if i > held {
			t.Fatalf("unthrottled recovery (rate 0) not green after %d ticks: %s", i, m.summary())
		}
		advance(time.Millisecond)
	}
}

// A rolling restart whose gate proceeds on its first reading after the node rejoined takes the
// next node down while the first one's replicas still recover: some shard is left with no
// started copy. The evidence gate (green, nothing INITIALIZING or RELOCATING) never is.
func TestRestartGateMustWaitForRecovery(t *testing.T) {
	for _, tc := range []struct {
		name string
		// ready is the gate: may the next node go?
		ready     func(m *model) bool
		wantLoses bool
	}{
		{"first reading", func(*model) bool { return true }, true},
		{"first green", func(m *model) bool { return m.maxSeverity() == severityGreen }, false},
		{"evidence", func(m *model) bool { return m.maxSeverity() == severityGreen && initializing(m) == 0 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, advance := recoveryModel(t)
			fewest := minStarted(m)
			step := func(d time.Duration) {
				advance(d)
				fewest = min(fewest, minStarted(m))
			}
			for i := range 3 {
				n := m.nodes[fmt.Sprintf("data-hot-%d", i)]
				m.transient[settingAllocationEnable] = "primaries"
				m.setNodeUp(n, false)
				fewest = min(fewest, minStarted(m))
				step(100 * time.Millisecond)
				m.setNodeUp(n, true)
				delete(m.transient, settingAllocationEnable)
				m.allocate()
				for waited := 0; !tc.ready(m); waited++ {
					if waited > 10000 {
						t.Fatalf("gate never opened: %s", m.summary())
					}
					step(100 * time.Millisecond)
				}
			}
			// Replicas 1 allow one copy down (the restarted node): every shard keeps one started.
			if loses := fewest < 1; loses != tc.wantLoses {
				t.Errorf("fewest started copies of a shard during the restart: %d; want a loss: %v", fewest, tc.wantLoses)
			}
		})
	}
}

// sys.shards answers the recovery states over SQL, and the rate is a runtime setting.
func TestSysShardsRecoveryStates(t *testing.T) {
	sim, err := Start(t.Context(), Config{
		StaticNodes: []StaticNode{
			{Name: "n0", Pod: "crate-0", Master: true, Data: true},
			{Name: "n1", Pod: "crate-1", Master: true, Data: true},
			{Name: "n2", Pod: "crate-2", Master: true, Data: true},
		},
		TickInterval: -1,
		ShardSize:    1 << 20,
		Logf:         t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	now := time.Unix(1_700_000_000, 0)
	sim.mu.Lock()
	sim.m.now = func() time.Time { return now }
	sim.mu.Unlock()
	exec := func(stmt string) *Result {
		t.Helper()
		res, err := sim.Exec("n0", "crate", stmt)
		if err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		return res
	}
	const busy = `SELECT count(*) FROM sys.shards WHERE routing_state IN ('INITIALIZING', 'RELOCATING')`
	// The restart gate's reading: busy copies and their recovery['size'] (used, recovered).
	const gate = `SELECT count(*), sum(recovery['size']['used']), sum(recovery['size']['recovered']) FROM sys.shards WHERE routing_state IN ('INITIALIZING', 'RELOCATING')`
	exec(`SET GLOBAL TRANSIENT "indices.recovery.max_bytes_per_sec" = '1mb'`)
	exec(`CREATE TABLE doc.t (id INT) CLUSTERED INTO 2 SHARDS WITH (number_of_replicas = '1')`)
	sim.Tick() // starts the clock
	if got := exec(busy).Rows[0][0]; got != int64(2) {
		t.Fatalf("replicas of a new table recovering: %v, want 2", got)
	}
	states := map[string]int{}
	for _, r := range exec(`SELECT schema_name, table_name, id, node['name'], routing_state, state FROM sys.shards`).Rows {
		states[fmt.Sprint(r[4], "/", r[5])]++
	}
	if states["INITIALIZING/RECOVERING"] != 2 || states["STARTED/STARTED"] != 2 {
		t.Fatalf("sys.shards states %v, want 2 STARTED/STARTED primaries and 2 INITIALIZING/RECOVERING replicas", states)
	}
	if sev, _ := sim.Health(); sev != severityYellow {
		t.Fatalf("severity %d while replicas recover, want yellow", sev)
	}
	if got := fmt.Sprint(exec(gate).Rows[0]); got != fmt.Sprint([]any{int64(2), int64(2 << 20), int64(0)}) {
		t.Fatalf("recovery['size'] of 2 replicas of 1 MiB that received nothing: %v, want [2 2097152 0]", got)
	}
	// size: ShardSize for a started copy, the bytes received so far for one being built.
	const size = `SELECT sum(size) FROM sys.shards`
	if got := exec(size).Rows[0][0]; got != int64(2<<20) {
		t.Fatalf("sum(size) with 2 started primaries and 2 replicas that received nothing: %v, want %d", got, 2<<20)
	}
	now = now.Add(2 * time.Second) // 1 MiB at 1 MiB/s, whatever the node's share
	sim.Tick()
	if got := exec(busy).Rows[0][0]; got != int64(0) {
		t.Fatalf("copies still recovering after 2 s: %v", got)
	}
	// A started copy's recovery is done: recovered = used = the shard's size.
	if got := fmt.Sprint(exec(`SELECT sum(recovery['size']['used']), sum(recovery['size']['recovered']), sum(recovery['size']['reused']) FROM sys.shards`).Rows[0]); got != fmt.Sprint([]any{int64(4 << 20), int64(4 << 20), int64(0)}) {
		t.Errorf("recovery['size'] of 4 started copies of 1 MiB: %v, want [4194304 4194304 0]", got)
	}
	perNode := 0
	for _, r := range exec(`SELECT node['name'], count(*), sum(size) FROM sys.shards GROUP BY 1`).Rows {
		if r[2] != r[1].(int64)<<20 {
			t.Errorf("node %v: %v copies of 1 MiB sum to %v bytes", r[0], r[1], r[2])
		}
		perNode++
	}
	if perNode == 0 {
		t.Error("no node holds a copy")
	}
	if sev, _ := sim.Health(); sev != severityGreen {
		t.Fatalf("severity %d once every copy started, want green", sev)
	}
}
