package kube

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestWritesRefusedByTheWriteGuard: DeletePod, DeletePVC and SetReplicas under a write guard
// that refuses (a run that lost its lock) return its error and send nothing to the API; under
// one that allows, they write.
func TestWritesRefusedByTheWriteGuard(t *testing.T) {
	writes := map[string]func(ctx context.Context, c *fake.Clientset) error{
		"DeletePod": func(ctx context.Context, c *fake.Clientset) error { return DeletePod(ctx, c, "prod", "db-0", "") },
		"DeletePVC": func(ctx context.Context, c *fake.Clientset) error { return DeletePVC(ctx, c, "prod", "data-db-0", "") },
		"SetReplicas": func(ctx context.Context, c *fake.Clientset) error {
			_, err := SetReplicas(ctx, c, "prod", "db", 2)
			return err
		},
	}
	lost := errors.New("lost the lock on cluster prod/db")
	for name, write := range writes {
		for _, refuse := range []bool{true, false} {
			client := fake.NewClientset(
				&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "prod"}},
				&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-db-0", Namespace: "prod"}},
				&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"}},
			)
			ctx := WithWriteGuard(t.Context(), func() error {
				if refuse {
					return lost
				}
				return nil
			})
			err := write(ctx, client)
			n := len(client.Actions())
			switch {
			case refuse && (!errors.Is(err, lost) || n != 0):
				t.Errorf("%s with the guard refusing: err %v, %d API action(s); want the guard's error and none", name, err, n)
			case !refuse && (err != nil || n != 1):
				t.Errorf("%s with the guard allowing: err %v, %d API action(s); want one write", name, err, n)
			}
		}
	}
}
