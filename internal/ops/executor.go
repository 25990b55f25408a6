package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// Executor runs a Plan: it takes the cluster lock, keeps a journal on it,
// runs each step's precheck, action and verify in order, renews the lock
// while it works and reports everything as events.
type Executor struct {
	// Locker takes the cluster lock; nil means --disable-locks (the journal
	// then lives in memory only).
	Locker Locker
	// LockID names this process in audit events when locks are disabled.
	LockID  string
	Sink    Sink
	Clock   Clock
	Auditor Auditor
	// WaitForLock, when non-zero, makes a refused lock (held by someone else) wait until it is
	// free, at most this long (negative: as long as the run's timeout allows), instead of
	// failing at once; the wait is reported as warnings.
	WaitForLock time.Duration
	// Objects receive the operation-level audit events (started, and how it ended, with the
	// lock ID): the cluster's StatefulSets, so `kubectl describe sts` shows them.
	Objects []ObjectRef
	// Timeout bounds the whole run (0 = none).
	Timeout time.Duration
	// Grace bounds how long an in-flight action may continue after Ctrl-C or
	// timeout, so a delete or a SQL statement is never cut in half.
	Grace time.Duration
	// RenewEvery overrides the lock renewal period (default: a third of the
	// time left on the lock when acquired).
	RenewEvery time.Duration
	// Pacing spaces the steps out and may stop the run after some
	// (--pause-between, --pause-after); zero: none.
	Pacing Pacing
	// Requests, when set, counts the run's API requests; the done event carries its counts.
	Requests *kube.RequestCounter
	// Pods is the run's pod informer, shared by every wait and precondition of the steps and
	// by the pods view (the commands start it with the view). When nil, the first step that
	// needs one starts it for the rest of the run.
	Pods *kube.Pods
	// HandoverQuiet bounds how long, after a step's action, the previous step's "done" write
	// (and its events) waits for that step to wait on something quiet. A restart's delete is
	// followed by a burst of writes at the API server: the old pod terminating, recreated by
	// its StatefulSet, scheduled; the write would slow that down (and the pod's restart with
	// it), so it goes out once the new incarnation is on its node (steppods.go WaitReplaced)
	// or any other wait begins (StepContext.Waiting). A real pod's graceful termination takes
	// longer than the bound: then the write goes out at the bound, during it. Zero:
	// DefaultHandoverQuiet.
	HandoverQuiet time.Duration

	// noHold: "done" writes go out right after the next step's action (armGate).
	noHold bool

	plan  *Plan
	held  HeldLock
	start time.Time
	mu    sync.Mutex // serialises journal saves
	// keepLock is set when the lock was already held by hand (lock
	// acquire) before this run: the run must not end the user's hold.
	keepLock bool
	// dirty is set while the journal holds a change not written yet (the step now running);
	// it is written at the latest just before the step's action.
	dirty bool
	// lastWrite is when the lease was last written (journal saves renew it too), so the
	// renewal skips a period that a save already covered.
	lastWrite time.Time
	// pending is a step's "done" write still in flight while the next step runs (see
	// runStep); every other journal write waits for it first (joinLocked), so writes stay in
	// order. seq numbers the journal writes, landed is the last one known written, and
	// prepared maps a step to the first write that carried what its Prepare staged (0: the
	// next write): that step may act before the write in flight lands once its own is in.
	pending *pendingSave
	// doneFailed is the error of a "done" write that failed in the background.
	doneFailed error
	seq        int
	landed     int
	prepared   map[string]int
	unwritten  []string // prepared steps no write has carried yet (not a scan of prepared per write)
	// resumedAt is the step the journal named current when this run resumed it.
	resumedAt string
	// stepsCancel stops the running step when the previous step's "done" write failed.
	stepsCancel context.CancelCauseFunc
	// lastDone is the plan's last step when its "done" is left to the run's final write
	// (endsInOneWrite): reported once that write landed.
	lastDone *deferredDone

	// emitMu orders events: while a step's "done" is written in the background, the next
	// step's events are held, and sent after that step's done (holding).
	emitMu  sync.Mutex
	holding bool
	heldEvs []Event

	podsMu  sync.Mutex
	podsCtx context.Context
	ownPods map[string]*kube.Pods // started by this run, by namespace
}

