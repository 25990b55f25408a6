package foundationdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// stsSimCluster is FoundationDB's Kubernetes sample with n storage pods in the simulator, the
// coordinators on the given ordinals, as discovery sees it (layout foundationdb-statefulset).
func stsSimCluster(t *testing.T, n int, coords ...int) (*ops.Cluster, *fdbsim.Cluster, *simExec) {
	t.Helper()
	c, model, ex, _ := stsSimClusterClock(t, n, coords...)
	return c, model, ex
}

// stsSimClusterClock is stsSimCluster with the model's clock, to let data move.
func stsSimClusterClock(t *testing.T, n int, coords ...int) (*ops.Cluster, *fdbsim.Cluster, *simExec, *fdbsim.ManualClock) {
	t.Helper()
	clock := fdbsim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	host := fdbsim.NewHost(clock)
	replicas := int32(n)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "fdb", Namespace: "demo"},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}}
	g := &ops.NodeGroup{Name: "fdb", Owner: ops.NewStatefulSetOwner(sts), Desired: replicas}
	var specs []fdbsim.ProcessSpec
	for i := range n {
		pod := fmt.Sprintf("fdb-%d", i)
		g.Pods = append(g.Pods, ops.Pod{Name: pod, Member: pod, Group: "fdb", Ordinal: i, Ready: true, PVCs: []string{"data-" + pod}})
		specs = append(specs, fdbsim.ProcessSpec{ID: pod, Address: fmt.Sprintf("10.0.0.%d:4501", i+1), Class: fdbsim.ClassStorage, Zone: pod})
		host.BindPod("demo/"+pod, "demo/fdb")
	}
	var addrs []string
	for _, i := range coords {
		addrs = append(addrs, specs[i].Address)
	}
	model, err := fdbsim.New(clock, fdbsim.Config{}, specs, addrs)
	if err != nil {
		t.Fatal(err)
	}
	host.SetCluster("demo/fdb", model)
	clock.Advance(time.Minute)
	c := &ops.Cluster{Name: "fdb", Namespace: "demo", Engine: ops.EngineFoundationDB, Layout: LayoutStatefulSet, Recognized: layoutStatefulSet, Groups: []*ops.NodeGroup{g}}
	return c, model, &simExec{host: host}, clock
}

