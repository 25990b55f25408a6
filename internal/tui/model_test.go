package tui

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// testClock is a settable clock for elapsed time and lock expiry.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

// abortCounter counts Abort calls.
type abortCounter struct{ n int }

func (a *abortCounter) abort() { a.n++ }

func newTestModel(opts Options) (Model, *testClock) {
	clk := &testClock{t: t0}
	opts.Now = clk.now
	return NewModel(opts), clk
}

// feed sends msgs through Update in order and returns the model and the
// last command.
func feed(t *testing.T, m Model, msgs ...tea.Msg) (Model, tea.Cmd) {
	t.Helper()
	var cmd tea.Cmd
	for _, msg := range msgs {
		var next tea.Model
		next, cmd = m.Update(msg)
		var ok bool
		if m, ok = next.(Model); !ok {
			t.Fatalf("Update returned %T, want Model", next)
		}
	}
	return m, cmd
}

func eventMsgs(events []ops.Event) []tea.Msg {
	out := make([]tea.Msg, 0, len(events))
	for _, e := range events {
		out = append(out, EventMsg(e))
	}
	return out
}

func keyMsg(k string) tea.KeyMsg {
	if k == "ctrl+c" {
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

func isQuit(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	_, ok := cmd().(tea.QuitMsg)
	return ok
}

func assertContains(t *testing.T, view string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(view, w) {
			t.Errorf("view lacks %q:\n%s", w, view)
		}
	}
}

func assertNotContains(t *testing.T, view string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(view, w) {
			t.Errorf("view has %q:\n%s", w, view)
		}
	}
}

// upTo returns the fixture events before the first one matching typ and
// step index (0: any step).
func upTo(t *testing.T, typ ops.EventType, step int) []ops.Event {
	t.Helper()
	events := fixtureEvents()
	for i, e := range events {
		if e.Type == typ && (step == 0 || (e.Step != nil && e.Step.Index == step)) {
			return events[:i]
		}
	}
	t.Fatalf("fixture has no %s event for step %d", typ, step)
	return nil
}

func TestModelRunningStep(t *testing.T) {
	m, clk := newTestModel(Options{NoColor: true, Abort: func() {}})
	// Up to the first 12/40 progress report of step 2.
	events := upTo(t, ops.EventStepProgress, 2)
	events = append(events, fixtureEvents()[len(events)])
	clk.t = events[len(events)-1].Time
	m, cmd := feed(t, m, append([]tea.Msg{tea.WindowSizeMsg{Width: 100, Height: 40}}, eventMsgs(events)...)...)
	if isQuit(cmd) {
		t.Fatal("quit before the done event")
	}
	view := m.View()
	assertContains(t, view,
		"rolling-restart  prod/crate-main (engine cratedb)",
		"lock: held by alice@laptop · expires 07:07:00 UTC (in 4m48s)",
		"elapsed 1m12s / timeout 30m0s",
		"↷ 1. sts/crate-data    pause shard allocation (done in an earlier run)",
		m.spinner.Spinner.Frames[0]+" 2. pod/crate-data-0  restart pod",
		"replicas recovering",
		"12/40 shards   30%",
		"· 3. pod/crate-data-1  restart pod",
		"· 4. sts/crate-data    resume shard allocation",
		"WARNING: resuming rolling-restart",
		"pods: 4/4 ready",
		"NAME            GROUP   READY  PHASE    NODE     ZONE        RESTARTS",
		"crate-data-0    data    yes    Running  node-b1  eu-west-1a  1",
		"q/ctrl+c abort safely",
	)
	// The wait before the progress is over: showing it would contradict the bar.
	assertNotContains(t, view, "waiting: new pod Ready")
}

func TestModelElapsedTicksBetweenEvents(t *testing.T) {
	m, clk := newTestModel(Options{NoColor: true})
	m, _ = feed(t, m, EventMsg{Type: ops.EventWarning, Message: "x", Elapsed: 90 * time.Second})
	clk.t = clk.t.Add(30 * time.Second)
	assertContains(t, m.View(), "elapsed 2m0s")
	assertNotContains(t, m.View(), "timeout")

	m, _ = newTestModel(Options{NoColor: true, Timeout: 10 * time.Minute})
	assertContains(t, m.View(), "elapsed 0s / timeout 10m0s", "waiting for the plan…", "lock: not acquired yet")
}

