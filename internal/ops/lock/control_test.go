package lock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func runningJournal(holder string) *ops.Journal {
	return &ops.Journal{Operation: "restart", Args: "--rolling", Holder: holder, State: ops.JournalRunning, Steps: 3}
}

func withControl(action, by string) leaseOpt {
	return withAnnotation(AnnotationControl, mustJSON(&ops.ControlRequest{Action: action, By: by, At: t0, Reason: "earlier"}))
}

// A request is written only for a running operation and only when it changes something; every
// refusal is one line and writes nothing.
func TestRequestControl(t *testing.T) {
	running := []leaseOpt{heldBy(me, "restart --rolling", t0, 600), withJournal(runningJournal(me))}
	for _, tc := range []struct {
		name   string
		lease  *coordinationv1.Lease // nil: no lease
		action string
		refuse string // in the refusal; "" = written
	}{
		{name: "no lease", action: ops.ControlPause, refuse: "no operation is running"},
		{name: "free lock", lease: testLease(withJournal(runningJournal(me))), action: ops.ControlPause, refuse: "nobody holds its lock"},
		{name: "expired", lease: testLease(heldBy(me, "restart --rolling", t0.Add(-time.Hour), 600), withJournal(runningJournal(me))), action: ops.ControlPause, refuse: "nobody holds"},
		{name: "manual hold", lease: testLease(heldBy(me, ManualOperation, t0, 600)), action: ops.ControlPause, refuse: "no run in progress"},
		{name: "finished run under a hold", lease: testLease(heldBy(me, "restart", t0, 600), withJournal(&ops.Journal{Operation: "restart", Holder: me, State: ops.JournalSucceeded})), action: ops.ControlAbort, refuse: "no run in progress"},
		{name: "pause", lease: testLease(running...), action: ops.ControlPause},
		{name: "pause twice", lease: testLease(append(running, withControl(ops.ControlPause, carol))...), action: ops.ControlPause, refuse: "already paused by " + carol},
		{name: "continue not paused", lease: testLease(running...), action: ops.ControlContinue, refuse: "is not paused"},
		{name: "continue after continue", lease: testLease(append(running, withControl(ops.ControlContinue, carol))...), action: ops.ControlContinue, refuse: "is not paused"},
		{name: "continue paused", lease: testLease(append(running, withControl(ops.ControlPause, carol))...), action: ops.ControlContinue},
		{name: "abort running", lease: testLease(running...), action: ops.ControlAbort},
		{name: "abort paused", lease: testLease(append(running, withControl(ops.ControlPause, carol))...), action: ops.ControlAbort},
		{name: "abort twice", lease: testLease(append(running, withControl(ops.ControlAbort, carol))...), action: ops.ControlAbort, refuse: "already being stopped"},
		{name: "pause while aborting", lease: testLease(append(running, withControl(ops.ControlAbort, carol))...), action: ops.ControlPause, refuse: "already being stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f *fixture
			if tc.lease != nil {
				f = newFixture(t, tc.lease)
			} else {
				f = newFixture(t)
			}
			req, err := f.manager(bob).RequestControl(t.Context(), tc.action, "lag")
			if tc.refuse != "" {
				if !errors.Is(err, ops.ErrPrecondition) || !strings.Contains(err.Error(), tc.refuse) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err = %v, want a one-line precondition refusal saying %q", err, tc.refuse)
				}
				f.assertNoWrites()
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeControl(f.stored())
			if err != nil || got == nil || *got != *req || got.Action != tc.action || got.By != bob || !got.At.Equal(t0) || got.Reason != "lag" {
				t.Fatalf("stored request = %+v (%v), want %s by %s at %s: lag (returned %+v)", got, err, tc.action, bob, t0, req)
			}
			if holderOf(f.stored()) != me {
				t.Errorf("holder changed to %q", holderOf(f.stored()))
			}
		})
	}
}

