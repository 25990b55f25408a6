package ops

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// KubeAuditor records a core/v1 Event on the object a step changed, so
// `kubectl describe` and `kubectl get events` show who did what.
//
// It writes each event synchronously instead of through client-go's tools/events (or
// tools/record) recorder, because a CLI must know an event is stored before it reports the
// step done and before it exits: the recorder's Eventf returns nothing and hands the event to
// a goroutine, its broadcaster drops events when its queue is full, each sink write runs in
// another goroutine with retries spaced 10s apart, and Shutdown only stops the distribution
// (it waits for no write; the core/v1 broadcaster's Shutdown even cancels the retries), so
// the last events of a run would be lost when the process exits. Its failures are also logged
// through klog, which must stay silent on stderr without -v. What the recorder brings that
// matters here is kept: unique names and retries of transient errors. Its series
// (aggregating identical events into one with a count) would not apply: a run never records
// the same event twice on one object.
type KubeAuditor struct {
	Client kubernetes.Interface
	Clock  Clock
	// Instance identifies this invocation (the lock ID).
	Instance string
}

// auditBackoff spaces the retries of one event: about 3s in all, enough to ride out an API
// server that restarts or sheds load briefly, short enough not to hold a step up for long.
var auditBackoff = wait.Backoff{Steps: 6, Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1}

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
	err := retry.OnError(auditBackoff, transient, func() error {
		ev.Name = fmt.Sprintf("%s.%x%s", obj.Name, now.UnixNano(), utilrand.String(5))
		_, err := a.Client.CoreV1().Events(obj.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("creating event: %w", err)
	}
	return nil
}

// Recorded reports whether an event with reason exists on obj (by its UID): a resumed run
// asks before recording what an interrupted run may have recorded already. It costs one
// request, made only when resuming.
func (a *KubeAuditor) Recorded(ctx context.Context, obj ObjectRef, reason string) (bool, error) {
	sel := fields.Set{"involvedObject.uid": obj.UID, "reason": reason}.AsSelector().String()
	list, err := a.Client.CoreV1().Events(obj.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return false, fmt.Errorf("listing events of %s %s: %w", obj.Kind, obj.Name, err)
	}
	// Checked here too: not every client honours field selectors (the fake clientset does not).
	for _, e := range list.Items {
		if string(e.InvolvedObject.UID) == obj.UID && e.Reason == reason {
			return true, nil
		}
	}
	return false, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
