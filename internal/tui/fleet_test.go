package tui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func fleetTargets() []FleetTarget {
	return []FleetTarget{
		{Context: "prod-eu", Namespace: "db", Cluster: "orders"},
		{Context: "prod-us", Namespace: "db", Cluster: "orders"},
		{Context: "prod-ap", Namespace: "db", Cluster: "orders"},
	}
}

func newFleetTestModel(ts []FleetTarget, abort func()) (FleetModel, *testClock) {
	clk := &testClock{t: t0}
	return NewFleetModel(FleetOptions{Title: "restart", Targets: ts, Abort: abort, NoColor: true, Now: clk.now}), clk
}

// feedFleet sends msgs through Update in order, the clock at each event's time as it
// arrives, and returns the model and the last command.
func feedFleet(t *testing.T, m FleetModel, clk *testClock, msgs ...tea.Msg) (FleetModel, tea.Cmd) {
	t.Helper()
	var cmd tea.Cmd
	for _, msg := range msgs {
		if fm, ok := msg.(FleetMsg); ok && fm.Event != nil && fm.Event.Time.After(clk.t) {
			clk.t = fm.Event.Time
		}
		var next tea.Model
		next, cmd = m.Update(msg)
		var ok bool
		if m, ok = next.(FleetModel); !ok {
			t.Fatalf("Update returned %T, want FleetModel", next)
		}
	}
	return m, cmd
}

// ev is target i's event e at t0+d, stamped like the executor's.
func ev(i int, d time.Duration, e ops.Event) FleetMsg {
	e.Time, e.Operation, e.Cluster, e.Elapsed = at(d), "rolling-restart", "orders", d
	return FleetMsg{Target: i, Event: &e}
}

func state(i int, s, err string) FleetMsg { return FleetMsg{Target: i, State: s, Error: err} }

func fleetPlan() *ops.PlanView {
	p := &ops.PlanView{Operation: "rolling-restart", Cluster: "orders", Namespace: "db", Engine: ops.EngineCrateDB}
	for i, pod := range []string{"orders-0", "orders-1", "orders-2"} {
		p.Steps = append(p.Steps, ops.StepView{Index: i + 1, ID: "restart/" + pod, Target: "pod/" + pod, Description: "restart pod"})
	}
	return p
}

func fleetRef(i int) *ops.StepRef {
	s := fleetPlan().Steps[i-1]
	return &ops.StepRef{Index: i, Total: 3, ID: s.ID, Target: s.Target, Description: s.Description}
}

// fleetRun is a representative moment of a fleet restart: prod-eu (the canary) succeeded,
// prod-us is in its second step, blocked on a pod, with an ETA; prod-ap waits.
func fleetRun() []tea.Msg {
	s := time.Second
	eta := &ops.ETA{At: at(70 * s), Low: 60 * s, High: 90 * s, Basis: "2 steps done"}
	return []tea.Msg{
		state(0, FleetRunning, ""),
		ev(0, 0, ops.Event{Type: ops.EventLock, Lock: &ops.LockInfo{Action: ops.LockAcquired, Holder: "alice@laptop", Expires: at(5 * time.Minute)}}),
		ev(0, s, ops.Event{Type: ops.EventPlan, Plan: fleetPlan()}),
		ev(0, 2*s, ops.Event{Type: ops.EventStepStarted, Step: fleetRef(1)}),
		ev(0, 20*s, ops.Event{Type: ops.EventStepDone, Step: fleetRef(1)}),
		ev(0, 21*s, ops.Event{Type: ops.EventStepStarted, Step: fleetRef(2)}),
		ev(0, 40*s, ops.Event{Type: ops.EventStepDone, Step: fleetRef(2)}),
		ev(0, 41*s, ops.Event{Type: ops.EventStepStarted, Step: fleetRef(3)}),
		ev(0, 60*s, ops.Event{Type: ops.EventStepDone, Step: fleetRef(3)}),
		ev(0, 60*s, ops.Event{Type: ops.EventDone, Outcome: ops.OutcomeSucceeded}),
		state(0, "succeeded", ""),
		state(1, FleetRunning, ""),
		ev(1, 61*s, ops.Event{Type: ops.EventLock, Lock: &ops.LockInfo{Action: ops.LockAcquired, Holder: "alice@laptop", Expires: at(6 * time.Minute)}}),
		ev(1, 61*s, ops.Event{Type: ops.EventPlan, Plan: fleetPlan(), Timeout: 30 * time.Minute}),
		ev(1, 62*s, ops.Event{Type: ops.EventStepStarted, Step: fleetRef(1)}),
		ev(1, 69*s, ops.Event{Type: ops.EventStepDone, Step: fleetRef(1)}),
		ev(1, 70*s, ops.Event{Type: ops.EventStepStarted, Step: fleetRef(2), ETA: eta}),
		ev(1, 75*s, ops.Event{Type: ops.EventStepWaiting, Step: fleetRef(2), Reason: "new pod Ready (UID changed)",
			Blocked: &ops.Blocked{Kind: ops.BlockedPod, On: "pod db/orders-1 (ContainerCreating)", Since: at(72 * s), ToUnblock: "kubectl -n db describe pod orders-1"}}),
	}
}

