package commands

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// Commands hand discovery the dynamic client, so a CrateDB operator cluster's data groups
// follow the CrateDB resource's spec.nodes.data order, not the StatefulSets' creation order;
// without the resource (or without the client) creation order holds.
func TestDiscoverFollowsCrateDBResourceOrder(t *testing.T) {
	sts := func(name string, created int64) *appsv1.StatefulSet {
		one := int32(1)
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", CreationTimestamp: metav1.NewTime(time.Unix(created, 0))},
			Spec:       appsv1.StatefulSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"sts": name}}},
		}
	}
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cloud.crate.io/v1", "kind": "CrateDB",
		"metadata": map[string]any{"name": "foo", "namespace": "prod"},
		"spec":     map[string]any{"nodes": map[string]any{"data": []any{map[string]any{"name": "cold"}, map[string]any{"name": "hot"}}}},
	}}
	gvr := schema.GroupVersionResource{Group: "cloud.crate.io", Version: "v1", Resource: "cratedbs"}
	tests := []struct {
		name string
		dyn  bool
		crs  []runtime.Object
		want string
	}{
		{"resource read", true, []runtime.Object{cr}, "cold hot"},
		{"no resource", true, nil, "hot cold"},
		{"no dynamic client", false, []runtime.Object{cr}, "hot cold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(sts("crate-data-hot-foo", 1), sts("crate-data-cold-foo", 2))
			cl := &Clients{Kube: client, Clock: fixedClock{testNow}}
			if tt.dyn {
				cl.Dynamic = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
					map[schema.GroupVersionResource]string{gvr: "CrateDBList"}, tt.crs...)
			}
			g := NewGlobalOptions(genericiooptions.IOStreams{})
			g.NewClients = func() (*Clients, error) { return cl, nil }
			ns := "prod"
			g.ConfigFlags.Namespace = &ns
			_, c, err := g.discover(context.Background(), "foo", false)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, grp := range c.Groups {
				names = append(names, grp.Name)
			}
			if got := strings.Join(names, " "); got != tt.want {
				t.Errorf("groups in order %q, want %q", got, tt.want)
			}
		})
	}
}
