package ops

import (
	"context"
	"errors"
	"testing"
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
	// The wait is a timer on the context: cancelling ends it at once.
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(ErrInterrupted)
	start := time.Now()
	err := Pacing{Between: time.Hour}.Pace(ctx, 1, step, emit)
	if !errors.Is(err, ErrInterrupted) || time.Since(start) > 10*time.Second {
		t.Errorf("cancelled wait: %v after %s", err, time.Since(start))
	}
}
