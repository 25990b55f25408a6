package ops

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// KubeAuditor records a core/v1 Event on the object a step changed, so
// `kubectl describe` and `kubectl get events` show who did what.
type KubeAuditor struct {
	Client kubernetes.Interface
	Clock  Clock
	// Instance identifies this invocation (the lock ID).
	Instance string
}

// Record creates the event. Its name is <object>.<time><random>, drawn again on a collision,
// so two events on one object at the same instant never collide (names derived from a clock
// alone did: the second was lost as "already exists"); transient API errors are retried.
func (a *KubeAuditor) Record(ctx context.Context, obj ObjectRef, reason, message string) error {
	now := metav1.NewTime(a.Clock.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "kubectl-dbops"}},
		InvolvedObject: corev1.ObjectReference{Kind: obj.Kind, APIVersion: obj.APIVersion,
			Namespace: obj.Namespace, Name: obj.Name, UID: types.UID(obj.UID)},
		Reason: reason,
		// `kubectl get events` prints messages raw; they quote lock IDs.
		Message:             truncate(Printable(message), 1024),
		Type:                corev1.EventTypeNormal,
		Source:              corev1.EventSource{Component: "kubectl-dbops"},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "kubectl-dbops",
		ReportingInstance:   truncate(Printable(a.Instance), 128),
	}
	if obj.Warning {
		ev.Type = corev1.EventTypeWarning
	}
	transient := func(err error) bool {
		// AlreadyExists: a generated name that collided; the next try draws another.
		return apierrors.IsAlreadyExists(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsTimeout(err) || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || utilnet.IsConnectionReset(err)
	}
	err := retry.OnError(retry.DefaultBackoff, transient, func() error {
		ev.Name = fmt.Sprintf("%s.%x%s", obj.Name, now.UnixNano(), utilrand.String(5))
		_, err := a.Client.CoreV1().Events(obj.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("creating event: %w", err)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
