package fdbop

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// sinceRecovery is status json's cluster.recovery_state.seconds_since_last_recovered.
func sinceRecovery(t *testing.T, m *fdbsim.Cluster) time.Duration {
	t.Helper()
	var st recoveryState
	if err := json.Unmarshal(m.StatusJSON(), &st); err != nil {
		t.Fatal(err)
	}
	return time.Duration(st.Cluster.RecoveryState.SecondsSinceLastRecovered * float64(time.Second))
}

// untilRecoveryAge advances the clock so that the last recovery is age old (and no older).
func untilRecoveryAge(t *testing.T, clock *fdbsim.ManualClock, m *fdbsim.Cluster, age time.Duration) {
	t.Helper()
	if d := age - sinceRecovery(t, m); d > 0 {
		clock.Advance(d)
	}
}

func pacedSpec() map[string]any {
	s := sandboxSpec()
	delete(s, "automationOptions") // waitBetweenRemovalsSeconds: the operator's 60 s
	return s
}

func TestDefaultPacingIsTheOperators(t *testing.T) {
	// setup/setup.go flag defaults; api/v1beta2 GetWaitBetweenRemovalsSeconds, GetRemovalMode.
	want := Pacing{MinimumRecoveryTimeForInclusion: 600 * time.Second, MinimumRecoveryTimeForExclusion: 120 * time.Second,
		MinimumUptimeForCoordinatorChangeWithMissingProcess: 2 * time.Minute, MinimumUptimeForCoordinatorChangeWithUndesiredProcess: 5 * time.Minute}
	if got := DefaultPacing(); got != want {
		t.Fatalf("DefaultPacing() = %+v", got)
	}
	if op := New(nil, nil, fdbsim.NewHost(fdbsim.RealClock{}), Options{}); *op.opts.Pacing != want {
		t.Fatalf("New without Pacing: %+v", *op.opts.Pacing)
	}
	for _, tc := range []struct {
		spec string
		wait time.Duration
		mode string
	}{
		{`{}`, 60 * time.Second, "Zone"},
		{`{"automationOptions":{"waitBetweenRemovalsSeconds":-1}}`, 60 * time.Second, "Zone"},
		{`{"automationOptions":{"waitBetweenRemovalsSeconds":0,"removalMode":"All"}}`, 0, "All"},
		{`{"automationOptions":{"waitBetweenRemovalsSeconds":5}}`, 5 * time.Second, "Zone"},
	} {
		var a automationOptions
		if err := json.Unmarshal([]byte(tc.spec), &a); err != nil {
			t.Fatal(err)
		}
		if a.waitBetweenRemovals() != tc.wait || a.removalMode() != tc.mode {
			t.Errorf("%s: wait %v mode %s", tc.spec, a.waitBetweenRemovals(), a.removalMode())
		}
	}
	for v, want := range map[string]bool{"7.3.63": true, "7.1.22": true, "7.1.21": false, "6.3.25": false, "7.1.25-rc1": true} {
		if supportsRecoveryState(v) != want {
			t.Errorf("supportsRecoveryState(%s) != %t", v, want)
		}
	}
}

