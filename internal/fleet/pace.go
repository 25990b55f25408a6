package fleet

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Pacing is how a fleet's targets run: the first Canary targets one at a time (each must
// succeed before anything else starts), then at most MaxParallel at once; with FailFast a
// failure starts no new target and asks the running ones to stop at their next batch boundary.
// PauseBetween spaces out the starts of consecutive targets.
type Pacing struct {
	MaxParallel  int
	Canary       int
	FailFast     bool
	PauseBetween time.Duration
	// After is the pause's timer (nil: time's); tests give a clock of their own.
	After func(time.Duration) <-chan time.Time
}

// Validate checks the pacing against the number of targets (usage errors, nothing run).
func (p Pacing) Validate(targets int) error {
	if p.MaxParallel < 1 {
		return ops.Usagef("--max-parallel must be at least 1 (got %d)", p.MaxParallel)
	}
	if p.Canary < 0 {
		return ops.Usagef("--canary must not be negative (got %d)", p.Canary)
	}
	if p.Canary > targets {
		return ops.Usagef("--canary %d is more than the fleet's %d target(s)", p.Canary, targets)
	}
	if p.PauseBetween < 0 {
		return ops.Usagef("--pause-between-clusters must not be negative (got %s)", p.PauseBetween)
	}
	return nil
}

// RunFunc runs one target's normal single-cluster procedure. stop is closed when the fleet
// wants running targets to end at their next batch boundary (the executor's Stop).
type RunFunc func(ctx context.Context, t Target, stop <-chan struct{}) error

// Result is how one target ended.
type Result struct {
	Target   Target
	Started  bool
	Err      error
	Duration time.Duration
	// Canary: the target ran in the canary phase.
	Canary bool
}

// Outcomes of a target in the summary.
const (
	OutcomeSucceeded  = "succeeded"
	OutcomeFailed     = "failed"
	OutcomeSkipped    = "skipped"
	OutcomeStopped    = "stopped"
	OutcomeNotStarted = "not-started"
	// OutcomeInterrupted: Ctrl-C or SIGTERM stopped the target; its journal is kept and its
	// action in flight was finished (ops.Executor), so resume continues it.
	OutcomeInterrupted = ops.OutcomeInterrupted
)

// Outcome is the summary's word for r.
func (r Result) Outcome() string {
	switch {
	case !r.Started:
		return OutcomeNotStarted
	case r.Err == nil:
		return OutcomeSucceeded
	case Skippable(r.Err):
		return OutcomeSkipped
	case errors.Is(r.Err, ops.ErrAborted), errors.Is(r.Err, ops.ErrPaused):
		return OutcomeStopped
	case errors.Is(r.Err, ops.ErrInterrupted):
		return OutcomeInterrupted
	default:
		return OutcomeFailed
	}
}

// Reason is r's reason code ("" when it succeeded, or never started for want of a failure
// elsewhere).
func (r Result) Reason() string {
	if r.Err == nil {
		return ""
	}
	return ops.ReasonOf(r.Err)
}

// Skippable errors are a target someone else holds (its lock, or a deny of our ID): reported
// and skipped, never waited on, and no reason to stop the other targets.
func Skippable(err error) bool { return errors.Is(err, ops.ErrLocked) }

// Run runs every target with run, paced by p, and returns the results in the targets' order.
// It returns once every started target has returned. A cancelled ctx starts no new target.
func Run(ctx context.Context, ts []Target, p Pacing, run RunFunc) []Result {
	res := make([]Result, len(ts))
	for i := range ts {
		res[i].Target = ts[i]
		res[i].Canary = i < p.Canary
	}
	stop := make(chan struct{})
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }) }
	halted := func() bool {
		select {
		case <-stop:
			return true
		default:
			return ctx.Err() != nil
		}
	}
	one := func(i int) {
		t0 := time.Now()
		err := run(ctx, ts[i], stop)
		res[i].Err, res[i].Duration = err, time.Since(t0)
		// A canary must succeed, whatever --fail-fast says; a skipped target (held by
		// someone else) stops nothing.
		if err != nil && !Skippable(err) && (i < p.Canary || p.FailFast) {
			halt()
		}
	}
	started := 0
	// pause waits PauseBetween before every start but the first; false: stop starting.
	pause := func() bool {
		if started > 0 && p.PauseBetween > 0 {
			var elapsed <-chan time.Time
			if p.After != nil {
				elapsed = p.After(p.PauseBetween)
			} else {
				t := time.NewTimer(p.PauseBetween)
				defer t.Stop()
				elapsed = t.C
			}
			select {
			case <-elapsed:
			case <-stop:
			case <-ctx.Done():
			}
		}
		return !halted()
	}
	for i := 0; i < p.Canary && i < len(ts); i++ {
		if !pause() {
			notStartedBy(ctx, res)
			return res
		}
		started++
		res[i].Started = true
		one(i)
	}
	limit := max(p.MaxParallel, 1)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := p.Canary; i < len(ts); i++ {
		select {
		case sem <- struct{}{}:
		case <-stop:
		case <-ctx.Done():
		}
		if !pause() {
			break
		}
		started++
		res[i].Started = true
		wg.Go(func() {
			defer func() { <-sem }()
			one(i)
		})
	}
	wg.Wait()
	notStartedBy(ctx, res)
	return res
}

// notStartedBy gives the targets a cancelled ctx kept from starting its error (Ctrl-C:
// interrupted), so that a fleet interrupted before a target ran does not exit 0 as if nothing
// had been asked of it. They stay not-started.
func notStartedBy(ctx context.Context, res []Result) {
	if ctx.Err() == nil {
		return
	}
	kind, reason := ops.ErrInterrupted, ops.ReasonInterrupted
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		kind, reason = ops.ErrTimeout, ops.ReasonTimeout
	}
	for i := range res {
		if !res[i].Started {
			res[i].Err = &ops.CodedError{Kind: kind, Msg: kind.Error() + " before it started", Reason: reason}
		}
	}
}

// exitRank orders exit codes from best to worst, for the fleet's exit code (README "Fleets"):
// succeeded, stopped at a boundary (paused or aborted), skipped because locked, refused by a
// precondition, forbidden, timed out, failed, bad input, interrupted.
var exitRank = []int{ops.ExitOK, ops.ExitPaused, ops.ExitLocked, ops.ExitPrecondition, ops.ExitForbidden,
	ops.ExitTimeout, ops.ExitFailed, ops.ExitUsage, ops.ExitInterrupted}

// WorstExit is the exit code of a fleet run: the worst of its targets' (exitRank); targets
// that never started add nothing (the failure that stopped them is counted), unless an
// interrupt kept them from starting (notStartedBy).
func WorstExit(rs []Result) int {
	worst, rank := ops.ExitOK, 0
	for _, r := range rs {
		if r.Err == nil {
			continue
		}
		c := ops.ExitCode(r.Err)
		k := slices.Index(exitRank, c)
		if k < 0 {
			k = slices.Index(exitRank, ops.ExitFailed)
		}
		if k > rank {
			worst, rank = c, k
		}
	}
	return worst
}