func TestModelFailureAndDone(t *testing.T) {
	m, _ := newTestModel(Options{NoColor: true, Abort: func() {}})
	events := fixtureEvents()
	m, cmd := feed(t, m, append([]tea.Msg{tea.WindowSizeMsg{Width: 120, Height: 50}}, eventMsgs(events[:len(events)-1])...)...)
	if isQuit(cmd) {
		t.Fatal("quit before the done event")
	}
	view := m.View()
	assertContains(t, view,
		"↷ 1. sts/crate-data",
		"✓ 2. pod/crate-data-0",
		"✗ 3. pod/crate-data-1",
		"error: verify: interrupted while waiting for new pod Ready",
		"· 4. sts/crate-data",
		"lock: released",
		`WARNING: [3/4] pod/crate-data-1 restart pod: could not record audit event`,
	)

	m, cmd = feed(t, m, EventMsg(events[len(events)-1]))
	if !isQuit(cmd) {
		t.Fatal("done event did not return tea.Quit")
	}
	view = m.View()
	assertContains(t, view,
		"✗ interrupted after 3m12s in step 3/4 (pod/crate-data-1: restart pod)",
		"re-run the same command to resume: kubectl dbops rolling-restart prod/crate-main --rolling --group data",
		"elapsed 3m12s / timeout 30m0s",
	)
	assertNotContains(t, view, "abort safely", abortingText)
	if got, want := m.Result(), (Result{Outcome: ops.OutcomeInterrupted}); got != want {
		t.Errorf("Result() = %+v, want %+v", got, want)
	}
}

func TestModelOutcomes(t *testing.T) {
	tests := []struct {
		done ops.Event
		want string
	}{
		{ops.Event{Type: ops.EventDone, Outcome: ops.OutcomeSucceeded, Elapsed: 61 * time.Second}, "✓ succeeded in 1m1s"},
		{ops.Event{Type: ops.EventDone, Outcome: ops.OutcomeDryRun}, "✓ dry-run"},
		{ops.Event{Type: ops.EventDone, Outcome: ops.OutcomeTimeout, Elapsed: time.Hour, Error: "timed out"}, "✗ timeout after 1h0m0s: timed out"},
		{ops.Event{Type: ops.EventDone, Outcome: ops.OutcomeFailed, Error: "taking the lock: held by bob"}, "✗ failed: taking the lock: held by bob"},
		{ops.Event{Type: ops.EventDone, Outcome: ops.OutcomePaused, Elapsed: 3 * time.Second, Error: "paused after 1 step(s) as asked (--pause-after 1)"},
			"… paused after 3s: paused after 1 step(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.done.Outcome, func(t *testing.T) {
			m, _ := newTestModel(Options{NoColor: true})
			m, cmd := feed(t, m, EventMsg(tt.done))
			if !isQuit(cmd) {
				t.Error("done event did not quit")
			}
			assertContains(t, m.View(), tt.want)
		})
	}
}

func TestModelAbort(t *testing.T) {
	tests := []struct {
		name  string
		first string
	}{
		{"q", "q"},
		{"ctrl+c", "ctrl+c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ac abortCounter
			m, _ := newTestModel(Options{NoColor: true, Abort: ac.abort})
			m, _ = feed(t, m, eventMsgs(upTo(t, ops.EventStepDone, 2))...)

			m, cmd := feed(t, m, keyMsg(tt.first))
			if ac.n != 1 {
				t.Fatalf("Abort called %d times, want 1", ac.n)
			}
			if isQuit(cmd) {
				t.Fatal("first abort key quit the view; it must wait for the done event")
			}
			view := m.View()
			assertContains(t, view, abortingText, "ctrl+c force quit")
			assertNotContains(t, view, "q/ctrl+c abort safely")

			// q again is not a second abort, nor a quit.
			m, cmd = feed(t, m, keyMsg("q"))
			if ac.n != 1 || isQuit(cmd) {
				t.Fatalf("second q: Abort calls %d, quit %v; want 1, false", ac.n, isQuit(cmd))
			}

			// Events keep flowing while aborting.
			m, cmd = feed(t, m, EventMsg{Type: ops.EventStepProgress, Step: fixtureRef(2), Progress: &ops.Progress{Done: 30, Total: 40, Unit: "shards"}})
			if isQuit(cmd) {
				t.Fatal("quit on a progress event while aborting")
			}
			assertContains(t, m.View(), "30/40 shards", abortingText)

			forced, cmd := feed(t, m, keyMsg("ctrl+c"))
			if !isQuit(cmd) {
				t.Fatal("ctrl+c while aborting did not force quit")
			}
			if ac.n != 1 {
				t.Errorf("force quit called Abort again (%d calls)", ac.n)
			}
			if r := forced.Result(); !r.Forced || r.Outcome != "" {
				t.Errorf("Result() = %+v, want forced without outcome", r)
			}
			assertContains(t, forced.View(), "forced quit")

			// The normal end of an abort: the executor reports interrupted.
			done, cmd := feed(t, m, EventMsg{Type: ops.EventDone, Outcome: ops.OutcomeInterrupted})
			if !isQuit(cmd) {
				t.Fatal("done while aborting did not quit")
			}
			if r := done.Result(); r.Forced || r.Outcome != ops.OutcomeInterrupted {
				t.Errorf("Result() = %+v, want interrupted, not forced", r)
			}
			assertNotContains(t, done.View(), abortingText)
		})
	}
}