// Run executes p. The returned error maps to an exit code via ExitCode.
func (e *Executor) Run(ctx context.Context, p *Plan) (err error) {
	if e.Clock == nil {
		e.Clock = RealClock{}
	}
	if e.Sink == nil {
		e.Sink = Discard{}
	}
	if e.Grace == 0 {
		e.Grace = 30 * time.Second
	}
	e.plan = p
	e.start = e.Clock.Now()
	podsCtx, stopPods := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPods()
	e.podsMu.Lock()
	e.podsCtx = podsCtx
	e.podsMu.Unlock()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if e.Timeout > 0 {
		var cancelT context.CancelFunc
		runCtx, cancelT = context.WithTimeoutCause(runCtx, e.Timeout,
			fmt.Errorf("%s did not finish within --timeout %s: %w", p.Operation, e.Timeout, ErrTimeout))
		defer cancelT()
	}

	// Nothing left to do (the goal is reached, e.g. a re-run after a run
	// that was killed once its last step had taken effect): succeed without
	// taking the lock or writing a journal, so CI retries of a finished
	// operation exit 0 and change nothing.
	if len(p.Steps) == 0 {
		e.emit(Event{Type: EventPlan, Plan: p.View(), Timeout: e.Timeout})
		e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("nothing to do: %s %s/%s is already where the request wants it; the lock was not taken and nothing was changed",
			p.Operation, p.Namespace, p.Cluster)})
		e.emitDone(OutcomeSucceeded, nil)
		return nil
	}

	journal, err := e.acquire(runCtx)
	if err != nil {
		e.emitDone(outcomeOf(err), err)
		return err
	}
	if e.held != nil {
		stop := e.startRenewal(runCtx, cancel)
		defer stop()
	}

	view := p.View()
	done := 0
	for i := range view.Steps {
		view.Steps[i].Done = journal.IsDone(view.Steps[i].ID)
		if view.Steps[i].Done {
			done++
		}
	}
	started := fmt.Sprintf("%s %s started: %d step(s)", p.Operation, p.Args, len(p.Steps))
	if done > 0 {
		started = fmt.Sprintf("%s %s resumed: %d of %d step(s) already done", p.Operation, p.Args, done, len(p.Steps))
	}
	e.emit(Event{Type: EventPlan, Plan: view, Timeout: e.Timeout})
	// Written while the first step runs (it is not what the first step waits for); the run's
	// last event waits for it, so the audit trail still reads started ... succeeded.
	startedAudit := make(chan struct{})
	go func() {
		defer close(startedAudit)
		gctx, cancel := e.graceContext(ctx) // a Ctrl-C meanwhile must not lose it
		defer cancel()
		e.auditOperation(gctx, "DbopsOperationStarted", false, started)
	}()

	// Tell every view at once that a stop was asked for, not only at the
	// end: the current action may take up to the grace period to finish.
	noticed := make(chan struct{})
	stopNotice := context.AfterFunc(runCtx, func() {
		defer close(noticed)
		e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("stopping (%v): finishing the current action safely, the journal is kept",
			context.Cause(runCtx))})
	})
	err = e.runSteps(runCtx, journal)
	<-startedAudit
	if !stopNotice() {
		<-noticed // the notice is on its way: let it reach the views before the outcome
	}
	if err != nil {
		err = classify(runCtx, err)
	}

	// Final bookkeeping must happen even after Ctrl-C or timeout.
	finCtx, finCancel := context.WithTimeout(context.WithoutCancel(ctx), e.Grace)
	defer finCancel()
	journal.Current = ""
	switch {
	case err == nil:
		journal.State = JournalSucceeded
		journal.Error = ""
	case errors.Is(err, ErrPaused):
		journal.State = JournalPaused
		journal.Error = ""
	case errors.Is(err, ErrInterrupted):
		journal.State = JournalInterrupted
		journal.Error = err.Error()
	case errors.Is(err, ErrTimeout):
		journal.State = JournalTimeout
		journal.Error = err.Error()
	default:
		journal.State = JournalFailed
		journal.Error = err.Error()
	}
	var serr error
	released := false
	if jr, ok := e.held.(JournalReleaser); ok && !e.keepLock {
		serr = e.saveAndRelease(finCtx, journal, jr)
		released = serr == nil
	} else {
		serr = e.saveJournal(finCtx, journal)
	}
	if d := e.lastDone; d != nil {
		// The last step's "done" went out with that write.
		if serr != nil {
			e.release(d.sc, func() {
				e.sink(e.stamp(Event{Type: EventStepFailed, Step: &d.ref, Error: "saving the operation journal: " + serr.Error()}))
			})
		} else {
			e.release(d.sc, func() { e.sink(e.stamp(Event{Type: EventStepDone, Step: &d.ref})) })
		}
	}
	if serr != nil && err == nil {
		err = fmt.Errorf("operation finished but its record could not be saved: %w", serr)
	}
	switch {
	case released:
		e.emit(Event{Type: EventLock, Lock: &LockInfo{Action: LockReleased, Holder: e.held.ID()}})
	case e.held != nil && e.keepLock:
		if derr := e.held.Detach(finCtx); derr != nil {
			e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("could not hand the lock back to your hold: %v", derr)})
		}
		e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("the lock stays held by %s as it was before this run; give it up with: %s",
			e.held.ID(), ReleaseCommand(p.Namespace, p.Cluster, e.held.ID()))})
	case e.held != nil:
		if rerr := e.held.Release(finCtx); rerr != nil {
			e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("could not release the lock (it expires by itself): %v", rerr)})
		} else {
			e.emit(Event{Type: EventLock, Lock: &LockInfo{Action: LockReleased, Holder: e.held.ID()}})
		}
	}
	switch outcome := outcomeOf(err); outcome {
	case OutcomeSucceeded:
		e.auditOperation(finCtx, "DbopsOperationSucceeded", false, fmt.Sprintf("%s %s succeeded", p.Operation, p.Args))
	default:
		e.auditOperation(finCtx, "DbopsOperation"+strings.ToUpper(outcome[:1])+outcome[1:], true,
			fmt.Sprintf("%s %s %s: %v", p.Operation, p.Args, outcome, err))
	}
	e.emitDone(outcomeOf(err), err)
	return err
}

