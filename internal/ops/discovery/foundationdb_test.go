package discovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func fdbCR(name string, spec map[string]any, groups ...[2]string) *unstructured.Unstructured {
	var pgs []any
	for _, g := range groups {
		pgs = append(pgs, map[string]any{"processGroupID": g[0], "faultDomain": g[1]})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.foundationdb.org/v1beta2", "kind": "FoundationDBCluster",
		"metadata": map[string]any{"name": name, "namespace": "db", "uid": "cr-" + name},
		"spec":     spec,
		"status":   map[string]any{"processGroups": pgs},
	}}
}

func fdbPod(cluster, class, id string, labels map[string]string, ready bool) *corev1.Pod {
	if labels == nil {
		labels = map[string]string{fdbLabelClusterName: cluster, fdbLabelProcessClass: class, fdbLabelProcessGroupID: id}
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: cluster + "-" + id, Namespace: "db", Labels: labels, UID: types.UID("uid-" + id),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps.foundationdb.org/v1beta2", Kind: "FoundationDBCluster", Name: cluster, UID: types.UID("cr-" + cluster)}}},
		Spec:   corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

func TestDiscoverFoundationDBCluster(t *testing.T) {
	counts := map[string]any{"processCounts": map[string]any{"storage": int64(2), "log": int64(1), "stateless": int64(1)}}
	cr := fdbCR("myfdb", counts, [2]string{"storage-17", "zone-a"}, [2]string{"storage-4", "zone-b"}, [2]string{"log-9", "zone-a"}, [2]string{"stateless-3", "zone-c"})
	stranger := fdbPod("myfdb", "storage", "storage-99", nil, true)
	stranger.OwnerReferences = nil // not the operator's
	pods := []runtime.Object{
		fdbPod("myfdb", "storage", "storage-17", nil, true),
		fdbPod("myfdb", "storage", "storage-4", nil, false),
		fdbPod("myfdb", "log", "log-9", nil, true),
		stranger,
	}
	custom := fdbCR("other", map[string]any{
		"processCounts": map[string]any{"storage": int64(1)},
		"labels": map[string]any{"matchLabels": map[string]any{"app": "x"}, "processClassLabels": []any{"x/class"},
			"processGroupIDLabels": []any{"x/id"}},
	}, [2]string{"s-1", "z"})
	customPod := fdbPod("other", "storage", "s-1", map[string]string{"app": "x", "x/class": "storage", "x/id": "s-1"}, true)

	tests := []struct {
		name      string
		opts      Options
		wantUsage string
		check     func(*testing.T, *ops.Cluster)
	}{
		{name: "found by name when no StatefulSet matches", opts: Options{Name: "myfdb"}, check: func(t *testing.T, c *ops.Cluster) {
			if c.Engine != ops.EngineFoundationDB || c.Layout != LayoutFoundationDBOperator || c.Operator != "" {
				t.Fatalf("engine/layout/operator %s/%s/%q", c.Engine, c.Layout, c.Operator)
			}
			if got := c.GroupNames(); !slices.Equal(got, []string{"storage", "log", "stateless"}) {
				t.Fatalf("groups %v", got)
			}
			st := c.Group("storage")
			if st.Desired != 2 || st.Current != 2 || st.Ready != 1 || ops.StatefulSetName(st) != "" ||
				ops.ControllerOf(st) == nil || ops.ControllerOf(st).Kind != "FoundationDBCluster" || ops.ControllerOf(st).Name != "myfdb" {
				t.Fatalf("storage group %+v", st)
			}
			if names := podNames(st); !slices.Equal(names, []string{"myfdb-storage-17", "myfdb-storage-4"}) {
				t.Fatalf("storage pods %v (the stranger must not be there)", names)
			}
			if p := st.Pods[0]; p.Member != "storage-17" || p.Zone != "zone-a" || p.Ordinal != 17 {
				t.Fatalf("pod %+v: zone is the process group's fault domain", p)
			}
			if sl := c.Group("stateless"); sl.Desired != 1 || sl.Current != 0 {
				t.Fatalf("stateless group without pods %+v", sl)
			}
		}},
		{name: "explicit engine", opts: Options{Name: "myfdb", Engine: ops.EngineFoundationDB}, check: func(t *testing.T, c *ops.Cluster) {
			if c.Engine != ops.EngineFoundationDB || len(c.Groups) != 3 {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "spec.labels replace the operator's labels", opts: Options{Name: "other"}, check: func(t *testing.T, c *ops.Cluster) {
			if g := c.Group("storage"); g == nil || len(g.Pods) != 1 || g.Pods[0].Member != "s-1" || g.Pods[0].Zone != "z" {
				t.Fatalf("%+v", c.Groups)
			}
		}},
		{name: "neither StatefulSet nor FoundationDBCluster", opts: Options{Name: "nothing"}, wantUsage: `no database cluster "nothing"`},
		{name: "explicit engine, no resource", opts: Options{Name: "nothing", Engine: ops.EngineFoundationDB}, wantUsage: `no FoundationDBCluster "nothing" in namespace "db"`},
		// An engine without operator resources: the StatefulSet layouts' message.
		{name: "explicit engine of StatefulSets only", opts: Options{Name: "nothing", Engine: ops.EngineEtcd}, wantUsage: `no database cluster "nothing" in namespace "db": no StatefulSet labelled`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(append(slices.Clone(pods), customPod)...)
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{FoundationDBClusterGVR: "FoundationDBClusterList"}, cr, custom)
			opts := tt.opts
			opts.Namespace, opts.Dynamic = "db", dyn
			c, err := discover(context.Background(), client, opts)
			if tt.wantUsage != "" {
				if !errors.Is(err, ops.ErrUsage) || !strings.Contains(err.Error(), tt.wantUsage) {
					t.Fatalf("err %v, want usage %q", err, tt.wantUsage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
			// Reads only: no write to the API.
			for _, a := range append(client.Actions(), dyn.Actions()...) {
				if a.GetVerb() != "get" && a.GetVerb() != "list" {
					t.Fatalf("discovery wrote: %v", a)
				}
			}
		})
	}
}

// TestStatefulSetLayoutsAskNoFoundationDBCluster: a cluster found as StatefulSets costs no
// request for FoundationDBClusters.
func TestStatefulSetLayoutsAskNoFoundationDBCluster(t *testing.T) {
	sts := mkSTS("db-a", 1, withLabels(LabelCluster, "foo"))
	sts.Namespace = "db"
	client := fake.NewClientset(sts)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{FoundationDBClusterGVR: "FoundationDBClusterList"})
	if _, err := discover(context.Background(), client, Options{Namespace: "db", Name: "foo", Dynamic: dyn}); err != nil {
		t.Fatal(err)
	}
	if n := len(dyn.Actions()); n != 0 {
		t.Fatalf("%d dynamic requests: %v", n, dyn.Actions())
	}
}

// sampleSpec is the spec fields of the operator's config/samples/cluster.yaml that decide its
// counts: no redundancy mode (double), cluster_controller 1, stateless -1, storage and log unset.
func sampleSpec() map[string]any {
	return map[string]any{
		"faultDomain":   map[string]any{"key": "foundationdb.org/none"},
		"processCounts": map[string]any{"cluster_controller": int64(1), "stateless": int64(-1)},
	}
}

// TestDiscoverOperatorSample: the operator's sample cluster's groups want its default counts,
// and no stateless group.
func TestDiscoverOperatorSample(t *testing.T) {
	cr := fdbCR("test-cluster", sampleSpec(), [2]string{"storage-1", "z"})
	client := fake.NewClientset(fdbPod("test-cluster", "storage", "storage-1", nil, true))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{FoundationDBClusterGVR: "FoundationDBClusterList"}, cr)
	c, err := discover(context.Background(), client, Options{Name: "test-cluster", Namespace: "db", Dynamic: dyn})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int32{}
	for _, g := range c.Groups {
		got[g.Name] = g.Desired
	}
	if want := map[string]int32{"storage": 3, "log": 4, "cluster_controller": 1}; !maps.Equal(got, want) {
		t.Fatalf("desired %v, want %v", got, want)
	}
}

// TestRefreshKeepsWhatTheRecognizerAttached: a refreshed FoundationDB StatefulSet cluster keeps
// its layout and reads each pod's member from its name again (the recognizer's Finish), and a
// CrateDB cluster without a master group keeps its master-eligible data group.
func TestRefreshKeepsWhatTheRecognizerAttached(t *testing.T) {
	fdb := mkSTS("foo", 2, withImage("foundationdb", "foundationdb/foundationdb-kubernetes:6.3.15"))
	hot, cold := crateData("hot"), crateData("cold")
	for _, tc := range []struct {
		name  string
		objs  []runtime.Object
		check func(*ops.Cluster) string
	}{
		{"foundationdb", []runtime.Object{fdb, mkPod(fdb, 0), mkPod(fdb, 1)}, func(c *ops.Cluster) string {
			return fmt.Sprintf("%s %v %s %s", c.Layout, c.Recognized != nil, c.AllPods()[0].Member, c.AllPods()[1].Member)
		}},
		{"cratedb", []runtime.Object{hot, cold, mkPod(hot, 0), mkPod(cold, 0)}, func(c *ops.Cluster) string {
			g := MasterEligible(c)
			if g == nil {
				return "none"
			}
			return g.Name
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.objs...)
			c, err := discover(context.Background(), client, Options{Namespace: ns, Name: "foo"})
			if err != nil {
				t.Fatal(err)
			}
			r, err := Refresh(context.Background(), client, c)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tc.check(r), tc.check(c); got != want || want == "none" {
				t.Errorf("refreshed %q, discovered %q", got, want)
			}
		})
	}
}
