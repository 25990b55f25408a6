package lock

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// AnnotationControl is the JSON form of the last ops.ControlRequest (pause, continue, abort)
// written for the running operation. It belongs to that run: a new acquisition and every
// release remove it, so a stale abort never ends a later run.
const AnnotationControl = "dbops.io/control"

func decodeControl(l *coordinationv1.Lease) (*ops.ControlRequest, error) {
	var c *ops.ControlRequest
	if err := decodeAnnotation(l, AnnotationControl, &c); err != nil {
		return nil, err
	}
	return c, nil
}

// RequestControl writes action (ops.ControlPause, ControlContinue or ControlAbort) for the
// operation running on the cluster, as this ID, at the server's time, with reason. It refuses,
// writing nothing, with an ops.ErrPrecondition error when there is no running operation (a
// free lock, an expired one, a hold taken by hand), when a continue finds the run not paused,
// or a request repeats the one in force. The write is a conflict-safe read-modify-write, so
// two requests racing are decided one after the other: the second sees the first.
func (m *Manager) RequestControl(ctx context.Context, action, reason string) (*ops.ControlRequest, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	switch action {
	case ops.ControlPause, ops.ControlContinue, ops.ControlAbort:
	default:
		return nil, ops.Usagef("control action %q: must be pause, continue or abort", action)
	}
	var req *ops.ControlRequest
	_, err := m.modify(ctx, func(l *coordinationv1.Lease, exists bool) (bool, error) {
		holder := holderOf(l)
		if !exists || holder == "" || m.expired(l, m.now()) {
			return false, ops.Preconditionf("no operation is running on cluster %s (nobody holds its lock); nothing to %s", m.clusterName(), action)
		}
		j, err := decodeJournal(l)
		if err != nil {
			return false, err
		}
		if j == nil || j.State != ops.JournalRunning || j.Holder != holder || l.Annotations[AnnotationOperation] == ManualOperation {
			return false, ops.Preconditionf("no operation is running on cluster %s: its lock is held by %s%s with no run in progress; nothing to %s",
				m.clusterName(), holder, describeWork(l), action)
		}
		cur, err := decodeControl(l)
		if err != nil {
			return false, err
		}
		in := ""
		if cur != nil {
			in = cur.Action
		}
		run := "the " + j.Operation + " of " + holder + " on cluster " + m.clusterName()
		switch {
		case in == ops.ControlAbort:
			return false, ops.Preconditionf("%s is already being stopped (%s); nothing to %s", run, cur.Describe(), action)
		case action == ops.ControlPause && in == ops.ControlPause:
			return false, ops.Preconditionf("%s is already %s; continue it with: kubectl dbops continue %s -n %s", run, cur.Describe(), m.Cluster, m.Namespace)
		case action == ops.ControlContinue && in != ops.ControlPause:
			return false, ops.Preconditionf("%s is not paused; nothing to continue", run)
		}
		req = &ops.ControlRequest{Action: action, By: m.ID, At: m.now().UTC(), Reason: reason}
		return true, encodeAnnotation(l, AnnotationControl, req, false)
	})
	if err != nil {
		return nil, m.wrap("writing the "+action+" request on", err)
	}
	return req, nil
}

var _ ops.ControlWatcher = (*heldLock)(nil)

// Control implements ops.ControlWatcher from the lease as this lock last read, wrote or
// watched it (WatchLock).
func (h *heldLock) Control() (*ops.ControlRequest, <-chan struct{}) {
	h.ctlMu.Lock()
	defer h.ctlMu.Unlock()
	if h.ctlChanged == nil {
		h.ctlChanged = make(chan struct{})
	}
	return h.ctl, h.ctlChanged
}

// noteControl records the control request on l, waking whoever waits for a change. A damaged
// annotation is left to the writes, which refuse to decode it.
func (h *heldLock) noteControl(l *coordinationv1.Lease) {
	if l == nil {
		return
	}
	c, err := decodeControl(l)
	if err != nil {
		return
	}
	h.ctlMu.Lock()
	defer h.ctlMu.Unlock()
	if sameControl(h.ctl, c) {
		return
	}
	h.ctl = c
	if h.ctlChanged != nil {
		close(h.ctlChanged)
	}
	h.ctlChanged = make(chan struct{})
}

func sameControl(a, b *ops.ControlRequest) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Action == b.Action && a.By == b.By && a.At.Equal(b.At) && a.Reason == b.Reason
}
