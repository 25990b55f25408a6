//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbop"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

const fdbGroupLabel = "foundationdb.org/fdb-process-group-id"

// fdbGroups are the FoundationDBCluster's status.processGroups, by ID.
func fdbGroups(t *testing.T, ns string) (map[string]map[string]any, *unstructured.Unstructured) {
	t.Helper()
	u, err := bed.Dynamic.Resource(fdbop.GVR).Namespace(ns).Get(t.Context(), "myfdb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	groups, _, _ := unstructured.NestedSlice(u.Object, "status", "processGroups")
	for _, g := range groups {
		m, _ := g.(map[string]any)
		id, _ := m["processGroupID"].(string)
		out[id] = m
	}
	return out, u
}

// fdbExcluded is configuration.excluded_servers of the model, as written.
func fdbExcluded(t *testing.T, m *fdbsim.Cluster) []string {
	t.Helper()
	var st struct {
		Cluster struct {
			Configuration struct {
				ExcludedServers []struct{ Address, Locality string } `json:"excluded_servers"`
			} `json:"configuration"`
		} `json:"cluster"`
	}
	if err := json.Unmarshal(m.StatusJSON(), &st); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range st.Cluster.Configuration.ExcludedServers {
		out = append(out, e.Address+e.Locality)
	}
	return out
}

// TestFoundationDBReplaceInterrupted: replace one storage process group, interrupted (SIGINT)
// once the removal is marked, then run again: exit 0, the group gone from the status, the
// storage count unchanged, none of its addresses still excluded, and success was never
// reported before its pod and PVC were gone.
func TestFoundationDBReplaceInterrupted(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	env := cliEnv(t)
	ctx := t.Context()
	pods, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-process-class=storage"})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("storage pods: %v %d", err, len(pods.Items))
	}
	victim := pods.Items[0]
	id := victim.Labels[fdbGroupLabel]
	ip := victim.Status.PodIP
	args := []string{"replace", "myfdb", victim.Name, "-n", ns, "--yes", "-o", "json"}
	run := startCLI(t, env, args...)
	run.waitEvent("the removal marked", func(e ndEvent) bool { return e.Type == "step-done" && e.stepID() == "mark/"+id })
	if groups, _ := fdbGroups(t, ns); groups[id]["removalTimestamp"] == nil {
		t.Fatalf("step mark done but group %s not marked: %v", id, groups[id])
	}
	if err := run.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if res := run.wait(); res.Code == 0 {
		t.Fatalf("the interrupted run succeeded: %s", res)
	}

	gone := func(when string) {
		t.Helper()
		sel := fdbGroupLabel + "=" + id
		if l, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel}); err != nil || len(l.Items) > 0 {
			t.Fatalf("%s: pods of %s: %v %d", when, id, err, len(l.Items))
		}
		if l, err := bed.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{LabelSelector: sel}); err != nil || len(l.Items) > 0 {
			t.Fatalf("%s: PVCs of %s: %v %d", when, id, err, len(l.Items))
		}
	}
	again := startCLI(t, env, args...)
	progress, markedAgain := 0, false
	for {
		ev, ok := again.next()
		if !ok {
			break
		}
		if ev.Type == "step-progress" && strings.HasPrefix(ev.stepID(), "exclude/") {
			progress++
		}
		if ev.Type == "step-started" && strings.HasPrefix(ev.stepID(), "mark/") {
			markedAgain = true
		}
		// Success is never reported before the pod and PVC are gone.
		if (ev.Type == "step-done" && strings.HasPrefix(ev.stepID(), "remove/")) || (ev.Type == "done" && ev.Outcome == "succeeded") {
			gone(ev.Type + " " + ev.stepID())
		}
	}
	res := again.wait()
	if res.Code != 0 || lastOutcome(again.all) != "succeeded" {
		t.Fatalf("re-run: %s", res)
	}
	if markedAgain || progress == 0 {
		t.Fatalf("re-run: mark step run again %v, %d exclusion progress events (want the journal's mark kept and progress from stored_bytes)", markedAgain, progress)
	}
	groups, _ := fdbGroups(t, ns)
	if _, ok := groups[id]; ok {
		t.Fatalf("group %s still in status", id)
	}
	storage := 0
	for _, g := range groups {
		if g["processClass"] == "storage" && g["removalTimestamp"] == nil {
			storage++
		}
	}
	if storage != 3 {
		t.Fatalf("%d storage process groups, want 3", storage)
	}
	for _, e := range fdbExcluded(t, model) {
		if e == "locality_instance_id:"+id || e == ip || strings.HasPrefix(e, ip+":") {
			t.Fatalf("%s still excluded: %v", e, fdbExcluded(t, model))
		}
	}
	if model.Has(id) {
		t.Fatalf("process %s still in the cluster", id)
	}
	if !slices.ContainsFunc(model.Log(), func(e fdbsim.LogEntry) bool {
		return e.Client == "operator" && strings.HasPrefix(e.Command, "exclude ")
	}) {
		t.Fatal("the operator never excluded")
	}
}

