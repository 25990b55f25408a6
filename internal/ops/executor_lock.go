package ops

// The executor's lock lifecycle: taking the lock (or waiting for it), deciding the journal a
// run starts with, watching for its loss and renewing it.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// acquire takes the lock and returns the journal to run with: the stored one
// when this is a re-run of the same request, else a fresh one. With a JournalAcquirer, that
// journal is stored by the write that takes the lock.
func (e *Executor) acquire(ctx context.Context) (*Journal, error) {
	p := e.plan
	if e.Locker == nil {
		now := e.Clock.Now()
		e.emit(Event{Type: EventLock, Lock: &LockInfo{Action: LockDisabled, Holder: e.LockID}})
		return &Journal{Operation: p.Operation, Args: p.Args, Holder: e.LockID, State: JournalRunning,
			Started: now, Updated: now, Steps: len(p.Steps), Request: p.Request}, nil
	}
	var first *firstJournal // decided by the acquiring write, when it stored it
	held, err := e.waitForLock(ctx, p, &first)
	if err != nil {
		return nil, fmt.Errorf("taking the lock on %s/%s: %w", p.Namespace, p.Cluster, err)
	}
	e.held = held
	info := held.Info()
	e.emit(Event{Type: EventLock, Lock: &info})
	prev := held.Journal()
	e.keepLock = info.Action == LockExtended && (prev == nil || prev.State == JournalSucceeded)
	if e.keepLock && info.HandReason != "" {
		// The same lock ID may be someone else's: a kubeconfig user several people share.
		e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("this run goes on under the lock %s took by hand (reason: %s); if that hold is not yours (a shared kubeconfig user), stop now and run with your own --lock-id",
			held.ID(), Printable(info.HandReason))})
	}
	if first != nil {
		e.firstDecided(first)
		e.mu.Lock()
		e.lastWrite, e.dirty = e.Clock.Now(), false
		e.mu.Unlock()
		return first.j, nil
	}
	d := e.decideFirst(ctx, prev, held.ID())
	e.firstDecided(d)
	if err := e.saveJournal(ctx, d.j); err != nil {
		_ = held.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	return d.j, nil
}

// firstJournal is the journal a run starts with, decided from the one found on the lock.
type firstJournal struct {
	j *Journal
	// resumed is the journal found, when this run resumes it; replaced, when this run replaces
	// an unfinished one.
	resumed, replaced *Journal
	// resumedBy names who started the resumed run.
	resumedBy string
}

// decideFirst decides the journal to start with from prev, the one found on the lock taken
// as holder (prev is the caller's copy). JournalAcquirer may call it more than once, so it
// changes nothing but its result (the steps' Prepare stage into that journal);
// firstDecided records the decision once it is this run's.
func (e *Executor) decideFirst(ctx context.Context, prev *Journal, holder string) *firstJournal {
	p := e.plan
	now := e.Clock.Now()
	if prev.Resumable(p.Operation, p.Args) {
		// Named before the holder becomes this run's: resuming someone else's run says
		// whose it was.
		by := prev.Holder
		if by != holder {
			by += " (now resumed as " + holder + ")"
		}
		resumed := prev.clone()
		prev.State = JournalRunning
		prev.Control = nil // the abort or pause of the earlier run is not this run's
		prev.RunStarted = now
		prev.Holder = holder
		prev.Steps = len(p.Steps)
		if p.Request != nil {
			req := p.Request
			// A resumed operation stays in the fleet run that started it.
			if req.Fleet == nil && prev.Request != nil && prev.Request.Fleet != nil {
				cp := *req
				cp.Fleet = prev.Request.Fleet
				req = &cp
			}
			prev.Request = req
		}
		return &firstJournal{j: prev, resumed: resumed, resumedBy: by}
	}
	d := &firstJournal{j: &Journal{Operation: p.Operation, Args: p.Args, Holder: holder, State: JournalRunning,
		Started: now, RunStarted: now, Updated: now, Steps: len(p.Steps), Request: p.Request}}
	if prev != nil && prev.State != JournalSucceeded {
		d.replaced = prev
	}
	// A fresh journal's first write already carries the first step's start (and what the
	// first two steps stage), as a "done" write carries the next step's: the first step then
	// acts without a write of its own. The run's pod informer, started before the lock was
	// asked for, has usually listed by now; without it the steps stage nothing here and write
	// their own start.
	if e.Pods != nil && p.Steps[0].Prepare != nil {
		_ = e.Pods.Synced(ctx) // its error is the step's to report
	}
	d.j.Current = p.Steps[0].ID
	for _, s := range p.Steps[:min(2, len(p.Steps))] {
		if s.Prepare != nil {
			s.Prepare(&StepContext{Step: s, LockID: holder, journal: d.j, exec: e})
		}
	}
	return d
}

