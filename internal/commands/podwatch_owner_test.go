package commands

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/discovery"
)

// fdbOperatorCluster discovers a FoundationDBCluster "myfdb" (the operator's default labels)
// with two storage pods and a log pod, beside a pod of another workload in the namespace.
func fdbOperatorCluster(t *testing.T) (*fake.Clientset, *ops.Cluster) {
	t.Helper()
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.foundationdb.org/v1beta2", "kind": "FoundationDBCluster",
		"metadata": map[string]any{"name": "myfdb", "namespace": "prod", "uid": "cr-uid"},
		"spec":     map[string]any{"processCounts": map[string]any{"storage": int64(2), "log": int64(1), "stateless": int64(-1)}},
	}}
	pod := func(class, id string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "myfdb-" + id, Namespace: "prod", UID: types.UID("uid-" + id),
			Labels: map[string]string{"foundationdb.org/fdb-cluster-name": "myfdb", "foundationdb.org/fdb-process-class": class,
				"foundationdb.org/fdb-process-group-id": id},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps.foundationdb.org/v1beta2", Kind: "FoundationDBCluster", Name: "myfdb", UID: "cr-uid"}}},
			Spec:   corev1.PodSpec{NodeName: "node-1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "prod", Labels: map[string]string{"app": "web"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	client := fake.NewClientset(pod("storage", "storage-2"), pod("storage", "storage-10"), pod("log", "log-1"), other)
	gvr := schema.GroupVersionResource{Group: "apps.foundationdb.org", Version: "v1beta2", Resource: "foundationdbclusters"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "FoundationDBClusterList"}, cr)
	c, err := discovery.Discover(t.Context(), client, discovery.Options{Namespace: "prod", Name: "myfdb", Dynamic: dyn, Recognizers: builtinRecognizers()})
	if err != nil {
		t.Fatal(err)
	}
	if c.Engine != ops.EngineFoundationDB {
		t.Fatalf("discovered engine %s", c.Engine)
	}
	return client, c
}

// A cluster whose pods an operator's resource owns (no StatefulSet): the run's pod informer
// selects the cluster's pods, not the whole namespace, and the live pods table lists them by
// group (it stayed empty when it matched pods by StatefulSet name).
func TestWatchPodsOperatorOwnedCluster(t *testing.T) {
	client, c := fdbOperatorCluster(t)
	if sel := clusterSelector(c); sel != "foundationdb.org/fdb-cluster-name=myfdb" {
		t.Errorf("informer selector %q, want the cluster's match labels", sel)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pods := kube.StartPods(ctx, client, "prod", clusterSelector(c), "")
	got := make(chan ops.Event, 16)
	watchPods(ctx, pods, client, c, fixedClock{testNow}, ops.SinkFunc(func(e ops.Event) { got <- e }))
	first := receive(t, got)
	var rows []string
	for _, p := range first.Pods {
		rows = append(rows, p.Group+"/"+p.Name)
	}
	if want := []string{"log/myfdb-log-1", "storage/myfdb-storage-2", "storage/myfdb-storage-10"}; !slices.Equal(rows, want) {
		t.Fatalf("pods table %v, want %v", rows, want)
	}
}

// The operation's audit events go to what owns the pods: the FoundationDBCluster once (it owns
// every group), never a StatefulSet with an empty name.
func TestOwnerRefsOperatorOwnedCluster(t *testing.T) {
	_, c := fdbOperatorCluster(t)
	refs := c.OwnerRefs()
	want := []ops.ObjectRef{{Kind: "FoundationDBCluster", APIVersion: "apps.foundationdb.org/v1beta2", Namespace: "prod", Name: "myfdb", UID: "cr-uid"}}
	if !slices.Equal(refs, want) {
		t.Fatalf("owner refs %+v, want %+v", refs, want)
	}
}