// auditOperation records an operation-level event on each of e.Objects, all at once.
func (e *Executor) auditOperation(ctx context.Context, reason string, warning bool, message string) {
	if e.Auditor == nil {
		return
	}
	msg := fmt.Sprintf("%s (kubectl-dbops, lock id %s)", message, e.lockID())
	errs := make([]error, len(e.Objects))
	var wg sync.WaitGroup
	for i, o := range e.Objects {
		o.Warning = warning
		wg.Go(func() { errs[i] = e.Auditor.Record(ctx, o, reason, msg) })
	}
	wg.Wait()
	for i, o := range e.Objects {
		if errs[i] != nil {
			e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("could not record audit event on %s/%s: %v", o.Kind, o.Name, errs[i])})
		}
	}
}

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
	if first != nil {
		e.firstDecided(first)
		e.mu.Lock()
		e.seq++
		for _, id := range first.staged {
			e.prepared[id] = e.seq
		}
		e.landed, e.lastWrite, e.dirty = e.seq, e.Clock.Now(), false
		e.mu.Unlock()
		return first.j, nil
	}
	d := e.decideFirst(ctx, prev, held.ID())
	e.firstDecided(d)
	e.mu.Lock()
	e.unwritten = append(e.unwritten, d.staged...)
	e.mu.Unlock()
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
	// staged are the steps whose Prepare staged into j.
	staged []string
}

