//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbsts"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbwire"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// fdbSampleStatefulSet is FoundationDB's own Kubernetes sample
// (apple/foundationdb packaging/docker/kubernetes/statefulset.yaml): a `foundationdb` container
// of the foundationdb-kubernetes image whose zone and instance ID are the pod's name.
func fdbSampleStatefulSet(name string, replicas int32) *appsv1.StatefulSet {
	s := statefulSet(name, replicas)
	byName := &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}
	byIP := &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}
	s.Spec.Template.Spec.Containers = []corev1.Container{{
		Name:  fdbsts.MainContainer,
		Image: "foundationdb/foundationdb-kubernetes:" + fdbsim.Version,
		Env: []corev1.EnvVar{
			{Name: "FDB_CLUSTER_FILE", Value: "/var/fdb/data/fdb.cluster"},
			{Name: "FDB_PUBLIC_IP", ValueFrom: byIP},
			{Name: "FDB_POD_IP", ValueFrom: byIP},
			{Name: "FDB_MACHINE_ID", ValueFrom: byName},
			{Name: "FDB_ZONE_ID", ValueFrom: byName},
			{Name: "FDB_INSTANCE_ID", ValueFrom: byName},
		},
		Args:         []string{"--input-dir", "/var/fdb/dynamic-conf"},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/fdb/data"}},
	}}
	return s
}

// fdbSTSFixture creates the sample's StatefulSet with replicas pods in ns and the simulator
// behind it (double redundancy, the sample's `configure new double ssd`).
func fdbSTSFixture(t *testing.T, ns, name string, replicas int32) *fdbwire.Bed {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	b, err := fdbwire.StartStatefulSets(ctx, bed, bed.Client, ns, fdbsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(ctx, fdbSampleStatefulSet(name, replicas), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create statefulset: %v", err)
	}
	waitPods(t, ns, labels.SelectorFromSet(labels.Set{"app": name}), int(replicas), func(p *corev1.Pod) bool {
		return testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
	if err := b.WaitStatefulSet(ctx, ns, name, int(replicas)); err != nil {
		t.Fatal(err)
	}
	return b
}

func fdbSTSModel(t *testing.T, b *fdbwire.Bed, ns, name string) *fdbsim.Cluster {
	t.Helper()
	m := b.Host.Cluster(fdbsts.Key(ns, name))
	if m == nil {
		t.Fatalf("no model for %s", name)
	}
	return m
}

// TestFoundationDBStatefulSetStatus: a StatefulSet laid out as FoundationDB's sample, with no
// label of this tool, is detected as FoundationDB by its image and its status read through
// fdbcli in its pods, each pod's process under its name (locality_instance_id).
func TestFoundationDBStatefulSetStatus(t *testing.T) {
	ns := newNamespace(t)
	fdbSTSFixture(t, ns, "fdbsample", 5)
	r := runCLI(t, cliEnv(t), "status", "fdbsample", "-n", ns)
	if r.Code != 0 {
		t.Fatal(r)
	}
	for _, want := range []string{"engine foundationdb, layout foundationdb-statefulset", "Health:   healthy",
		"Processes:", "coordinators: 3/3 reachable", "recovery: fully_recovered", "fdbsample-4"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.Stdout)
		}
	}
	// Each pod's row names its own process (instance ID = pod name), none reported without a pod.
	procs, _, _ := strings.Cut(r.Stdout[strings.Index(r.Stdout, "Processes:"):], "Node groups:")
	for _, line := range strings.Split(procs, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && strings.HasPrefix(f[0], "fdbsample-") && (f[1] != f[0] || !strings.Contains(line, ":4501")) {
			t.Errorf("row of %s names process group %s: %q", f[0], f[1], line)
		}
		if len(f) > 2 && f[0] == "-" && strings.Contains(line, ":4501") {
			t.Errorf("process without its pod: %q", line)
		}
	}
}

// fdbMembership are the exclude, include and coordinators changes run from pods. The same
// command run again at once is one change: the engine repeats its `exclude no_wait` to read
// fdbcli's own report of the exclusion until it says "Successfully excluded".
func fdbMembership(m *fdbsim.Cluster) []string {
	var out []string
	for _, e := range m.Log() {
		if e.Client == "operator" || !e.OK {
			continue
		}
		f := strings.Fields(e.Command)
		if len(f) > 1 && (f[0] == "exclude" || f[0] == "include" || f[0] == "coordinators") && (len(out) == 0 || out[len(out)-1] != e.Command) {
			out = append(out, e.Command)
		}
	}
	return out
}

func verbs(cmds []string) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = strings.Fields(c)[0]
	}
	return out
}