// Two terminals pausing at once: the write is decided again after the conflict, and the second
// is refused with the first's request, writing nothing of its own.
func TestRequestControlRace(t *testing.T) {
	f := newFixture(t, testLease(heldBy(me, "restart --rolling", t0, 600), withJournal(runningJournal(me))))
	f.beforeUpdate = func() { f.put(withControl(ops.ControlPause, carol)) }
	_, err := f.manager(bob).RequestControl(t.Context(), ops.ControlPause, "mine")
	if !errors.Is(err, ops.ErrPrecondition) || !strings.Contains(err.Error(), "already paused by "+carol) {
		t.Fatalf("err = %v, want refused: already paused by %s", err, carol)
	}
	if got, _ := decodeControl(f.stored()); got == nil || got.By != carol {
		t.Fatalf("stored request = %+v, want carol's", got)
	}
}

// A request belongs to the run it was written for: a new acquisition and a release drop it,
// so an abort left by a crashed run never stops the next one.
func TestControlDroppedByAcquireAndRelease(t *testing.T) {
	f := newFixture(t, testLease(withJournal(&ops.Journal{Operation: "restart", Holder: bob, State: ops.JournalInterrupted}), withControl(ops.ControlAbort, carol)))
	held, err := f.manager(me).Acquire(t.Context(), "restart")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.stored().Annotations[AnnotationControl]; ok {
		t.Fatal("the acquisition kept an earlier run's abort")
	}
	f.put(withControl(ops.ControlPause, carol))
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.stored().Annotations[AnnotationControl]; ok {
		t.Fatal("the release kept the run's pause")
	}
}

// steerRun runs a three-step plan with the real lock on the fake API server. Step 1 waits for
// the test (inFlight/finish) and sets a setting its verify puts back (as an engine's step does
// with a maintenance zone or allocation); the sink records events.
type steerRun struct {
	f        *fixture
	inFlight chan struct{}
	finish   chan struct{}

	mu      sync.Mutex
	events  []ops.Event
	started []string
	setting bool // step 1's setting, on between its action and its verify
	done    chan error
}

func startSteerRun(t *testing.T) *steerRun {
	r := &steerRun{f: newFixture(t), inFlight: make(chan struct{}), finish: make(chan struct{}), done: make(chan error, 1)}
	step := func(id string) *ops.Step {
		s := &ops.Step{ID: id, Target: "pod/" + id, Description: "restart " + id}
		s.Action = func(ctx context.Context, sc *ops.StepContext) error {
			r.mu.Lock()
			r.started = append(r.started, id)
			if id == "db-0" {
				r.setting = true
			}
			r.mu.Unlock()
			if id == "db-0" {
				close(r.inFlight)
				<-r.finish
			}
			return nil
		}
		s.Verify = func(ctx context.Context, sc *ops.StepContext) error {
			r.mu.Lock()
			r.setting = false
			r.mu.Unlock()
			return nil
		}
		return s
	}
	p := &ops.Plan{Operation: "restart", Args: "--rolling", Namespace: testNS, Cluster: testCluster,
		Steps: []*ops.Step{step("db-0"), step("db-1"), step("db-2")}}
	// The real clock: renewals must really write while the run waits in a pause. Every 50 ms,
	// not faster: another terminal's request retries a conflict 5 times 10 ms apart (modify's
	// retry.DefaultRetry), and renewals every 5 ms won all five under -race in CI; real
	// renewals are seconds apart.
	m := &Manager{Client: r.f.cs, Namespace: testNS, Cluster: testCluster, ID: me, Session: "s1", Clock: ops.RealClock{}}
	e := &ops.Executor{Locker: m, Clock: ops.RealClock{}, RenewEvery: 50 * time.Millisecond, Timeout: time.Minute,
		Sink: ops.SinkFunc(func(ev ops.Event) {
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		})}
	go func() { r.done <- e.Run(t.Context(), p) }()
	<-r.inFlight
	return r
}

func (r *steerRun) count(match func(ops.Event) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.events {
		if match(ev) {
			n++
		}
	}
	return n
}

func (r *steerRun) startedSteps() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.started...)
}

func isControl(action string) func(ops.Event) bool {
	return func(ev ops.Event) bool {
		return ev.Type == ops.EventControl && ev.Control != nil && ev.Control.Action == action
	}
}