// decideFirst decides the journal to start with from prev, the one found on the lock taken
// as holder (prev is the caller's copy). JournalAcquirer may call it more than once, so
// besides its result it changes only what the steps' Prepare note about what they staged
// (a restart's staged UIDs), which the next call stages again; firstDecided records the
// decision once it is this run's.
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
		prev.Holder = holder
		prev.Steps = len(p.Steps)
		if p.Request != nil {
			prev.Request = p.Request
		}
		return &firstJournal{j: prev, resumed: resumed, resumedBy: by}
	}
	d := &firstJournal{j: &Journal{Operation: p.Operation, Args: p.Args, Holder: holder, State: JournalRunning,
		Started: now, Updated: now, Steps: len(p.Steps), Request: p.Request}}
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
			d.staged = append(d.staged, s.ID)
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
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.prepared == nil {
		e.prepared = map[string]int{}
	}
	for _, id := range d.staged {
		e.prepared[id] = 0
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

// startRenewal keeps the lock alive while steps run; losing it cancels the
// run, because an operation must not go on under someone else's lock.
func (e *Executor) startRenewal(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
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
				if e.recentlyWritten(every) {
					// A journal save renewed the lease meanwhile: no write of its own.
					info := e.held.Info()
					e.emit(Event{Type: EventLock, Lock: &info})
					continue
				}
				info, err := e.held.Renew(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					if errors.Is(err, ErrLocked) {
						cancel(fmt.Errorf("lost the cluster lock: %w", err))
						return
					}
					e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("lock renewal failed, will retry: %v", err)})
					continue
				}
				e.emit(Event{Type: EventLock, Lock: &info})
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (e *Executor) runSteps(ctx context.Context, j *Journal) (err error) {
	// A step may run while the previous step's "done" is still being written (runStep); when
	// that write fails, the running step is stopped and the run fails with the write's error.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	e.stepsCancel = cancel
	defer func() {
		if serr := e.settle(); serr != nil {
			err = serr
		}
	}()
	total, ran := len(e.plan.Steps), 0
	for i, s := range e.plan.Steps {
		ref := StepRef{Index: i + 1, Total: total, ID: s.ID, Target: s.Target, Description: s.Description}
		if j.IsDone(s.ID) {
			e.emitStep(EventStepSkipped, ref, func(ev *Event) { ev.Reason = "done in an earlier run" })
			continue
		}
		if err := context.Cause(ctx); err != nil {
			return err
		}
		if err := e.Pacing.Pace(ctx, ran, s, e.emit); err != nil {
			return err
		}
		var next, after *Step
		if i+1 < total {
			next = e.plan.Steps[i+1]
		}
		if i+2 < total {
			after = e.plan.Steps[i+2]
		}
		if err := e.runStep(ctx, j, s, ref, next, after); err != nil {
			if serr := e.settle(); serr != nil {
				// The previous step's "done" write failed while this step ran: that is
				// why it stopped.
				e.emitStep(EventStepFailed, ref, func(ev *Event) { ev.Error = "stopped: " + serr.Error() })
				return serr
			}
			e.emitStep(EventStepFailed, ref, func(ev *Event) { ev.Error = err.Error() })
			return fmt.Errorf("step %d/%d (%s: %s): %w", ref.Index, total, s.Target, s.Description, err)
		}
		ran++
	}
	return nil
}