// TestFoundationDBReplaceRefusedBelowFaultTolerance: replacing every storage process group at
// once (storage in all three zoneids of a triple cluster) is refused before the lock: exit 5,
// the FoundationDBCluster unchanged (same resourceVersion), no Lease.
func TestFoundationDBReplaceRefusedBelowFaultTolerance(t *testing.T) {
	ns := newNamespace(t)
	fdbSimFixture(t, ns, "myfdb")
	env := cliEnv(t)
	_, before := fdbGroups(t, ns)
	r := runCLI(t, env, "replace", "myfdb", "--process-class", "storage", "-n", ns, "--yes")
	if r.Code != 5 || !strings.Contains(r.Stderr, "fault tolerance") {
		t.Fatalf("want exit 5 naming fault tolerance: %s", r)
	}
	_, after := fdbGroups(t, ns)
	if after.GetResourceVersion() != before.GetResourceVersion() {
		t.Fatalf("FoundationDBCluster written: resourceVersion %s -> %s", before.GetResourceVersion(), after.GetResourceVersion())
	}
	if leases, err := bed.Client.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{}); err != nil || len(leases.Items) > 0 {
		t.Fatalf("leases: %v %d", err, len(leases.Items))
	}
}

// TestFoundationDBReplaceNode: replace --node N replaces every process group with a pod on that
// node; each class keeps its count.
func TestFoundationDBReplaceNode(t *testing.T) {
	ns := newNamespace(t)
	fdbSimFixture(t, ns, "myfdb")
	env := cliEnv(t)
	ctx := t.Context()
	pods, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-process-class=storage"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("storage pods: %v", err)
	}
	node := pods.Items[0].Spec.NodeName
	all, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-cluster-name=myfdb"})
	if err != nil {
		t.Fatal(err)
	}
	var victims []string
	for _, p := range all.Items {
		if p.Spec.NodeName == node {
			victims = append(victims, p.Labels[fdbGroupLabel])
		}
	}
	r := runCLI(t, env, "replace", "myfdb", "--node", node, "-n", ns, "--yes", "-o", "json")
	if r.Code != 0 || lastOutcome(parseNDJSON(t, r)) != "succeeded" {
		t.Fatalf("replace --node %s: %s", node, r)
	}
	groups, _ := fdbGroups(t, ns)
	perClass := map[string]int{}
	for id, g := range groups {
		if slices.Contains(victims, id) {
			t.Fatalf("group %s of node %s still in status", id, node)
		}
		if g["removalTimestamp"] == nil {
			perClass[g["processClass"].(string)]++
		}
	}
	for _, class := range []string{"storage", "log", "stateless"} {
		if perClass[class] != 3 {
			t.Fatalf("process groups per class %v, want 3 each (replaced %v)", perClass, victims)
		}
	}
}

