package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// withPVCObjects adds the "data" claim of every pod of groups.
func withPVCObjects(cluster string, groups []fakecluster.Group) []runtime.Object {
	objs := fakecluster.Objects("prod", cluster, "", groups...)
	for _, g := range groups {
		for o := 0; o < g.Replicas; o++ {
			name := fmt.Sprintf("data-%s-%s-%d", cluster, g.Name, o)
			objs = append(objs, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", UID: types.UID(name + "-uid0")}})
		}
	}
	return objs
}

// recreatePVCs makes pod creations create a missing "data-<pod>" PVC with
// a new UID, as the StatefulSet controller does, and records the most pods
// deleted and not yet recreated at once.
func recreatePVCs(client *fake.Clientset) func() int {
	var (
		mu             sync.Mutex
		gen, cur, most int
	)
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		cur++
		most = max(most, cur)
		return false, nil, nil
	})
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		gvr := corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
		name := "data-" + p.Name
		mu.Lock()
		defer mu.Unlock()
		if _, err := client.Tracker().Get(gvr, "prod", name); err != nil {
			gen++
			if err := client.Tracker().Create(gvr, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod",
				UID: types.UID(fmt.Sprintf("%s-new%d", name, gen))}}, "prod"); err != nil {
				return true, nil, err
			}
		}
		cur--
		return false, nil, nil
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return most
	}
}

func pvcUID(t *testing.T, client *fake.Clientset, name string) types.UID {
	t.Helper()
	pvc, err := client.CoreV1().PersistentVolumeClaims("prod").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("PVC %s: %v", name, err)
	}
	return pvc.UID
}

func TestReplaceGenericNewPVCs(t *testing.T) {
	h := newHarness(t, withPVCObjects("db", dbGroups())...)
	ctrl := fakecluster.Start(t, h.client, "prod")
	most := recreatePVCs(h.client)
	// The first batch's pods come back only once both are gone, whatever the scheduling.
	ctrl.SetHold(true)
	go func() {
		ctrl.WaitDeleted(t, 2)
		ctrl.SetHold(false)
		ctrl.Flush()
	}()
	r := h.run("replace", "db", "db-master-0", "db-master-1", "db-hot-1", "--max-concurrent", "2", "--yes", "--lock-id", "alice@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	if got, want := ctrl.Deleted(), []string{"db-master-0", "db-master-1", "db-hot-1"}; !slices.Equal(got, want) {
		t.Errorf("deleted %v, want %v", got, want)
	}
	if m := most(); m != 2 {
		t.Errorf("at most %d replacements in flight, want 2", m)
	}
	for _, pod := range []string{"db-master-0", "db-master-1", "db-hot-1"} {
		if uid := pvcUID(t, h.client, "data-"+pod); strings.HasSuffix(string(uid), "-uid0") {
			t.Errorf("PVC of %s not replaced (UID %s)", pod, uid)
		}
	}
	if uid := pvcUID(t, h.client, "data-db-hot-0"); uid != "data-db-hot-0-uid0" {
		t.Errorf("PVC of an untouched pod changed: %s", uid)
	}
}

func TestReplaceDeletionKeepsPVC(t *testing.T) {
	h := newHarness(t, withPVCObjects("db", dbGroups())...)
	ctrl := fakecluster.Start(t, h.client, "prod")
	recreatePVCs(h.client)
	r := h.run("replace", "db", "db-hot-1", "--strategy", "deletion", "--yes", "--lock-id", "alice@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	if got := ctrl.Deleted(); !slices.Equal(got, []string{"db-hot-1"}) {
		t.Errorf("deleted %v", got)
	}
	if uid := pvcUID(t, h.client, "data-db-hot-1"); uid != "data-db-hot-1-uid0" {
		t.Errorf("deletion replaced the PVC: %s", uid)
	}
	for _, w := range fakecluster.Writes(h.client) {
		if strings.Contains(w, "persistentvolumeclaims") {
			t.Errorf("deletion wrote a PVC: %s", w)
		}
	}
}

func TestReplaceFailedTaintDryRun(t *testing.T) {
	objs := withPVCObjects("db", dbGroups())
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok && n.Name == "node-1" {
			n.Spec.Taints = []corev1.Taint{{Key: "example.com/retire", Effect: corev1.TaintEffectNoSchedule,
				TimeAdded: &metav1.Time{Time: testNow.Add(-time.Hour)}}}
		}
	}
	h := newHarness(t, objs...)
	r := h.run("replace", "db", "--failed", "--taint", "example.com/retire=30m", "--dry-run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	for _, want := range []string{"db-master-1: node node-1 has taint", "db-hot-1: node node-1 has taint", "pod/db-master-1:", "pod/db-hot-1:"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("dry-run output lacks %q:\n%s", want, r.out)
		}
	}
	for _, other := range []string{"db-master-0", "db-hot-0", "db-cold-0", "db-master-2"} {
		if strings.Contains(r.out, other) {
			t.Errorf("dry-run names %s, which is healthy:\n%s", other, r.out)
		}
	}
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("dry-run wrote: %v", w)
	}

	// A taint younger than the threshold picks nothing.
	r = h.run("replace", "db", "--failed", "--taint", "example.com/retire=2h", "--yes")
	if r.code != 0 || !strings.Contains(r.out, "nothing to replace") {
		t.Errorf("exit %d, out %q, want exit 0 and nothing to replace", r.code, r.out)
	}
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("nothing to replace, yet it wrote: %v", w)
	}
}

