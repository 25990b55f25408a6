package fdbop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

type bed struct {
	kube *fake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
	host *fdbsim.Host
	op   *Operator
	ips  int
}

// newBed runs the stand-in without the operator's pacing (every wait 0, as the operator's own
// unit tests run it: internal/test_helper.go); newPacedBed with it.
func newBed(t *testing.T, spec map[string]any) *bed {
	t.Helper()
	return newPacedBed(t, spec, &Pacing{})
}

func newPacedBed(t *testing.T, spec map[string]any, pacing *Pacing) *bed {
	t.Helper()
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.foundationdb.org/v1beta2", "kind": "FoundationDBCluster",
		"metadata": map[string]any{"name": "myfdb", "namespace": "demo", "uid": "cr-uid", "generation": int64(2)},
		"spec":     spec,
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GVR: "FoundationDBClusterList"}, cr)
	var nodes []runtime.Object
	for i, z := range []string{"zone-a", "zone-b", "zone-c"} {
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i),
			Labels: map[string]string{"topology.kubernetes.io/zone": z}}})
	}
	kube := fake.NewClientset(nodes...)
	host := fdbsim.NewHost(fdbsim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	return &bed{kube: kube, dyn: dyn, host: host, op: New(kube, dyn, host, Options{Namespace: "demo", Seed: 7, Pacing: pacing})}
}

func sandboxSpec() map[string]any {
	return map[string]any{
		"version":               "7.3.63",
		"processCounts":         map[string]any{"storage": int64(3), "log": int64(3), "stateless": int64(3)},
		"databaseConfiguration": map[string]any{"redundancy_mode": "triple"},
		"faultDomain":           map[string]any{"key": "topology.kubernetes.io/zone", "valueFrom": "$NODE_LABEL_TOPOLOGY_KUBERNETES_IO_ZONE"},
		// No wait between removals, as the operator's own tests (internal/test_helper.go).
		"automationOptions": map[string]any{"waitBetweenRemovalsSeconds": int64(0)},
	}
}

func (b *bed) reconcile(t *testing.T) {
	t.Helper()
	if err := b.op.Reconcile(context.Background(), "myfdb"); err != nil {
		t.Fatal(err)
	}
}