// TestStatefulSetScalePlan: the plan of 5 -> 3 with a coordinator on pod 4 (golden), of 5 -> 3
// without one (no coordinators step), of 3 -> 5, and the refusal below double's team size,
// planned without a single fdbcli mutation.
func TestStatefulSetScalePlan(t *testing.T) {
	for _, tc := range []struct {
		name     string
		coords   []int
		from, to int32
		steps    string
		golden   string
		refused  string
	}{
		{name: "down with a coordinator leaving", coords: []int{0, 1, 4}, from: 5, to: 3,
			steps: "gate exclude coordinators replicas pvcs include", golden: "sts_scale_down.txt"},
		{name: "down, coordinators stay", coords: []int{0, 1, 2}, from: 5, to: 3, steps: "gate exclude replicas pvcs include"},
		{name: "up", coords: []int{0, 1, 2}, from: 3, to: 5, steps: "gate replicas join"},
		{name: "below double", coords: []int{0, 1, 2}, from: 5, to: 1, refused: "redundancy mode double"},
		{name: "below the coordinators", coords: []int{0, 1, 2}, from: 5, to: 2, refused: "3 coordinators"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, model, ex := stsSimCluster(t, int(tc.from), tc.coords...)
			e := newEngine(t, ex)
			to := tc.to
			p, err := e.PlanScale(t.Context(), c, ops.ScaleRequest{Replicas: &to})
			for _, l := range model.Log() {
				if strings.Fields(l.Command)[0] != "status" {
					t.Errorf("planning ran %q", l.Command)
				}
			}
			if tc.refused != "" {
				if !errors.Is(err, ops.ErrPrecondition) || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("err %v, want a precondition refusal naming %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertPlan(t, p, tc.steps, tc.golden)
		})
	}
}

// TestStatefulSetSetReplicasRefusesConcurrentResize: replicas someone else changed since the plan
// are refused with nothing written; unchanged, the patch carries the resourceVersion read.
func TestStatefulSetSetReplicasRefusesConcurrentResize(t *testing.T) {
	for _, tc := range []struct {
		name    string
		live    int32
		refused bool
	}{
		{"resized since the plan", 4, true},
		{"as planned", 5, false},
		{"already at the target", 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := tc.live
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "fdb", Namespace: "demo", ResourceVersion: "7"}, Spec: appsv1.StatefulSetSpec{Replicas: &live}}
			client := fake.NewClientset(sts)
			e, err := New(ops.EngineDeps{Client: client}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			c, _, _ := stsSimCluster(t, 5, 0, 1, 2)
			s := &stsScale{e: e, c: c, g: c.Groups[0], from: 5, to: 3}
			err = s.setReplicas(t.Context(), nil)
			var patches []string
			for _, a := range client.Actions() {
				if pa, ok := a.(k8stesting.PatchAction); ok {
					patches = append(patches, string(pa.GetPatch()))
				}
			}
			switch {
			case tc.refused:
				if !errors.Is(err, ops.ErrPrecondition) || len(patches) != 0 {
					t.Fatalf("err %v, patches %q: want a refusal, nothing written", err, patches)
				}
			case tc.live == 3:
				if err != nil || len(patches) != 0 {
					t.Fatalf("err %v, patches %q: want nothing to do", err, patches)
				}
			default:
				if err != nil || len(patches) != 1 || !strings.Contains(patches[0], `"resourceVersion":"7"`) || !strings.Contains(patches[0], `"replicas":3`) {
					t.Fatalf("err %v, patches %q", err, patches)
				}
			}
		})
	}
}

// TestStatefulSetScalePlanResumesFromExclusions: a scale down stopped after replicas were
// lowered (pods 3 and 4 gone, still excluded) is planned again from live state: the pods still
// excluded above the target are included again and their PVCs deleted.
func TestStatefulSetScalePlanResumesFromExclusions(t *testing.T) {
	c, model, ex := stsSimCluster(t, 5, 0, 1, 2)
	var out, errb bytes.Buffer
	if code := model.Run(t.Context(), []string{"--exec", "exclude no_wait locality_instance_id:fdb-4 locality_instance_id:fdb-3"}, &out, &errb); code != 0 {
		t.Fatalf("exclude: %s %s", out.String(), errb.String())
	}
	for _, id := range []string{"fdb-3", "fdb-4"} {
		if err := model.Stop(id); err != nil {
			t.Fatal(err)
		}
	}
	g := c.Groups[0]
	g.Pods, g.Desired = g.Pods[:3], 3
	to := int32(3)
	p, err := newEngine(t, ex).PlanScale(t.Context(), c, ops.ScaleRequest{Replicas: &to})
	if err != nil {
		t.Fatal(err)
	}
	var ids, details []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
		details = append(details, s.Details...)
	}
	if got, want := strings.Join(ids, " "), "gate exclude replicas pvcs include"; got != want {
		t.Fatalf("steps %q, want %q", got, want)
	}
	if got := strings.Join(details, "\n"); !strings.Contains(got, "include locality_instance_id:fdb-4 locality_instance_id:fdb-3") {
		t.Fatalf("details %q", got)
	}
}