// TestFoundationDBReplaceConcurrentRemoval: while the run waits for the lock after planning the
// replacement of storage group A, someone else marks storage group B for removal. The run's
// patch meets a resourceVersion conflict, reads the CR again, checks again (B's replacement
// keeps three storage zoneids) and adds A to the list beside B: nothing overwritten. Both
// removals converge: exit 0, A and B gone, three storage groups.
func TestFoundationDBReplaceConcurrentRemoval(t *testing.T) {
	ns := newNamespace(t)
	fdbSimFixture(t, ns, "myfdb")
	env := cliEnv(t)
	ctx := t.Context()
	pods, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-process-class=storage"})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("storage pods: %v", err)
	}
	a, idA, idB := pods.Items[0].Name, pods.Items[0].Labels[fdbGroupLabel], pods.Items[1].Labels[fdbGroupLabel]
	var storageBefore []string
	for _, p := range pods.Items {
		storageBefore = append(storageBefore, p.Labels[fdbGroupLabel])
	}
	if r := runCLI(t, env, "lock", "acquire", "myfdb", "-n", ns, "--lock-id", "alice"); r.Code != 0 {
		t.Fatalf("lock acquire: %s", r)
	}
	run := startCLI(t, env, "replace", "myfdb", a, "-n", ns, "--yes", "--lock-id", "bob", "--wait-for-lock", "-o", "json")
	run.waitEvent("waiting for the lock", func(e ndEvent) bool {
		return e.Type == "warning" && strings.Contains(e.Message, "waiting for the lock")
	})
	res := bed.Dynamic.Resource(fdbop.GVR).Namespace(ns)
	u, err := res.Get(ctx, "myfdb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// B's replacement must not land in the zone of the storage group that stays (the run's
	// re-check would then refuse, rightly: two storage zoneids and one replacement): while it is
	// scheduled, only the nodes of B's own zone take pods.
	podB := pods.Items[1]
	nodeB, err := bed.Client.CoreV1().Nodes().Get(ctx, podB.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cordoned := cordonOtherZones(t, nodeB.Labels[testbed.ZoneLabel])
	_ = unstructured.SetNestedStringSlice(u.Object, []string{idB}, "spec", "processGroupsToRemove")
	updated, err := res.Update(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The scenario is B's replacement already placed: the run's re-check counts only groups
	// with a fault domain (an unscheduled replacement could land in any zone), so until the
	// stand-in has scheduled it the run refuses, rightly. Wait for that in the CR's status.
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	w, err := res.Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=myfdb", ResourceVersion: updated.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	placed := func(obj *unstructured.Unstructured) bool {
		groups, _, _ := unstructured.NestedSlice(obj.Object, "status", "processGroups")
		for _, g := range groups {
			m, _ := g.(map[string]any)
			id, _ := m["processGroupID"].(string)
			if m["processClass"] == "storage" && id != idA && id != idB && m["faultDomain"] != nil && m["faultDomain"] != "" && !slices.Contains(storageBefore, id) {
				return true
			}
		}
		return false
	}
	for done := placed(updated); !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch of the FoundationDBCluster ended before B's replacement was placed")
			}
			if obj, isU := ev.Object.(*unstructured.Unstructured); isU {
				done = placed(obj)
			}
		case <-wctx.Done():
			t.Fatal("B's replacement was not placed in time")
		}
	}
	w.Stop()
	cordoned()
	if r := runCLI(t, env, "lock", "release", "myfdb", "-n", ns, "--lock-id", "alice"); r.Code != 0 {
		t.Fatalf("lock release: %s", r)
	}
	out := run.wait()
	if out.Code != 0 {
		t.Fatalf("replace after a concurrent removal: %s", out)
	}
	conflict := slices.ContainsFunc(run.all, func(e ndEvent) bool {
		return e.Type == "step-waiting" && strings.Contains(e.Reason, "resourceVersion conflict")
	})
	if !conflict {
		t.Fatal("no resourceVersion conflict: the patch did not carry the version the plan read")
	}
	after, err := res.Get(ctx, "myfdb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l, _, _ := unstructured.NestedStringSlice(after.Object, "spec", "processGroupsToRemove"); !slices.Equal(l, []string{idB, idA}) {
		t.Fatalf("processGroupsToRemove %v, want [%s %s] (the other removal kept, ours added)", l, idB, idA)
	}
	groups, _ := fdbGroups(t, ns)
	storage := 0
	for id, g := range groups {
		if id == idA || id == idB {
			t.Fatalf("group %s still in status", id)
		}
		if g["processClass"] == "storage" {
			storage++
		}
	}
	if storage != 3 {
		t.Fatalf("%d storage groups, want 3", storage)
	}
}

// TestFoundationDBReplaceDeletion: --strategy deletion deletes the pod (the operator recreates
// it under the same name, new UID) behind the restart gate, and bounces nothing.
func TestFoundationDBReplaceDeletion(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	env := cliEnv(t)
	ctx := t.Context()
	pods, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-process-class=log"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("log pods: %v", err)
	}
	victim := pods.Items[0]
	r := runCLI(t, env, "replace", "myfdb", victim.Name, "--strategy", "deletion", "-n", ns, "--yes")
	if r.Code != 0 {
		t.Fatal(r)
	}
	again, err := bed.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
	if err != nil || again.UID == victim.UID {
		t.Fatalf("pod %s not recreated: %v", victim.Name, err)
	}
	if muts := fdbMutations(model); slices.ContainsFunc(muts, func(c string) bool { return strings.HasPrefix(c, "kill ") }) {
		t.Fatalf("--strategy deletion bounced processes: %q", muts)
	}
	if groups, _ := fdbGroups(t, ns); groups[victim.Labels[fdbGroupLabel]] == nil {
		t.Fatal("the process group was removed by a deletion")
	}
}

