package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// Confirmed: the run was started with --yes; the resume hint repeats it, so it works
	// where it is printed (a pipeline without a terminal).
	Confirmed bool
	// Requests, when set, counts the run's API requests; the done event carries its counts.
	Requests *kube.RequestCounter
	// Pods is the run's pod informer, shared by every wait and precondition of the steps and
	// by the pods view (the commands start it with the view). When nil, the first step that
	// needs one starts it for the rest of the run.
	Pods *kube.Pods

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
	// resumedAt is the step the journal named current when this run resumed it.
	resumedAt string
	// lastDone is a step whose "done" the run's final write carries (the plan's last step
	// when that write releases the lock, or a step whose "done" write found the lock lost):
	// reported once that write landed.
	lastDone *deferredDone

	// lostMu guards lost, why the lock stopped being this run's (LockWatcher, renewal).
	lostMu sync.Mutex
	lost   error

	// emitMu serialises the events sent to the sink (steps, renewals and audits run on
	// their own goroutines).
	emitMu sync.Mutex

	podsMu  sync.Mutex
	podsCtx context.Context
	ownPods map[string]*kube.Pods // started by this run, by namespace

	// stepTimes are the finished steps' times, for the done event.
	timesMu   sync.Mutex
	stepTimes []StepTime
	// lastBlockedWrite is when a step's blocker was last written to the journal (e.mu).
	lastBlockedWrite time.Time
	// pendingBlocked is a blocker not written yet (e.mu); lastWritten the journal as last
	// written (e.mu).
	pendingBlocked *Blocked
	pendingETA     *ETA
	lastWritten    *Journal
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
	e.mu.Lock()
	if e.lastWritten == nil && e.held != nil {
		// The acquisition wrote the run's first journal (flushBlocked writes over it).
		e.lastWritten = journal.clone()
	}
	e.mu.Unlock()
	lost := func(err error) {
		e.lostMu.Lock()
		if e.lost == nil {
			e.lost = err
		}
		e.lostMu.Unlock()
		cancel(err)
	}
	stopWatch := e.watchLock(runCtx, lost)
	defer stopWatch()
	if e.held != nil {
		stop := e.startRenewal(runCtx, lost)
		defer stop()
	}

	view := p.View()
	done := 0
	skipped := p.SkippedOnResume(journal)
	for i := range view.Steps {
		view.Steps[i].Done = skipped[view.Steps[i].ID]
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
		e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("stopping (%s): finishing the current action safely, the journal is kept",
			stopCause(runCtx))})
	})
	err = e.runSteps(runCtx, journal)
	// The run's own last write (which releases the lock) must not read as a release by
	// someone else.
	stopWatch()
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
	// The database's own lock goes first, while the Lease still says the run is ours.
	e.releaseCompanion(finCtx)
	journal.Current = ""
	journal.ETA = nil // nothing left to estimate; a stopped run's blocker stays as it was last
	if err == nil {
		journal.Blocked = nil
	}
	switch {
	case err == nil:
		journal.State = JournalSucceeded
		journal.Error = ""
	case errors.Is(err, ErrPaused):
		journal.State = JournalPaused
		journal.Error = ""
	case errors.Is(err, ErrAborted):
		journal.State = JournalAborted
		journal.Error = err.Error()
	case errors.Is(err, ErrInterrupted):
		journal.State = JournalInterrupted
		journal.Error = err.Error()
	case errors.Is(err, ErrTimeout):
		journal.State = JournalTimeout
		journal.Error = err.Error()
	case errors.Is(err, ErrLocked) && ReasonOf(err) == ReasonDenied:
		journal.State = JournalDenied
		journal.Error = err.Error()
	case errors.Is(err, ErrLocked) && ReasonOf(err) == ReasonLockLost:
		journal.State = JournalLockLost
		journal.Error = err.Error()
	default:
		journal.State = JournalFailed
		journal.Error = err.Error()
	}
	var serr error
	released := false
	lr, recordsLoss := e.held.(LossRecorder)
	jr, releases := e.held.(JournalReleaser)
	switch {
	case errors.Is(err, ErrLocked) && recordsLoss:
		// Denied or released by someone else: the steps that finished stay recorded as done,
		// where the lock object still carries this run's journal.
		serr = e.writeFinal(finCtx, journal, lr.SaveJournalAfterLoss)
		released = serr == nil && !e.keepLock
	case releases && !e.keepLock:
		serr = e.writeFinal(finCtx, journal, jr.SaveJournalAndRelease)
		released = serr == nil
	default:
		serr = e.saveJournal(finCtx, journal)
	}
	if d := e.lastDone; d != nil {
		// That step's "done" went out with that write.
		d.sc.waitAudits()
		if serr != nil {
			e.emitStep(EventStepFailed, d.ref, func(ev *Event) {
				ev.Error, ev.ReasonCode = "saving the operation journal: "+serr.Error(), ReasonOf(serr)
			})
		} else {
			e.noteStepTime(d.sc, d.ref)
			e.emitStep(EventStepDone, d.ref, nil)
		}
	}
	if serr != nil && err == nil {
		err = fmt.Errorf("operation finished but its record could not be saved: %w", serr)
	}
	switch {
	case released:
		e.emit(Event{Type: EventLock, Lock: &LockInfo{Action: LockReleased, Holder: e.held.ID()}})
	case errors.Is(err, ErrLocked):
		// Not this run's any more: whatever holds it now is left alone (a lock still held
		// under this ID was given up by the write above, where it could be made).
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

func (e *Executor) runSteps(ctx context.Context, j *Journal) error {
	total, ran := len(e.plan.Steps), 0
	for i, s := range e.plan.Steps {
		ref := StepRef{Index: i + 1, Total: total, ID: s.ID, Target: s.Target, Description: s.Description}
		if j.IsDone(s.ID) {
			e.emitStep(EventStepSkipped, ref, func(ev *Event) { ev.Reason = "done in an earlier run" })
			continue
		}
		if err := context.Cause(ctx); err != nil {
			// Stopped at the boundary: say before which step, not the context's own words.
			return &stepError{where: fmt.Sprintf("step %d/%d (%s: %s)", ref.Index, total, s.Target, s.Description), err: err, before: true}
		}
		// A pause or abort written on the lock is honoured here, before the next step
		// touches anything (honourControl).
		if err := e.honourControl(ctx, j); err != nil {
			return err
		}
		// A step a resumed run finds done already (a pod the interrupted run restarted) is
		// not paced for, nor counted: the pause is between pods this run restarts.
		resumed := s.Resumed != nil && s.Resumed(j)
		if !resumed {
			if err := e.Pacing.Pace(ctx, ran, s, e.emit); err != nil {
				return err
			}
		}
		var next, after *Step
		if i+1 < total {
			next = e.plan.Steps[i+1]
		}
		if i+2 < total {
			after = e.plan.Steps[i+2]
		}
		if err := e.runStep(ctx, j, s, ref, next, after); err != nil {
			if d := e.lastDone; d != nil && d.ref.ID == s.ID {
				// The step finished, but its "done" write found the lock lost: the run's
				// final write records it and reports it (Run).
				return err
			}
			// Stopped by the run (Ctrl-C, SIGTERM, --timeout, a lost lock), the step says so.
			classified := classify(ctx, err)
			reason, msg := ReasonOf(classified), err.Error()
			if errors.Is(classified, ErrInterrupted) {
				// Ctrl-C: what the step was doing, without the cancelled context's own words.
				msg = withoutCancel(msg)
			}
			e.emitStep(EventStepFailed, ref, func(ev *Event) { ev.Error, ev.ReasonCode = msg, reason })
			return &stepError{where: fmt.Sprintf("step %d/%d (%s: %s)", ref.Index, total, s.Target, s.Description), err: err}
		}
		if !resumed {
			ran++
		}
	}
	return nil
}

// runStep runs step s: precheck, action, verify, then its "done" write. That write lands, and
// the step is reported done, before the next step touches anything, so every view and the
// journal agree on which steps finished, and a write that finds the lock lost stops the run
// before the next change. The same write carries what the next two steps stage (Prepare:
// the UIDs a restart deletes) and names the next step current, so the next step needs no
// write of its own before its action.
func (e *Executor) runStep(ctx context.Context, j *Journal, s *Step, ref StepRef, next, after *Step) error {
	sc := &StepContext{Step: s, Ref: ref, LockID: e.lockID(), journal: j, exec: e, started: e.Clock.Now()}
	deferred := false
	defer func() {
		if !deferred {
			sc.waitAudits() // a failed step's events too, before the run reports it
		}
	}()
	// Code deep inside a step (a database connector picking a Ready pod) reads the run's
	// pod informer from the context instead of getting pods one by one.
	ctx = kube.WithPods(ctx, e.Pods)
	ctx = kube.WithWriteGuard(ctx, e.lockLost)
	e.mu.Lock()
	e.pendingBlocked, e.pendingETA = nil, nil
	j.Blocked = nil // the previous step's blocker
	j.ETA = e.estimate(j, ref.Index-1, 0, nil)
	eta := j.ETA
	e.mu.Unlock()
	e.emitStep(EventStepStarted, ref, func(ev *Event) { ev.ETA = eta })
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
		// step can act as soon as this one is done.
		e.mu.Lock()
		dirty := e.dirty
		e.mu.Unlock()
		if dirty && next != nil {
			e.prepare(j, next)
		}
		if err := e.flushJournal(ctx, j); err != nil {
			return err
		}
		// The lock as last seen: a deny, or a release or takeover by someone else, written
		// since the run's last write stops the step before it changes anything.
		if err := e.lockLost(); err != nil {
			return err
		}
		// The action is not cut short by Ctrl-C: a half-sent change is worse
		// than finishing it. It is bounded by the grace period instead; its writes still
		// check the lock (kube.WithWriteGuard travels with the context).
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), e.Grace)
		err := s.Action(actx, sc)
		acancel()
		if err != nil {
			return err
		}
	}
	if s.Verify != nil {
		if err := s.Verify(ctx, sc); err != nil {
			return err
		}
	}
	// Durable first: a consumer told "done" must find it in the journal. The step's events
	// (AuditAsync) are written beside that write.
	e.mu.Lock()
	e.pendingBlocked, e.pendingETA = nil, nil
	j.Blocked = nil
	j.ETA = e.estimate(j, ref.Index, 0, &StepTime{Step: s.ID, Took: e.Clock.Now().Sub(sc.started)})
	eta = j.ETA
	e.mu.Unlock()
	switch {
	case next != nil && context.Cause(ctx) == nil:
		if next.Prepare != nil && !j.IsDone(next.ID) {
			e.prepare(j, next)
			if after != nil && after.Prepare != nil && !j.IsDone(after.ID) {
				e.prepare(j, after)
			}
			j.Current = next.ID
		} else {
			j.Current = ""
		}
		j.Done = append(j.Done, s.ID)
		sc.startAudits()
		if err := e.saveGrace(ctx, j); err != nil {
			deferred = e.deferDoneOnLoss(sc, ref, err)
			return err
		}
	case next == nil && e.endsInOneWrite() && context.Cause(ctx) == nil:
		// The plan's last step: its "done" goes out with the run's final write, which
		// releases the lock (Run), and is reported once that landed; its events are written
		// meanwhile.
		j.Done = append(j.Done, s.ID)
		j.Current = ""
		sc.startAudits()
		e.lastDone = &deferredDone{sc: sc, ref: ref}
		deferred = true
		return nil
	default:
		sc.startAudits()
		if err := e.markDone(ctx, j, s); err != nil {
			deferred = e.deferDoneOnLoss(sc, ref, err)
			return err
		}
	}
	sc.waitAudits() // written beside the journal write above; "done" only once both are
	e.noteStepTime(sc, ref)
	e.emitStep(EventStepDone, ref, func(ev *Event) { ev.ETA = eta })
	return nil
}

