package tui

import (
	"bytes"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func fixtureBlocked() *ops.Blocked {
	return &ops.Blocked{Kind: ops.BlockedPod, On: "pod prod/crate-data-1", Since: at(98 * time.Second),
		GiveUpAt: at(30 * time.Minute), ToUnblock: "kubectl describe pod -n prod crate-data-1"}
}

// The running step shows what it is blocked on, since when, when it gives up and how to
// unblock it; the header shows the ETA.
func TestModelBlockedAndETA(t *testing.T) {
	m, clk := newTestModel(Options{NoColor: true, Abort: func() {}})
	events := upTo(t, ops.EventStepStarted, 3)
	events[len(events)-1].ETA = &ops.ETA{Low: 40 * time.Second, High: 70 * time.Second}
	b := fixtureBlocked()
	b.Stalled = "no progress: running 2m0s, longer than the slowest of 1 finished step(s) (1m33s)"
	wait := ops.Event{Type: ops.EventStepWaiting, Step: fixtureRef(3), Reason: "new pod Ready (UID changed)", Time: at(98 * time.Second), Blocked: b}
	clk.t = at(110 * time.Second)
	m, _ = feed(t, m, append([]tea.Msg{tea.WindowSizeMsg{Width: 160, Height: 50}}, append(eventMsgs(events), EventMsg(wait))...)...)
	assertContains(t, m.View(),
		"ETA 40s–1m10s",
		"blocked on: pod prod/crate-data-1 · since 07:02:38 (12s) · gives up at 07:31:00 UTC",
		"to unblock: kubectl describe pod -n prod crate-data-1",
		"no progress: running 2m0s, longer than the slowest",
	)
	// The next step starts afresh.
	m, _ = feed(t, m, EventMsg{Type: ops.EventStepStarted, Step: fixtureRef(4), ETA: &ops.ETA{Unknown: "x"}})
	assertNotContains(t, m.View(), "blocked on:")
	assertContains(t, m.View(), "ETA unknown")
}

// The plain view prints an unchanged blocked-on line at most every 10 s, and at once when it
// changes.
func TestPlainBlockedThrottle(t *testing.T) {
	var buf bytes.Buffer
	p := NewPlain(&buf, PlainOptions{TimeFormat: time.TimeOnly})
	wait := func(d time.Duration, on string) {
		b := fixtureBlocked()
		b.On = on
		p.Emit(ops.Event{Type: ops.EventStepWaiting, Step: fixtureRef(3), Reason: "not Ready", Time: at(d), Blocked: b})
	}
	p.Emit(ops.Event{Type: ops.EventStepStarted, Step: fixtureRef(3), Time: at(0)})
	for _, d := range []time.Duration{1, 3, 5, 10, 11, 13} {
		wait(d*time.Second, "pod prod/crate-data-1")
	}
	wait(14*time.Second, "member crate-data-1")
	wait(15*time.Second, "member crate-data-1")
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n")[1:] {
		got = append(got, strings.Fields(l)[0])
	}
	want := []string{"07:01:01", "07:01:11", "07:01:14"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("printed:\n%s\nwant lines at %v", buf.String(), want)
	}
	if !strings.Contains(buf.String(), "waiting 1s: not Ready: blocked on pod prod/crate-data-1 since 07:02:38, gives up at 07:31:00 UTC; to unblock: kubectl describe pod -n prod crate-data-1") {
		t.Errorf("no blocked-on text:\n%s", buf.String())
	}
}

// NDJSON carries the blocker and the ETA as typed fields.
func TestJSONBlockedAndETA(t *testing.T) {
	var buf bytes.Buffer
	NewJSON(&buf).Emit(ops.Event{Type: ops.EventStepWaiting, Step: fixtureRef(3), Time: at(time.Minute), Blocked: fixtureBlocked(),
		ETA: &ops.ETA{At: at(time.Minute), Low: time.Minute, High: 2 * time.Minute}})
	for _, want := range []string{
		`"blocked":{"kind":"pod","on":"pod prod/crate-data-1","since":"2026-11-22T07:02:38Z","giveUpAt":"2026-11-22T07:31:00Z","toUnblock":"kubectl describe pod -n prod crate-data-1"}`,
		`"eta":{"at":"2026-11-22T07:02:00Z","lowNs":60000000000,"highNs":120000000000}`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("ndjson:\n%s\nwant %s", buf.String(), want)
		}
	}
}

// A step that moves data: its blocked-on line carries the run's ETA with the step's part from
// the rate the data moves at.
func TestPlainBlockedWithRateETA(t *testing.T) {
	var buf bytes.Buffer
	p := NewPlain(&buf, PlainOptions{TimeFormat: time.TimeOnly})
	step := &ops.ETA{At: at(time.Minute), Low: 4 * time.Second, High: 8 * time.Second, Basis: "819.2 MiB left at 102.4 MiB/s–204.8 MiB/s over 3 readings since 07:00:58"}
	p.Emit(ops.Event{Type: ops.EventStepWaiting, Step: fixtureRef(3), Reason: "the exclusion of storage-10: 819.2 MiB left to move", Time: at(time.Minute),
		Blocked: fixtureBlocked(), ETA: &ops.ETA{At: at(time.Minute), Low: 4 * time.Second, High: 8 * time.Second, Basis: "this step: " + step.Basis, Step: step}})
	want := "; ETA 4s–8s (this step: 819.2 MiB left at 102.4 MiB/s–204.8 MiB/s over 3 readings since 07:00:58)"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("plain:\n%s\nwant %s", buf.String(), want)
	}
}