func TestRestartZoneModeRuns(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
	ctrl := fakecluster.Start(t, h.client, "prod")
	r := h.run("restart", "db", "--rolling", "--mode", "zone", "--max-unavailable-zones", "0", "--yes", "--lock-id", "alice@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	// Pods run on node-<ordinal%3> in zone-a..c.
	want := []string{"db-master-0", "db-hot-0", "db-cold-0", "db-master-1", "db-hot-1", "db-master-2"}
	if got := ctrl.Deleted(); !slices.Equal(got, want) {
		t.Errorf("deleted %v, want zone by zone %v", got, want)
	}
	if !strings.Contains(r.out, "zone/zone-a") {
		t.Errorf("output does not name the zone batch:\n%s", r.out)
	}
}

// TestReplaceFailedResumesItsChoice: an interrupted --failed run is resumed
// with the pods it picked, even though they no longer look failed; the
// journal of another request (here --strategy deletion) is not.
func TestReplaceFailedResumesItsChoice(t *testing.T) {
	tests := []struct {
		name     string
		strategy string
		flags    []ops.RequestFlag
		want     []string
	}{
		{"same request", "replacement", []ops.RequestFlag{{Name: "lock-id", Values: []string{"alice@test"}}},
			[]string{"db-hot-1: chosen by the interrupted run being resumed", "pod/db-hot-1:", "resumes the interrupted run"}},
		{"another request", "deletion", []ops.RequestFlag{{Name: "strategy", Values: []string{"deletion"}}},
			[]string{"nothing to replace in prod/db: no pod meets a failure condition"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, withPVCObjects("db", dbGroups())...)
			putJournal(t, h, ops.Journal{Operation: "replace", Args: "--strategy " + tt.strategy + " --max-concurrent 1 --pods db-hot-1",
				Holder: "alice@test", State: ops.JournalInterrupted, Started: testNow.Add(-time.Hour), Steps: 1,
				Request: &ops.Request{Command: []string{"replace"}, Cluster: "db", Namespace: "prod", Engine: ops.EngineCrateDB,
					Flags:  append([]ops.RequestFlag{{Name: "failed", Values: []string{"true"}, Bool: true}}, tt.flags...),
					Picked: []string{"db-hot-1"}}})
			r := h.run("replace", "db", "--failed", "--dry-run")
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			for _, want := range tt.want {
				if !strings.Contains(r.out, want) {
					t.Errorf("output lacks %q:\n%s", want, r.out)
				}
			}
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("dry-run wrote: %v", w)
			}
		})
	}
}

// TestReplaceNodeSelector: --node-selector chooses the nodes by label (kubectl-fdb cordon
// --node-selector) and replaces every pod of the cluster on them; a selector no node matches
// replaces nothing; an invalid selector or one combined with --node is exit 2; none writes.
func TestReplaceNodeSelector(t *testing.T) {
	objs := withPVCObjects("db", dbGroups())
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok && n.Name == "node-1" {
			n.Labels = map[string]string{"pool": "retire", "tier": "old"}
		}
	}
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		want  []string
		other []string
	}{
		{name: "matching", args: []string{"--node-selector", "pool=retire,tier=old"},
			want:  []string{"db-master-1: on node node-1 (--node-selector pool=retire,tier=old) (evacuated)", "db-hot-1: on node node-1", "pod/db-master-1:", "pod/db-hot-1:"},
			other: []string{"db-master-0", "db-hot-0", "db-cold-0", "db-master-2"}},
		{name: "no node", args: []string{"--node-selector", "pool=none"}, want: []string{"nothing to replace in prod/db: no node matches --node-selector pool=none"}},
		{name: "invalid", args: []string{"--node-selector", "pool=bad value"}, code: 2},
		{name: "with --node", args: []string{"--node-selector", "pool=retire", "--node", "node-1"}, code: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, objs...)
			r := h.run(append([]string{"replace", "db", "--dry-run"}, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d: %s\n%s", r.code, tc.code, r.err, r.out)
			}
			for _, want := range tc.want {
				if !strings.Contains(r.out, want) {
					t.Errorf("output lacks %q:\n%s", want, r.out)
				}
			}
			for _, other := range tc.other {
				if strings.Contains(r.out, other) {
					t.Errorf("output names %s, not on a matching node:\n%s", other, r.out)
				}
			}
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("wrote: %v", w)
			}
		})
	}
}

// TestScaleRemoveNeedsProcesses: --remove names FoundationDB process groups for --processes; on
// its own, empty, or on a cluster that is not a FoundationDBCluster it is exit 2 and nothing is
// written.
func TestScaleRemoveNeedsProcesses(t *testing.T) {
	h := newHarness(t, withPVCObjects("db", dbGroups())...)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--remove", "storage-1"}, "give --processes CLASS=N"},
		{[]string{"--replicas", "3", "--remove", "storage-1"}, "give --processes CLASS=N"},
		{[]string{"--processes", "storage=2", "--remove", ""}, "--remove was given an empty value"},
		{[]string{"--processes", "storage=2", "--remove", "storage-1"}, "--processes is for FoundationDB clusters; cluster db is generic"},
	} {
		r := h.run(append([]string{"scale", "db", "--yes"}, tc.args...)...)
		if r.code != ops.ExitUsage || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d %q, want exit 2 with %q", tc.args, r.code, r.err, tc.want)
		}
	}
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("wrote: %v", w)
	}
}