// TestFoundationDBStatefulSetScaleDown: 5 -> 3 on the sample's StatefulSet, with a coordinator on
// the highest pod, runs exclude -> coordinators -> replicas -> PVC delete -> include, ends with the
// coordinators on pods 0-2, nothing excluded, the claims of pods 3 and 4 gone; --replicas 1 on the
// double-redundancy cluster is refused with exit 5 and nothing written.
func TestFoundationDBStatefulSetScaleDown(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSTSFixture(t, ns, "fdbsample", 5)
	model := fdbSTSModel(t, b, ns, "fdbsample")
	ctx := t.Context()
	addr := map[string]string{}
	for _, p := range model.Processes() {
		addr[p.ID] = p.Address
	}
	// Move a coordinator onto pod 4, the first to go.
	if out, errOut, err := fdbcliIn(ctx, ns, "fdbsample-0", "--exec", "coordinators "+addr["fdbsample-0"]+" "+addr["fdbsample-1"]+" "+addr["fdbsample-4"], "--timeout", "10"); err != nil {
		t.Fatalf("coordinators: %v %s %s", err, out, errOut)
	}
	env := cliEnv(t)

	// Refused: below double redundancy's team size.
	r := runCLI(t, env, "scale", "fdbsample", "-n", ns, "--replicas", "1", "--yes")
	if r.Code != 5 || !strings.Contains(r.Stderr, "redundancy mode double") {
		t.Fatalf("--replicas 1: want exit 5: %s", r)
	}
	if leases, err := bed.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{}); err != nil || len(leases.Items) > 0 {
		t.Fatalf("refused scale left a Lease: %v %v", err, leases)
	}
	if m := fdbMembership(model); len(m) != 1 {
		t.Fatalf("refused scale ran fdbcli mutations: %q", m)
	}
	if s, err := bed.Client.AppsV1().StatefulSets(ns).Get(ctx, "fdbsample", metav1.GetOptions{}); err != nil || *s.Spec.Replicas != 5 {
		t.Fatalf("refused scale changed replicas: %v", err)
	}

	// The dry run shows every fdbcli command and writes nothing.
	r = runCLI(t, env, "scale", "fdbsample", "-n", ns, "--replicas", "3", "--dry-run")
	if r.Code != 0 {
		t.Fatal(r)
	}
	for _, want := range []string{"exclude no_wait locality_instance_id:fdbsample-4 locality_instance_id:fdbsample-3", "coordinators ", "include locality_instance_id:fdbsample-4"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, r.Stdout)
		}
	}
	if m := fdbMembership(model); len(m) != 1 {
		t.Fatalf("dry run ran fdbcli mutations: %q", m)
	}

	// When the StatefulSet's replicas drop, the exclusion and the coordinator change are done and
	// the include is not.
	atReplicas := make(chan []string, 1)
	go func() {
		w, err := bed.Client.AppsV1().StatefulSets(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=fdbsample"})
		if err != nil {
			return
		}
		defer w.Stop()
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*appsv1.StatefulSet); ok && *s.Spec.Replicas == 3 {
				atReplicas <- verbs(fdbMembership(model))
				return
			}
		}
	}()
	// When the first leaving PVC is deleted, replicas have dropped and the include has not run.
	atPVC := make(chan []string, 1)
	pw, err := bed.Client.CoreV1().PersistentVolumeClaims(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Stop()
	go func() {
		for ev := range pw.ResultChan() {
			if c, ok := ev.Object.(*corev1.PersistentVolumeClaim); ok && (ev.Type == watch.Deleted || c.DeletionTimestamp != nil) &&
				(c.Name == "data-fdbsample-4" || c.Name == "data-fdbsample-3") {
				atPVC <- verbs(fdbMembership(model))
				return
			}
		}
	}()
	r = runCLI(t, env, "scale", "fdbsample", "-n", ns, "--replicas", "3", "--yes", "-o", "json")
	evs := parseNDJSON(t, r)
	if r.Code != 0 || lastOutcome(evs) != "succeeded" {
		t.Fatalf("scale 5 -> 3: %s", r)
	}
	select {
	case got := <-atPVC:
		if want := []string{"coordinators", "exclude", "coordinators"}; !slices.Equal(got, want) {
			t.Errorf("when a PVC was deleted, fdbcli had run %v, want %v (include after the PVCs)", got, want)
		}
	case <-ctx.Done():
		t.Fatal("no PVC deletion seen")
	}
	if got, want := stepsOf(evs, "step-done"), []string{"gate", "exclude", "coordinators", "replicas", "pvcs", "include"}; !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	if got, want := verbs(fdbMembership(model)), []string{"coordinators", "exclude", "coordinators", "include"}; !slices.Equal(got, want) {
		t.Errorf("fdbcli changes %q, want verbs %v", fdbMembership(model), want)
	}
	select {
	case got := <-atReplicas:
		if want := []string{"coordinators", "exclude", "coordinators"}; !slices.Equal(got, want) {
			t.Errorf("when replicas dropped, fdbcli had run %v, want %v", got, want)
		}
	case <-ctx.Done():
		t.Fatal("replicas never seen at 3")
	}
	coords := model.Coordinators()
	slices.Sort(coords)
	want := []string{addr["fdbsample-0"], addr["fdbsample-1"], addr["fdbsample-2"]}
	slices.Sort(want)
	if !slices.Equal(coords, want) {
		t.Errorf("coordinators %v, want pods 0-2 %v", coords, want)
	}
	out, _, err := fdbcliIn(ctx, ns, "fdbsample-0", "--exec", "exclude", "--timeout", "10")
	if err != nil || !strings.Contains(out, "no servers or localities excluded") {
		t.Errorf("left excluded: %v %s", err, out)
	}
	for _, pvc := range []string{"data-fdbsample-3", "data-fdbsample-4"} {
		if _, err := bed.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc, metav1.GetOptions{}); err == nil {
			t.Errorf("PVC %s left", pvc)
		}
	}
	if _, err := bed.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-fdbsample-2", metav1.GetOptions{}); err != nil {
		t.Errorf("PVC of a remaining pod: %v", err)
	}
}

