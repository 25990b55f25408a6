//go:build e2e

package e2e

// End-to-end tests of `replace` and of `restart --mode zone`: the real binary against the
// testbed's StatefulSet controller, scheduler and volume provisioner.

import (
	"context"
	"fmt"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/bedwire"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

func pvcUIDs(t *testing.T, ns string) map[string]types.UID {
	t.Helper()
	list, err := bed.Client.CoreV1().PersistentVolumeClaims(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list PVCs: %v", err)
	}
	out := map[string]types.UID{}
	for _, c := range list.Items {
		if c.DeletionTimestamp == nil {
			out[c.Name] = c.UID
		}
	}
	return out
}

// inFlight replays a pod watch and returns the most pods that were, at one time, between the
// deletion of their original incarnation and the readiness of a new one.
func inFlight(changes []podTransition, old map[string]types.UID) int {
	down := map[string]bool{}
	most := 0
	for _, c := range changes {
		switch {
		case c.UID == old[c.Name] && c.Terminating:
			down[c.Name] = true
		case c.UID != old[c.Name] && c.Ready && !c.Terminating:
			delete(down, c.Name)
		}
		most = max(most, len(down))
	}
	return most
}

// Generic replacement: the pod comes back Ready on a new PVC; the other pods and PVCs are untouched.
func TestReplaceGeneric(t *testing.T) {
	ns := newNamespace(t)
	old := uidsByName(createDBCluster(t, ns, webCluster, 3))
	oldPVCs := pvcUIDs(t, ns)
	pods := recordPodWatch(t, ns)

	res := runCLI(t, cliEnv(t), "replace", webCluster, "web-1", "-n", ns, "--yes", "--no-tui")
	if res.Code != 0 {
		t.Fatalf("want exit 0: %s", res)
	}
	waitReplacementsReady(t, pods, []string{"web-1"}, old)
	now := pvcUIDs(t, ns)
	if now["data-web-1"] == "" || now["data-web-1"] == oldPVCs["data-web-1"] {
		t.Errorf("PVC data-web-1: uid %q before, %q after; want a new one", oldPVCs["data-web-1"], now["data-web-1"])
	}
	for _, name := range []string{"data-web-0", "data-web-2"} {
		if now[name] != oldPVCs[name] {
			t.Errorf("PVC %s of a pod not replaced changed: %s -> %s", name, oldPVCs[name], now[name])
		}
	}
	for _, c := range podTransitions(pods.snapshot()) {
		if c.Name != "web-1" && c.Terminating {
			t.Errorf("pod %s was touched: %s", c.Name, c)
		}
	}
	checkReplaceEvents(t, ns, "DbopsReplacePod", map[string]types.UID{"web-1": old["web-1"]})
}

// --max-concurrent 2: three pods replaced in batches of two, never more than two down at once.
func TestReplaceMaxConcurrent(t *testing.T) {
	ns := newNamespace(t)
	old := uidsByName(createDBCluster(t, ns, webCluster, 4))
	oldPVCs := pvcUIDs(t, ns)
	pods := recordPodWatch(t, ns)
	names := []string{"web-0", "web-1", "web-2"}

	res := runCLI(t, cliEnv(t), append([]string{"replace", webCluster}, append(names, "-n", ns, "--max-concurrent", "2", "--yes", "--no-tui")...)...)
	if res.Code != 0 {
		t.Fatalf("want exit 0: %s", res)
	}
	changes := waitReplacementsReady(t, pods, names, old)
	t.Logf("most replacements in flight at once: %d", inFlight(changes, old))
	if n := inFlight(changes, old); n > 2 {
		for _, c := range changes {
			t.Logf("pod watch %s", c)
		}
		t.Errorf("%d replacements were in flight at once, want at most 2", n)
	}
	now := pvcUIDs(t, ns)
	for _, n := range names {
		if now["data-"+n] == oldPVCs["data-"+n] {
			t.Errorf("PVC data-%s not replaced", n)
		}
	}
	if now["data-web-3"] != oldPVCs["data-web-3"] {
		t.Error("PVC data-web-3 changed, but web-3 was not asked for")
	}
}

// --failed with --taint finds the pod on the tainted node and nothing else; a younger taint
// finds nothing.
func TestReplaceFailedTaintedNode(t *testing.T) {
	ns := newNamespace(t)
	created := createDBCluster(t, ns, webCluster, 3)
	victim := created[2]
	// A key of this test only, with a soft effect: the nodes are shared with other tests.
	key := "dbops-e2e.example.com/retire-" + ns
	taintNode(t, victim.Spec.NodeName, corev1.Taint{Key: key, Effect: corev1.TaintEffectPreferNoSchedule,
		TimeAdded: &metav1.Time{Time: time.Now().Add(-time.Hour)}})
	env := cliEnv(t)

	res := runCLI(t, env, "replace", webCluster, "-n", ns, "--failed", "--taint", key+"=30m", "--dry-run")
	if res.Code != 0 {
		t.Fatalf("want exit 0: %s", res)
	}
	if want := victim.Name + ": node " + victim.Spec.NodeName + " has taint " + key; !strings.Contains(res.Stdout, want) {
		t.Errorf("dry-run lacks %q:\n%s", want, res.Stdout)
	}
	for _, p := range created[:2] {
		if strings.Contains(res.Stdout, p.Name) {
			t.Errorf("dry-run names healthy pod %s:\n%s", p.Name, res.Stdout)
		}
	}

	res = runCLI(t, env, "replace", webCluster, "-n", ns, "--failed", "--taint", key+"=3h", "--yes")
	if res.Code != 0 || !strings.Contains(res.Stdout, "nothing to replace") {
		t.Errorf("a taint younger than the threshold: want exit 0 and nothing to replace: %s", res)
	}
}

func taintNode(t *testing.T, node string, taint corev1.Taint) {
	t.Helper()
	update := func(ctx context.Context, f func(*corev1.Node)) error {
		n, err := bed.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		f(n)
		_, err = bed.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	}
	if err := update(t.Context(), func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, taint) }); err != nil {
		t.Fatalf("taint node %s: %v", node, err)
	}
	t.Cleanup(func() {
		_ = update(context.Background(), func(n *corev1.Node) {
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == taint.Key })
		})
	})
}

