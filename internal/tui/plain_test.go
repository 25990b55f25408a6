package tui

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func TestPlainGolden(t *testing.T) {
	var buf bytes.Buffer
	p := NewPlain(&buf, PlainOptions{})
	for _, e := range fixtureEvents() {
		p.Emit(e)
	}
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "plain.golden", buf.Bytes())
}

func TestPlainClockAndFormat(t *testing.T) {
	fixed := time.Date(2026, 11, 22, 9, 30, 0, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		name   string
		opts   PlainOptions
		event  ops.Event
		prefix string
	}{
		{
			name:   "event time wins, rendered in UTC",
			opts:   PlainOptions{Now: func() time.Time { return fixed }},
			event:  ops.Event{Type: ops.EventWarning, Time: time.Date(2026, 11, 22, 8, 0, 0, 0, time.FixedZone("CET", 3600)), Message: "x"},
			prefix: "2026-11-22T07:00:00Z WARNING: x\n",
		},
		{
			name:   "clock stamps events without time",
			opts:   PlainOptions{Now: func() time.Time { return fixed }},
			event:  ops.Event{Type: ops.EventWarning, Message: "x"},
			prefix: "2026-11-22T08:30:00Z WARNING: x\n",
		},
		{
			name:   "custom format",
			opts:   PlainOptions{Now: func() time.Time { return fixed }, TimeFormat: time.TimeOnly},
			event:  ops.Event{Type: ops.EventWarning, Message: "x"},
			prefix: "08:30:00 WARNING: x\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			NewPlain(&buf, tt.opts).Emit(tt.event)
			if got := buf.String(); got != tt.prefix {
				t.Errorf("got %q, want %q", got, tt.prefix)
			}
		})
	}
}

func TestPlainLines(t *testing.T) {
	step := &ops.StepRef{Index: 2, Total: 6, ID: "restart/web-1", Target: "pod/web-1", Description: "restart pod"}
	exp := time.Date(2026, 11, 22, 7, 6, 0, 0, time.UTC)
	// The reason is what the requester typed: escaped, never sent to the terminal raw.
	pauseReq := &ops.ControlRequest{Action: ops.ControlPause, By: "bob@ci", At: exp, Reason: "lag \x1b[31mred"}
	tests := []struct {
		name  string
		event ops.Event
		want  string
	}{
		{"waiting", ops.Event{Type: ops.EventStepWaiting, Step: step, Reason: "new pod Ready (UID changed)"},
			"[2/6] pod/web-1 waiting: new pod Ready (UID changed)"},
		{"progress", ops.Event{Type: ops.EventStepProgress, Step: step, Progress: &ops.Progress{Done: 12, Total: 40, Unit: "shards"}},
			"[2/6] pod/web-1 12/40 shards"},
		{"failed", ops.Event{Type: ops.EventStepFailed, Step: step, Error: "boom\nsecond line"},
			`[2/6] pod/web-1 restart pod: FAILED: boom\nsecond line`},
		{"lock acquired", ops.Event{Type: ops.EventLock, Lock: &ops.LockInfo{Action: ops.LockAcquired, Holder: "bob@ci", Operation: "scale", Expires: exp}},
			"lock acquired by bob@ci for scale, expires 2026-11-22T07:06:00Z"},
		{"lock extended", ops.Event{Type: ops.EventLock, Lock: &ops.LockInfo{Action: ops.LockExtended, Holder: "bob@ci", Expires: exp}},
			"lock extended by bob@ci, expires 2026-11-22T07:06:00Z"},
		{"lock renewed", ops.Event{Type: ops.EventLock, Lock: &ops.LockInfo{Action: ops.LockRenewed, Holder: "bob@ci", Expires: exp}},
			"lock renewed, expires 2026-11-22T07:06:00Z"},
		{"lock released", ops.Event{Type: ops.EventLock, Lock: &ops.LockInfo{Action: ops.LockReleased, Holder: "bob@ci", Expires: exp}},
			"lock released"},
		{"lock disabled", ops.Event{Type: ops.EventLock, Lock: &ops.LockInfo{Action: ops.LockDisabled}, Message: "--no-lock"},
			"lock disabled: --no-lock"},
		{"done succeeded", ops.Event{Type: ops.EventDone, Outcome: ops.OutcomeSucceeded, Elapsed: 2*time.Minute + 3400*time.Millisecond},
			"done: succeeded in 2m3s"},
		{"done failed", ops.Event{Type: ops.EventDone, Outcome: ops.OutcomeFailed, Elapsed: 800 * time.Millisecond, Error: "precondition not met"},
			"done: failed after 800ms: precondition not met"},
		{"warning with step", ops.Event{Type: ops.EventWarning, Step: step, Message: "slow"},
			"WARNING: [2/6] pod/web-1 restart pod: slow"},
		{"paused", ops.Event{Type: ops.EventControl, Control: pauseReq, Message: pauseReq.Describe()},
			`PAUSE: paused by bob@ci at 2026-11-22T07:06:00Z: lag \x1b[31mred`},
		{"continued", ops.Event{Type: ops.EventControl, Control: &ops.ControlRequest{Action: ops.ControlContinue, By: "bob@ci", At: exp}, Message: "continued by bob@ci at 2026-11-22T07:06:00Z"},
			"CONTINUE: continued by bob@ci at 2026-11-22T07:06:00Z"},
		{"unknown type", ops.Event{Type: "rebalance", Message: "new"}, "rebalance: new"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			NewPlain(&buf, PlainOptions{Now: func() time.Time { return t0 }}).Emit(tt.event)
			want := "2026-11-22T07:01:00Z " + tt.want + "\n"
			if buf.String() != want {
				t.Errorf("got  %q\nwant %q", buf.String(), want)
			}
		})
	}
}

