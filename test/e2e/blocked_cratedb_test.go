//go:build e2e

package e2e

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim"
)

// TestBlockedOnCrateDBShardFromSecondTerminal: a scale-down of the cold group whose drain
// cannot finish, every data node that stays being above the disk low watermark (the
// simulator's disk usage knob; CrateDB's DiskThresholdDecider refuses them), so the copies on
// the leaving node stay. `status` run as a second process reads from the Lease what the drain
// is blocked on (a table's shard on that node, with sys.allocations' explanation), until
// when, and how to unblock it (free disk on the nodes that refuse it, or raise the
// watermark); `status -o json` carries it. Once the disk is freed the drain and the run
// finish, and every table keeps its copies.
func TestBlockedOnCrateDBShardFromSecondTerminal(t *testing.T) {
	x := newCrateEnv(t, true)
	cold1 := x.node("cold", 1)
	var staying []string
	for _, g := range crateE2EGroups {
		if g.name == "master" {
			continue
		}
		for i := range int(g.replicas) {
			if n := x.node(g.name, i); n != cold1 {
				staying = append(staying, n)
			}
		}
	}
	for _, n := range staying {
		if err := x.sim.SetDiskUsage(n, 90); err != nil {
			t.Fatal(err)
		}
	}
	x.waitGreen()
	before := x.shardState()
	onCold1 := 0
	for _, c := range x.sim.Shards() {
		if c.Node == cold1 {
			onCold1++
		}
	}
	if onCold1 == 0 {
		t.Fatalf("%s holds no shard: nothing to block the drain", cold1)
	}

	run := startCLI(t, x.env, x.args("scale", "--data", "cold=1", "--yes", "--lock-id", "alice",
		"--lock-duration", "15s", "--timeout", "5m", "-o", "json")...)
	want := []string{"Blocked:  on table doc.", " shard ",
		" on node " + cold1 + " (cannot move shard to another node, even though it is not allowed to remain on its current node) (shard) since ",
		", gives up at ",
		"to unblock: free disk on " + strings.Join(slices.Sorted(slices.Values(staying)), ", ") +
			" (above cluster.routing.allocation.disk.watermark.low = 85%), or raise that setting: SET GLOBAL TRANSIENT \"cluster.routing.allocation.disk.watermark.low\" = '<higher>'"}
	// The blocker reaches the Lease once the wait has lasted a few seconds (with the lock's
	// renewal): poll what a second terminal sees, bounded.
	deadline := time.Now().Add(3 * time.Minute)
	var out string
	for {
		res := runCLI(t, x.env, "status", x.name, "-n", x.ns)
		out = res.Stdout
		if res.Code == 0 && containsAll(out, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed the blocker %q:\n%s", want, out)
		}
		time.Sleep(time.Second)
	}
	// The named shard is one the simulator keeps on the leaving node.
	_, rest, _ := strings.Cut(out, "Blocked:  on table ")
	table, rest, _ := strings.Cut(rest, " shard ")
	idText, _, _ := strings.Cut(rest, " ")
	id, err := strconv.Atoi(idText)
	if err != nil {
		t.Fatalf("no shard id in %q", out)
	}
	if !slices.ContainsFunc(x.sim.Shards(), func(c cratedbsim.ShardCopy) bool {
		return c.Table == table && c.Shard == id && c.Node == cold1 && c.Started
	}) {
		t.Errorf("status names %s shard %d on %s, which the simulator does not hold there: %+v", table, id, cold1, x.sim.Shards())
	}
	js := runCLI(t, x.env, "status", x.name, "-n", x.ns, "-o", "json")
	for _, w := range []string{`"kind": "shard"`, `"on": "table ` + table + ` shard ` + idText + ` on node ` + cold1, `"giveUpAt": "`, `"toUnblock": "free disk on `} {
		if !strings.Contains(js.Stdout, w) {
			t.Errorf("status -o json lacks %s:\n%s", w, js.Stdout)
		}
	}
	for _, n := range staying {
		if err := x.sim.SetDiskUsage(n, 40); err != nil {
			t.Fatal(err)
		}
	}
	if res := run.wait(); res.Code != 0 {
		t.Fatalf("scale after the disk was freed: exit %d\n%s", res.Code, res)
	}
	for _, n := range x.sim.Nodes() {
		if n.Name == cold1 && (n.Up || n.Shards > 0) {
			t.Errorf("%s after the scale: %+v", cold1, n)
		}
	}
	x.wantSameShards("the scale", before)
	if got := x.exclusions(); got != "" {
		t.Errorf("allocation exclusions after the scale = %q, want none", got)
	}
	t.Logf("%s held %d copies before the drain", cold1, onCold1)
}