func fleetView(t *testing.T, m FleetModel) string {
	t.Helper()
	v := m.View()
	if strings.Contains(v, "\x1b") {
		t.Errorf("NoColor view holds escape sequences:\n%q", v)
	}
	return v
}

// The golden view of a fleet mid-run: one line per target (state, step i/n, ETA, blocked-on)
// and the focused (running) target's detail.
func TestFleetViewGolden(t *testing.T) {
	m, clk := newFleetTestModel(fleetTargets(), func() {})
	m, _ = feedFleet(t, m, clk, append([]tea.Msg{tea.WindowSizeMsg{Width: 100, Height: 30}}, fleetRun()...)...)
	clk.t = at(80 * time.Second)
	assertGolden(t, "fleet-view-100x30.golden", []byte(fleetView(t, m)))
}

// rowOf is target's line of the view.
func rowOf(t *testing.T, view string, target FleetTarget) string {
	t.Helper()
	for _, l := range strings.Split(view, "\n") {
		// The first line naming it (its name may be cut on a narrow terminal).
		if strings.Contains(l, target.Context+"/") {
			return l
		}
	}
	t.Fatalf("no line for %s:\n%s", target, view)
	return ""
}

func TestFleetModel(t *testing.T) {
	ts := fleetTargets()
	s := time.Second
	progress := ev(1, 78*s, ops.Event{Type: ops.EventStepProgress, Step: fleetRef(2), Progress: &ops.Progress{Done: 12, Total: 40, Unit: "shards"}})
	failed := ev(1, 90*s, ops.Event{Type: ops.EventStepFailed, Step: fleetRef(2), Error: "verify: pod orders-1 not Ready after 5m"})
	done := ev(1, 90*s, ops.Event{Type: ops.EventDone, Outcome: ops.OutcomeFailed, Error: "step 2/3 failed",
		Resume: "re-run the same command to resume: kubectl dbops restart orders --rolling --context prod-us -n db"})
	tests := []struct {
		name  string
		msgs  []tea.Msg
		width int
		// rows: per target, what its line holds; focus: the target whose detail is shown.
		rows   map[int][]string
		absent map[int][]string
		focus  int
		detail []string
	}{
		{name: "all waiting", rows: map[int][]string{0: {"waiting"}, 1: {"waiting"}, 2: {"waiting"}}, focus: 0,
			detail: []string{"waiting"}},
		{name: "targets starting: the focus follows the start", msgs: []tea.Msg{state(0, FleetRunning, ""), state(1, FleetRunning, "")},
			rows: map[int][]string{0: {"running"}, 1: {"running"}, 2: {"waiting"}}, focus: 1},
		{name: "step progress", msgs: append(fleetRun(), progress),
			rows: map[int][]string{0: {"succeeded", "step 3/3"}, 1: {"running", "step 2/3"}}, focus: 1,
			detail: []string{"12/40 shards", " 30%"}},
		{name: "blocked on and ETA", msgs: fleetRun(),
			rows: map[int][]string{1: {"running", "step 2/3", "ETA 1m0s–1m30s", "blocked on pod db/orders-1"}}, focus: 1,
			detail: []string{"blocked on: pod db/orders-1 (ContainerCreating)", "to unblock: kubectl -n db describe pod orders-1", "ETA 1m0s–1m30s"}},
		{name: "ETA only on a running target", msgs: append(fleetRun(), done, state(1, "failed", "verify: pod orders-1 not Ready after 5m")),
			rows: map[int][]string{1: {"failed"}}, absent: map[int][]string{1: {"ETA", "blocked on"}}, focus: 1},
		{name: "a failure: the focus goes to it, its error shown",
			msgs: append(fleetRun(), state(2, FleetRunning, ""), failed, done, state(1, "failed", "verify: pod orders-1 not Ready after 5m")),
			rows: map[int][]string{1: {"✗", "failed", "step 2/3", "verify: pod orders-1 not Ready after 5m"}, 2: {"running"}}, focus: 1,
			detail: []string{"✗ 2. pod/orders-1", "error: verify: pod orders-1 not Ready after 5m", "✗ failed after 1m30s: step 2/3 failed",
				"re-run the same command to resume"}},
		{name: "skipped before its run: its error is its detail",
			msgs: []tea.Msg{state(0, FleetRunning, ""), state(0, "skipped", "cluster db/orders is locked by bob@elsewhere (INC-7)")},
			rows: map[int][]string{0: {"↷", "skipped", "locked by bob@elsewhere"}}, focus: 0,
			detail: []string{"error: cluster db/orders is locked by bob@elsewhere (INC-7)"}},
		{name: "stopped and not started", msgs: append(fleetRun(), state(1, "stopped", "aborted at a batch boundary"), state(2, "not-started", "")),
			rows: map[int][]string{1: {"stopped", "aborted at a batch boundary"}, 2: {"not-started"}}, focus: 1},
		{name: "focus moves down and up, pinned against later starts",
			msgs:  []tea.Msg{state(0, FleetRunning, ""), keyMsg("j"), keyMsg("j"), keyMsg("j"), tea.KeyMsg{Type: tea.KeyUp}, state(2, FleetRunning, "")},
			focus: 1, detail: []string{"waiting"}},
		{name: "focus with arrow keys", msgs: []tea.Msg{tea.KeyMsg{Type: tea.KeyDown}, tea.KeyMsg{Type: tea.KeyDown}, keyMsg("k")},
			focus: 1},
		{name: "focus stays in bounds", msgs: []tea.Msg{keyMsg("k"), keyMsg("k")}, focus: 0},
		{name: "narrow terminal", width: 40, msgs: fleetRun(),
			rows: map[int][]string{0: {"succeeded"}, 1: {"running", "step 2/3"}, 2: {"waiting"}}, focus: 1},
		{name: "a target's own lines are recent lines", msgs: []tea.Msg{FleetMsg{Target: 0, Line: "WARNING: --disable-locks: running restart WITHOUT the cluster lock"}},
			focus: 0, detail: []string{"recent:", "WARNING: --disable-locks"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, clk := newFleetTestModel(ts, func() {})
			width := tc.width
			if width == 0 {
				width = 120
			}
			m, _ = feedFleet(t, m, clk, append([]tea.Msg{tea.WindowSizeMsg{Width: width, Height: 40}}, tc.msgs...)...)
			view := fleetView(t, m)
			for i, want := range tc.rows {
				row := rowOf(t, view, ts[i])
				for _, w := range want {
					if !strings.Contains(row, w) {
						t.Errorf("line of %s lacks %q: %q", ts[i], w, row)
					}
				}
			}
			for i, bad := range tc.absent {
				row := rowOf(t, view, ts[i])
				for _, b := range bad {
					if strings.Contains(row, b) {
						t.Errorf("line of %s holds %q: %q", ts[i], b, row)
					}
				}
			}
			if m.focus != tc.focus {
				t.Errorf("focus %d, want %d:\n%s", m.focus, tc.focus, view)
			}
			if !strings.Contains(view, currentMark+ts[tc.focus].String()) {
				t.Errorf("detail is not %s's:\n%s", ts[tc.focus], view)
			}
			_, detail, _ := strings.Cut(view, "\n"+currentMark+ts[tc.focus].String())
			assertContains(t, detail, tc.detail...)
			for _, l := range strings.Split(view, "\n") {
				if w := ansi.StringWidth(l); w > width {
					t.Errorf("line of width %d > %d: %q", w, width, l)
				}
			}
		})
	}
}

