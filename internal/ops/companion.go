package ops

import (
	"context"
	"errors"
	"fmt"
)

// CompanionLock is a lock of the database's own that a run takes beside its Lease, for the
// actions the database's other actors coordinate through it (the FoundationDB operator's lock
// key, internal/engines/foundationdb/fdblock.go). The steps take it; the executor renews it
// whenever it renews the Lease, and releases it when the run ends, before the Lease.
type CompanionLock interface {
	// Renew extends the lock if this run holds it (nothing otherwise). An ErrLocked error
	// means someone else holds it now: the run stops.
	Renew(ctx context.Context) error
	// Release clears the lock if, and only if, this run still holds it.
	Release(ctx context.Context) error
}

// renewCompanion renews the plan's companion lock after a Lease renewal.
func (e *Executor) renewCompanion(ctx context.Context, lost func(error)) {
	c := e.plan.Companion
	if c == nil {
		return
	}
	if err := c.Renew(ctx); err != nil {
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrLocked) {
			lost(err)
			return
		}
		e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("renewing %v", err)})
	}
}

// releaseCompanion releases the plan's companion lock at the run's end.
func (e *Executor) releaseCompanion(ctx context.Context) {
	if c := e.plan.Companion; c != nil {
		if err := c.Release(ctx); err != nil {
			e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("releasing %v", err)})
		}
	}
}
