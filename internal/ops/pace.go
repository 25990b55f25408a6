package ops

import (
	"context"
	"fmt"
	"time"
)

// Pausing at a point the user asked for (--pause-after) is its own ending:
// not a failure, not finished. The journal is kept for the resume.
const (
	ExitPaused    = 7
	OutcomePaused = "paused"
	JournalPaused = "paused"
)

// ErrPaused is the kind of the error a run stopped by --pause-after ends with.
var ErrPaused = fmt.Errorf("paused as asked")

// Pacing spaces a run's steps out for a human check between them, like
// kubectl-fdb's pacing of its operations: wait Between before each step this
// run executes after its first, and stop cleanly once After steps ran in
// this run (0 = no limit). Steps an earlier run did do not count.
type Pacing struct {
	Between time.Duration
	After   int
	// Resume is the command that continues the run, for the pause message.
	Resume string
	// Stop, when closed, ends the run cleanly before its next step (a batch boundary), as
	// After does: a fleet whose other target failed with --fail-fast (internal/fleet).
	Stop <-chan struct{}
}

// Pace is the Executor hook: called before each step this run is about to
// execute, with how many it has executed so far. It waits on a timer bound
// to ctx (Ctrl-C and --timeout end the wait at once) and reports the wait as
// a warning event.
func (p Pacing) Pace(ctx context.Context, ran int, s *Step, emit func(Event)) error {
	select {
	case <-p.Stop:
		return &CodedError{Kind: ErrPaused, Msg: fmt.Sprintf("stopped before %s: the fleet stops (another target failed); the journal is kept", s.Target)}
	default:
	}
	if p.After > 0 && ran >= p.After {
		return &CodedError{Kind: ErrPaused, Msg: fmt.Sprintf("paused after %d step(s) as asked (--pause-after %d); the journal is kept", ran, p.After)}
	}
	if p.Between <= 0 || ran == 0 {
		return nil
	}
	emit(Event{Type: EventWarning, Message: fmt.Sprintf("pausing %s before %s (--pause-between)", p.Between, s.Target)})
	t := time.NewTimer(p.Between)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
