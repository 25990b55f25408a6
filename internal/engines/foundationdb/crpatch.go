package foundationdb

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// patchCR writes a merge patch of the FoundationDBCluster u as read: spec (and, when set,
// metadata.annotations) carrying u's resourceVersion, so the API server refuses it with a
// conflict when anyone changed the resource since (the caller reads again and decides again;
// a merge patch replaces whole lists). It is a write of the run: the run's lock-loss guard is
// asked first, so a run that lost its lock changes nothing (internal/kube/guard.go).
func patchCR(ctx context.Context, dyn dynamic.Interface, u *unstructured.Unstructured, spec, annotations map[string]any) error {
	if err := kube.CheckWriteGuard(ctx); err != nil {
		return err
	}
	md := map[string]any{"resourceVersion": u.GetResourceVersion()}
	if annotations != nil {
		md["annotations"] = annotations
	}
	patch, err := json.Marshal(map[string]any{"metadata": md, "spec": spec})
	if err != nil {
		return fmt.Errorf("encoding the patch of FoundationDBCluster %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	_, err = dyn.Resource(ClusterGVR).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