// TestFoundationDBStatefulSetScaleUp: 3 -> 5 raises replicas and succeeds only once the new pods'
// processes report (the model has them up) and the database is healthy.
func TestFoundationDBStatefulSetScaleUp(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSTSFixture(t, ns, "fdbsample", 3)
	model := fdbSTSModel(t, b, ns, "fdbsample")
	env := cliEnv(t)
	r := runCLI(t, env, "scale", "fdbsample", "-n", ns, "--replicas", "5", "--yes", "-o", "json")
	evs := parseNDJSON(t, r)
	if r.Code != 0 || lastOutcome(evs) != "succeeded" {
		t.Fatalf("scale 3 -> 5: %s", r)
	}
	if got, want := stepsOf(evs, "step-done"), []string{"gate", "replicas", "join"}; !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	up := map[string]bool{}
	for _, p := range model.Processes() {
		up[p.ID] = p.Up
	}
	if !up["fdbsample-3"] || !up["fdbsample-4"] {
		t.Fatalf("new processes not up when the run ended: %v", up)
	}
	if m := fdbMembership(model); len(m) != 0 {
		t.Errorf("scale up changed membership: %q", m)
	}
}

// TestFoundationDBStatefulSetReplace: replacing a coordinator's pod runs the exclusion sequence
// (exclude, coordinators moved off it), then recreates the pod on a new PVC, waits for its
// process and includes it again: the pod and claim are new, nothing is left excluded, and every
// coordinator is a running process.
func TestFoundationDBStatefulSetReplace(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSTSFixture(t, ns, "fdbsample", 5)
	model := fdbSTSModel(t, b, ns, "fdbsample")
	ctx := t.Context()
	oldPod, err := bed.Client.CoreV1().Pods(ns).Get(ctx, "fdbsample-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldPVC, err := bed.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-fdbsample-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, cliEnv(t), "replace", "fdbsample", "fdbsample-1", "-n", ns, "--yes", "-o", "json")
	evs := parseNDJSON(t, r)
	if r.Code != 0 || lastOutcome(evs) != "succeeded" {
		t.Fatalf("replace: %s", r)
	}
	b1 := "/fdbsample-1"
	if got, want := stepsOf(evs, "step-done"), []string{"gate" + b1, "exclude" + b1, "coordinators" + b1, "replace/recreate/fdbsample-1", "report" + b1, "include" + b1}; !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	if got, want := verbs(fdbMembership(model)), []string{"exclude", "coordinators", "include"}; !slices.Equal(got, want) {
		t.Errorf("fdbcli changes %q, want verbs %v", fdbMembership(model), want)
	}
	newPod, err := bed.Client.CoreV1().Pods(ns).Get(ctx, "fdbsample-1", metav1.GetOptions{})
	if err != nil || newPod.UID == oldPod.UID {
		t.Errorf("pod not recreated: %v", err)
	}
	newPVC, err := bed.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-fdbsample-1", metav1.GetOptions{})
	if err != nil || newPVC.UID == oldPVC.UID {
		t.Errorf("PVC not recreated: %v", err)
	}
	up := map[string]bool{}
	for _, p := range model.Processes() {
		if p.Up {
			up[p.Address] = true
		}
	}
	for _, c := range model.Coordinators() {
		if !up[c] {
			t.Errorf("coordinator %s is not a running process (%v)", c, model.Coordinators())
		}
	}
	out, _, err := fdbcliIn(ctx, ns, "fdbsample-0", "--exec", "exclude", "--timeout", "10")
	if err != nil || !strings.Contains(out, "no servers or localities excluded") {
		t.Errorf("left excluded: %v %s", err, out)
	}
}

// TestFoundationDBStatefulSetScaleDownInterrupted: a scale 5 -> 3 interrupted (SIGINT) once the
// exclusion is done, then run again, finishes from live state: replicas 3, the PVCs of pods 3 and
// 4 gone, nothing excluded, and the exclusion is not run a second time.
func TestFoundationDBStatefulSetScaleDownInterrupted(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSTSFixture(t, ns, "fdbsample", 5)
	model := fdbSTSModel(t, b, ns, "fdbsample")
	ctx := t.Context()
	env := cliEnv(t)
	args := []string{"scale", "fdbsample", "-n", ns, "--replicas", "3", "--yes", "-o", "json"}
	run := startCLI(t, env, args...)
	run.waitEvent("the exclusion done", func(e ndEvent) bool { return e.Type == "step-done" && e.stepID() == "exclude" })
	if err := run.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if res := run.wait(); res.Code == 0 {
		t.Fatalf("the interrupted run succeeded: %s", res)
	}
	r := runCLI(t, env, args...)
	if r.Code != 0 || lastOutcome(parseNDJSON(t, r)) != "succeeded" {
		t.Fatalf("re-run: %s", r)
	}
	if got := verbs(fdbMembership(model)); strings.Count(strings.Join(got, " "), "exclude") != 1 || got[len(got)-1] != "include" {
		t.Errorf("fdbcli changes %q: want one exclude, include last", fdbMembership(model))
	}
	if s, err := bed.Client.AppsV1().StatefulSets(ns).Get(ctx, "fdbsample", metav1.GetOptions{}); err != nil || *s.Spec.Replicas != 3 {
		t.Fatalf("replicas: %v", err)
	}
	for _, pvc := range []string{"data-fdbsample-3", "data-fdbsample-4"} {
		if _, err := bed.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc, metav1.GetOptions{}); err == nil {
			t.Errorf("PVC %s left", pvc)
		}
	}
	out, _, err := fdbcliIn(ctx, ns, "fdbsample-0", "--exec", "exclude", "--timeout", "10")
	if err != nil || !strings.Contains(out, "no servers or localities excluded") {
		t.Errorf("left excluded: %v %s", err, out)
	}
}

