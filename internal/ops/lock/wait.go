package lock

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

var _ ops.LockWaiter = (*Manager)(nil)

// WaitChange implements ops.LockWaiter: it watches the lease from its current version and
// returns at the first change (released, taken, renewed, deleted), or once the holder's
// claim runs out by time alone: the lease expires, or a session of this same ID stops
// counting as alive (see otherSession). No polling: one watch per wait.
func (m *Manager) WaitChange(ctx context.Context) error {
	l, err := m.get(ctx)
	if apierrors.IsNotFound(err) {
		return nil // free: try again
	}
	if err != nil {
		return m.wrap("watching", err)
	}
	now := m.now()
	until := m.expiry(l)
	if holderOf(l) == m.ID && l.Spec.RenewTime != nil {
		timeout := m.SessionTimeout
		if timeout <= 0 {
			timeout = DefaultSessionTimeout
		}
		if dead := l.Spec.RenewTime.Add(timeout); dead.Before(until) {
			until = dead
		}
	}
	left := until.Sub(now)
	if holderOf(l) == "" || left <= 0 {
		return nil
	}
	// A little past the deadline, so the next attempt finds it passed by the server's clock.
	timer := time.NewTimer(left + 500*time.Millisecond)
	defer timer.Stop()
	w, err := m.Client.CoordinationV1().Leases(m.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", LeaseName(m.Cluster)).String(),
		ResourceVersion: l.ResourceVersion,
	})
	if err != nil {
		return m.wrap("watching", err)
	}
	defer w.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("waiting for the lock on %s: %w", m.clusterName(), context.Cause(ctx))
	case <-timer.C:
		return nil
	case <-w.ResultChan():
		return nil // changed (or the watch ended): try again
	}
}