func (e *Executor) runStep(ctx context.Context, j *Journal, s *Step, ref StepRef, next, after *Step) error {
	sc := &StepContext{Step: s, Ref: ref, LockID: e.lockID(), journal: j, exec: e}
	async := false
	defer func() {
		if !async {
			sc.waitAudits() // a failed step's events too, before the run reports it
		}
	}()
	// Code deep inside a step (a database connector picking a Ready pod) reads the run's
	// pod informer from the context instead of getting pods one by one.
	ctx = kube.WithPods(ctx, e.Pods)
	e.emitStep(EventStepStarted, ref, nil)
	// "Step started" is written together with what the precheck staged (the UIDs a restart
	// is about to delete), in one write just before the action: nothing changed before it.
	// The previous step's "done" may have written it already (Step.Prepare).
	if j.Current != s.ID {
		j.Current = s.ID
		e.mu.Lock()
		e.dirty = true
		e.mu.Unlock()
	}
	if s.Precheck != nil {
		done, err := s.Precheck(ctx, sc)
		if err != nil {
			return err
		}
		if done {
			if err := e.markDone(ctx, j, s); err != nil {
				return err
			}
			e.emitStep(EventStepSkipped, ref, func(ev *Event) { ev.Reason = "already in the desired state" })
			return nil
		}
	}
	if s.Action != nil {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		// A start write that happens anyway also carries what the next step stages, so that
		// step can act as soon as this one is done (see below).
		e.mu.Lock()
		dirty := e.dirty
		e.mu.Unlock()
		if dirty && next != nil {
			e.prepare(j, next)
		}
		if err := e.flushJournal(ctx, j, s); err != nil {
			return err
		}
		// The action is not cut short by Ctrl-C: a half-sent change is worse
		// than finishing it. It is bounded by the grace period instead.
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), e.Grace)
		err := s.Action(actx, sc)
		acancel()
		if err != nil {
			e.openGate()
		} else {
			e.armGate(e.handoverQuiet())
		}
		if err != nil {
			return err
		}
	}
	if s.Verify != nil {
		if err := s.Verify(ctx, sc); err != nil {
			return err
		}
	}
	// Durable first: a consumer told "done" must find it in the journal. The same write
	// carries what the next step stages for its start, and names it current; and what the
	// step after it stages, so that one will not need to wait either.
	if next != nil && next.Prepare != nil && !j.IsDone(next.ID) && context.Cause(ctx) == nil {
		e.prepare(j, next)
		if after != nil && after.Prepare != nil && !j.IsDone(after.ID) {
			e.prepare(j, after)
		}
		j.Done = append(j.Done, s.ID)
		j.Current = next.ID
		if e.canOverlap() {
			// The next step staged what it needs in an earlier write: it may act while this
			// write is in flight. Its events wait for this step's "done" (doneAsync).
			if err := e.doneAsync(ctx, j, sc, ref); err != nil {
				return err
			}
			async = true
			return nil
		}
		sc.startAudits()
		if err := e.saveGrace(ctx, j); err != nil {
			return err
		}
	} else if next == nil && e.endsInOneWrite() && context.Cause(ctx) == nil {
		// The plan's last step: its "done" goes out with the run's final write, which
		// releases the lock (Run), and is reported once that landed; its events are written
		// meanwhile.
		j.Done = append(j.Done, s.ID)
		j.Current = ""
		sc.startAudits()
		e.lastDone = &deferredDone{sc: sc, ref: ref}
		async = true
		return nil
	} else {
		sc.startAudits()
		if err := e.markDone(ctx, j, s); err != nil {
			return err
		}
	}
	sc.waitAudits() // written beside the journal write above; "done" only once both are
	e.emitStep(EventStepDone, ref, nil)
	return nil
}

// prepare runs step's Prepare, staging into j what it must have journaled before its action,
// and notes that the next journal write carries it.
func (e *Executor) prepare(j *Journal, step *Step) {
	if step.Prepare == nil {
		return
	}
	step.Prepare(&StepContext{Step: step, LockID: e.lockID(), journal: j, exec: e})
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.prepared == nil {
		e.prepared = map[string]int{}
	}
	if _, ok := e.prepared[step.ID]; !ok {
		e.prepared[step.ID] = 0
		e.unwritten = append(e.unwritten, step.ID)
	}
}

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

