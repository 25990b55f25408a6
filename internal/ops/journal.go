package ops

import (
	"context"
	"slices"
	"time"
)

// Journal states. Anything but JournalSucceeded can be resumed by running
// the same command again.
const (
	JournalRunning     = "running"
	JournalInterrupted = "interrupted"
	JournalFailed      = "failed"
	JournalTimeout     = "timeout"
	JournalSucceeded   = "succeeded"
)

// Journal is the record of an operation, stored on the cluster's lock object
// so that `status` can show it and a re-run can resume it.
type Journal struct {
	Operation string            `json:"operation"`
	Args      string            `json:"args"`
	Holder    string            `json:"holder"`
	State     string            `json:"state"`
	Started   time.Time         `json:"started"`
	Updated   time.Time         `json:"updated"`
	Steps     int               `json:"steps"`
	Done      []string          `json:"done,omitempty"`
	Current   string            `json:"current,omitempty"`
	Data      map[string]string `json:"data,omitempty"`
	Error     string            `json:"error,omitempty"`
}

// Resumable reports whether j is an unfinished run of the same request.
func (j *Journal) Resumable(operation, args string) bool {
	return j != nil && j.State != JournalSucceeded && j.Operation == operation && j.Args == args
}

// IsDone reports whether step id completed in an earlier or this run.
func (j *Journal) IsDone(id string) bool {
	return slices.Contains(j.Done, id)
}

// Locker takes the per-cluster lock.
type Locker interface {
	// Acquire takes the lock for operation, extends it when already held by
	// this ID, or fails with an ErrLocked error naming the holder.
	Acquire(ctx context.Context, operation string) (HeldLock, error)
}

// LockWaiter is a Locker that can wait, with a watch, for the lock to change (released,
// taken, expired, or its holder's session gone), so --wait-for-lock retries only then.
type LockWaiter interface {
	// WaitChange returns when the lock's object changed, or when its current holder's claim
	// runs out by time alone (expiry, a dead session), or with ctx's error.
	WaitChange(ctx context.Context) error
}

// HeldLock is a lock this process holds. It carries the journal.
type HeldLock interface {
	// ID is the lock ID this process acts as.
	ID() string
	// Info describes the lock as acquired or last renewed.
	Info() LockInfo
	// Renew pushes the expiry out by the lock duration.
	Renew(ctx context.Context) (LockInfo, error)
	// Release gives the lock up; the journal stays on the lock object.
	Release(ctx context.Context) error
	// Journal is the journal found on the lock object at acquisition (nil
	// when there was none).
	Journal() *Journal
	// SaveJournal persists j on the lock object (conflict-safe).
	SaveJournal(ctx context.Context, j *Journal) error
	// Detach ends this process's claim on a lock that stays held (a hold
	// taken by hand before the run), so the user's next command may use it.
	Detach(ctx context.Context) error
}