// TestStandInPacesExclusionAndInclusion: with the operator's defaults, a group marked for
// removal is excluded only once the last recovery is 120 s old, and its exclusion included
// again (the group leaving the status) only once the last recovery is 600 s old and 60 s have
// passed since its resources went.
func TestStandInPacesExclusionAndInclusion(t *testing.T) {
	b := newPacedBed(t, pacedSpec(), nil)
	clock := b.host.Clock().(*fdbsim.ManualClock)
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	model := b.host.Cluster("demo/myfdb")
	// The victim: a storage group holding a coordinator, moved right after its exclusion.
	var victim *processGroupStatus
	for _, pg := range b.status(t).ProcessGroups {
		if pg.ProcessClass == "storage" && slices.Contains(model.Coordinators(), pg.Addresses[0]+":4501") {
			victim = pg
		}
	}
	if victim == nil {
		t.Fatalf("no storage coordinator among %v", model.Coordinators())
	}
	b.setSpec(t, []any{victim.ProcessGroupID}, "processGroupsToRemove")
	b.reconcile(t)
	b.kubelet(t)
	untilRecoveryAge(t, clock, model, 119*time.Second)
	b.reconcile(t)
	b.reconcile(t)
	if ex := operatorCommands(model, "exclude"); len(ex) != 0 {
		t.Fatalf("excluded %v s after a recovery, the operator waits 120 s", sinceRecovery(t, model).Seconds())
	}
	if !slices.Contains(model.Coordinators(), victim.Addresses[0]+":4501") {
		t.Fatalf("undesired coordinator changed %v s after a recovery, the operator waits 5 minutes", sinceRecovery(t, model).Seconds())
	}
	clock.Advance(time.Second)
	b.reconcile(t)
	if ex := operatorCommands(model, "exclude"); !slices.Equal(ex, []string{"exclude no_wait locality_instance_id:" + victim.ProcessGroupID}) {
		t.Fatalf("exclusions once the last recovery is 120 s old: %v", ex)
	}
	if slices.Contains(model.Coordinators(), victim.Addresses[0]+":4501") {
		t.Fatalf("coordinator kept on the excluded group: %v", model.Coordinators())
	}
	// The data moves; the pod and PVC go once the group is fully excluded.
	clock.Advance(10 * time.Second)
	b.reconcile(t)
	b.reconcile(t)
	if _, err := b.kube.CoreV1().Pods("demo").Get(context.Background(), podName("myfdb", victim), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod of the excluded group: %v", err)
	}
	pg := groupOf(b.status(t), victim.ProcessGroupID)
	if pg == nil || conditionTime(pg, "ResourcesTerminating") == 0 {
		t.Fatalf("removed group without ResourcesTerminating: %+v", pg)
	}
	// 60 s after the removal but the last recovery not yet 600 s old: no inclusion.
	clock.Advance(60 * time.Second)
	untilRecoveryAge(t, clock, model, 599*time.Second)
	b.reconcile(t)
	b.reconcile(t)
	if inc := operatorCommands(model, "include"); len(inc) != 0 {
		t.Fatalf("included %v s after a recovery, the operator waits 600 s", sinceRecovery(t, model).Seconds())
	}
	if st := b.status(t); groupOf(st, victim.ProcessGroupID) == nil || st.Generations["reconciled"] == 3 {
		t.Fatalf("group left the status before its inclusion: %v", st.Generations)
	}
	clock.Advance(time.Second)
	b.reconcile(t)
	if inc := operatorCommands(model, "include"); !slices.Equal(inc, []string{"include locality_instance_id:" + victim.ProcessGroupID}) {
		t.Fatalf("includes once the last recovery is 600 s old: %v", inc)
	}
	b.reconcile(t)
	if st := b.status(t); groupOf(st, victim.ProcessGroupID) != nil || st.Generations["reconciled"] != 3 {
		t.Fatalf("after the inclusion: %v", st.Generations)
	}
}