// firstDecided reports and records what decideFirst decided, once the journal is this run's.
func (e *Executor) firstDecided(d *firstJournal) {
	switch {
	case d.resumed != nil:
		e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("resuming %s started %s by %s: %d step(s) already done",
			d.resumed.Operation, d.resumed.Started.UTC().Format(time.RFC3339), d.resumedBy, len(d.resumed.Done))})
		e.resumedAt = d.resumed.Current
	case d.replaced != nil:
		e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("an earlier %s %s was left %s; its record is replaced by this %s",
			d.replaced.Operation, d.replaced.Args, d.replaced.State, e.plan.Operation)})
	}
}

// waitForLock acquires the lock; with WaitForLock set, a lock held by someone else is
// waited for (watching it) and tried again each time it changes. With a JournalAcquirer, the
// acquiring write stores the run's first journal, decided into *first.
func (e *Executor) waitForLock(ctx context.Context, p *Plan, first **firstJournal) (HeldLock, error) {
	try := func() (HeldLock, error) {
		ja, ok := e.Locker.(JournalAcquirer)
		if !ok {
			return e.Locker.Acquire(ctx, lockOperation(p))
		}
		var d *firstJournal
		held, err := ja.AcquireJournal(ctx, lockOperation(p), func(prev *Journal, holder string) (*Journal, error) {
			d = e.decideFirst(ctx, prev, holder)
			return d.j, nil
		})
		if err == nil {
			*first = d
		}
		return held, err
	}
	held, err := try()
	w, canWait := e.Locker.(LockWaiter)
	if err == nil || e.WaitForLock == 0 || !canWait || !errors.Is(err, ErrLocked) {
		return held, err
	}
	waitCtx := ctx
	if e.WaitForLock > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, e.WaitForLock)
		defer cancel()
	}
	start := e.Clock.Now()
	last := ""
	for errors.Is(err, ErrLocked) {
		if msg := err.Error(); msg != last {
			last = msg
			e.emit(Event{Type: EventWarning, Message: "waiting for the lock: " + msg})
		}
		if werr := w.WaitChange(waitCtx); werr != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, fmt.Errorf("%w (waited %s with --wait-for-lock)", err, e.Clock.Now().Sub(start).Round(time.Second))
		}
		held, err = try()
	}
	return held, err
}

func lockOperation(p *Plan) string {
	if p.Args == "" {
		return p.Operation
	}
	return p.Operation + " " + p.Args
}

// watchLock follows the held lock's object while the steps run (LockWatcher), and calls lost
// as soon as it stops being this run's; stop ends the watch and waits for it.
func (e *Executor) watchLock(ctx context.Context, lost func(error)) (stop func()) {
	w, ok := e.held.(LockWatcher)
	if !ok {
		return func() {}
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.WatchLock(wctx, lost)
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// lockLost returns why the lock stopped being this run's, as last seen (nil while it is).
// It is checked right before each step's action and, through the action's context
// (kube.WithWriteGuard), before each delete or patch an action makes.
func (e *Executor) lockLost() error {
	e.lostMu.Lock()
	defer e.lostMu.Unlock()
	return e.lost
}

// startRenewal keeps the lock alive while steps run; losing it cancels the
// run, because an operation must not go on under someone else's lock.
func (e *Executor) startRenewal(ctx context.Context, lost func(error)) (stop func()) {
	every := e.RenewEvery
	if every <= 0 {
		// Often enough that the lock's session looks alive to a second
		// invocation under the same ID (lock.DefaultSessionTimeout).
		left := e.held.Info().Expires.Sub(e.Clock.Now())
		every = min(left/3, 15*time.Second)
		if every < time.Second {
			every = time.Second
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if wrote, err := e.flushBlocked(ctx); wrote && err == nil {
					// The blocker's write renewed the lease.
					info := e.held.Info()
					e.emit(Event{Type: EventLock, Lock: &info})
					e.renewCompanion(ctx, lost)
					continue
				}
				if e.recentlyWritten(every) {
					// A journal save renewed the lease meanwhile: no write of its own.
					info := e.held.Info()
					e.emit(Event{Type: EventLock, Lock: &info})
					e.renewCompanion(ctx, lost)
					continue
				}
				info, err := e.held.Renew(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					if errors.Is(err, ErrLocked) {
						lost(fmt.Errorf("lost the cluster lock: %w", err))
						return
					}
					e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("lock renewal failed, will retry: %v", err)})
					continue
				}
				e.emit(Event{Type: EventLock, Lock: &info})
				e.renewCompanion(ctx, lost)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
