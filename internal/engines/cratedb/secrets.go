package cratedb

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// SecretRef names one key of a Secret in the cluster's namespace.
type SecretRef = ops.SecretRef

// ParseSecretRef parses NAME[/KEY]; defKey applies when KEY is omitted.
// flag names the option in the usage error.
func ParseSecretRef(flag, v, defKey string) (SecretRef, error) {
	name, key, hasKey := strings.Cut(strings.TrimSpace(v), "/")
	if hasKey && key == "" {
		return SecretRef{}, ops.Usagef("%s %q: empty key after '/' (want NAME[/KEY])", flag, v)
	}
	if !hasKey {
		key = defKey
	}
	if name == "" || strings.Contains(key, "/") {
		return SecretRef{}, ops.Usagef("%s %q: want NAME[/KEY]", flag, v)
	}
	return SecretRef{Name: name, Key: key}, nil
}

// readSecret returns the value of ref. A missing Secret or key is a usage
// error naming both; the value never appears in an error.
func readSecret(ctx context.Context, client kubernetes.Interface, ns string, ref SecretRef, what string) (string, error) {
	s, err := client.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", ops.Usagef("%s: Secret %s/%s not found (wanted key %q)", what, ns, ref.Name, ref.Key)
	case err != nil:
		return "", fmt.Errorf("%s: reading Secret %s/%s: %w", what, ns, ref.Name, err)
	}
	if v, ok := s.Data[ref.Key]; ok && len(v) > 0 {
		return strings.TrimRight(string(v), "\r\n"), nil
	}
	if v, ok := s.StringData[ref.Key]; ok && v != "" {
		return strings.TrimRight(v, "\r\n"), nil
	}
	return "", ops.Usagef("%s: Secret %s/%s has no key %q (or it is empty)", what, ns, ref.Name, ref.Key)
}