// cordonOtherZones marks every schedulable node outside zones unschedulable and returns the
// function that makes them schedulable again (also run when the test ends).
func cordonOtherZones(t *testing.T, zones ...string) (uncordon func()) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	nodes, err := bed.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set := func(name string, unschedulable bool) error {
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, unschedulable)
		_, err := bed.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	var names []string
	for _, n := range nodes.Items {
		if !slices.Contains(zones, n.Labels[testbed.ZoneLabel]) && !n.Spec.Unschedulable {
			if err := set(n.Name, true); err != nil {
				t.Fatal(err)
			}
			names = append(names, n.Name)
		}
	}
	done := false
	uncordon = func() {
		if done {
			return
		}
		done = true
		for _, n := range names {
			if err := set(n, false); err != nil {
				t.Errorf("uncordon %s: %v", n, err)
			}
		}
	}
	t.Cleanup(uncordon)
	return uncordon
}

// TestFoundationDBReplaceNodeSelector: replace --node-selector key=value evacuates every node
// with that label, as kubectl-fdb cordon --node-selector: every process group with a pod on such
// a node is replaced and each class keeps its count. A selector matching the nodes of every
// storage group is refused before the lock (exit 5, the CR unchanged, no Lease).
func TestFoundationDBReplaceNodeSelector(t *testing.T) {
	ns := newNamespace(t)
	fdbSimFixture(t, ns, "myfdb")
	env := cliEnv(t)
	ctx := t.Context()
	key := "e2e.dbops.io/" + ns
	label := func(node, value string) {
		t.Helper()
		v := any(value)
		if value == "" {
			v = nil
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: v}}})
		if _, err := bed.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	storage, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-process-class=storage"})
	if err != nil || len(storage.Items) == 0 {
		t.Fatalf("storage pods: %v", err)
	}
	for _, p := range storage.Items {
		label(p.Spec.NodeName, "all")
		t.Cleanup(func() { label(p.Spec.NodeName, "") })
	}
	_, before := fdbGroups(t, ns)
	r := runCLI(t, env, "replace", "myfdb", "--node-selector", key+"=all", "-n", ns, "--yes")
	if r.Code != 5 || !strings.Contains(r.Stderr, "fault tolerance") {
		t.Fatalf("every storage node: want exit 5 naming fault tolerance: %s", r)
	}
	if _, after := fdbGroups(t, ns); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Fatalf("FoundationDBCluster written: resourceVersion %s -> %s", before.GetResourceVersion(), after.GetResourceVersion())
	}
	if leases, err := bed.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{}); err != nil || len(leases.Items) > 0 {
		t.Fatalf("leases: %v %v", err, leases)
	}

	node := storage.Items[0].Spec.NodeName
	label(node, "evacuate")
	all, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-cluster-name=myfdb"})
	if err != nil {
		t.Fatal(err)
	}
	var victims []string
	for _, p := range all.Items {
		if p.Spec.NodeName == node {
			victims = append(victims, p.Labels[fdbGroupLabel])
		}
	}
	r = runCLI(t, env, "replace", "myfdb", "--node-selector", key+"=evacuate", "-n", ns, "--yes", "-o", "json")
	if r.Code != 0 || lastOutcome(parseNDJSON(t, r)) != "succeeded" {
		t.Fatalf("replace --node-selector: %s", r)
	}
	groups, _ := fdbGroups(t, ns)
	perClass := map[string]int{}
	for id, g := range groups {
		if slices.Contains(victims, id) {
			t.Fatalf("group %s of node %s still in status", id, node)
		}
		if g["removalTimestamp"] == nil {
			perClass[g["processClass"].(string)]++
		}
	}
	for _, class := range []string{"storage", "log", "stateless"} {
		if perClass[class] != 3 {
			t.Fatalf("process groups per class %v, want 3 each (replaced %v)", perClass, victims)
		}
	}
}