func (b *bed) pods(t *testing.T) []corev1.Pod {
	t.Helper()
	l, err := b.kube.CoreV1().Pods("demo").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// kubelet plays scheduler and kubelet: every pod not running gets a node (spread by class
// index), an IP, a UID and Ready.
func (b *bed) kubelet(t *testing.T) {
	t.Helper()
	for i, p := range b.pods(t) {
		if p.Status.Phase == corev1.PodRunning {
			continue
		}
		b.ips++
		p.UID = types.UID(fmt.Sprintf("uid-%d", b.ips))
		p.Spec.NodeName = fmt.Sprintf("node-%d", i%3)
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.1.0.%d", b.ips),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := b.kube.CoreV1().Pods("demo").Update(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func (b *bed) status(t *testing.T) clusterStatus {
	t.Helper()
	u, err := b.dyn.Resource(GVR).Namespace("demo").Get(context.Background(), "myfdb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var s clusterStatus
	if err := fromUnstructured(u.Object["status"], &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStandInCreatesProcessGroupsPodsAndTheModel(t *testing.T) {
	b := newBed(t, sandboxSpec())
	b.reconcile(t)
	st := b.status(t)
	if len(st.ProcessGroups) != 9 || st.Generations["reconciled"] != 0 {
		t.Fatalf("status after first reconcile: %+v", st)
	}
	pods := b.pods(t)
	if len(pods) != 9 {
		t.Fatalf("%d pods", len(pods))
	}
	for _, pg := range st.ProcessGroups {
		name := podName("myfdb", pg)
		i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == name })
		if i < 0 {
			t.Fatalf("no pod %s for %s", name, pg.ProcessGroupID)
		}
		p := pods[i]
		if !strings.HasPrefix(name, "myfdb-"+pg.ProcessClass+"-") || p.Labels[labelClusterName] != "myfdb" ||
			p.Labels[labelProcessClass] != pg.ProcessClass || p.Labels[labelProcessGroupID] != pg.ProcessGroupID ||
			len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "FoundationDBCluster" || p.Spec.Containers[0].Name != "foundationdb" {
			t.Fatalf("pod %s: %+v", name, p.ObjectMeta)
		}
		if !slices.ContainsFunc(pg.ProcessGroupConditions, func(c *processGroupCondition) bool { return c.Type == "MissingPod" }) {
			t.Fatalf("group %s conditions %v", pg.ProcessGroupID, pg.ProcessGroupConditions)
		}
	}
	if b.host.Cluster("demo/myfdb") != nil {
		t.Fatal("model created before the pods run")
	}
	b.kubelet(t)
	b.reconcile(t)
	st = b.status(t)
	model := b.host.Cluster("demo/myfdb")
	if model == nil || st.Generations["reconciled"] != 2 || !st.Health.Available || st.ConnectionString != model.ConnectionString() {
		t.Fatalf("status once running: %+v", st)
	}
	zones := map[string]int{}
	for _, pg := range st.ProcessGroups {
		if len(pg.Addresses) != 1 || !strings.HasPrefix(pg.FaultDomain, "zone-") || len(pg.ProcessGroupConditions) != 0 {
			t.Fatalf("group %+v", pg)
		}
		zones[pg.FaultDomain]++
	}
	if len(zones) != 3 || len(model.Coordinators()) != 5 {
		t.Fatalf("zones %v coordinators %v", zones, model.Coordinators())
	}
	// fdbcli in a pod of the cluster reaches the model.
	var out, errb strings.Builder
	if code := b.host.Exec(context.Background(), "demo/"+pods[0].Name, []string{"--exec", "status minimal"}, &out, &errb); code != 0 ||
		out.String() != "The database is available.\n" {
		t.Fatalf("exec: %d %q %q", code, out.String(), errb.String())
	}
}

func TestStandInRecreatesADeletedPodAndHonoursSkip(t *testing.T) {
	b := newBed(t, sandboxSpec())
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	model := b.host.Cluster("demo/myfdb")
	// Delete a coordinator's pod: the stand-in stops its process, recreates the pod under the
	// same name, starts the process at the new address and moves the coordinator.
	coord := model.Coordinators()[0]
	var victim corev1.Pod
	for _, p := range b.pods(t) {
		if p.Status.PodIP+":4501" == coord {
			victim = p
		}
	}
	id := victim.Labels[labelProcessGroupID]
	if err := b.kube.CoreV1().Pods("demo").Delete(context.Background(), victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b.reconcile(t)
	procUp := func() bool {
		for _, p := range model.Processes() {
			if p.ID == id {
				return p.Up
			}
		}
		t.Fatalf("no process %s", id)
		return false
	}
	if procUp() {
		t.Fatal("process still up after its pod was deleted")
	}
	again, err := b.kube.CoreV1().Pods("demo").Get(context.Background(), victim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod not recreated: %v", err)
	}
	if again.Labels[labelProcessGroupID] != id {
		t.Fatalf("recreated pod labels %v", again.Labels)
	}
	b.reconcile(t)
	st := b.status(t)
	for _, pg := range st.ProcessGroups {
		if pg.ProcessGroupID == id && !slices.ContainsFunc(pg.ProcessGroupConditions, func(c *processGroupCondition) bool { return c.Type == "PodPending" }) {
			t.Fatalf("conditions of the recreated group: %v", pg.ProcessGroupConditions)
		}
	}
	b.kubelet(t)
	b.reconcile(t)
	if !procUp() {
		t.Fatal("process not started in the new pod")
	}
	if slices.Contains(model.Coordinators(), coord) || len(model.Coordinators()) != 5 {
		t.Fatalf("coordinator %s at a vanished address kept: %v", coord, model.Coordinators())
	}
	changed := false
	for _, e := range model.Log() {
		if e.Client == "operator" && strings.HasPrefix(e.Command, "coordinators ") && e.OK {
			changed = true
		}
	}
	if !changed {
		t.Fatalf("coordinators not changed through fdbcli: %v", model.Log())
	}

	// spec.skip: a deleted pod stays deleted and the status is not touched.
	u, _ := b.dyn.Resource(GVR).Namespace("demo").Get(context.Background(), "myfdb", metav1.GetOptions{})
	_ = unstructured.SetNestedField(u.Object, true, "spec", "skip")
	if _, err := b.dyn.Resource(GVR).Namespace("demo").Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := b.status(t)
	if err := b.kube.CoreV1().Pods("demo").Delete(context.Background(), victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b.reconcile(t)
	if _, err := b.kube.CoreV1().Pods("demo").Get(context.Background(), victim.Name, metav1.GetOptions{}); err == nil {
		t.Fatal("pod recreated while spec.skip is true")
	}
	if string(mustJSON(before)) != string(mustJSON(b.status(t))) {
		t.Fatal("status written while spec.skip is true")
	}
}

func TestCustomLabels(t *testing.T) {
	spec := sandboxSpec()
	spec["labels"] = map[string]any{
		"matchLabels":          map[string]any{"app": "fdb-x"},
		"processClassLabels":   []any{"x/class"},
		"processGroupIDLabels": []any{"x/id"},
	}
	b := newBed(t, spec)
	b.reconcile(t)
	for _, p := range b.pods(t) {
		if p.Labels["app"] != "fdb-x" || p.Labels["x/class"] == "" || p.Labels["x/id"] == "" || p.Labels[labelProcessClass] != "" {
			t.Fatalf("labels %v", p.Labels)
		}
	}
}

func TestChooseCoordinatorsSpreadsZones(t *testing.T) {
	var procs []fdbsim.ProcessSpec
	for i, z := range []string{"a", "b", "c", "a", "b", "c"} {
		class := fdbsim.ClassStorage
		if i >= 3 {
			class = fdbsim.ClassLog
		}
		procs = append(procs, fdbsim.ProcessSpec{ID: fmt.Sprint(i), Address: fmt.Sprintf("10.0.0.%d:4501", i), Class: class, Zone: z})
	}
	procs = append(procs, fdbsim.ProcessSpec{ID: "s", Address: "10.0.0.9:4501", Class: fdbsim.ClassStateless, Zone: "d"})
	got := chooseCoordinators(procs, nil, 3)
	if !slices.Equal(got, []string{"10.0.0.0:4501", "10.0.0.1:4501", "10.0.0.2:4501"}) {
		t.Fatal(got)
	}
	got = chooseCoordinators(procs, nil, 5)
	zones := map[string]int{}
	for _, a := range got {
		for _, p := range procs {
			if p.Address == a {
				zones[p.Zone]++
				if p.Class == fdbsim.ClassStateless {
					t.Fatal("stateless coordinator")
				}
			}
		}
	}
	if len(got) != 5 || zones["a"] > 2 || zones["b"] > 2 || zones["c"] > 2 {
		t.Fatalf("%v %v", got, zones)
	}
}

// TestStandInFailureConditionsAsUpdateStatus: a Pending pod is PodPending, a running pod with a
// container not ready is PodFailing (not PodPending), as controllers/update_status.go
// validateProcessGroup sets them; a condition keeps its first timestamp while it holds.
func TestStandInFailureConditionsAsUpdateStatus(t *testing.T) {
	b := newBed(t, sandboxSpec())
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	pods := b.pods(t)
	failing, pending := pods[0], pods[1]
	failing.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "foundationdb", Ready: false}}
	failing.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	pending.Status = corev1.PodStatus{Phase: corev1.PodPending}
	for _, p := range []corev1.Pod{failing, pending} {
		if _, err := b.kube.CoreV1().Pods("demo").Update(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	conds := func() map[string][]processGroupCondition {
		out := map[string][]processGroupCondition{}
		for _, pg := range b.status(t).ProcessGroups {
			for _, c := range pg.ProcessGroupConditions {
				if c.Type == "PodFailing" || c.Type == "PodPending" {
					out[pg.ProcessGroupID] = append(out[pg.ProcessGroupID], *c)
				}
			}
		}
		return out
	}
	b.reconcile(t)
	first := conds()
	fid, pid := failing.Labels[labelProcessGroupID], pending.Labels[labelProcessGroupID]
	if len(first) != 2 || len(first[fid]) != 1 || first[fid][0].Type != "PodFailing" || len(first[pid]) != 1 || first[pid][0].Type != "PodPending" {
		t.Fatalf("conditions %v, want %s PodFailing and %s PodPending", first, fid, pid)
	}
	b.reconcile(t)
	if again := conds(); again[fid][0].Timestamp != first[fid][0].Timestamp || again[pid][0].Timestamp != first[pid][0].Timestamp {
		t.Fatalf("timestamps changed while the conditions held: %v then %v", first, again)
	}
}
