package cratedb

import (
	"context"
	"io"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// KubeExecer runs commands through the API server's exec subresource.
// Secrets travel on stdin, never in argv (API-server audit logs record
// exec command lines).
type KubeExecer struct {
	Config *rest.Config
	Client kubernetes.Interface
}

// Exec implements Execer.
func (k KubeExecer) Exec(ctx context.Context, namespace, pod, container string, argv []string, stdin io.Reader) ([]byte, []byte, error) {
	return kube.Exec(ctx, k.Config, k.Client, namespace, pod, container, argv, stdin)
}