// TestStatefulSetReplacePlan: replacing a coordinator's pod plans the exclusion sequence around
// the recreate step; with too few pods left to hold double's teams it is refused.
func TestStatefulSetReplacePlan(t *testing.T) {
	c, _, ex := stsSimCluster(t, 4, 0, 1, 2)
	p, err := newEngine(t, ex).PlanReplacement(t.Context(), c, ops.ReplaceRequest{Pods: []string{"fdb-1"}, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	if got, want := strings.Join(ids, " "), "gate/fdb-1 exclude/fdb-1 coordinators/fdb-1 replace/recreate/fdb-1 report/fdb-1 include/fdb-1"; got != want {
		t.Fatalf("steps %q, want %q", got, want)
	}
	c, _, ex = stsSimCluster(t, 3, 0, 1, 2)
	_, err = newEngine(t, ex).PlanReplacement(t.Context(), c, ops.ReplaceRequest{Pods: []string{"fdb-1", "fdb-2"}, MaxConcurrent: 2})
	if !errors.Is(err, ops.ErrPrecondition) || !strings.Contains(err.Error(), "redundancy mode double") {
		t.Fatalf("err %v, want a refusal", err)
	}
	// Two pods on double: one at a time is within the fault tolerance, but while it is
	// excluded its data has no second pod to live on.
	c, _, ex = stsSimCluster(t, 2, 0, 1)
	_, err = newEngine(t, ex).PlanReplacement(t.Context(), c, ops.ReplaceRequest{Pods: []string{"fdb-1"}, MaxConcurrent: 1})
	if !errors.Is(err, ops.ErrPrecondition) || !strings.Contains(err.Error(), "replacing 1 pod(s) at once leaves 1 of 2 pods, below the 2 redundancy mode double needs") {
		t.Fatalf("err %v, want the storage-team refusal", err)
	}
}

// TestStatefulSetReplaceFaultTolerance: the operator layout's fault-tolerance refusal applies to
// the StatefulSet layout, per batch (each pod is its own zoneid, as the sample sets
// FDB_ZONE_ID): two pods at once on double redundancy, or any pod while a storage process is
// down (min_replicas_remaining below the configuration), are refused before anything runs; one
// pod at a time on a healthy cluster is planned.
func TestStatefulSetReplaceFaultTolerance(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pods    []string
		max     int
		down    string
		refused string
	}{
		{name: "one at a time", pods: []string{"fdb-1", "fdb-3"}, max: 1},
		{name: "two zoneids at once", pods: []string{"fdb-1", "fdb-3"}, max: 2, refused: "fault domains"},
		{name: "degraded", pods: []string{"fdb-1"}, max: 1, down: "fdb-4", refused: "min_replicas_remaining 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, model, ex, clock := stsSimClusterClock(t, 5, 0, 1, 2)
			if tc.down != "" {
				if err := model.Stop(tc.down); err != nil {
					t.Fatal(err)
				}
				clock.Advance(10 * time.Second) // the recovery that follows; data is not re-replicated
			}
			_, err := newEngine(t, ex).PlanReplacement(t.Context(), c, ops.ReplaceRequest{Pods: tc.pods, MaxConcurrent: tc.max})
			for _, l := range model.Log() {
				if strings.Fields(l.Command)[0] != "status" {
					t.Errorf("planning ran %q", l.Command)
				}
			}
			if tc.refused == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ops.ErrPrecondition) || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("err %v, want a refusal naming %q", err, tc.refused)
			}
		})
	}
}