// TestFoundationDBStatefulSetRollingRestart: restart --rolling on the sample's StatefulSet bounces
// every pod's process (fdbcli kill, --method process) under the FDB health gate, one zone (here:
// one pod) at a time in maintenance mode, and ends healthy with nothing left in maintenance.
// --method pod is refused: a recreated pod comes back on a new IP and no operator moves the
// coordinators.
func TestFoundationDBStatefulSetRollingRestart(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSTSFixture(t, ns, "fdbsample", 3)
	model := fdbSTSModel(t, b, ns, "fdbsample")
	env := cliEnv(t)
	if r := runCLI(t, env, "restart", "fdbsample", "--rolling", "--method", "pod", "-n", ns, "--yes"); r.Code != 2 || !strings.Contains(r.Stderr, "--method process") {
		t.Fatalf("--method pod: want exit 2: %s", r)
	}
	r := runCLI(t, env, "restart", "fdbsample", "--rolling", "-n", ns, "--yes", "-o", "json")
	if r.Code != 0 || lastOutcome(parseNDJSON(t, r)) != "succeeded" {
		t.Fatalf("restart: %s", r)
	}
	kills := 0
	for _, c := range fdbMutations(model) {
		if strings.HasPrefix(c, "kill ") {
			kills++
		}
	}
	if kills != 3 {
		t.Errorf("%d kills, want one per pod: %q", kills, fdbMutations(model))
	}
	if z, _ := model.MaintenanceZone(); z != "" {
		t.Errorf("maintenance zone %s left", z)
	}
}