// noteStepTime records where a finished step's time went, for the done event.
func (e *Executor) noteStepTime(sc *StepContext, ref StepRef) {
	now := e.Clock.Now()
	t := StepTime{Step: ref.ID, Target: ref.Target, CatchUp: sc.catchUp}
	if !sc.started.IsZero() {
		t.Took = now.Sub(sc.started)
	}
	if !sc.readyAt.IsZero() {
		t.Gate = now.Sub(sc.readyAt)
	}
	e.timesMu.Lock()
	e.stepTimes = append(e.stepTimes, t)
	e.timesMu.Unlock()
}

// deferDoneOnLoss handles a finished step whose "done" write failed with err. When the write
// found the lock lost and the lock can still record progress after that (LossRecorder), the
// step stays in the journal as done and the run's final write records it and reports it
// (lastDone); it reports whether it did so.
func (e *Executor) deferDoneOnLoss(sc *StepContext, ref StepRef, err error) bool {
	if _, ok := e.held.(LossRecorder); !ok || !errors.Is(err, ErrLocked) {
		return false
	}
	e.lastDone = &deferredDone{sc: sc, ref: ref}
	return true
}

// prepare runs step's Prepare, staging into j what it must have journaled before its action.
func (e *Executor) prepare(j *Journal, step *Step) {
	if step.Prepare == nil {
		return
	}
	step.Prepare(&StepContext{Step: step, LockID: e.lockID(), journal: j, exec: e})
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
	e.emitMu.Lock()
	defer e.emitMu.Unlock()
	// Stamped under the lock, so the times the views see never go backwards.
	e.sink(e.stamp(ev))
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

// sink sends ev to the views (e.emitMu held).
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
	e.timesMu.Lock()
	ev.StepTimes = slices.Clone(e.stepTimes)
	e.timesMu.Unlock()
	if err != nil {
		ev.Error, ev.ReasonCode = err.Error(), ReasonOf(err)
		ev.Resume, ev.ResumeArgv = e.resumeHint(outcome, err)
	}
	e.emit(ev)
}