// q or ctrl+c is the fleet's interrupt (Abort, once); the view stays until the fleet ends,
// and a second ctrl+c forces it to quit, as in the single-cluster view.
func TestFleetModelAbort(t *testing.T) {
	var a abortCounter
	m, clk := newFleetTestModel(fleetTargets(), a.abort)
	m, cmd := feedFleet(t, m, clk, append(fleetRun(), keyMsg("q"))...)
	if a.n != 1 || isQuit(cmd) {
		t.Fatalf("after q: %d aborts, quit %v", a.n, isQuit(cmd))
	}
	assertContains(t, fleetView(t, m), "aborting safely", "ctrl+c force quit")
	m, cmd = feedFleet(t, m, clk, keyMsg("q"), keyMsg("j"))
	if a.n != 1 || isQuit(cmd) || m.focus != 2 {
		t.Fatalf("q again: %d aborts, quit %v, focus %d", a.n, isQuit(cmd), m.focus)
	}
	m, cmd = feedFleet(t, m, clk, keyMsg("ctrl+c"))
	if !isQuit(cmd) || !m.Result().Forced {
		t.Fatalf("second ctrl+c: quit %v, result %+v", isQuit(cmd), m.Result())
	}
	assertContains(t, fleetView(t, m), "forced quit")

	// An interrupt from outside the view (a signal) shows it aborting too.
	m, clk = newFleetTestModel(fleetTargets(), a.abort)
	m, _ = feedFleet(t, m, clk, abortingMsg{})
	assertContains(t, fleetView(t, m), "aborting safely")
	if a.n != 1 {
		t.Errorf("Abort called for an outside interrupt")
	}
}

