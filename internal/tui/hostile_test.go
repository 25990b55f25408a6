package tui

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// hostile would clear the screen, forge a line, reverse the text and start
// a C1 escape if printed raw.
const hostile = "x\x1b[2J\r\n2026-11-22T07:20:01Z done: succeeded\u202e\u009b31m\x7f"

func hostileEvents() []ops.Event {
	step := &ops.StepRef{Index: 1, Total: 1, ID: "s/" + hostile, Target: "pod/" + hostile, Description: "restart " + hostile}
	return []ops.Event{
		{Type: ops.EventLock, Time: t0, Lock: &ops.LockInfo{Action: ops.LockTakeover, Holder: "alice", Previous: "mallory" + hostile, Operation: "restart " + hostile}},
		{Type: ops.EventPlan, Time: t0, Operation: "restart", Cluster: "db", Plan: &ops.PlanView{Operation: "restart", Cluster: "db", Namespace: "prod",
			Notes: []string{"note " + hostile}, Steps: []ops.StepView{{Index: 1, ID: step.ID, Target: step.Target, Description: step.Description,
				Preconditions: []string{"pre " + hostile}, Details: []string{"> " + hostile}}}}},
		{Type: ops.EventStepStarted, Time: t0, Step: step, Message: "msg " + hostile},
		{Type: ops.EventStepWaiting, Time: t0, Step: step, Reason: "wait " + hostile},
		{Type: ops.EventPods, Time: t0, Pods: []ops.PodSummary{{Name: "db-0", Group: "g" + hostile, Phase: "Running", Node: "n" + hostile, Zone: "z" + hostile}}},
		{Type: ops.EventWarning, Time: t0, Message: "warn " + hostile},
		{Type: ops.EventStepFailed, Time: t0, Step: step, Error: "boom " + hostile},
		{Type: ops.EventDone, Time: t0, Outcome: ops.OutcomeFailed, Error: "boom " + hostile, Resume: "re-run: " + hostile},
	}
}

// assertNoRaw fails on a character a terminal would act on, ignoring the
// view's own colour sequences (ESC followed by '[' and digits, ';', 'm').
func assertNoRaw(t *testing.T, what, out string) {
	t.Helper()
	for _, bad := range []string{"\x1b[2J", "\r", "\u202e", "\u009b", "\x7f"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s holds raw %q:\n%s", what, bad, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "2026-11-22T07:20:01Z done: succeeded") {
			t.Errorf("%s has a forged line: %q", what, line)
		}
	}
}

// TestHostileStringsEscapedInEveryView: the TUI, the plain lines and the
// NDJSON stream never print a control character from event text raw.
func TestHostileStringsEscapedInEveryView(t *testing.T) {
	events := hostileEvents()
	t.Run("tui", func(t *testing.T) {
		for _, color := range []bool{false, true} {
			m, _ := newTestModel(Options{NoColor: !color})
			m, _ = feed(t, m, tea.WindowSizeMsg{Width: 200, Height: 60})
			// Without the done event the view still shows every row.
			m, _ = feed(t, m, eventMsgs(events[:len(events)-1])...)
			view := m.View()
			assertNoRaw(t, "TUI view", view)
			if !strings.Contains(view, `\x1b[2J`) {
				t.Errorf("TUI view does not show the escaped text:\n%s", view)
			}
			m, _ = feed(t, m, EventMsg(events[len(events)-1]))
			assertNoRaw(t, "TUI final view", m.View())
		}
	})
	t.Run("plain", func(t *testing.T) {
		var b bytes.Buffer
		p := NewPlain(&b, PlainOptions{})
		for _, e := range events {
			p.Emit(e)
		}
		assertNoRaw(t, "plain", b.String())
		if !strings.Contains(b.String(), `re-run: x\x1b[2J\r\n2026-11-22T07:20:01Z done: succeeded\u202e\x9b31m\x7f`) {
			t.Errorf("plain output does not show the escaped resume hint:\n%s", b.String())
		}
	})
	t.Run("ndjson", func(t *testing.T) {
		var b bytes.Buffer
		j := NewJSON(&b)
		for _, e := range events {
			j.Emit(e)
		}
		assertNoRaw(t, "NDJSON", b.String())
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if len(lines) != len(events) {
			t.Fatalf("%d lines for %d events", len(lines), len(events))
		}
		var last ops.Event
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
			t.Fatal(err)
		}
		// Escaping is JSON's own: a consumer decodes the original text.
		if last.Resume != "re-run: "+hostile {
			t.Errorf("decoded resume = %q", last.Resume)
		}
	})
}