// restart --mode zone on a cluster spread over three zones: zones in name order, each zone's
// pods deleted in the same batch, the next zone touched only once the previous one is back.
func TestRestartZoneMode(t *testing.T) {
	ns := newNamespace(t)
	created := createDBCluster(t, ns, webCluster, 6)
	old := uidsByName(created)
	zoneOf := map[string]string{}
	for _, p := range created {
		n, err := bed.Client.CoreV1().Nodes().Get(t.Context(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get node: %v", err)
		}
		zoneOf[p.Name] = n.Labels[testbed.ZoneLabel]
	}
	var zones []string
	for _, z := range zoneOf {
		if !slices.Contains(zones, z) {
			zones = append(zones, z)
		}
	}
	slices.Sort(zones)
	if len(zones) < 3 {
		t.Fatalf("pods spread over %v, want three zones", zones)
	}
	pods := recordPodWatch(t, ns)

	res := runCLI(t, cliEnv(t), "restart", webCluster, "-n", ns, "--rolling", "--mode", "zone", "--max-unavailable-zones", "0", "--yes", "--no-tui")
	if res.Code != 0 {
		t.Fatalf("want exit 0: %s", res)
	}
	for _, z := range zones {
		if !strings.Contains(res.Stdout, "zone/"+z) {
			t.Errorf("output does not name batch zone/%s:\n%s", z, res.Stdout)
		}
	}
	var names []string
	for n := range old {
		names = append(names, n)
	}
	changes := waitReplacementsReady(t, pods, names, old)
	// Per zone: the first deletion of an original pod and the last readiness of a new one.
	first, last := map[string]int{}, map[string]int{}
	for _, c := range changes {
		z := zoneOf[c.Name]
		switch {
		case c.UID == old[c.Name] && c.Terminating:
			if _, ok := first[z]; !ok {
				first[z] = c.Seq
			}
		case c.UID != old[c.Name] && c.Ready && !c.Terminating:
			last[z] = max(last[z], c.Seq)
		}
	}
	dump := func() string {
		var b strings.Builder
		for _, c := range changes {
			fmt.Fprintf(&b, "  %s zone=%s\n", c, zoneOf[c.Name])
		}
		return b.String()
	}
	for i := 1; i < len(zones); i++ {
		prev, cur := zones[i-1], zones[i]
		if first[cur] < last[prev] {
			t.Errorf("zone %s was touched (event #%d) before zone %s was back (event #%d):\n%s", cur, first[cur], prev, last[prev], dump())
		}
	}
	if n := inFlight(changes, old); n < 2 {
		t.Errorf("at most %d pods were down at once; a zone's two pods should go together:\n%s", n, dump())
	}
}

// CrateDB replacement against the simulator: the node's shards are drained before its pod and
// PVC go (the cluster never turns red), it comes back on a new PVC, rejoins sys.nodes, and only
// its own exclusion is dropped again.
func TestCrateDBReplace(t *testing.T) {
	for _, l := range crateLayouts {
		t.Run(l.name, func(t *testing.T) { testCrateDBReplace(t, l.layout) })
	}
}

func testCrateDBReplace(t *testing.T, layout bedwire.Layout) {
	x := newCrateEnvLayout(t, true, layout)
	const pod, claim = "crate-data-hot-" + crateE2ECluster + "-1", "data-crate-data-hot-" + crateE2ECluster + "-1"
	node := x.node("hot", 1)
	oldPVC := pvcUIDs(t, x.ns)[claim]
	oldPod, err := bed.Client.CoreV1().Pods(x.ns).Get(t.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The database cannot be watched: sample its health while the command runs.
	stop := make(chan struct{})
	worst := make(chan int, 1)
	go func() {
		w := 0
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			sev, _ := x.sim.Health()
			w = max(w, sev)
			select {
			case <-stop:
				worst <- w
				return
			case <-tick.C:
			}
		}
	}()
	res := runCLI(t, x.env, x.args("replace", pod, "--yes", "--no-tui", "--health-checks", "2", "--health-interval", "200ms")...)
	close(stop)
	if res.Code != 0 {
		t.Fatalf("want exit 0: %s", res)
	}
	if w := <-worst; w >= 3 {
		t.Errorf("the cluster turned red (severity %d) during the replacement: shards were lost", w)
	}
	// The simulator logs shard counts per tick and node state changes in model order.
	if shards, _, ok := shardsOnWhenDown(x.simLog.snapshot(), node); !ok || shards != 0 {
		t.Errorf("node %s went down holding %d shards (seen: %v); want it drained first", node, shards, ok)
	}
	if now := pvcUIDs(t, x.ns)[claim]; now == "" || now == oldPVC {
		t.Errorf("PVC %s: uid %s before, %s after; want a new one", claim, oldPVC, now)
	}
	back := false
	for _, n := range x.sim.Nodes() {
		if n.Name == node && n.Up {
			back = true
		}
	}
	if !back {
		t.Errorf("node %s is not back in sys.nodes: %+v", node, x.sim.Nodes())
	}
	if ex := x.exclusions(); ex != "" {
		t.Errorf("allocation exclusions left behind: %q", ex)
	}
	var sawExclude bool
	for _, s := range x.toolStatements(0) {
		if strings.Contains(s.Statement, "exclude._name") && strings.Contains(s.Statement, node) {
			sawExclude = true
		}
	}
	if !sawExclude {
		t.Errorf("the tool never excluded %s from allocation:\n%s", node, dumpStatements(x.toolStatements(0)))
	}
	checkReplaceEvents(t, x.ns, "DbopsReplacePod", map[string]types.UID{pod: oldPod.UID})
	x.waitGreen()
}
