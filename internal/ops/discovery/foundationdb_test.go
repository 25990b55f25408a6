package discovery

import (
	"context"
	"errors"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(append(slices.Clone(pods), customPod)...)
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{FoundationDBClusterGVR: "FoundationDBClusterList"}, cr, custom)
			opts := tt.opts
			opts.Namespace, opts.Dynamic = "db", dyn
			c, err := Discover(context.Background(), client, opts)
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
	if _, err := Discover(context.Background(), client, Options{Namespace: "db", Name: "foo", Dynamic: dyn}); err != nil {
		t.Fatal(err)
	}
	if n := len(dyn.Actions()); n != 0 {
		t.Fatalf("%d dynamic requests: %v", n, dyn.Actions())
	}
}
