package lock

import (
	"context"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// heldLock is a lock this process acquired. Renew may run on its own
// goroutine while the operation saves its journal, so it is safe for
// concurrent use. Every write starts from the lease as last written and
// checks it is still ours; a conflict means someone else wrote it, and the
// write is decided again on a fresh read (Manager.modifyFrom).
type heldLock struct {
	m       *Manager
	journal *ops.Journal

	mu    sync.Mutex
	info  ops.LockInfo
	lease *coordinationv1.Lease // as last written or read; nil = read first
	// writeMu serialises writes, so each starts from the previous one's result.
	writeMu sync.Mutex

	// ctl is the control request last seen on the lease; ctlChanged is closed when it changes.
	ctlMu      sync.Mutex
	ctl        *ops.ControlRequest
	ctlChanged chan struct{}
}

// modify writes through the cached lease and keeps the result as the new cache.
func (h *heldLock) modify(ctx context.Context, mutate func(l *coordinationv1.Lease, exists bool) (bool, error)) (*coordinationv1.Lease, error) {
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	h.mu.Lock()
	cached := h.lease
	h.mu.Unlock()
	lease, err := h.m.modifyFrom(ctx, cached, false, mutate)
	h.mu.Lock()
	if err == nil && lease != nil && lease.ResourceVersion != "" {
		h.lease = lease
	} else {
		h.lease = nil // unknown state: read before the next write
	}
	h.mu.Unlock()
	if err == nil {
		h.noteControl(lease)
	}
	return lease, err
}

var _ ops.HeldLock = (*heldLock)(nil)

func (h *heldLock) ID() string { return h.m.ID }

func (h *heldLock) Info() ops.LockInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.info
}

func (h *heldLock) Journal() *ops.Journal { return h.journal }

// Renew pushes the expiry out by the lock duration. It fails with
// ops.ErrLocked when the lock was taken over or released meanwhile, or this
// ID was denied: the operation must stop.
func (h *heldLock) Renew(ctx context.Context) (ops.LockInfo, error) {
	lease, err := h.modify(ctx, func(l *coordinationv1.Lease, exists bool) (bool, error) {
		if err := h.checkMine(l, exists); err != nil {
			return false, err
		}
		now := metav1.NewMicroTime(h.m.now())
		l.Spec.RenewTime = &now
		seconds := h.m.durationSeconds()
		l.Spec.LeaseDurationSeconds = &seconds
		return true, nil
	})
	if err != nil {
		return ops.LockInfo{}, h.m.wrap("renewing", err)
	}
	info := h.m.lockInfo(lease, ops.LockRenewed)
	h.mu.Lock()
	h.info = info
	h.mu.Unlock()
	return info, nil
}

// Release frees the lock if this ID still holds it in this session; a lock someone else
// took over meanwhile, another session of this ID included, is left alone. The journal stays
// on the lease.
func (h *heldLock) Release(ctx context.Context) error {
	_, err := h.modify(ctx, func(l *coordinationv1.Lease, exists bool) (bool, error) {
		if !exists || holderOf(l) != h.m.ID || l.Annotations[AnnotationSession] != h.m.Session {
			return false, nil
		}
		clearHolder(l)
		return true, nil
	})
	return h.m.wrap("releasing", err)
}

// SaveJournal stores j on the lease. It refuses with ops.ErrLocked when the
// lock is no longer ours, since the operation must then stop; a nil j
// removes the journal.
//
// The same write renews the lock (the lease is written anyway), so the executor's renewal
// skips a period in which the journal was saved.
func (h *heldLock) SaveJournal(ctx context.Context, j *ops.Journal) error {
	lease, err := h.modify(ctx, func(l *coordinationv1.Lease, exists bool) (bool, error) {
		if err := h.checkMine(l, exists); err != nil {
			return false, err
		}
		now := metav1.NewMicroTime(h.m.now())
		l.Spec.RenewTime = &now
		seconds := h.m.durationSeconds()
		l.Spec.LeaseDurationSeconds = &seconds
		if err := h.recordHistory(l, j); err != nil {
			return false, err
		}
		return true, encodeAnnotation(l, AnnotationJournal, j, j == nil)
	})
	if err != nil {
		return h.m.wrap("saving the journal on", err)
	}
	info := h.m.lockInfo(lease, ops.LockRenewed)
	h.mu.Lock()
	h.info = info
	h.mu.Unlock()
	return nil
}

// SaveJournalAndRelease stores the run's last journal and gives the lock up in one write (a
// run's end otherwise costs two round trips). Like SaveJournal it refuses, writing nothing,
// when the lock is no longer ours.
func (h *heldLock) SaveJournalAndRelease(ctx context.Context, j *ops.Journal) error {
	_, err := h.modify(ctx, func(l *coordinationv1.Lease, exists bool) (bool, error) {
		if err := h.checkMine(l, exists); err != nil {
			return false, err
		}
		clearHolder(l)
		if err := h.recordHistory(l, j); err != nil {
			return false, err
		}
		return true, encodeAnnotation(l, AnnotationJournal, j, j == nil)
	})
	return h.m.wrap("saving the journal on and releasing", err)
}

