package lock

import (
	"context"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Deny puts id on the deny list, recording this ID as the one who denied
// it, the server time and reason. Denying an ID already on the list
// replaces its entry. The lease is created when missing, so an ID can be
// denied before it ever touched the cluster. A lock id holds stays held
// until someone takes it over.
func (m *Manager) Deny(ctx context.Context, id, reason string) error {
	if err := m.validate(); err != nil {
		return err
	}
	if id = strings.TrimSpace(id); id == "" {
		return ops.Usagef("deny: the lock ID to deny is empty")
	}
	_, err := m.modify(ctx, func(l *coordinationv1.Lease, _ bool) (bool, error) {
		list, err := decodeDenyList(l)
		if err != nil {
			return false, err
		}
		now := m.now().UTC()
		entry := DenyEntry{ID: id, By: m.ID, At: now, Reason: reason}
		if d := findDeny(list, id); d != nil {
			*d = entry
		} else {
			list = append(list, entry)
		}
		if err := encodeAnnotation(l, AnnotationDenyList, list, false); err != nil {
			return false, err
		}
		return true, m.record(l, ActionDeny, id, reason, now)
	})
	return m.wrap("denying on", err)
}

// Allow removes id from the deny list, recording who, when and why. An ID
// that is not on the list is an ops.ErrUsage error.
func (m *Manager) Allow(ctx context.Context, id, reason string) error {
	if err := m.validate(); err != nil {
		return err
	}
	if id = strings.TrimSpace(id); id == "" {
		return ops.Usagef("allow: the lock ID to allow is empty")
	}
	_, err := m.modify(ctx, func(l *coordinationv1.Lease, _ bool) (bool, error) {
		list, err := decodeDenyList(l)
		if err != nil {
			return false, err
		}
		if findDeny(list, id) == nil {
			return false, ops.Usagef("lock ID %s is not on the deny list of cluster %s", id, m.clusterName())
		}
		list = slices.DeleteFunc(list, func(d DenyEntry) bool { return d.ID == id })
		if err := encodeAnnotation(l, AnnotationDenyList, list, len(list) == 0); err != nil {
			return false, err
		}
		return true, m.record(l, ActionAllow, id, reason, m.now().UTC())
	})
	return m.wrap("allowing on", err)
}

// DenyList returns the denied IDs in the order they were denied; never nil.
func (m *Manager) DenyList(ctx context.Context) ([]DenyEntry, error) {
	s, err := m.Status(ctx)
	if err != nil {
		return nil, err
	}
	return s.DenyList, nil
}

// record appends to the bounded deny history.
func (m *Manager) record(l *coordinationv1.Lease, action, id, reason string, at time.Time) error {
	history, err := decodeDenyHistory(l)
	if err != nil {
		return err
	}
	history = append(history, DenyRecord{Action: action, ID: id, By: m.ID, At: at, Reason: reason})
	if n := len(history) - MaxDenyHistory; n > 0 {
		history = slices.Delete(history, 0, n)
	}
	return encodeAnnotation(l, AnnotationDenyHistory, history, false)
}