// TestStandInWaitsBetweenRemovals: two groups to remove in two zones are removed one zone at a
// time (removalMode Zone), the second only waitBetweenRemovalsSeconds (60 s unset) after the
// first's resources went.
func TestStandInWaitsBetweenRemovals(t *testing.T) {
	b := newBed(t, pacedSpec())
	clock := b.host.Clock().(*fdbsim.ManualClock)
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	b.setSpec(t, int64(5), "processCounts", "storage")
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	b.setSpec(t, int64(3), "processCounts", "storage")
	b.reconcile(t)
	var marked []*processGroupStatus
	for _, pg := range b.status(t).ProcessGroups {
		if pg.RemovalTimestamp != nil {
			marked = append(marked, pg)
		}
	}
	if len(marked) != 2 || marked[0].FaultDomain == marked[1].FaultDomain {
		t.Fatalf("want two groups marked in two zones: %+v", marked)
	}
	gone := func() (n int) {
		for _, pg := range marked {
			if _, err := b.kube.CoreV1().Pods("demo").Get(context.Background(), podName("myfdb", pg), metav1.GetOptions{}); apierrors.IsNotFound(err) {
				n++
			}
		}
		return n
	}
	clock.Advance(10 * time.Second) // the data moves
	b.reconcile(t)
	b.reconcile(t)
	if n := gone(); n != 1 {
		t.Fatalf("%d pods removed at once, the operator removes one zone at a time", n)
	}
	clock.Advance(59 * time.Second)
	b.reconcile(t)
	if n := gone(); n != 1 {
		t.Fatalf("%d pods removed 59 s after the first removal, the operator waits 60 s", n)
	}
	clock.Advance(time.Second)
	b.reconcile(t)
	if n := gone(); n != 2 {
		t.Fatalf("%d pods removed 60 s after the first removal", n)
	}
}

// TestStandInPacesCoordinatorChange: a coordinator whose pod came back at a new IP is missing;
// the stand-in changes the coordinators only once the last recovery is 2 minutes old, and the
// cluster reads not reconciled (needsCoordinatorChange) meanwhile.
func TestStandInPacesCoordinatorChange(t *testing.T) {
	b := newPacedBed(t, pacedSpec(), nil)
	clock := b.host.Clock().(*fdbsim.ManualClock)
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	model := b.host.Cluster("demo/myfdb")
	var victim *processGroupStatus
	for _, pg := range b.status(t).ProcessGroups {
		if pg.ProcessClass == "log" && slices.Contains(model.Coordinators(), pg.Addresses[0]+":4501") {
			victim = pg
		}
	}
	if victim == nil {
		t.Fatalf("no log coordinator among %v", model.Coordinators())
	}
	old := victim.Addresses[0] + ":4501"
	if err := b.kube.CoreV1().Pods("demo").Delete(context.Background(), podName("myfdb", victim), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	untilRecoveryAge(t, clock, model, 119*time.Second)
	b.reconcile(t)
	if !slices.Contains(model.Coordinators(), old) {
		t.Fatalf("coordinators changed %v s after a recovery, the operator waits 2 minutes", sinceRecovery(t, model).Seconds())
	}
	// api/v1beta2 CheckReconciliation: generations.reconciled only moves up; the pending change
	// shows as needsCoordinatorChange.
	if st := b.status(t); st.Generations["needsCoordinatorChange"] != 2 {
		t.Fatalf("a pending coordinator change not in the status: %v", st.Generations)
	}
	clock.Advance(time.Second)
	b.reconcile(t)
	if slices.Contains(model.Coordinators(), old) {
		t.Fatalf("coordinator %s kept once the last recovery is 2 minutes old: %v", old, model.Coordinators())
	}
	b.reconcile(t)
	if st := b.status(t); st.Generations["reconciled"] != 2 || st.Generations["needsCoordinatorChange"] != 0 {
		t.Fatalf("after the change: %v", st.Generations)
	}
}

func groupOf(st clusterStatus, id string) *processGroupStatus {
	for _, pg := range st.ProcessGroups {
		if pg.ProcessGroupID == id {
			return pg
		}
	}
	return nil
}

// TestCRDKeepsTheRemovalPacingFields: the test bed's API server prunes fields the CRD does not
// declare; without these the stand-in always read the default 60 s (it did in e2e).
func TestCRDKeepsTheRemovalPacingFields(t *testing.T) {
	var crd map[string]any
	if err := yaml.Unmarshal(CRD, &crd); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
	if len(versions) == 0 {
		t.Fatal("no versions")
	}
	props, _, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "automationOptions", "properties")
	for _, f := range []string{"waitBetweenRemovalsSeconds", "removalMode"} {
		if _, ok := props[f]; !ok {
			t.Errorf("spec.automationOptions.%s missing from the CRD", f)
		}
	}
}