// The fleet's end (its feed closed) quits the view; the targets that did not succeed get
// their outcome and resume line, prefixed with the target, printed after it.
func TestFleetModelEnd(t *testing.T) {
	m, clk := newFleetTestModel(fleetTargets(), func() {})
	m, _ = feedFleet(t, m, clk, append(fleetRun(),
		ev(1, 90*time.Second, ops.Event{Type: ops.EventDone, Outcome: ops.OutcomeInterrupted, Error: "interrupted in step 2/3 (pod/orders-1: restart pod)",
			Resume: "re-run the same command to resume: kubectl dbops restart orders --rolling --context prod-us -n db"}),
		state(1, "failed", "interrupted"), state(2, "not-started", ""))...)
	m, cmd := feedFleet(t, m, clk, fleetEndMsg{})
	if !isQuit(cmd) {
		t.Fatal("the fleet's end did not quit the view")
	}
	view := fleetView(t, m)
	if strings.Contains(view, "abort safely") || strings.Contains(view, "⠋") {
		t.Errorf("final view still shows keys or a spinner:\n%s", view)
	}
	want := "[prod-us/db/orders] ✗ interrupted after 1m30s in step 2/3 (pod/orders-1: restart pod)\n" +
		"[prod-us/db/orders] re-run the same command to resume: kubectl dbops restart orders --rolling --context prod-us -n db"
	if got := strings.Join(m.afterExitLines(), "\n"); got != want {
		t.Errorf("after exit:\n%s\nwant:\n%s", got, want)
	}
}

// Names, errors and event texts from kubeconfigs, operators and databases are escaped.
func TestFleetModelHostile(t *testing.T) {
	ts := []FleetTarget{{Context: "ctx" + hostile, Namespace: "db", Cluster: "orders"}, {Context: "b", Namespace: "db", Cluster: "c" + hostile}}
	m, clk := newFleetTestModel(ts, func() {})
	var msgs []tea.Msg
	for _, e := range hostileEvents() {
		msgs = append(msgs, FleetMsg{Target: 0, Event: &e})
	}
	msgs = append(msgs, FleetMsg{Target: 0, Line: "line " + hostile}, state(1, "failed", "boom "+hostile), state(0, "failed", "boom "+hostile))
	m, _ = feedFleet(t, m, clk, msgs...)
	assertNoRaw(t, "fleet view", fleetView(t, m))
	m, _ = feedFleet(t, m, clk, keyMsg("j"))
	assertNoRaw(t, "fleet view of target 2", fleetView(t, m))
	assertNoRaw(t, "after exit", strings.Join(m.afterExitLines(), "\n"))
}

// On a short window the target list and the detail shrink so the view fits.
func TestFleetModelFits(t *testing.T) {
	var ts []FleetTarget
	for i := range 30 {
		ts = append(ts, FleetTarget{Context: fmt.Sprintf("prod-%02d", i), Namespace: "db", Cluster: "orders"})
	}
	for _, size := range [][2]int{{80, 24}, {60, 15}, {120, 40}} {
		m, clk := newFleetTestModel(ts, func() {})
		m, _ = feedFleet(t, m, clk, append([]tea.Msg{tea.WindowSizeMsg{Width: size[0], Height: size[1]}, keyMsg("j")}, fleetRun()...)...)
		view := fleetView(t, m)
		checkFits(t, view, size[0], size[1])
		assertContains(t, view, "▸ ⠋ prod-01", "more targets")
	}
}

// RunFleet draws the fleet's messages until the feed closes, then prints the outcome lines
// of the targets that did not succeed; a send after the view exited does not block.
func TestRunFleet(t *testing.T) {
	feed := NewFleetFeed(0)
	out := &syncBuffer{}
	ch := make(chan error, 1)
	go func() {
		_, err := RunFleet(context.Background(), feed, FleetOptions{Title: "restart", Targets: fleetTargets(), Abort: func() {}, NoColor: true, Output: out},
			tea.WithInput(nil))
		ch <- err
	}()
	feed.Send(state(1, FleetRunning, ""))
	feed.Target(1).Emit(ops.Event{Type: ops.EventDone, Outcome: ops.OutcomeFailed, Error: "boom", Resume: "re-run: kubectl dbops restart orders"})
	feed.Send(state(1, "failed", "boom"))
	feed.Close()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunFleet did not return")
	}
	if !strings.HasSuffix(out.String(), "[prod-us/db/orders] ✗ failed: boom\n[prod-us/db/orders] re-run: kubectl dbops restart orders\n") {
		t.Errorf("output:\n%q", out.String())
	}
	assertContains(t, out.String(), "fleet restart", "prod-us/db/orders")
	feed.Target(0).Emit(ops.Event{Type: ops.EventWarning})
	feed.Send(state(0, "failed", ""))
}
