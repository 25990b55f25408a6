package fdbop

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

func (b *bed) setSpec(t *testing.T, value any, fields ...string) {
	t.Helper()
	res := b.dyn.Resource(GVR).Namespace("demo")
	u, err := res.Get(context.Background(), "myfdb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, value, append([]string{"spec"}, fields...)...); err != nil {
		t.Fatal(err)
	}
	u.SetGeneration(u.GetGeneration() + 1)
	if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func operatorCommands(m *fdbsim.Cluster, prefix string) []string {
	var out []string
	for _, e := range m.Log() {
		if e.Client == "operator" && strings.HasPrefix(e.Command, prefix) && e.OK {
			out = append(out, e.Command)
		}
	}
	return out
}

// TestStandInRemovesAProcessGroupAsGrowThenShrink: a group named in processGroupsToRemove is
// marked, replaced first, excluded only once the replacement runs, its coordinator moved, its
// pod and PVC deleted only once fully excluded, then included and dropped from the status.
func TestStandInRemovesAProcessGroupAsGrowThenShrink(t *testing.T) {
	b := newBed(t, sandboxSpec())
	clock := b.host.Clock().(*fdbsim.ManualClock)
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	model := b.host.Cluster("demo/myfdb")
	// The victim: a storage group holding a coordinator, so the coordinator must move first.
	var victim *processGroupStatus
	coords := model.Coordinators()
	for _, pg := range b.status(t).ProcessGroups {
		if pg.ProcessClass == "storage" && slices.Contains(coords, pg.Addresses[0]+":4501") {
			victim = pg
		}
	}
	if victim == nil {
		t.Fatalf("no storage coordinator among %v", coords)
	}
	pvc := pvcName("myfdb", victim)
	if _, err := b.kube.CoreV1().PersistentVolumeClaims("demo").Get(context.Background(), pvc, metav1.GetOptions{}); err != nil {
		t.Fatalf("PVC of a storage group: %v", err)
	}
	b.setSpec(t, []any{victim.ProcessGroupID}, "processGroupsToRemove")
	b.reconcile(t)
	st := b.status(t)
	if len(st.ProcessGroups) != 10 {
		t.Fatalf("%d groups, want the replacement added", len(st.ProcessGroups))
	}
	marked := st.ProcessGroups[slices.IndexFunc(st.ProcessGroups, func(pg *processGroupStatus) bool { return pg.ProcessGroupID == victim.ProcessGroupID })]
	if marked.RemovalTimestamp == nil || st.Generations["reconciled"] == 3 {
		t.Fatalf("group not marked or reconciled: %+v %v", marked, st.Generations)
	}
	if ex := operatorCommands(model, "exclude"); len(ex) != 0 {
		t.Fatalf("excluded before the replacement runs: %v", ex)
	}
	if slices.Contains(model.Coordinators(), victim.Addresses[0]+":4501") {
		t.Fatalf("coordinator kept on a group marked for removal: %v", model.Coordinators())
	}
	b.kubelet(t)
	b.reconcile(t)
	if ex := operatorCommands(model, "exclude"); !slices.Equal(ex, []string{"exclude no_wait locality_instance_id:" + victim.ProcessGroupID}) {
		t.Fatalf("exclusions %v", ex)
	}
	if _, err := b.kube.CoreV1().Pods("demo").Get(context.Background(), podName("myfdb", victim), metav1.GetOptions{}); err != nil {
		t.Fatalf("pod deleted before the data moved: %v", err)
	}
	clock.Advance(10 * time.Second)
	b.reconcile(t)
	b.reconcile(t)
	if _, err := b.kube.CoreV1().Pods("demo").Get(context.Background(), podName("myfdb", victim), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod of the excluded group: %v", err)
	}
	if _, err := b.kube.CoreV1().PersistentVolumeClaims("demo").Get(context.Background(), pvc, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("PVC of the excluded group: %v", err)
	}
	b.reconcile(t)
	st = b.status(t)
	if len(st.ProcessGroups) != 9 || slices.ContainsFunc(st.ProcessGroups, func(pg *processGroupStatus) bool { return pg.ProcessGroupID == victim.ProcessGroupID }) {
		t.Fatalf("groups after removal: %d", len(st.ProcessGroups))
	}
	if inc := operatorCommands(model, "include"); !slices.Equal(inc, []string{"include locality_instance_id:" + victim.ProcessGroupID}) {
		t.Fatalf("includes %v", inc)
	}
	if model.Has(victim.ProcessGroupID) || st.Generations["reconciled"] != 3 || !st.Health.Healthy {
		t.Fatalf("after removal: model has it %v, status %+v", model.Has(victim.ProcessGroupID), st)
	}
}

// TestStandInFollowsProcessCounts: a class grown gets a new group and process; shrunk, its
// excess group is marked, excluded, removed and included again.
func TestStandInFollowsProcessCounts(t *testing.T) {
	b := newBed(t, sandboxSpec())
	clock := b.host.Clock().(*fdbsim.ManualClock)
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	model := b.host.Cluster("demo/myfdb")
	count := func() (groups, marked, procs int) {
		for _, pg := range b.status(t).ProcessGroups {
			if pg.ProcessClass == "storage" {
				groups++
				if pg.RemovalTimestamp != nil {
					marked++
				}
			}
		}
		for _, p := range model.Processes() {
			if p.Class == "storage" && p.Up {
				procs++
			}
		}
		return
	}
	b.setSpec(t, int64(4), "processCounts", "storage")
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	if g, m, p := count(); g != 4 || m != 0 || p != 4 {
		t.Fatalf("grown: %d groups, %d marked, %d processes", g, m, p)
	}
	b.setSpec(t, int64(3), "processCounts", "storage")
	b.reconcile(t)
	if g, m, _ := count(); g != 4 || m != 1 {
		t.Fatalf("shrinking: %d groups, %d marked", g, m)
	}
	if ex := operatorCommands(model, "exclude"); len(ex) != 1 {
		t.Fatalf("exclusions %v", ex)
	}
	clock.Advance(10 * time.Second)
	for range 3 {
		b.reconcile(t)
	}
	if g, m, p := count(); g != 3 || m != 0 || p != 3 {
		t.Fatalf("shrunk: %d groups, %d marked, %d processes", g, m, p)
	}
	if st := b.status(t); st.Generations["reconciled"] != 4 {
		t.Fatalf("not reconciled: %v", st.Generations)
	}
}