func TestModelAbortFromOutside(t *testing.T) {
	var ac abortCounter
	m, _ := newTestModel(Options{NoColor: true, Abort: ac.abort})
	m, cmd := feed(t, m, abortingMsg{})
	if isQuit(cmd) || ac.n != 0 {
		t.Fatalf("quit=%v abort calls=%d; want neither: the context is already cancelled", isQuit(cmd), ac.n)
	}
	assertContains(t, m.View(), abortingText)
	if _, cmd = feed(t, m, keyMsg("ctrl+c")); !isQuit(cmd) {
		t.Error("ctrl+c after an external abort did not force quit")
	}
}

func TestModelWithoutAbortQuits(t *testing.T) {
	m, _ := newTestModel(Options{NoColor: true})
	m, cmd := feed(t, m, keyMsg("q"))
	if !isQuit(cmd) || !m.Result().Forced {
		t.Error("q without an Abort func should quit at once")
	}
}

func TestModelIgnoresOtherKeys(t *testing.T) {
	var ac abortCounter
	m, _ := newTestModel(Options{NoColor: true, Abort: ac.abort})
	for _, k := range []string{"x", "Q", "enter"} {
		if _, cmd := feed(t, m, keyMsg(k)); cmd != nil || ac.n != 0 {
			t.Errorf("key %q: cmd=%v abort calls=%d", k, cmd != nil, ac.n)
		}
	}
}

func TestModelStreamEnd(t *testing.T) {
	m, _ := newTestModel(Options{NoColor: true})
	m, cmd := feed(t, m, EventMsg{Type: ops.EventPlan, Plan: fixturePlan()}, EventMsg{Type: ops.EventStepStarted, Step: fixtureRef(2)}, streamEndMsg{})
	if !isQuit(cmd) {
		t.Fatal("closed stream did not quit")
	}
	view := m.View()
	assertContains(t, view, "ended without reporting an outcome", markStopped+" 2. pod/crate-data-0")
	if r := m.Result(); r != (Result{}) {
		t.Errorf("Result() = %+v, want zero", r)
	}
}

func TestModelWaitsOnChannel(t *testing.T) {
	ch := make(chan ops.Event, 1)
	m, _ := newTestModel(Options{Events: ch})
	e := ops.Event{Type: ops.EventWarning, Message: "hello"}
	ch <- e
	got := m.waitForEvent()()
	if em, ok := got.(EventMsg); !ok || em.Message != "hello" {
		t.Fatalf("waitForEvent() = %#v, want the event", got)
	}
	// Each event re-arms the wait.
	if _, cmd := feed(t, m, got); cmd == nil {
		t.Fatal("no wait command after an event")
	}
	close(ch)
	if got := m.waitForEvent()(); got != (streamEndMsg{}) {
		t.Fatalf("after close: %#v, want streamEndMsg", got)
	}
	if m, _ := newTestModel(Options{}); m.waitForEvent() != nil {
		t.Error("a model without a channel must not wait on one")
	}
}

func TestModelStepsWithoutPlan(t *testing.T) {
	m, _ := newTestModel(Options{NoColor: true})
	m, _ = feed(t, m, EventMsg{Type: ops.EventStepStarted, Step: &ops.StepRef{Index: 2, Total: 3, ID: "b", Target: "pod/b", Description: "restart"}})
	view := m.View()
	assertContains(t, view, "· 1. (not in plan)", " 2. pod/b  restart", "· 3. (not in plan)")
}