// canOverlap reports whether a step's "done" may be written while the next step runs: only
// with a lock to write to (without one the journal lives in memory and a write costs nothing).
func (e *Executor) canOverlap() bool {
	return e.held != nil
}

// pendingSave is a journal write in flight that the executor did not wait for.
type pendingSave struct {
	seq int
	// start opens (once) when the write may go out (openGate).
	start chan struct{}
	once  sync.Once
	// held: the write was held back after the next step's action (armGate).
	held bool
	done chan struct{}
	at   time.Time
	err  error
}

// doneAsync writes the journal j (s done, the next step current) in the background, once the
// next step's action is sent (openGate), then reports s done, after the events AuditAsync wrote beside it; until then the next step's
// events are held, so every view still sees step s done before the next step starts. When the
// write fails, s is reported failed and the running step is stopped (runSteps).
func (e *Executor) doneAsync(ctx context.Context, j *Journal, sc *StepContext, ref StepRef) error {
	e.mu.Lock()
	if err := e.joinLocked(); err != nil {
		// The previous step's write failed while this step ran: runSteps reports this step
		// as stopped by it.
		e.mu.Unlock()
		return err
	}
	snap, seq := e.snapshotLocked(j)
	p := &pendingSave{seq: seq, done: make(chan struct{}), start: make(chan struct{})}
	e.pending = p
	e.dirty = false
	e.mu.Unlock()
	e.emitMu.Lock()
	e.holding = true
	e.emitMu.Unlock()
	gctx, cancel := e.graceContext(ctx)
	go func() {
		defer close(p.done)
		defer cancel()
		<-p.start
		sc.startAudits()
		err := e.held.SaveJournal(gctx, snap)
		p.at = e.Clock.Now()
		if err != nil {
			p.err = fmt.Errorf("step %d/%d (%s: %s): saving the operation journal: %w", ref.Index, ref.Total, ref.Target, ref.Description, err)
			e.asyncFailed(sc, ref, p.err)
			return
		}
		e.release(sc, func() { e.sink(e.stamp(Event{Type: EventStepDone, Step: &ref})) })
	}()
	return nil
}

// asyncFailed reports the step whose "done" write failed, and stops the step running after it.
func (e *Executor) asyncFailed(sc *StepContext, ref StepRef, err error) {
	e.release(sc, func() { e.sink(e.stamp(Event{Type: EventStepFailed, Step: &ref, Error: err.Error()})) })
	if e.stepsCancel != nil {
		e.stepsCancel(err)
	}
}

// release waits for sc's audit events, reports their failures and then report, and sends the
// events held meanwhile.
func (e *Executor) release(sc *StepContext, report func()) {
	sc.startAudits()
	var failed []Event
	for _, p := range sc.pending {
		<-p.done
		if p.err != nil {
			failed = append(failed, e.stamp(auditFailedEvent(p.obj, p.err)))
		}
	}
	sc.pending = nil
	e.emitMu.Lock()
	defer e.emitMu.Unlock()
	for _, ev := range failed {
		e.sink(ev)
	}
	report()
	for _, ev := range e.heldEvs {
		e.sink(ev)
	}
	e.heldEvs, e.holding = nil, false
}

// openGate lets the previous step's "done" write (and its events) go out: once this step's
// action failed, or it waits for something quiet (StepContext.Waiting), or HandoverQuiet
// after its action (armGate), or when anything else joins the write. Sent after the next
// step's delete and its aftermath rather than beside them, they do not compete with them at
// the API server.
func (e *Executor) openGate() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.pending; p != nil {
		p.once.Do(func() { close(p.start) })
	}
}

// DefaultHandoverQuiet is Executor.HandoverQuiet's default.
const DefaultHandoverQuiet = 250 * time.Millisecond