// TestFoundationDBStatefulSetReplaceChoose: on the sample's StatefulSet, replace chooses pods as
// on the operator layout. --process-class of a class no process has: exit 2, nothing written.
// Two nodes' pods at once (--max-concurrent 2, each pod its own zoneid) on double redundancy:
// refused before the lock, exit 5, nothing written. --node N then evacuates every pod on N, one
// at a time: each recreated, one exclude and one include per pod, nothing left excluded (the
// coordinator of the first batch is not moved onto a pod of a later one). --process-class storage chooses every pod (the dry run lists them).
func TestFoundationDBStatefulSetReplaceChoose(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSTSFixture(t, ns, "fdbsample", 5)
	model := fdbSTSModel(t, b, ns, "fdbsample")
	ctx := t.Context()
	env := cliEnv(t)
	uids := func() map[string]string {
		pods, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=fdbsample"})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, p := range pods.Items {
			out[p.Name] = string(p.UID) + "@" + p.Spec.NodeName
		}
		return out
	}
	nothingWritten := func(what string, before map[string]string) {
		t.Helper()
		if m := fdbMembership(model); len(m) != 0 {
			t.Fatalf("%s ran fdbcli changes %q", what, m)
		}
		if leases, err := bed.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{}); err != nil || len(leases.Items) > 0 {
			t.Fatalf("%s left a Lease: %v", what, err)
		}
		if after := uids(); !maps.Equal(before, after) {
			t.Fatalf("%s changed pods: %v -> %v", what, before, after)
		}
	}
	before := uids()
	if r := runCLI(t, env, "replace", "fdbsample", "--process-class", "log", "-n", ns, "--yes"); r.Code != 2 || !strings.Contains(r.Stderr, `no process of class "log"`) {
		t.Fatalf("--process-class log: want exit 2: %s", r)
	}
	nothingWritten("--process-class log", before)
	r := runCLI(t, env, "replace", "fdbsample", "--process-class", "storage", "-n", ns, "--dry-run")
	if r.Code != 0 {
		t.Fatal(r)
	}
	for i := range 5 {
		if !strings.Contains(r.Stdout, fmt.Sprintf("fdbsample-%d: process class storage", i)) {
			t.Errorf("dry run of --process-class storage lacks fdbsample-%d:\n%s", i, r.Stdout)
		}
	}
	node := func(pod string) string { _, n, _ := strings.Cut(before[pod], "@"); return n }
	n1, n3 := node("fdbsample-1"), node("fdbsample-3")
	r = runCLI(t, env, "replace", "fdbsample", "--node", n1+","+n3, "--max-concurrent", "2", "-n", ns, "--yes")
	if r.Code != 5 || !strings.Contains(r.Stderr, "fault tolerance") {
		t.Fatalf("two zoneids at once: want exit 5: %s", r)
	}
	nothingWritten("the refused replace", before)

	r = runCLI(t, env, "replace", "fdbsample", "--node", n1, "-n", ns, "--yes", "-o", "json")
	if r.Code != 0 || lastOutcome(parseNDJSON(t, r)) != "succeeded" {
		t.Fatalf("replace --node %s: %s", n1, r)
	}
	after := uids()
	var evacuated []string
	for pod, v := range before {
		if node(pod) != n1 {
			continue
		}
		evacuated = append(evacuated, pod)
		if after[pod] == v {
			t.Errorf("pod %s on node %s not replaced", pod, n1)
		}
	}
	for _, c := range fdbMembership(model) {
		f := strings.Fields(c)
		if f[0] == "exclude" && len(f) != 3 {
			t.Errorf("exclude of more than one pod at a time: %q", c)
		}
	}
	if got := strings.Count(strings.Join(verbs(fdbMembership(model)), " "), "include"); got != len(evacuated) {
		t.Errorf("%d includes for %d evacuated pods %v: %q", got, len(evacuated), evacuated, fdbMembership(model))
	}
	out, _, err := fdbcliIn(ctx, ns, "fdbsample-0", "--exec", "exclude", "--timeout", "10")
	if err != nil || !strings.Contains(out, "no servers or localities excluded") {
		t.Errorf("left excluded: %v %s", err, out)
	}
}