func TestModelNoColor(t *testing.T) {
	events := fixtureEvents()
	states := map[string][]tea.Msg{
		"running":  eventMsgs(events[:len(events)/2]),
		"aborting": append(eventMsgs(events[:len(events)/2]), keyMsg("q")),
		"done":     eventMsgs(events),
	}
	for name, msgs := range states {
		t.Run(name, func(t *testing.T) {
			for _, noColor := range []bool{true, false} {
				r := lipgloss.NewRenderer(io.Discard)
				r.SetColorProfile(termenv.TrueColor)
				m, _ := newTestModel(Options{NoColor: noColor, Renderer: r, Abort: func() {}})
				m, _ = feed(t, m, append([]tea.Msg{tea.WindowSizeMsg{Width: 100, Height: 40}}, msgs...)...)
				hasEsc := strings.Contains(m.View(), "\x1b")
				if noColor && hasEsc {
					t.Errorf("NoColor view has escape sequences:\n%q", m.View())
				}
				if !noColor && !hasEsc {
					t.Error("colour view has no escape sequences; the NoColor check proves nothing")
				}
			}
		})
	}
}

func manyPods(n, notReadyEvery int) []ops.PodSummary {
	pods := make([]ops.PodSummary, n)
	for i := range pods {
		pods[i] = ops.PodSummary{Name: fmt.Sprintf("crate-data-%d", i), Group: "data", Ready: true, Phase: "Running",
			Node: fmt.Sprintf("ip-10-0-%d-17.eu-west-1.compute.internal", i), Zone: "eu-west-1a"}
		if notReadyEvery > 0 && i%notReadyEvery == notReadyEvery-1 {
			pods[i].Ready, pods[i].Phase = false, "Pending"
		}
	}
	return pods
}

func TestModelWindowSize(t *testing.T) {
	tests := []struct {
		name          string
		width, height int
		want, notWant []string
	}{
		{"wide shows every column", 140, 60, []string{"NODE", "ZONE", "RESTARTS", "crate-data-29"}, nil},
		{"narrow drops zone and node", 60, 60, []string{"NAME", "GROUP", "READY", "PHASE", "RESTARTS"}, []string{"ZONE", "NODE"}},
		{"very narrow keeps the essentials", 34, 60, []string{"NAME", "READY", "PHASE"}, []string{"GROUP", "RESTARTS"}},
		{"short keeps not-ready pods", 100, 24, []string{"crate-data-4", "crate-data-9", "more pods", "pods: 24/30 ready"}, []string{"crate-data-28 "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newTestModel(Options{NoColor: true, Abort: func() {}})
			msgs := []tea.Msg{tea.WindowSizeMsg{Width: tt.width, Height: tt.height}}
			msgs = append(msgs, eventMsgs(upTo(t, ops.EventStepDone, 2))...)
			msgs = append(msgs, EventMsg{Type: ops.EventPods, Pods: manyPods(30, 5)})
			m, _ = feed(t, m, msgs...)
			view := m.View()
			// What the renderer counts, including the empty last line.
			lines := strings.Split(view, "\n")
			if len(lines) > tt.height {
				t.Errorf("%d lines for a window of %d:\n%s", len(lines), tt.height, view)
			}
			for _, l := range lines {
				if w := ansi.StringWidth(l); w > tt.width {
					t.Errorf("line of width %d > %d: %q", w, tt.width, l)
				}
			}
			assertContains(t, view, tt.want...)
			assertNotContains(t, view, tt.notWant...)
			// The running step and its detail survive any squeeze.
			assertContains(t, view, "2. pod/crate-data-0", "40/40 shards")
		})
	}
}

