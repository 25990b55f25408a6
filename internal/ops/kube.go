package ops

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// PodReady reports whether a pod is running, not being deleted and has the
// Ready condition (kube.PodReady).
func PodReady(p *corev1.Pod) bool { return kube.PodReady(p) }

// DeletePod deletes a pod only if it still has the given UID (kube.DeletePod).
func DeletePod(ctx context.Context, client kubernetes.Interface, namespace, name string, uid types.UID) error {
	return kube.DeletePod(ctx, client, namespace, name, uid)
}

func shortUID(u types.UID) string { return kube.ShortUID(u) }
