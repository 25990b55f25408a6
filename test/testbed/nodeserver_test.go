package testbed

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

func mapping(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": kind, "spec": spec}}
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func target(containers []any, workDir string) map[string]any {
	t := map[string]any{"local": map[string]any{"workDir": workDir}}
	if containers != nil {
		t["containers"] = containers
	}
	return t
}

// TestNodeServerTarget: the node server picks an exec's target as kwok does
// (pkg/kwok/server/debugging_exec.go getExecTarget): the pod's Exec wins over ClusterExecs
// and, when it has no target for the container, ends the search; within one, the target that
// lists the container, else the first without containers; ClusterExecs by their selector.
func TestNodeServerTarget(t *testing.T) {
	execs := cache.NewStore(cache.MetaNamespaceKeyFunc)
	clusterExecs := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, o := range []*unstructured.Unstructured{
		mapping("Exec", "ns", "p-0", map[string]any{"execs": []any{target(nil, "/pod-default"), target([]any{"side"}, "/pod-side")}}),
		mapping("Exec", "ns", "p-1", map[string]any{"execs": []any{target([]any{"side"}, "/only-side")}}),
	} {
		_ = execs.Add(o)
	}
	for _, o := range []*unstructured.Unstructured{
		mapping("ClusterExec", "", "a-other-ns", map[string]any{"selector": map[string]any{"matchNamespaces": []any{"other"}}, "execs": []any{target(nil, "/other")}}),
		mapping("ClusterExec", "", "b-names", map[string]any{"selector": map[string]any{"matchNames": []any{"p-2"}}, "execs": []any{target(nil, "/named")}}),
		mapping("ClusterExec", "", "c-all", map[string]any{"execs": []any{target(nil, "/all")}}),
	} {
		_ = clusterExecs.Add(o)
	}
	ns := &nodeServer{execs: execs, clusterExecs: clusterExecs}
	for _, tc := range []struct {
		namespace, pod, container string
		want                      string // workDir; "" = no target
	}{
		{"ns", "p-0", "main", "/pod-default"},
		{"ns", "p-0", "side", "/pod-side"},
		{"ns", "p-1", "side", "/only-side"},
		{"ns", "p-1", "main", ""}, // the pod's Exec has none: no fallback to ClusterExecs
		{"ns", "p-2", "main", "/named"},
		{"ns", "p-3", "main", "/all"},
		{"other", "p-3", "main", "/other"},
	} {
		got, err := ns.target(tc.namespace, tc.pod, tc.container)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s/%s %s: got %v, want no target", tc.namespace, tc.pod, tc.container, got)
			}
			continue
		}
		if err != nil || got["workDir"] != tc.want {
			t.Errorf("%s/%s %s: got %v, %v; want workDir %s", tc.namespace, tc.pod, tc.container, got, err, tc.want)
		}
	}
}