func TestModelLongPlanWindow(t *testing.T) {
	plan := &ops.PlanView{Operation: "rolling-restart", Cluster: "big", Namespace: "prod", Engine: ops.EngineGeneric}
	for i := 1; i <= 40; i++ {
		plan.Steps = append(plan.Steps, ops.StepView{Index: i, ID: fmt.Sprint(i), Target: fmt.Sprintf("pod/web-%d", i-1), Description: "restart pod"})
	}
	ref := func(i int) *ops.StepRef {
		return &ops.StepRef{Index: i, Total: 40, ID: fmt.Sprint(i), Target: fmt.Sprintf("pod/web-%d", i-1), Description: "restart pod"}
	}
	msgs := []tea.Msg{tea.WindowSizeMsg{Width: 80, Height: 20}, EventMsg{Type: ops.EventPlan, Plan: plan}}
	for i := 1; i < 20; i++ {
		msgs = append(msgs, EventMsg{Type: ops.EventStepStarted, Step: ref(i)}, EventMsg{Type: ops.EventStepDone, Step: ref(i)})
	}
	msgs = append(msgs, EventMsg{Type: ops.EventStepStarted, Step: ref(20)}, EventMsg{Type: ops.EventStepWaiting, Step: ref(20), Reason: "pod Ready"})
	m, _ := newTestModel(Options{NoColor: true, Abort: func() {}})
	m, _ = feed(t, m, msgs...)
	view := m.View()
	if n := len(strings.Split(view, "\n")); n > 20 {
		t.Errorf("%d lines for a window of 20:\n%s", n, view)
	}
	assertContains(t, view, "earlier steps", "more steps", "20. pod/web-19", "waiting: pod Ready")
	assertNotContains(t, view, " 1. pod/web-0 ", "40. pod/web-39")
}

func TestStepWindow(t *testing.T) {
	tests := []struct {
		n, focus, budget int
		lo, hi           int
	}{
		{n: 5, focus: 2, budget: 10, lo: 0, hi: 5},
		{n: 5, focus: 2, budget: 5, lo: 0, hi: 5},
		{n: 40, focus: 0, budget: 10, lo: 0, hi: 9},    // only a "more" marker
		{n: 40, focus: 39, budget: 10, lo: 31, hi: 40}, // only an "earlier" marker
		{n: 40, focus: 20, budget: 10, lo: 18, hi: 26}, // both markers, focus near the top
		{n: 40, focus: 20, budget: 0, lo: 20, hi: 21},  // never less than the focus
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n%d_focus%d_budget%d", tt.n, tt.focus, tt.budget), func(t *testing.T) {
			lo, hi := stepWindow(tt.n, tt.focus, tt.budget)
			if lo != tt.lo || hi != tt.hi {
				t.Errorf("stepWindow = [%d,%d), want [%d,%d)", lo, hi, tt.lo, tt.hi)
			}
			if tt.focus < lo || tt.focus >= hi {
				t.Errorf("focus %d outside [%d,%d)", tt.focus, lo, hi)
			}
			markers := 0
			if lo > 0 {
				markers++
			}
			if hi < tt.n {
				markers++
			}
			if tt.budget >= 3 && hi-lo+markers > tt.budget {
				t.Errorf("%d rows + %d markers exceed budget %d", hi-lo, markers, tt.budget)
			}
		})
	}
}

func TestPickPods(t *testing.T) {
	pods := manyPods(10, 3) // 2, 5 and 8 not ready
	tests := []struct {
		name    string
		current map[string]bool
		n       int
		want    string
	}{
		{"no current pod: not ready first", nil, 5, "crate-data-0 crate-data-1 crate-data-2 crate-data-5 crate-data-8"},
		{"current first, then not ready, then the next ones", map[string]bool{"crate-data-6": true}, 5,
			"crate-data-2 crate-data-5 crate-data-6 crate-data-7 crate-data-8"},
		{"current even when only one row fits", map[string]bool{"crate-data-9": true}, 1, "crate-data-9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, more := pickPods(pods, tt.current, tt.n)
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			if strings.Join(names, " ") != tt.want || more != len(pods)-tt.n {
				t.Errorf("pickPods = %v (+%d), want %s (+%d)", names, more, tt.want, len(pods)-tt.n)
			}
		})
	}
}

// TestModelViewGolden pins the whole layout at a typical terminal size, so
// layout changes show up in review.
func TestModelViewGolden(t *testing.T) {
	m, clk := newTestModel(Options{NoColor: true, Abort: func() {}})
	events := upTo(t, ops.EventStepWaiting, 3)
	clk.t = events[len(events)-1].Time.Add(5 * time.Second)
	m, _ = feed(t, m, append([]tea.Msg{tea.WindowSizeMsg{Width: 100, Height: 30}}, eventMsgs(events)...)...)
	m, _ = feed(t, m, EventMsg{Type: ops.EventPods, Pods: fixturePods("crate-data-1")}, keyMsg("q"))
	assertGolden(t, "view-aborting.golden", []byte(m.View()))
}

