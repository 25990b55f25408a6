//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/bedwire"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// votingSample is one reading of the simulator's voting configuration and master.
type votingSample struct {
	voters []string
	master string
}

func (s votingSample) String() string {
	m := s.master
	if m == "" {
		m = "NONE"
	}
	return fmt.Sprintf("master %s voters [%s]", m, strings.Join(s.voters, " "))
}

// sampleVoting reads the simulator's voting configuration every few milliseconds until
// stop is closed, keeping each distinct reading in order (a poll of the simulator's state:
// a database cannot be watched).
func sampleVoting(sim *cratedbsim.Sim, stop <-chan struct{}) func() []votingSample {
	var mu sync.Mutex
	var out []votingSample
	done := make(chan struct{})
	take := func() {
		voters, master := sim.VotingConfiguration()
		s := votingSample{voters: voters, master: master}
		mu.Lock()
		if n := len(out); n == 0 || out[n-1].String() != s.String() {
			out = append(out, s)
		}
		mu.Unlock()
	}
	go func() {
		defer close(done)
		for {
			take()
			select {
			case <-stop:
				take()
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() []votingSample {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(out)
	}
}

// TestCrateDBMasterScaleKeepsQuorum: 7 -> 3 masters on the simulator (Parallel pod
// management, the voting configuration modelled as CrateDB keeps it) removes one master per
// step and keeps a master throughout; the voting configuration is sampled during the whole
// run and after every step. Lowering the StatefulSet from 7 to 3 at once leaves the
// simulator without a master (cratedbsim TestMasterScaleAtOnceLosesQuorum), as the engine
// did before.
func TestCrateDBMasterScaleKeepsQuorum(t *testing.T) {
	for _, l := range crateLayouts {
		t.Run(l.name, func(t *testing.T) { testCrateDBMasterScaleKeepsQuorum(t, l.layout) })
	}
}

func testCrateDBMasterScaleKeepsQuorum(t *testing.T, layout bedwire.Layout) {
	x := newCrateEnvGroups(t, true, layout, []crateE2EGroup{{"master", 7, ""}, {"hot", 2, "0"}})
	before, master := x.sim.VotingConfiguration()
	if len(before) != 7 || master == "" {
		t.Fatalf("before the scale: voting configuration %v, master %q", before, master)
	}
	stsRec := recordStatefulSetWatch(t, x.ns)
	stop := make(chan struct{})
	samples := sampleVoting(x.sim, stop)

	res := runCLI(t, x.env, x.args("scale", "--master", "3", "--health-checks", "2", "--health-interval", "100ms", "--yes", "-o", "json")...)
	close(stop)
	got := samples()
	var lines []string
	for _, s := range got {
		lines = append(lines, s.String())
	}
	t.Logf("voting configuration during the scale:\n  %s", strings.Join(lines, "\n  "))
	if res.Code != 0 {
		t.Fatalf("scale: want exit 0: %s", res)
	}
	evs := parseNDJSON(t, res)
	if out := lastOutcome(evs); out != "succeeded" {
		t.Errorf("outcome %q, want succeeded", out)
	}
	t.Logf("steps done: %v", stepsOf(evs, "step-done"))

	want := []string{}
	for n := 7; n > 3; n-- {
		want = append(want, fmt.Sprintf("crate-master-%s %d->%d", x.name, n, n-1))
	}
	if changes := replicaChanges(stsRec); !slices.Equal(changes, want) {
		t.Errorf("StatefulSet replica changes %v, want %v", changes, want)
	}
	// A master throughout, and never a configuration whose live members are no majority.
	removed := map[string]bool{}
	for i := 3; i < 7; i++ {
		removed[x.node("master", i)] = true
	}
	for _, s := range got {
		if s.master == "" {
			t.Errorf("no master at some point: %s", s)
		}
	}
	// The configuration shrinks as CrateDB's auto-shrink does: 7, 5, 5, 3, 3 voters, never a
	// removed node once the scale is done.
	var sizes []int
	for _, s := range got {
		if n := len(s.voters); len(sizes) == 0 || sizes[len(sizes)-1] != n {
			sizes = append(sizes, n)
		}
	}
	if !slices.Equal(sizes, []int{7, 5, 3}) {
		t.Errorf("voting configuration sizes %v, want 7, 5, 3", sizes)
	}
	after, master := x.sim.VotingConfiguration()
	for _, v := range after {
		if removed[v] {
			t.Errorf("voting configuration after the scale %v holds removed node %s", after, v)
		}
	}
	if len(after) != 3 || master == "" {
		t.Errorf("after the scale: voting configuration %v, master %q", after, master)
	}
	x.waitGreen()
}

// TestCrateDBZoneRestartKeepsAStartedCopy: a table whose copies all sit in one zone (pinned
// there by an allocation exclusion) would go red while --mode zone restarts that zone; the
// restart is refused before anything is written (exit 5). Before, CrateDB's zone restart
// had no such check and deleted the zone's pods.
func TestCrateDBZoneRestartKeepsAStartedCopy(t *testing.T) {
	x := newCrateEnvGroups(t, true, bedwire.LayoutPodName, []crateE2EGroup{{"master", 3, ""}, {"hot", 6, "0"}})
	ctx := t.Context()
	// Pods of the hot group by zone (the scheduler spreads them; 6 pods over 3 zones put
	// two in one zone at least).
	byZone := map[string][]string{}
	for i := range 6 {
		pod, err := bed.Client.CoreV1().Pods(x.ns).Get(ctx, fmt.Sprintf("crate-data-hot-%s-%d", x.name, i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node, err := bed.Client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		z := node.Labels[testbed.ZoneLabel]
		byZone[z] = append(byZone[z], x.node("hot", i))
	}
	var zone string
	var pinned []string
	for z, nodes := range byZone {
		if len(nodes) >= 2 && (zone == "" || z < zone) {
			zone, pinned = z, nodes[:2]
		}
	}
	if zone == "" {
		t.Fatalf("no zone with two hot pods: %v", byZone)
	}
	var others []string
	for _, nodes := range byZone {
		for _, n := range nodes {
			if !slices.Contains(pinned, n) {
				others = append(others, n)
			}
		}
	}
	slices.Sort(others)
	x.sql(`SET GLOBAL "cluster.routing.allocation.exclude._name" = '` + strings.Join(others, ",") + `'`)
	x.sql(`CREATE TABLE doc.pinned (id INT) CLUSTERED INTO 2 SHARDS WITH (number_of_replicas = 1)`)
	x.waitGreen()
	for _, c := range x.sim.Shards() {
		if c.Table == "doc.pinned" && !slices.Contains(pinned, c.Node) {
			t.Fatalf("doc.pinned copy on %s, outside %v", c.Node, pinned)
		}
	}
	t.Logf("doc.pinned lives on %v in %s", pinned, zone)

	before := snapshotNamespace(t, x.ns)
	seq0 := x.lastSeq()
	res := runCLI(t, x.env, x.args("restart", "--rolling", "--mode", "zone", "--group", "hot", "--yes", "--no-tui", "--health-checks", "1", "--health-interval", "200ms")...)
	if res.Code != 5 {
		t.Fatalf("zone restart: want exit 5: %s", res)
	}
	if !strings.Contains(res.Stderr, "would take every started copy of") || !strings.Contains(res.Stderr, "would go red") {
		t.Errorf("stderr does not name the shard that would go red: %s", res.Stderr)
	}
	t.Logf("stderr: %s", strings.TrimSpace(res.Stderr))
	for _, s := range x.toolStatements(seq0) {
		if isMutatingStatement(s.Statement) {
			t.Errorf("refused restart ran a writing statement: #%d %s", s.Seq, s.Statement)
		}
	}
	if diffs := diffRVSnapshots(t, before, snapshotNamespace(t, x.ns)); len(diffs) > 0 {
		var other []string
		for _, d := range diffs {
			if !strings.Contains(d, "lease/dbops-"+x.name) {
				other = append(other, d)
			}
		}
		if len(other) > 0 {
			t.Errorf("a refused restart changed the namespace:\n  %s", strings.Join(other, "\n  "))
		}
	}
	for _, n := range x.sim.Nodes() {
		if !n.Up {
			t.Errorf("node %s went down", n.Name)
		}
	}
}

// TestCrateDBScaleLeavesEachGatewaySettingOnce: StatefulSets whose pods carry both
// -Cgateway.expected_nodes and -Cgateway.expected_data_nodes (CrateDB 5.x takes both) are
// scaled: the rename of expected_nodes to expected_data_nodes must leave the setting once,
// or every pod restarted afterwards refuses to start ("setting [...] already set", which the
// simulator enforces as CrateDB's command line does) and the rolling restart never ends.
func TestCrateDBScaleLeavesEachGatewaySettingOnce(t *testing.T) {
	x := newCrateEnvGroups(t, true, bedwire.LayoutPodName, []crateE2EGroup{{"master", 3, ""}, {"hot", 3, "0"}})
	ctx := t.Context()
	for _, g := range x.groups {
		s, err := bed.Client.AppsV1().StatefulSets(x.ns).Get(ctx, g.sts(x.name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := &s.Spec.Template.Spec.Containers[0]
		c.Args = append(c.Args, "-Cgateway.expected_nodes=6")
		if _, err := bed.Client.AppsV1().StatefulSets(x.ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	res := runCLI(t, x.env, x.args("scale", "--data", "hot=4", "--yes", "--no-tui")...)
	if res.Code != 0 {
		t.Fatalf("scale: want exit 0: %s", res)
	}
	for _, g := range x.groups {
		s, err := bed.Client.AppsV1().StatefulSets(x.ns).Get(ctx, g.sts(x.name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := s.Spec.Template.Spec.Containers[0]
		seen := map[string]int{}
		for _, a := range append(slices.Clone(c.Command), c.Args...) {
			if k, _, ok := strings.Cut(strings.TrimPrefix(a, "-C"), "="); ok && strings.HasPrefix(a, "-C") {
				seen[k]++
			}
		}
		for k, n := range seen {
			if n > 1 {
				t.Errorf("statefulset %s: setting %s given %d times: %q", s.Name, k, n, c.Args)
			}
		}
		if seen["gateway.expected_data_nodes"] != 1 || seen["gateway.expected_nodes"] != 0 {
			t.Errorf("statefulset %s: want expected_data_nodes once and no expected_nodes: %q", s.Name, c.Args)
		}
	}
	// Every restarted pod starts with the rewritten arguments.
	res = runCLI(t, x.env, x.args("restart", "--rolling", "--group", "hot", "--yes", "--no-tui", "--health-checks", "1", "--health-interval", "200ms", "--timeout", "90s")...)
	if res.Code != 0 {
		t.Fatalf("rolling restart after the scale: want exit 0 (each pod starts): %s", res)
	}
	x.waitGreen()
}
