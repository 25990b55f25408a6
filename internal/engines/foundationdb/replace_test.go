package foundationdb

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// withProcessGroups gives the cluster's FoundationDBCluster a status.processGroups entry per pod.
func withProcessGroups(c *ops.Cluster) {
	var groups []any
	for _, p := range c.AllPods() {
		groups = append(groups, map[string]any{"processGroupID": p.Member, "processClass": p.Group, "faultDomain": p.Zone})
	}
	for _, g := range c.Groups {
		st, _ := ops.ControllerOf(g).Object["status"].(map[string]any)
		st["processGroups"] = groups
	}
}

// liveCR makes the cluster's FoundationDBCluster object (its owner's) a full resource as read
// from the API server, at resourceVersion 42, and returns it (sharing the object).
func liveCR(c *ops.Cluster) *unstructured.Unstructured {
	obj := ops.ControllerOf(c.Groups[0]).Object
	obj["apiVersion"], obj["kind"] = "apps.foundationdb.org/v1beta2", "FoundationDBCluster"
	obj["metadata"].(map[string]any)["namespace"] = "demo"
	obj["metadata"].(map[string]any)["resourceVersion"] = "42"
	return &unstructured.Unstructured{Object: obj}
}

// fakeCRClient is a fake dynamic client serving FoundationDBClusters, holding objs.
func fakeCRClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ClusterGVR: "FoundationDBClusterList"}, objs...)
}

func TestPlanReplacementRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		req     ops.ReplaceRequest
		setup   func(t *testing.T, c *ops.Cluster, m *fdbsim.Cluster)
		usage   bool
		message string
	}{
		{name: "every storage zone at once", req: ops.ReplaceRequest{Pods: []string{"myfdb-storage-10", "myfdb-storage-11", "myfdb-storage-12"}},
			message: "hold storage in 3 fault domains"},
		{name: "fewer storage fault domains than replicas", req: ops.ReplaceRequest{Pods: []string{"storage-11"}},
			setup: func(t *testing.T, c *ops.Cluster, _ *fdbsim.Cluster) {
				// Someone else's removal of storage-12 is under way.
				st, _ := ops.ControllerOf(c.Groups[0]).Object["status"].(map[string]any)
				for _, g := range st["processGroups"].([]any) {
					if m := g.(map[string]any); m["processGroupID"] == "storage-12" {
						m["removalTimestamp"] = "2026-01-01T00:00:00Z"
					}
				}
			},
			message: "leave storage in 1 fault domain(s) with at most 1 replacement(s), fewer than the 3 replicas"},
		{name: "unknown name", req: ops.ReplaceRequest{Pods: []string{"nope"}}, usage: true, message: `"nope" is neither a pod nor a process group`},
		{name: "no exclusion without force", req: ops.ReplaceRequest{Pods: []string{"myfdb-log-10"}, NoExclusion: true}, usage: true, message: "needs --force"},
		{name: "no exclusion of a running process", req: ops.ReplaceRequest{Pods: []string{"myfdb-log-10"}, NoExclusion: true, Force: true},
			message: "only for a process that is not running"},
		{name: "degraded", req: ops.ReplaceRequest{Pods: []string{"myfdb-log-10"}},
			setup: func(t *testing.T, _ *ops.Cluster, m *fdbsim.Cluster) {
				if err := m.Stop("storage-10"); err != nil {
					t.Fatal(err)
				}
			},
			message: "below the configured 3"},
		{name: "unavailable", req: ops.ReplaceRequest{Pods: []string{"myfdb-stateless-10"}},
			setup: func(t *testing.T, _ *ops.Cluster, m *fdbsim.Cluster) {
				// Every log down: no recovery can complete, the database is unavailable.
				for _, id := range []string{"log-10", "log-11", "log-12"} {
					if err := m.Stop(id); err != nil {
						t.Fatal(err)
					}
				}
			},
			message: "is unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, m, e := liveCluster(t, 3, 3)
			withProcessGroups(c)
			if tc.setup != nil {
				tc.setup(t, c, m)
			}
			tc.req.MaxConcurrent = 1
			p, err := e.PlanReplacement(t.Context(), c, tc.req)
			if err == nil {
				t.Fatalf("planned %v", p.Steps)
			}
			if want := ops.ExitPrecondition; tc.usage {
				want = ops.ExitUsage
				if ops.ExitCode(err) != want {
					t.Fatalf("exit %d for %v", ops.ExitCode(err), err)
				}
			} else if ops.ExitCode(err) != want {
				t.Fatalf("exit %d for %v", ops.ExitCode(err), err)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %q, want %q", err, tc.message)
			}
		})
	}
}

