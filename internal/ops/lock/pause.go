package lock

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// AnnotationPausedOperator records on the Lease that its holder paused the cluster's operator
// (`lock acquire --pause-operator`: the FoundationDBCluster's spec.skip set by this tool), with
// the resource it paused, so that the release un-pauses only what this tool paused. It stays
// when the holder changes (a takeover), since the pause is still the tool's.
const AnnotationPausedOperator = "dbops.io/paused-operator"

// SetPausedOperator records (resource != "") or clears (resource == "") the pause, while this
// ID holds the lock (or with Force).
func (m *Manager) SetPausedOperator(ctx context.Context, resource string) error {
	if err := m.validate(); err != nil {
		return err
	}
	_, err := m.modify(ctx, func(l *coordinationv1.Lease, exists bool) (bool, error) {
		if !exists || (holderOf(l) != m.ID && !m.Force) {
			return false, ops.Lockedf("cluster %s is not locked by %s; cannot record the operator pause", m.clusterName(), m.ID)
		}
		if l.Annotations[AnnotationPausedOperator] == resource {
			return false, nil
		}
		setAnnotation(l, AnnotationPausedOperator, resource)
		return true, nil
	})
	return m.wrap("recording the operator pause on", err)
}

// PausedOperator is the resource this tool paused, as recorded on the Lease ("" when none).
func (m *Manager) PausedOperator(ctx context.Context) (string, error) {
	l, err := m.get(ctx)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", m.wrap("reading", err)
	}
	return l.Annotations[AnnotationPausedOperator], nil
}

// ClearPausedOperator removes the pause record whoever holds the lock: the release that
// un-paused the operator clears it right after, and a record whose pause is over must not
// survive to make a later release un-pause someone else's.
func (m *Manager) ClearPausedOperator(ctx context.Context) error {
	if err := m.validate(); err != nil {
		return err
	}
	_, err := m.modify(ctx, func(l *coordinationv1.Lease, exists bool) (bool, error) {
		if !exists || l.Annotations[AnnotationPausedOperator] == "" {
			return false, nil
		}
		setAnnotation(l, AnnotationPausedOperator, "")
		return true, nil
	})
	return m.wrap("clearing the operator pause on", err)
}
