package ops

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// KubeAuditor records a core/v1 Event on the object a step changed, so
// `kubectl describe` and `kubectl get events` show who did what.
type KubeAuditor struct {
	Client kubernetes.Interface
	Clock  Clock
	// Instance identifies this invocation (the lock ID).
	Instance string
}

// Record creates the event.
func (a *KubeAuditor) Record(ctx context.Context, obj ObjectRef, reason, message string) error {
	t := a.Clock.Now()
	now := metav1.NewTime(t)
	ev := &corev1.Event{
		// Named like client-go's event recorder names events.
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", obj.Name, t.UnixNano()), Namespace: obj.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "kubectl-dbops"}},
		InvolvedObject: corev1.ObjectReference{Kind: obj.Kind, APIVersion: obj.APIVersion,
			Namespace: obj.Namespace, Name: obj.Name, UID: types.UID(obj.UID)},
		Reason: reason,
		// `kubectl get events` prints messages raw; they quote lock IDs.
		Message:             Printable(message),
		Type:                corev1.EventTypeNormal,
		Source:              corev1.EventSource{Component: "kubectl-dbops"},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "kubectl-dbops",
		ReportingInstance:   truncate(Printable(a.Instance), 128),
	}
	if _, err := a.Client.CoreV1().Events(obj.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
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
