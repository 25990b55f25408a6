package discovery

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// crateDBResource is the CrateDB operator's custom resource.
func crateDBResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "cloud.crate.io", Version: "v1", Resource: "cratedbs"}
}

// crateDataGroups reads spec.nodes.data[].name from the CrateDB resource
// named name, in definition order. The resource is optional: when it does
// not exist, its CRD is not installed, or RBAC forbids reading it, the
// result is nil and discovery falls back to creation order.
func crateDataGroups(ctx context.Context, dyn dynamic.Interface, ns, name string) ([]string, error) {
	obj, err := dyn.Resource(crateDBResource()).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err), meta.IsNoMatchError(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading CrateDB resource %s/%s: %w", ns, name, err)
	}
	data, found, err := unstructured.NestedSlice(obj.Object, "spec", "nodes", "data")
	if err != nil || !found {
		// An unexpected shape only loses the ordering hint.
		return nil, nil
	}
	var names []string
	for _, item := range data {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if n, ok := m["name"].(string); ok && n != "" {
			names = append(names, n)
		}
	}
	return names, nil
}