// handoverQuiet returns HandoverQuiet, or its default.
func (e *Executor) handoverQuiet() time.Duration {
	if e.HandoverQuiet > 0 {
		return e.HandoverQuiet
	}
	return DefaultHandoverQuiet
}

// armGate opens the gate of the write in flight, if any, once d passed, unless the step's
// waiting opens it earlier (StepContext.waiting).
//
// Once a held write was still in flight when the step after it ended (pods that start faster
// than a journal write lands: holding it put it in that step's way), writes are no longer
// held for the rest of the run (noHold, joinLocked).
func (e *Executor) armGate(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.pending
	switch {
	case p == nil:
	case e.noHold:
		p.once.Do(func() { close(p.start) })
	default:
		p.held = true
		time.AfterFunc(d, func() { p.once.Do(func() { close(p.start) }) })
	}
}

// settle waits for a "done" write in flight and returns the error of the one that failed, if
// any did (whoever joined it first).
func (e *Executor) settle() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.joinLocked(); err != nil {
		return err
	}
	return e.doneFailed
}

// joinLocked waits for the write in flight, if any (e.mu held).
func (e *Executor) joinLocked() error {
	p := e.pending
	if p == nil {
		return nil
	}
	p.once.Do(func() { close(p.start) }) // else it would wait for itself
	select {
	case <-p.done:
	default:
		if p.held {
			e.noHold = true // see armGate
		}
		<-p.done
	}
	e.pending = nil
	if p.err != nil {
		e.doneFailed = p.err
		return p.err
	}
	e.landed = max(e.landed, p.seq)
	e.lastWrite = p.at
	return nil
}

// snapshotLocked stamps j and returns a copy to write, with the write's sequence number; the
// steps prepared since the last write are carried by this one (e.mu held).
func (e *Executor) snapshotLocked(j *Journal) (*Journal, int) {
	j.Updated = e.Clock.Now()
	e.seq++
	for _, id := range e.unwritten {
		e.prepared[id] = e.seq
	}
	e.unwritten = e.unwritten[:0]
	return j.clone(), e.seq
}

// durableLocked reports whether what step id's Prepare staged is known written (e.mu held).
func (e *Executor) durableLocked(id string) bool {
	seq, ok := e.prepared[id]
	return ok && seq != 0 && seq <= e.landed
}

// graceContext is ctx without its cancellation, bounded by the grace period: for writes that
// record what has already happened (journal, audit events), which Ctrl-C must not lose.
func (e *Executor) graceContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), e.Grace)
}

// saveAndRelease writes the run's last journal and releases the lock in one write, after the
// writes in flight.
func (e *Executor) saveAndRelease(ctx context.Context, j *Journal, jr JournalReleaser) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.writeLocked(ctx, j, jr.SaveJournalAndRelease)
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

// flushJournal writes the journal if it holds a change not written yet, before step s acts.
// When the previous step's "done" is still being written, s waits for it only if s needs
// something that write carries: not when s's Prepare was carried by an earlier write.
func (e *Executor) flushJournal(ctx context.Context, j *Journal, s *Step) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.dirty && s != nil && e.durableLocked(s.ID) {
		return nil
	}
	if err := e.joinLocked(); err != nil {
		return err
	}
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

// writeLocked writes j with write (nil: nothing to write to), after the write in flight
// (e.mu held).
func (e *Executor) writeLocked(ctx context.Context, j *Journal, write func(context.Context, *Journal) error) error {
	if err := e.joinLocked(); err != nil {
		return err
	}
	snap, seq := e.snapshotLocked(j)
	if write != nil {
		if err := write(ctx, snap); err != nil {
			return fmt.Errorf("saving the operation journal: %w", err)
		}
		e.lastWrite = e.Clock.Now()
	}
	e.dirty = false
	e.landed = seq
	return nil
}