// TestFoundationDBStatefulSetReplaceFailed: replace --failed on the sample's StatefulSet picks a
// pod whose fdbserver does not report in status json; with that storage process down the
// database is recovering or its data below replication, so the fault-tolerance check refuses
// the replacement before the lock (exit 5, nothing written), as on the operator layout. Once the process runs again there is nothing to replace.
func TestFoundationDBStatefulSetReplaceFailed(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSTSFixture(t, ns, "fdbsample", 5)
	model := fdbSTSModel(t, b, ns, "fdbsample")
	env := cliEnv(t)
	var addr string
	for _, p := range model.Processes() {
		if p.ID == "fdbsample-2" {
			addr = p.Address
		}
	}
	if err := model.Stop("fdbsample-2"); err != nil {
		t.Fatal(err)
	}
	// The fault-tolerance check refuses it: while the recovery that follows the stop runs, as
	// "unavailable", then as min_replicas_remaining below the configured replicas.
	r := runCLI(t, env, "replace", "fdbsample", "--failed", "-n", ns, "--yes")
	if r.Code != 5 || !strings.Contains(r.Stderr, "refusing to replace") ||
		!(strings.Contains(r.Stderr, "min_replicas_remaining") || strings.Contains(r.Stderr, "is unavailable")) {
		t.Fatalf("--failed with a storage process down: want exit 5 (fault tolerance): %s", r)
	}
	if m := fdbMembership(model); len(m) != 0 {
		t.Fatalf("the refused replace ran fdbcli changes %q", m)
	}
	if leases, err := bed.Client.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{}); err != nil || len(leases.Items) > 0 {
		t.Fatalf("the refused replace left a Lease: %v", err)
	}
	if err := model.Start("fdbsample-2", addr); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, env, "replace", "fdbsample", "--failed", "-n", ns, "--yes")
	if r.Code != 0 || !strings.Contains(r.Stdout, "nothing to replace") {
		t.Fatalf("--failed with every process running: want nothing to replace: %s", r)
	}
}