// resumeHint is the done event's resume sentence and command, for a run that ended with err:
// none for a success, nor for a lock this run never held. A run whose lock was taken away
// (denied, released or taken over by someone else) is resumed once the cluster may be changed
// again, and not as the lock ID it ran as: that ID may be denied.
func (e *Executor) resumeHint(outcome string, err error) (string, []string) {
	if outcome == OutcomeSucceeded || e.plan == nil || e.plan.Request == nil {
		return "", nil
	}
	lost := ExitCode(err) == ExitLocked
	if lost && e.held == nil {
		return "", nil
	}
	var drop map[string]bool
	if lost {
		drop = map[string]bool{"lock-id": true}
	}
	argv := e.plan.Request.Argv(drop)
	if e.Confirmed {
		argv = append(argv, "--yes")
	}
	if lost {
		return fmt.Sprintf("this run's lock ID %s lost the lock (see the error); the journal is kept: once the cluster may be changed again, resume as a lock ID that is not denied: %s",
			Printable(e.held.ID()), ShellLine(argv)), argv
	}
	return "re-run the same command to resume: " + ShellLine(argv), argv
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
		return &CodedError{Kind: kindOf(cause), Msg: fmt.Sprintf("%v (while: %v)", cause, err), Err: err, Reason: ReasonOf(cause)}
	case errors.Is(cause, context.DeadlineExceeded):
		return &CodedError{Kind: ErrTimeout, Msg: fmt.Sprintf("timed out: %v", err), Err: err}
	default:
		// Without the cancelled context's own words; what the step undid (allocation
		// re-enabled, say) stays.
		msg := "interrupted: " + withoutCancel(err.Error())
		if se, ok := errors.AsType[*stepError](err); ok && se.before {
			msg = "interrupted before " + se.where + ", at a step boundary"
		} else if ok {
			msg = "interrupted in " + se.where
			if inner := withoutCancel(se.err.Error()); inner != "interrupted" && inner != "" {
				msg += ": " + inner
			}
		}
		return &CodedError{Kind: ErrInterrupted, Msg: msg, Err: err}
	}
}

// stepError is a step's failure, naming the step; before: the run stopped before the step
// began (nothing of it was done).
type stepError struct {
	where  string
	err    error
	before bool
}

func (e *stepError) Error() string { return e.where + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// stopCause says why the run is stopping, in the user's words: Ctrl-C and SIGTERM cancel
// the context, which reads "context canceled".
func stopCause(ctx context.Context) string {
	cause := context.Cause(ctx)
	if errors.Is(cause, context.Canceled) {
		return "interrupted"
	}
	return cause.Error()
}

// withoutCancel drops the cancelled context's own words from an error text that a Ctrl-C
// ended ("waiting for pod Ready: context canceled").
func withoutCancel(s string) string {
	for _, w := range []string{": context canceled", "context canceled: ", "context canceled"} {
		s = strings.ReplaceAll(s, w, "")
	}
	if s == "" {
		return "interrupted"
	}
	return s
}

func kindOf(err error) error {
	if errors.Is(err, ErrLocked) {
		return ErrLocked
	}
	return ErrTimeout
}

func outcomeOf(err error) string {
	if errors.Is(err, ErrAborted) {
		return OutcomeAborted
	}
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