// recentlyWritten reports whether the lease was written less than d ago.
func (e *Executor) recentlyWritten(d time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.lastWrite.IsZero() && e.Clock.Now().Sub(e.lastWrite) < d
}

// podCache returns the run's pod informer for namespace ns: the one the commands started
// (Pods), else one this run starts on first use and stops when it ends.
func (e *Executor) podCache(client kubernetes.Interface, ns string) *kube.Pods {
	if e.Pods != nil && e.Pods.Namespace() == ns {
		return e.Pods
	}
	e.podsMu.Lock()
	defer e.podsMu.Unlock()
	if p := e.ownPods[ns]; p != nil {
		return p
	}
	if client == nil {
		return nil
	}
	if e.podsCtx == nil {
		// A step run outside Run (a test driving one step): no run to bound the informer.
		e.podsCtx = context.Background()
	}
	if e.ownPods == nil {
		e.ownPods = map[string]*kube.Pods{}
	}
	p := kube.StartPods(e.podsCtx, client, ns, "", "")
	e.ownPods[ns] = p
	return p
}

func (e *Executor) emit(ev Event) {
	ev = e.stamp(ev)
	e.emitMu.Lock()
	defer e.emitMu.Unlock()
	if e.holding {
		e.heldEvs = append(e.heldEvs, ev)
		return
	}
	e.sink(ev)
}

// stamp fills in the event's time and run.
func (e *Executor) stamp(ev Event) Event {
	if ev.Time.IsZero() {
		ev.Time = e.Clock.Now()
	}
	if e.plan != nil {
		ev.Operation = e.plan.Operation
		ev.Cluster = e.plan.Cluster
	}
	if !e.start.IsZero() {
		ev.Elapsed = ev.Time.Sub(e.start)
	}
	return ev
}

// sink sends ev to the views (e.emitMu held, or from a run's own goroutine before any other).
func (e *Executor) sink(ev Event) {
	if e.Sink == nil {
		return
	}
	e.Sink.Emit(ev)
}

func (e *Executor) emitStep(t EventType, ref StepRef, fill func(*Event)) {
	r := ref
	ev := Event{Type: t, Step: &r}
	if fill != nil {
		fill(&ev)
	}
	e.emit(ev)
}

func (e *Executor) emitDone(outcome string, err error) {
	ev := Event{Type: EventDone, Outcome: outcome, Timeout: e.Timeout}
	if e.Requests != nil {
		ev.APIRequests = e.Requests.Snapshot()
	}
	if err != nil {
		ev.Error = err.Error()
		if outcome != OutcomeSucceeded && e.plan != nil && e.plan.Command != "" && ExitCode(err) != ExitLocked {
			ev.Resume = "re-run the same command to resume: " + e.plan.Command
		}
	}
	e.emit(ev)
}

// classify turns a step error into interrupted/timeout/lock-lost when the
// run's context says that is what happened, whatever the step returned
// (watch helpers often report a cancelled context as their own error).
func classify(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, ErrTimeout), errors.Is(cause, ErrLocked):
		return &CodedError{Kind: kindOf(cause), Msg: fmt.Sprintf("%v (while: %v)", cause, err), Err: err}
	case errors.Is(cause, context.DeadlineExceeded):
		return &CodedError{Kind: ErrTimeout, Msg: fmt.Sprintf("timed out: %v", err), Err: err}
	default:
		return &CodedError{Kind: ErrInterrupted, Msg: fmt.Sprintf("interrupted: %v", err), Err: err}
	}
}

func kindOf(err error) error {
	if errors.Is(err, ErrLocked) {
		return ErrLocked
	}
	return ErrTimeout
}

func outcomeOf(err error) string {
	switch ExitCode(err) {
	case ExitOK:
		return OutcomeSucceeded
	case ExitInterrupted:
		return OutcomeInterrupted
	case ExitTimeout:
		return OutcomeTimeout
	case ExitPaused:
		return OutcomePaused
	default:
		return OutcomeFailed
	}
}
