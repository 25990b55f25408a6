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
	return deleteUID(ctx, "PVC", namespace, name, uid, client.CoreV1().PersistentVolumeClaims(namespace).Delete)
}

// deleteUID deletes the named object with del, only if it still has uid ("" = whichever):
// not found, or a failed UID precondition (that incarnation is already gone), counts as
// deleted.
func deleteUID(ctx context.Context, kind, namespace, name string, uid types.UID,
	del func(context.Context, string, metav1.DeleteOptions) error) error {
	if err := CheckWriteGuard(ctx); err != nil {
		return fmt.Errorf("not deleting %s %s/%s: %w", kind, namespace, name, err)
	}
	opts := metav1.DeleteOptions{}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := del(ctx, name, opts)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err) && uid != "":
		return nil
	default:
		return fmt.Errorf("deleting %s %s/%s: %w", kind, namespace, name, err)
	}
}
