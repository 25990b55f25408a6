package ops

// The executor's journal writes: steps marked done, deferred to the next write, the final
// write within the grace period.

import (
	"context"
	"fmt"
	"time"
)

// deferredDone is a step whose "done" a later write carries.
type deferredDone struct {
	sc  *StepContext
	ref StepRef
}

// endsInOneWrite reports whether the run's final write also releases the lock, so the last
// step's "done" can go out with it: one write fewer between the last pod Ready and the end.
func (e *Executor) endsInOneWrite() bool {
	_, ok := e.held.(JournalReleaser)
	return ok && !e.keepLock
}

// graceContext is ctx without its cancellation, bounded by the grace period: for writes that
// record what has already happened (journal, audit events), which Ctrl-C must not lose.
func (e *Executor) graceContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), e.Grace)
}

// writeFinal writes the run's last journal with write (which may also release the lock).
func (e *Executor) writeFinal(ctx context.Context, j *Journal, write func(context.Context, *Journal) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.writeLocked(ctx, j, write)
}

func (e *Executor) markDone(ctx context.Context, j *Journal, s *Step) error {
	j.Done = append(j.Done, s.ID)
	j.Current = ""
	return e.saveGrace(ctx, j)
}

// saveGrace saves j even after Ctrl-C, within the grace period: saving "done" must not be
// lost to a Ctrl-C that arrives just now.
func (e *Executor) saveGrace(ctx context.Context, j *Journal) error {
	sctx, cancel := e.graceContext(ctx)
	defer cancel()
	return e.saveJournal(sctx, j)
}

func (e *Executor) lockID() string {
	if e.held != nil {
		return e.held.ID()
	}
	return e.LockID
}

func (e *Executor) saveJournal(ctx context.Context, j *Journal) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.saveLocked(ctx, j)
}

// flushJournal writes the journal if it holds a change not written yet, before a step acts.
func (e *Executor) flushJournal(ctx context.Context, j *Journal) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.dirty {
		return nil
	}
	return e.saveLocked(ctx, j)
}

func (e *Executor) saveLocked(ctx context.Context, j *Journal) error {
	var write func(context.Context, *Journal) error // without a lock the journal lives in memory
	if e.held != nil {
		write = e.held.SaveJournal
	}
	return e.writeLocked(ctx, j, write)
}

// writeLocked writes a copy of j with write (nil: nothing to write to) (e.mu held).
func (e *Executor) writeLocked(ctx context.Context, j *Journal, write func(context.Context, *Journal) error) error {
	j.Updated = e.Clock.Now()
	if write != nil {
		c := j.clone()
		if err := write(ctx, c); err != nil {
			return fmt.Errorf("saving the operation journal: %w", err)
		}
		e.lastWrite = e.Clock.Now()
		e.lastWritten = c.clone()
	}
	e.dirty = false
	return nil
}

// recentlyWritten reports whether the lease was written less than d ago.
func (e *Executor) recentlyWritten(d time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.lastWrite.IsZero() && e.Clock.Now().Sub(e.lastWrite) < d
}