// checkMine fails unless this ID still holds the lease and is not denied.
// An expired lease nobody took over is still ours.
func (h *heldLock) checkMine(l *coordinationv1.Lease, exists bool) error {
	m := h.m
	if !exists {
		return lostf("lost the lock on cluster %s: its lease %s was deleted; stop and check the cluster before going on",
			m.clusterName(), LeaseName(m.Cluster))
	}
	denies, err := decodeDenyList(l)
	if err != nil {
		return err
	}
	if d := findDeny(denies, m.ID); d != nil {
		return m.deniedError(d)
	}
	switch holder := holderOf(l); holder {
	case m.ID:
		if l.Annotations[AnnotationSession] != m.Session {
			return lostf("lost the lock on cluster %s: another kubectl-dbops session of %s took it over%s; stop and check the cluster before going on",
				m.clusterName(), m.ID, describeWork(l))
		}
		return nil
	case "":
		return lostf("lost the lock on cluster %s: it was released by someone else; stop and check the cluster before going on",
			m.clusterName())
	default:
		return lostf("lost the lock on cluster %s: it is now held by %s%s until %s; stop and check the cluster before going on",
			m.clusterName(), holder, describeWork(l), formatTime(m.expiry(l)))
	}
}

// lostf reports a lock this process held and no longer does (exit 3, reason LockLost).
func lostf(format string, a ...any) error {
	return ops.WithReason(ops.Lockedf(format, a...), ops.ReasonLockLost)
}

// Detach clears this process's session from a lock it keeps holding (a
// manual hold extended by an operation), so later commands of the same ID
// are not taken for a concurrent session.
func (h *heldLock) Detach(ctx context.Context) error {
	_, err := h.modify(ctx, func(l *coordinationv1.Lease, exists bool) (bool, error) {
		if !exists || holderOf(l) != h.m.ID || l.Annotations[AnnotationSession] != h.m.Session || h.m.Session == "" {
			return false, nil
		}
		delete(l.Annotations, AnnotationSession)
		delete(l.Annotations, AnnotationControl) // the run that was steered is over
		return true, nil
	})
	return h.m.wrap("detaching from", err)
}

var (
	_ ops.LockWatcher  = (*heldLock)(nil)
	_ ops.LossRecorder = (*heldLock)(nil)
)

// WatchLock implements ops.LockWatcher with an informer on the lease alone (a field selector
// on its name): the run hears of a deny, a release or takeover by someone else, or the
// lease's deletion as the API server writes it, not at its next journal write or renewal.
// Each state of the lease is judged as a write of this lock would judge it (checkMine); the
// run's own writes pass.
func (h *heldLock) WatchLock(ctx context.Context, lost func(error)) {
	leases := h.m.Client.CoordinationV1().Leases(h.m.Namespace)
	name := LeaseName(h.m.Cluster)
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return leases.Watch(ctx, o)
		},
	}
	var once sync.Once
	judge := func(l *coordinationv1.Lease, exists bool) {
		if exists && l.Name != name {
			return // a client that ignores the field selector (the fake clientset)
		}
		if exists {
			h.noteControl(l)
		}
		if err := h.checkMine(l, exists); err != nil {
			once.Do(func() { lost(err) })
		}
	}
	leaseOf := func(obj any) *coordinationv1.Lease {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		l, _ := obj.(*coordinationv1.Lease)
		return l
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(lw, h.m.Client),
		ObjectType:    &coordinationv1.Lease{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if l := leaseOf(obj); l != nil {
					judge(l, true)
				}
			},
			UpdateFunc: func(_, obj any) {
				if l := leaseOf(obj); l != nil {
					judge(l, true)
				}
			},
			DeleteFunc: func(obj any) {
				if l := leaseOf(obj); l != nil && l.Name == name {
					judge(nil, false)
				}
			},
		},
	})
	informer.RunWithContext(ctx)
}

// SaveJournalAfterLoss implements ops.LossRecorder: a run that lost its lock records what it
// finished. It writes only while the lease still carries this ID's journal and nobody else
// holds it: after a deny (this ID may still be the holder: the write gives the lock up) or a
// release by someone else. A lease taken over, by another ID or another session of this one,
// or deleted, is left alone.
func (h *heldLock) SaveJournalAfterLoss(ctx context.Context, j *ops.Journal) error {
	_, err := h.modify(ctx, func(l *coordinationv1.Lease, exists bool) (bool, error) {
		if !exists {
			return false, ops.Lockedf("the lease %s of cluster %s was deleted: this run's progress is not recorded", LeaseName(h.m.Cluster), h.m.clusterName())
		}
		switch holder := holderOf(l); {
		case holder == h.m.ID && l.Annotations[AnnotationSession] == h.m.Session:
			clearHolder(l)
		case holder != "":
			return false, ops.Lockedf("cluster %s is now locked by %s: this run's progress is not recorded", h.m.clusterName(), holder)
		}
		stored, err := decodeJournal(l)
		if err != nil {
			return false, err
		}
		if stored == nil || stored.Holder != h.m.ID {
			return false, ops.Lockedf("the journal on cluster %s is no longer this run's: its progress is not recorded", h.m.clusterName())
		}
		if err := h.recordHistory(l, j); err != nil {
			return false, err
		}
		return true, encodeAnnotation(l, AnnotationJournal, j, j == nil)
	})
	return h.m.wrap("recording the journal after losing the lock on", err)
}
