package cratedb

import (
	"context"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// KubeExecer runs commands through the API server's exec subresource.
// kube.Exec keeps argv (which holds passwords here) out of its errors.
type KubeExecer struct {
	Config *rest.Config
	Client kubernetes.Interface
}

// Exec implements Execer.
func (k KubeExecer) Exec(ctx context.Context, namespace, pod, container string, argv []string) ([]byte, []byte, error) {
	return kube.Exec(ctx, k.Config, k.Client, namespace, pod, container, argv, nil)
}