// A pause written from another terminal while a step is in flight stops the run at the next
// step boundary: no step starts while it is paused, the lock keeps renewing, the journal says
// who paused it; a continue goes on to the end.
func TestExecutorHonoursPauseAndContinue(t *testing.T) {
	r := startSteerRun(t)
	other := r.f.manager(bob)
	if _, err := other.RequestControl(t.Context(), ops.ControlPause, "check lag"); err != nil {
		t.Fatal(err)
	}
	close(r.finish) // the step in flight comes back
	waitFor(t, func() bool { return r.count(isControl(ops.ControlPause)) == 1 })
	if got := r.count(func(ev ops.Event) bool { return ev.Type == ops.EventStepDone }); got != 1 {
		t.Fatalf("%d steps done when the pause was honoured, want 1", got)
	}
	j, err := decodeJournal(r.f.stored())
	if err != nil || j.Control == nil || j.Control.By != bob || !strings.HasPrefix(j.StateText(), "paused by "+bob) {
		t.Fatalf("journal while paused = %+v (%v), want paused by %s", j, err, bob)
	}
	// Renewals go on while paused: the lease is renewed (written) again, twice.
	renewed := r.f.stored().Spec.RenewTime.Time
	for range 2 {
		waitFor(t, func() bool { return r.f.stored().Spec.RenewTime.Time.After(renewed) })
		renewed = r.f.stored().Spec.RenewTime.Time
	}
	if got := r.startedSteps(); len(got) != 1 {
		t.Fatalf("steps started while paused: %v", got)
	}
	if _, err := other.RequestControl(t.Context(), ops.ControlContinue, "lag ok"); err != nil {
		t.Fatal(err)
	}
	if err := <-r.done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := r.startedSteps(); len(got) != 3 {
		t.Fatalf("steps started = %v, want all 3", got)
	}
	if r.count(isControl(ops.ControlContinue)) != 1 {
		t.Error("no continue event")
	}
	if _, ok := r.f.stored().Annotations[AnnotationControl]; ok {
		t.Error("the control request outlived the run")
	}
}

// An abort ends the run once the step in flight is back (its verify put its setting back),
// before the next step starts: outcome aborted, exit 7, reason Aborted, the journal and the
// history say who aborted it.
func TestExecutorHonoursAbort(t *testing.T) {
	for _, paused := range []bool{false, true} {
		name := "running"
		if paused {
			name = "paused"
		}
		t.Run(name, func(t *testing.T) {
			r := startSteerRun(t)
			other := r.f.manager(bob)
			if paused {
				if _, err := other.RequestControl(t.Context(), ops.ControlPause, "look"); err != nil {
					t.Fatal(err)
				}
				close(r.finish)
				waitFor(t, func() bool { return r.count(isControl(ops.ControlPause)) == 1 })
			}
			if _, err := other.RequestControl(t.Context(), ops.ControlAbort, "incident"); err != nil {
				t.Fatal(err)
			}
			if !paused {
				r.mu.Lock()
				still := r.setting
				r.mu.Unlock()
				if !still {
					t.Fatal("step 1 was not in flight")
				}
				close(r.finish)
			}
			err := <-r.done
			if ops.ExitCode(err) != 7 || ops.ReasonOf(err) != ops.ReasonAborted || !strings.Contains(err.Error(), "aborted by "+bob) {
				t.Fatalf("err = %v (exit %d, reason %s), want aborted by %s, exit 7, Aborted", err, ops.ExitCode(err), ops.ReasonOf(err), bob)
			}
			if got := r.startedSteps(); len(got) != 1 {
				t.Fatalf("steps started = %v, want only the one in flight", got)
			}
			r.mu.Lock()
			setting := r.setting
			r.mu.Unlock()
			if setting {
				t.Error("the in-flight step's setting was not put back")
			}
			if r.count(func(ev ops.Event) bool { return ev.Type == ops.EventDone && ev.Outcome == ops.OutcomeAborted }) != 1 {
				t.Error("no done event with outcome aborted")
			}
			l := r.f.stored()
			j, _ := decodeJournal(l)
			if j == nil || j.State != ops.JournalAborted || j.Control == nil || j.Control.By != bob || len(j.Done) != 1 {
				t.Fatalf("journal = %+v, want aborted by %s with 1 step done", j, bob)
			}
			if holderOf(l) != "" {
				t.Errorf("lock still held by %s", holderOf(l))
			}
			hist, _, err := r.f.manager(me).History(t.Context())
			if err != nil || len(hist) != 1 || hist[0].Outcome != ops.JournalAborted {
				t.Errorf("history = %+v (%v), want one aborted run", hist, err)
			}
		})
	}
}
