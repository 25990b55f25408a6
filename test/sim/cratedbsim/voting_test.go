package cratedbsim

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// masterScaleCluster starts a simulator on 7 dedicated masters and 2 data nodes.
func masterScaleCluster(t *testing.T) (*fakeCluster, *Sim) {
	t.Helper()
	f := newFakeCluster(t)
	f.sts("crate-master-c", 7, "-Cnode.name=$(POD_NAME)", "-Cnode.master=true", "-Cnode.data=false")
	f.sts("crate-data-hot-c", 2, "-Cnode.name=$(POD_NAME)", "-Cnode.master=false", "-Cnode.data=true")
	for i := range 7 {
		f.pvc("crate-master-c-" + strconv.Itoa(i))
		f.pod("crate-master-c-"+strconv.Itoa(i), true)
	}
	for i := range 2 {
		f.pvc("crate-data-hot-c-" + strconv.Itoa(i))
		f.pod("crate-data-hot-c-"+strconv.Itoa(i), true)
	}
	sim, err := Start(t.Context(), Config{Client: f.client, Namespace: testNS, Cluster: "c", TickInterval: -1, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	f.waitWatches()
	waitFor(t, "9 nodes", func() bool { _, n := sim.Health(); return n == 9 })
	return f, sim
}

// shrinkMasters does what the StatefulSet controller does with Parallel pod management:
// replicas lowered, every pod above it deleted at once.
func shrinkMasters(t *testing.T, f *fakeCluster, sim *Sim, from, to int) {
	t.Helper()
	ctx := context.Background()
	s, err := f.client.AppsV1().StatefulSets(testNS).Get(ctx, "crate-master-c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = ptr.To(int32(to))
	if _, err := f.client.AppsV1().StatefulSets(testNS).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := to; i < from; i++ {
		f.deletePod("crate-master-c-" + strconv.Itoa(i))
	}
	waitFor(t, fmt.Sprintf("%d masters down", from-to), func() bool {
		up := 0
		for _, n := range sim.Nodes() {
			if n.Master && n.Up {
				up++
			}
		}
		return up == to
	})
	sim.Tick() // the master's fault detection
}

// masterNode is sys.cluster.master_node as a client reads it.
func masterNode(t *testing.T, sim *Sim) any {
	t.Helper()
	res, err := sim.Exec("test", "crate", "SELECT master_node FROM sys.cluster")
	if err != nil {
		t.Fatal(err)
	}
	return res.Rows[0][0]
}

// TestMasterScaleAtOnceLosesQuorum: 7 -> 3 masters at once takes 4 of the 7 voters away
// before any master could shrink the voting configuration: no master, and none can be
// elected. (Before voting.go the simulator counted only the 3 masters the StatefulSet
// still wanted and elected one.)
func TestMasterScaleAtOnceLosesQuorum(t *testing.T) {
	f, sim := masterScaleCluster(t)
	if masterNode(t, sim) == nil {
		t.Fatal("no master before the scale")
	}
	shrinkMasters(t, f, sim, 7, 3)
	for range 3 {
		sim.Tick()
	}
	if m := masterNode(t, sim); m != nil {
		t.Fatalf("master %v elected with 3 of 7 voters", m)
	}
	if voters, _ := sim.VotingConfiguration(); len(voters) != 7 {
		t.Fatalf("voting configuration %v, want the 7 masters still", voters)
	}
	// The removed masters stay listed: no master published their departure.
	if res, err := sim.Exec("test", "crate", "SELECT count(*) FROM sys.nodes"); err != nil || fmt.Sprint(res.Rows) != "[[9]]" {
		t.Fatalf("sys.nodes count = %v, %v; want 9", res, err)
	}
}

// TestMasterScaleOneAtATimeKeepsQuorum: one master at a time, each departure processed
// before the next, keeps a master; the configuration shrinks to odd sizes of live nodes.
func TestMasterScaleOneAtATimeKeepsQuorum(t *testing.T) {
	f, sim := masterScaleCluster(t)
	voters, master := sim.VotingConfiguration()
	if len(voters) != 7 || master == "" {
		t.Fatalf("before: voters %v master %q", voters, master)
	}
	for _, tc := range []struct{ to, voters int }{{6, 5}, {5, 5}, {4, 3}, {3, 3}} {
		shrinkMasters(t, f, sim, tc.to+1, tc.to)
		voters, master := sim.VotingConfiguration()
		t.Logf("masters=%d voting configuration %v master %s", tc.to, voters, master)
		if master == "" || masterNode(t, sim) == nil {
			t.Fatalf("no master at %d masters", tc.to)
		}
		if len(voters) != tc.voters {
			t.Fatalf("at %d masters the voting configuration is %v, want %d nodes", tc.to, voters, tc.voters)
		}
		for _, v := range voters {
			if n, err := strconv.Atoi(v[len("crate-master-c-"):]); err != nil || n >= tc.to {
				t.Fatalf("voting configuration %v holds a removed node", voters)
			}
		}
		if res, err := sim.Exec("test", "crate", "SELECT count(*) FROM sys.nodes"); err != nil || fmt.Sprint(res.Rows) != fmt.Sprintf("[[%d]]", tc.to+2) {
			t.Fatalf("sys.nodes count = %v, %v; want %d", res, err, tc.to+2)
		}
	}
}

// TestReconfigure follows Reconfigurator.reconfigure on a model: departures shrink to the
// largest odd number of live voters, never below 3, and a configuration without a live
// majority is kept.
func TestReconfigure(t *testing.T) {
	m := testModel(5, 0, 2)
	if len(m.voting) != 5 {
		t.Fatalf("voting %v, want 5", m.votingNames())
	}
	m.setNodeUp(m.nodes["master-4"], false)
	m.tick()
	if got := m.votingNames(); len(got) != 3 || slices.Contains(got, "master-4") {
		t.Fatalf("after one of 5 left: %v, want 3 live voters", got)
	}
	// Two of the three voters down: no master, and the configuration cannot shrink.
	before := m.votingNames()
	var down []string
	for _, name := range before[:2] {
		m.setNodeUp(m.nodes[name], false)
		down = append(down, name)
	}
	m.tick()
	if m.masterID() != "" {
		t.Fatalf("master %s with 2 of 3 voters down", m.master)
	}
	if fmt.Sprint(m.votingNames()) != fmt.Sprint(before) {
		t.Fatalf("configuration changed without a master: %v -> %v", before, m.votingNames())
	}
	// One returns: a majority again, a master, and the configuration keeps its members.
	m.setNodeUp(m.nodes[down[0]], true)
	if m.masterID() == "" {
		t.Fatal("no master with 2 of 3 voters back")
	}
}
