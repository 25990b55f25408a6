package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// DeletePVC deletes a PersistentVolumeClaim only if it still has the given UID: a claim
// already gone, or already replaced by a new one (the precondition fails), counts as
// deleted, so a re-run never deletes the fresh claim a replacement made.
func DeletePVC(ctx context.Context, client kubernetes.Interface, namespace, name string, uid types.UID) error {
	opts := metav1.DeleteOptions{}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := client.CoreV1().PersistentVolumeClaims(namespace).Delete(ctx, name, opts)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err) && uid != "":
		return nil
	default:
		return fmt.Errorf("deleting PVC %s/%s: %w", namespace, name, err)
	}
}