// The current step's detail says what it waits for and for how long.
func TestWaitingShowsHowLong(t *testing.T) {
	m, clk := newTestModel(Options{})
	step := &ops.StepRef{Index: 1, Total: 2, ID: "restart/web-0", Target: "pod/web-0", Description: "restart pod"}
	plan := &ops.PlanView{Operation: "restart", Cluster: "web", Namespace: "demo", Engine: "generic",
		Steps: []ops.StepView{{Index: 1, ID: "restart/web-0", Target: "pod/web-0"}, {Index: 2, ID: "restart/web-1", Target: "pod/web-1"}}}
	m, _ = feed(t, m, tea.WindowSizeMsg{Width: 100, Height: 40},
		EventMsg(ops.Event{Type: ops.EventPlan, Plan: plan, Time: t0}),
		EventMsg(ops.Event{Type: ops.EventStepStarted, Step: step, Time: t0}))
	clk.t = t0.Add(2*time.Minute + 10*time.Second)
	m, _ = feed(t, m, EventMsg(ops.Event{Type: ops.EventStepWaiting, Step: step, Time: clk.t, Reason: "cluster yellow, 3 shards initializing"}))
	if v := m.View(); !strings.Contains(v, "waiting 2m10s: ") || !strings.Contains(v, "cluster yellow, 3 shards initializing") {
		t.Errorf("view lacks the wait and its length:\n%s", v)
	}
}

// A pause honoured by the run is shown above the warnings, who, when and why, until the
// continue.
func TestModelPaused(t *testing.T) {
	m, clk := newTestModel(Options{NoColor: true, Abort: func() {}})
	events := upTo(t, ops.EventStepStarted, 3)
	clk.t = events[len(events)-1].Time
	req := &ops.ControlRequest{Action: ops.ControlPause, By: "bob@ci", At: clk.t, Reason: "check lag"}
	m, _ = feed(t, m, append([]tea.Msg{tea.WindowSizeMsg{Width: 200, Height: 40}}, eventMsgs(append(events,
		ops.Event{Type: ops.EventControl, Time: clk.t, Control: req, Message: req.Describe() + "; waiting before the next step"}))...)...)
	assertContains(t, m.View(), "PAUSED: paused by bob@ci at "+clk.t.UTC().Format(time.RFC3339)+": check lag; waiting before the next step")
	cont := &ops.ControlRequest{Action: ops.ControlContinue, By: "bob@ci", At: clk.t}
	m, _ = feed(t, m, EventMsg(ops.Event{Type: ops.EventControl, Time: clk.t, Control: cont, Message: cont.Describe()}))
	assertNotContains(t, m.View(), "PAUSED")
}

// TestModelLockExpiryFollowsRenewals: each renewal's later expiry replaces the shown one (an
// on-call engineer reads from it how long the lock is safe), the holder stays named although
// renewals need not repeat it, and an expiry in the past is shown as expired.
func TestModelLockExpiryFollowsRenewals(t *testing.T) {
	m, clk := newTestModel(Options{NoColor: true, Abort: func() {}})
	lock := func(a string, holder string, expires time.Duration) tea.Msg {
		return EventMsg(ops.Event{Type: ops.EventLock, Time: clk.t, Lock: &ops.LockInfo{Action: a, Holder: holder, Expires: t0.Add(expires)}})
	}
	m, _ = feed(t, m, tea.WindowSizeMsg{Width: 100, Height: 40}, lock(ops.LockAcquired, "alice@laptop", 5*time.Minute))
	assertContains(t, m.View(), "lock: held by alice@laptop · expires "+t0.Add(5*time.Minute).UTC().Format("15:04:05")+" UTC (in 5m0s)")
	for i := 1; i <= 3; i++ {
		clk.t = t0.Add(time.Duration(i) * time.Minute)
		m, _ = feed(t, m, lock(ops.LockRenewed, "", time.Duration(i)*time.Minute+5*time.Minute))
		want := "lock: held by alice@laptop · expires " + t0.Add(time.Duration(i)*time.Minute+5*time.Minute).UTC().Format("15:04:05") + " UTC (in 5m0s)"
		assertContains(t, m.View(), want)
	}
	clk.t = t0.Add(10 * time.Minute)
	m, _ = feed(t, m, tea.WindowSizeMsg{Width: 100, Height: 40})
	assertContains(t, m.View(), "(expired 2m0s ago)")
}
