package ops

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestPacing(t *testing.T) {
	step := &Step{Target: "pod/x-1"}
	var events []Event
	emit := func(e Event) { events = append(events, e) }
	tests := []struct {
		name   string
		p      Pacing
		ran    int
		want   int // exit code
		events int
	}{
		{"none", Pacing{}, 3, ExitOK, 0},
		{"after not reached", Pacing{After: 2}, 1, ExitOK, 0},
		{"after reached", Pacing{After: 2}, 2, ExitPaused, 0},
		{"between first step", Pacing{Between: time.Hour}, 0, ExitOK, 0},
		{"between", Pacing{Between: time.Millisecond}, 1, ExitOK, 1},
		{"stop open", Pacing{Stop: make(chan struct{})}, 1, ExitOK, 0},
		{"stop closed before the first step", Pacing{Stop: closedChan()}, 0, ExitPaused, 0},
		{"stop closed", Pacing{Stop: closedChan(), Between: time.Hour}, 2, ExitPaused, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events = nil
			err := tt.p.Pace(t.Context(), tt.ran, step, emit)
			if ExitCode(err) != tt.want || len(events) != tt.events {
				t.Errorf("err %v (exit %d), %d events", err, ExitCode(err), len(events))
			}
		})
	}
	// The wait is a timer on the context: cancelling ends it at once. In a synctest bubble the
	// clock moves only when every goroutine waits, so "at once" is exactly zero time, not a
	// bound on wall time.
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(ErrInterrupted)
		start := time.Now()
		err := Pacing{Between: time.Hour}.Pace(ctx, 1, step, emit)
		if d := time.Since(start); !errors.Is(err, ErrInterrupted) || d != 0 {
			t.Errorf("cancelled wait: %v after %s, want ErrInterrupted at once", err, d)
		}
		// Cancelled while it waits: it returns then, not after the hour.
		ctx, cancel = context.WithCancelCause(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- Pacing{Between: time.Hour}.Pace(ctx, 1, step, emit) }()
		time.Sleep(time.Minute) // fake time: the pause is under way
		cancel(ErrInterrupted)
		err = <-errc
		if d := time.Since(start); !errors.Is(err, ErrInterrupted) || d != time.Minute {
			t.Errorf("wait cancelled after a minute: %v after %s", err, d)
		}
	})
}

func closedChan() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