// stsEngine is an engine whose API holds the StatefulSet's pods (the steps list them live, to
// run fdbcli in one that stays).
func stsEngine(t *testing.T, c *ops.Cluster, ex kube.Executor) (*Engine, *fake.Clientset) {
	t.Helper()
	var objs []runtime.Object
	ctrl := true
	for _, pod := range c.AllPods() {
		objs = append(objs, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: "demo", OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "fdb", Controller: &ctrl}}},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		})
	}
	client := fake.NewClientset(objs...)
	e, err := New(ops.EngineDeps{Client: client, Exec: ex}, Options{PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return e, client
}

// TestStatefulSetExcludePrecheck: the exclusion counts as done only when the pods' localities are
// excluded and fdbcli reports their addresses "Successfully excluded", or when the pods are gone
// (a run before lowered replicas, which it does only after that report). A leaving pod whose
// process does not run is not excluded by that alone: fdbcli finds no process to report on.
func TestStatefulSetExcludePrecheck(t *testing.T) {
	c, model, ex, clock := stsSimClusterClock(t, 5, 0, 1, 2)
	if err := model.Stop("fdb-4"); err != nil {
		t.Fatal(err)
	}
	e, client := stsEngine(t, c, ex)
	to := int32(4)
	p, err := e.PlanScale(t.Context(), c, ops.ScaleRequest{Replicas: &to})
	if err != nil {
		t.Fatal(err)
	}
	if p.Steps[1].ID != "exclude" {
		t.Fatalf("step 2 is %s", p.Steps[1].ID)
	}
	if done, err := p.Steps[1].Precheck(t.Context(), nil); err != nil || done {
		t.Fatalf("precheck before any exclusion: done %v, err %v", done, err)
	}
	var out, errb bytes.Buffer
	if code := model.Run(t.Context(), []string{"--exec", "exclude no_wait locality_instance_id:fdb-4"}, &out, &errb); code != 0 {
		t.Fatalf("exclude: %s %s", out.String(), errb.String())
	}
	if done, err := p.Steps[1].Precheck(t.Context(), nil); err != nil || done {
		t.Fatalf("precheck with the process not running: done %v, err %v; want not done (nothing confirms it)", done, err)
	}
	if err := model.Start("fdb-4", ""); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if done, err := p.Steps[1].Precheck(t.Context(), nil); err != nil || !done {
		t.Fatalf("precheck once fdbcli reports it: done %v, err %v", done, err)
	}
	if err := model.Stop("fdb-4"); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("demo").Delete(t.Context(), "fdb-4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if done, err := p.Steps[1].Precheck(t.Context(), nil); err != nil || !done {
		t.Fatalf("precheck with the pod gone: done %v, err %v", done, err)
	}
}

// notifyExec passes each fdbcli exclude's output to excl, when there is room.
type notifyExec struct {
	*simExec
	excl chan string
}

func (n *notifyExec) Exec(ctx context.Context, namespace, pod, container string, argv []string, in io.Reader) ([]byte, []byte, error) {
	out, errOut, err := n.simExec.Exec(ctx, namespace, pod, container, argv, in)
	if strings.HasPrefix(execArg(argv), "exclude") {
		select {
		case n.excl <- string(out) + string(errOut):
		default:
		}
	}
	return out, errOut, err
}

// TestStatefulSetExcludeConfirmedByFdbcli: the exclude step succeeds only on fdbcli's own
// "Successfully excluded". A leaving pod whose process is down shows nothing in status json (so
// nothing of it "holds data"), and fdbcli cannot report on it: the step keeps waiting while its
// data is still missing a replica, and is done once the data is healthy without it. A
// coordinator fdbcli warns about that the plan does not move is refused.
func TestStatefulSetExcludeConfirmedByFdbcli(t *testing.T) {
	c, model, sim, clock := stsSimClusterClock(t, 5, 0, 1, 2)
	ex := &notifyExec{simExec: sim, excl: make(chan string, 16)}
	e, _ := stsEngine(t, c, ex)
	to := int32(4)
	p, err := e.PlanScale(t.Context(), c, ops.ScaleRequest{Replicas: &to})
	if err != nil {
		t.Fatal(err)
	}
	step := p.Steps[1]
	if err := model.Stop("fdb-4"); err != nil {
		t.Fatal(err)
	}
	if err := step.Action(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if out := <-ex.excl; !strings.Contains(out, "locality_instance_id:fdb-4  ---- WARNING: Currently no servers found with this locality match!") {
		t.Fatalf("the action's exclude said %q", out)
	}
	ctx, cancel := context.WithCancel(t.Context())
	verified := make(chan error, 1)
	go func() { verified <- step.Verify(ctx, nil) }()
	select {
	case out := <-ex.excl: // the verification asked fdbcli, which could not confirm it
		if !strings.Contains(out, "no servers found with this locality match") {
			t.Errorf("fdbcli said %q", out)
		}
	case err := <-verified:
		t.Fatalf("the exclusion of a pod whose process is down was verified (err %v) without fdbcli confirming it", err)
	}
	cancel()
	if err := <-verified; err == nil {
		t.Fatal("verified after cancel")
	}
	// Its data re-replicated elsewhere (data healthy without it): fdbcli still cannot report on
	// a process that does not run, and status json now shows nothing lost.
	clock.Advance(time.Hour)
	if err := step.Verify(t.Context(), nil); err != nil {
		t.Fatal(err)
	}

	// A coordinator moved onto the leaving pod after the plan: fdbcli warns, the step refuses.
	c, model, sim = stsSimCluster(t, 5, 0, 1, 2)
	e, _ = stsEngine(t, c, sim)
	if p, err = e.PlanScale(t.Context(), c, ops.ScaleRequest{Replicas: &to}); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := model.Run(t.Context(), []string{"--exec", "coordinators 10.0.0.1:4501 10.0.0.2:4501 10.0.0.5:4501"}, &out, &errb); code != 0 {
		t.Fatalf("coordinators: %s %s", out.String(), errb.String())
	}
	if err := p.Steps[1].Action(t.Context(), nil); !errors.Is(err, ops.ErrPrecondition) || !strings.Contains(err.Error(), "10.0.0.5:4501") {
		t.Fatalf("err %v, want a refusal naming the coordinator", err)
	}
}

// TestStatefulSetReplaceBatchesCoordinators: replacing a coordinator's pod and, in a later batch,
// another pod moves the coordinator onto a pod outside the request (not onto the later batch's
// pod, which would take it away again), and every batch has a coordinators step, which finds
// nothing to do when no coordinator is on its pods when it runs.
func TestStatefulSetReplaceBatchesCoordinators(t *testing.T) {
	c, _, ex := stsSimCluster(t, 5, 0, 1, 2)
	p, err := newEngine(t, ex).PlanReplacement(t.Context(), c, ops.ReplaceRequest{Pods: []string{"fdb-1", "fdb-3"}, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]*ops.Step{}
	for _, s := range p.Steps {
		steps[s.ID] = s
	}
	first, second := steps["coordinators/fdb-1"], steps["coordinators/fdb-3"]
	if first == nil || second == nil {
		t.Fatalf("steps %v: want a coordinators step per batch", slices.Collect(maps.Keys(steps)))
	}
	if got, want := first.Details[0], "fdbcli --exec 'coordinators 10.0.0.1:4501 10.0.0.3:4501 10.0.0.5:4501'"; !strings.HasPrefix(got, want) {
		t.Fatalf("first batch: %q, want %q (fdb-4, not fdb-3 of the next batch)", got, want)
	}
}

// The scale's live view of the StatefulSet's pods lists by the StatefulSet's selector: not
// every pod of the namespace on each status read.
func TestStatefulSetLiveListsByItsSelector(t *testing.T) {
	pod := func(name string, labels map[string]string, owner string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo", Labels: labels}}
		if owner != "" {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: owner, Controller: &yes}}
		}
		return p
	}
	client := fake.NewClientset(pod("fdb-0", map[string]string{"app": "fdb"}, "fdb"), pod("fdb-1", map[string]string{"app": "fdb"}, "fdb"),
		pod("web-0", map[string]string{"app": "web"}, "web"))
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fdb"}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "fdb", Namespace: "demo"}, Spec: appsv1.StatefulSetSpec{Selector: sel}}
	g := &ops.NodeGroup{Name: "fdb", Owner: ops.NewStatefulSetOwner(sts)}
	s := &stsScale{e: &Engine{client: client}, c: &ops.Cluster{Name: "fdb", Namespace: "demo", Groups: []*ops.NodeGroup{g}}, g: g}
	c, err := s.live(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Groups[0].Pods; len(got) != 2 || got[0].Name != "fdb-0" || got[1].Name != "fdb-1" {
		t.Fatalf("live pods %+v", got)
	}
	for _, a := range client.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok && a.GetResource().Resource == "pods" {
			if got := l.GetListRestrictions().Labels.String(); got != "app=fdb" {
				t.Errorf("pods listed with selector %q, want the StatefulSet's app=fdb", got)
			}
		}
	}
}