func TestPlainThrottle(t *testing.T) {
	a := &ops.StepRef{Index: 1, Total: 2, ID: "a", Target: "pod/a"}
	b := &ops.StepRef{Index: 2, Total: 2, ID: "b", Target: "pod/b"}
	wait := func(s *ops.StepRef, r string) ops.Event {
		return ops.Event{Type: ops.EventStepWaiting, Step: s, Reason: r}
	}
	var buf bytes.Buffer
	p := NewPlain(&buf, PlainOptions{Now: func() time.Time { return t0 }, TimeFormat: "-"})
	for _, e := range []ops.Event{
		wait(a, "ready"), wait(a, "ready"), // repeat: dropped
		wait(b, "ready"),                    // other step: printed
		wait(a, "ready"),                    // still the same for a: dropped
		wait(a, "health"), wait(a, "ready"), // changed twice: both printed
		{Type: ops.EventStepDone, Step: a},
		{Type: ops.EventStepStarted, Step: a}, wait(a, "ready"), // a re-run starts afresh
	} {
		p.Emit(e)
	}
	want := strings.Join([]string{
		"- [1/2] pod/a waiting: ready",
		"- [2/2] pod/b waiting: ready",
		"- [1/2] pod/a waiting: health",
		"- [1/2] pod/a waiting: ready",
		"- [1/2] pod/a: done",
		"- [1/2] pod/a: started",
		"- [1/2] pod/a waiting: ready",
	}, "\n") + "\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestPlainPodsSummary(t *testing.T) {
	var buf bytes.Buffer
	p := NewPlain(&buf, PlainOptions{TimeFormat: "-"})
	many := make([]ops.PodSummary, 8)
	for i := range many {
		many[i] = ops.PodSummary{Name: string(rune('a' + i))}
	}
	for _, pods := range [][]ops.PodSummary{
		fixturePods(), fixturePods(), // unchanged: one line
		fixturePods("crate-data-1"),
		fixturePods("crate-data-1"), // phase-only changes do not count
		many,
	} {
		p.Emit(ops.Event{Type: ops.EventPods, Pods: pods})
	}
	want := "- pods: 4/4 ready\n" +
		"- pods: 3/4 ready, not ready: crate-data-1\n" +
		"- pods: 0/8 ready, not ready: a, b, c, d, e (+3 more)\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(b []byte) (int, error) {
	w.n++
	return 0, errors.New("broken pipe")
}

func TestPlainStopsAfterWriteError(t *testing.T) {
	w := &failingWriter{}
	p := NewPlain(w, PlainOptions{})
	p.Emit(ops.Event{Type: ops.EventWarning, Message: "a"})
	p.Emit(ops.Event{Type: ops.EventWarning, Message: "b"})
	if p.Err() == nil || w.n != 1 {
		t.Fatalf("err=%v writes=%d; want the first error and no further writes", p.Err(), w.n)
	}
}

// TestPlainConcurrent is meant for -race: lock renewal emits from its own
// goroutine.
func TestPlainConcurrent(t *testing.T) {
	var buf bytes.Buffer
	p := NewPlain(&buf, PlainOptions{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				p.Emit(ops.Event{Type: ops.EventStepWaiting, Step: &ops.StepRef{Index: i + 1, ID: string(rune('a' + i))}, Reason: string(rune('a' + j%3))})
			}
		})
	}
	wg.Wait()
	if n := strings.Count(buf.String(), "\n"); n != 8*50 {
		t.Errorf("got %d lines, want %d", n, 8*50)
	}
}
