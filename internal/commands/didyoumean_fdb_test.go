package commands

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// A misspelled name of a cluster an operator runs without StatefulSets (a FoundationDBCluster)
// gets the same "did you mean" as a StatefulSet cluster's, and nothing is written.
func TestDidYouMeanOperatorCluster(t *testing.T) {
	h := newHarness(t)
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.foundationdb.org/v1beta2", "kind": "FoundationDBCluster",
		"metadata": map[string]any{"name": "myfdb", "namespace": "prod"},
	}}
	gvr := schema.GroupVersionResource{Group: "apps.foundationdb.org", Version: "v1beta2", Resource: "foundationdbclusters"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "FoundationDBClusterList"}, cr)
	r := h.runWith(func(g *GlobalOptions) {
		g.NewClients = func() (*Clients, error) { return &Clients{Kube: h.client, Dynamic: dyn, Clock: h.clock}, nil }
	}, "restart", "myfbd", "-n", "prod", "--rolling", "--yes")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, `did you mean "myfdb"?`) || strings.Count(strings.TrimSpace(r.err), "\n") != 0 {
		t.Fatalf("exit %d, stderr %q: want exit 2, one line with did you mean \"myfdb\"", r.code, r.err)
	}
	for _, a := range dyn.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" {
			t.Errorf("a misspelled name wrote: %v", a)
		}
	}
}