func TestPlanReplacementOneStorageGroup(t *testing.T) {
	c, _, e := liveCluster(t, 3, 3)
	withProcessGroups(c)
	p, err := e.PlanReplacement(t.Context(), c, ops.ReplaceRequest{Pods: []string{"myfdb-storage-11"}, MaxConcurrent: 1, Args: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	want := "mark/storage-11 replacements/storage-11 exclude/storage-11 coordinators/storage-11 remove/storage-11 include/storage-11 healthy/storage-11"
	if got := strings.Join(ids, " "); got != want {
		t.Fatalf("steps %s, want %s", got, want)
	}
	// A resumed run takes its process groups from the journal, whatever the pods are now.
	j := &ops.Journal{Data: map[string]string{keyGroups: "storage-11"}}
	c.Groups[0].Pods = c.Groups[0].Pods[:1]
	p2, err := e.PlanReplacement(t.Context(), c, ops.ReplaceRequest{Pods: []string{"myfdb-storage-11"}, MaxConcurrent: 1, Journal: j})
	if err != nil || len(p2.Steps) != 7 || p2.Steps[0].ID != "mark/storage-11" {
		t.Fatalf("resumed plan: %v", err)
	}
}

func TestPlanReplacementBatchesByMaxConcurrent(t *testing.T) {
	for _, tc := range []struct {
		max   int
		steps int
		first string
	}{
		{1, 14, "mark/log-10"},
		{2, 7, "mark/log-10,log-11"},
	} {
		c, _, e := liveCluster(t, 3, 3)
		withProcessGroups(c)
		p, err := e.PlanReplacement(t.Context(), c, ops.ReplaceRequest{Pods: []string{"myfdb-log-10", "log-11"}, MaxConcurrent: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Steps) != tc.steps || p.Steps[0].ID != tc.first {
			t.Fatalf("--max-concurrent %d: %d steps, first %s", tc.max, len(p.Steps), p.Steps[0].ID)
		}
	}
}

// TestRemovedSelectsByClusterAndGroup: two FoundationDBClusters in one namespace may both have
// a process group storage-10. Once ours is gone, the other cluster's pod and PVC of the same ID
// must not hold the "removed" step (nor would their deletion be ours to wait for).
func TestRemovedSelectsByClusterAndGroup(t *testing.T) {
	labelled := func(cluster, id string) map[string]string {
		return map[string]string{defaultClusterNameLabel: cluster, defaultProcessGroupIDLabel: id, "foundationdb.org/fdb-process-class": "storage"}
	}
	cr := func(name string, match map[string]any) *unstructured.Unstructured {
		spec := map[string]any{}
		if match != nil {
			spec["labels"] = map[string]any{"matchLabels": match}
		}
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name, "namespace": "demo"},
			"spec": spec, "status": map[string]any{}}}
	}
	for _, tc := range []struct {
		name    string
		u       *unstructured.Unstructured
		objs    []runtime.Object
		done    bool
		waiting string
	}{
		{name: "other cluster's pod and PVC of the same ID", u: cr("myfdb", nil), done: true,
			objs: []runtime.Object{
				&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other-storage-10", Namespace: "demo", Labels: labelled("other", "storage-10")}},
				&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "other-storage-10-data", Namespace: "demo", Labels: labelled("other", "storage-10")}},
			}},
		{name: "our pod still there", u: cr("myfdb", nil), waiting: "pod myfdb-storage-10 of process group storage-10 to be deleted",
			objs: []runtime.Object{
				&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other-storage-10", Namespace: "demo", Labels: labelled("other", "storage-10")}},
				&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "myfdb-storage-10", Namespace: "demo", Labels: labelled("myfdb", "storage-10")}},
			}},
		{name: "our PVC still there, custom match labels", u: cr("myfdb", map[string]any{"app": "mine"}),
			waiting: "PVC mine-data of process group storage-10 to be deleted",
			objs: []runtime.Object{
				&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "other-data", Namespace: "demo", Labels: labelled("myfdb", "storage-10")}},
				&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "mine-data", Namespace: "demo",
					Labels: map[string]string{"app": "mine", defaultProcessGroupIDLabel: "storage-10"}}},
			}},
		{name: "resources gone, the operator's inclusion paced", u: terminating(cr("myfdb", nil)),
			waiting: "process group storage-10 to leave status.processGroups (resources terminating: the operator includes removed groups only " +
				"once the last recovery is old enough, 600s by default, and spec.automationOptions.waitBetweenRemovalsSeconds after the removal, 60s by default)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(ops.EngineDeps{Client: fake.NewClientset(tc.objs...)}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := &removal{e: e, c: &ops.Cluster{Name: "myfdb", Namespace: "demo"}, name: "myfdb", idLabel: defaultProcessGroupIDLabel}
			done, waiting, err := r.removed(t.Context(), nil, tc.u, []string{"storage-10"})
			if err != nil {
				t.Fatal(err)
			}
			if done != tc.done || waiting != tc.waiting {
				t.Fatalf("done %t waiting %q, want %t %q", done, waiting, tc.done, tc.waiting)
			}
		})
	}
}

// terminating lists storage-10 in u's status as the operator leaves a removed group while it
// waits to include it (update_status.go: ResourcesTerminating).
func terminating(u *unstructured.Unstructured) *unstructured.Unstructured {
	u.Object["status"] = map[string]any{"processGroups": []any{map[string]any{"processGroupID": "storage-10", "processClass": "storage",
		"removalTimestamp": "2026-01-01T00:00:00Z", "exclusionTimestamp": "2026-01-01T00:00:00Z",
		"processGroupConditions": []any{map[string]any{"type": "ResourcesTerminating", "timestamp": int64(1)}}}}}
	return u
}

// TestNotExcludedReasonNamesTheOperatorsPacing: a group not yet excluded is reported as the
// operator's exclusion to come, with the age of the last recovery it paces by, not as data
// left to move.
func TestNotExcludedReasonNamesTheOperatorsPacing(t *testing.T) {
	var st Status
	if err := json.Unmarshal([]byte(`{"cluster":{"recovery_state":{"name":"fully_recovered","seconds_since_last_recovered":42.4}}}`), &st); err != nil {
		t.Fatal(err)
	}
	want := "the operator to exclude storage-10 (it excludes only once the last recovery is old enough, 120s by default; the last recovery was 42s ago)"
	if got := notExcludedReason(&st, []string{"storage-10", "storage-10"}); got != want {
		t.Fatalf("got %q", got)
	}
	if got := notExcludedReason(&Status{}, []string{"storage-10"}); !strings.HasSuffix(got, "120s by default)") {
		t.Fatalf("without a recovery state: %q", got)
	}
}
