package foundationdb

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/discovery"
)

// SetSkip sets (skip) or clears spec.skip of the FoundationDBCluster named like u, which makes
// the operator leave the cluster alone (controllers/cluster_controller.go: "Skipping cluster
// with skip value true"; docs/manual/operations.md). The merge patch carries the
// resourceVersion read just before, re-read on a conflict. changed is false when spec.skip
// already says so (nothing written). Clearing removes the field, as it was before it was set.
func SetSkip(ctx context.Context, dyn dynamic.Interface, namespace, name string, skip bool) (changed bool, err error) {
	res := dyn.Resource(discovery.FoundationDBClusterGVR).Namespace(namespace)
	for attempt := 0; ; attempt++ {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("reading FoundationDBCluster %s/%s: %w", namespace, name, err)
		}
		if cur, _, _ := unstructured.NestedBool(u.Object, "spec", "skip"); cur == skip {
			return false, nil
		}
		var value any
		if skip {
			value = true
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": u.GetResourceVersion()},
			"spec":     map[string]any{"skip": value},
		})
		if err != nil {
			return false, err
		}
		_, err = res.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsConflict(err) && attempt < maxPatchConflicts:
		case apierrors.IsConflict(err):
			return false, ops.Preconditionf("FoundationDBCluster %s/%s keeps changing (%d resourceVersion conflicts); refusing to overwrite it", namespace, name, attempt+1)
		default:
			return false, fmt.Errorf("patching spec.skip of FoundationDBCluster %s/%s: %w", namespace, name, err)
		}
	}
}
