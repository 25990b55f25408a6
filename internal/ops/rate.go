package ops

import (
	"fmt"
	"time"
)

// Units of what a data-moving step still has to move (StepContext.Remaining).
const (
	UnitBytes   = "bytes"
	UnitEntries = "raft entries"
	UnitShards  = "shards"
)

// RateSample is how much a step had left to move at a time, read from the database.
type RateSample struct {
	At   time.Time
	Left int64
}

// maxRateSamples bounds the samples a step keeps: the rate of the last ones is the one that
// holds now (a drain slows down as the last, largest shards move).
const maxRateSamples = 16

// addRateSample appends s to samples (oldest first). A reading taken at the same time as the
// last replaces it; a run of equal readings keeps only its first and its latest (databases
// update their figures every few seconds, and a poll faster than that must not push the
// readings that moved out of the window). More left than at the window's first reading is
// new work the old readings say nothing about (a process reporting late, a new recovery):
// the measurement starts over. A smaller rise is kept, and slows the average.
func addRateSample(samples []RateSample, s RateSample) []RateSample {
	if n := len(samples); n > 0 {
		switch {
		case s.Left > samples[0].Left:
			samples = samples[:0]
		case !s.At.After(samples[n-1].At):
			samples = samples[:n-1]
		case n >= 2 && samples[n-1].Left == s.Left && samples[n-2].Left == s.Left:
			samples = samples[:n-1]
		}
	}
	samples = append(samples, s)
	if len(samples) > maxRateSamples {
		samples = append(samples[:0], samples[len(samples)-maxRateSamples:]...)
	}
	return samples
}

// RateEstimate is the remaining time of a step that moves data, from samples (oldest first,
// unit as the Unit* constants): what is left now divided by the rate it shrank at, as a
// range. The rates are taken between readings where the figure changed, each from the
// previous change (a figure that updates every few seconds would otherwise read as a burst
// over the last poll interval). Low is at the fastest such rate; high at the slower of the
// slowest one and the average since the first reading, which counts stalls and rises, plus
// every, the longest time between two readings of the wait: the step ends when a reading
// sees nothing left, up to that long after it is so (without it the FDB exclusion in
// test/e2e/eta_test.go ended just past the high end). Unknown until two readings show some
// of it moved.
func RateEstimate(now time.Time, samples []RateSample, unit string, every time.Duration) *ETA {
	eta := &ETA{At: now}
	if len(samples) == 0 {
		eta.Unknown = "nothing measured yet"
		return eta
	}
	first, last := samples[0], samples[len(samples)-1]
	if last.Left <= 0 {
		return eta
	}
	if len(samples) < 2 {
		eta.Unknown = fmt.Sprintf("%s left, one reading so far: a rate needs two", amount(last.Left, unit))
		return eta
	}
	moved := first.Left - last.Left
	took := last.At.Sub(first.At)
	if moved <= 0 || took <= 0 {
		eta.Unknown = fmt.Sprintf("%s left, none moved since %s", amount(last.Left, unit), first.At.UTC().Format("15:04:05"))
		return eta
	}
	avg := float64(moved) / took.Seconds()
	fastest, slowest := avg, avg
	prev := first
	for _, s := range samples[1:] {
		if s.Left == prev.Left {
			continue
		}
		d, dt := prev.Left-s.Left, s.At.Sub(prev.At).Seconds()
		prev = s
		if d <= 0 || dt <= 0 {
			continue
		}
		r := float64(d) / dt
		fastest, slowest = max(fastest, r), min(slowest, r)
	}
	left := float64(last.Left)
	eta.Low = time.Duration(left / fastest * float64(time.Second))
	eta.High = time.Duration(left/slowest*float64(time.Second)) + every
	eta.Basis = fmt.Sprintf("%s left at %s over %d readings since %s", amount(last.Left, unit),
		rateRange(slowest, fastest, unit), len(samples), first.At.UTC().Format("15:04:05"))
	if every > 0 {
		eta.Basis += ", read every " + roundETA(every).String() + " at most"
	}
	return eta
}

func amount(n int64, unit string) string {
	if unit == UnitBytes {
		return FormatBytes(n)
	}
	return fmt.Sprintf("%d %s", n, unit)
}

// rateRange is "10.0–12.0 MiB/s", or one rate when both read the same.
func rateRange(slow, fast float64, unit string) string {
	a, b := fmt.Sprintf("%.1f", slow), fmt.Sprintf("%.1f", fast)
	if unit == UnitBytes {
		a, b, unit = FormatBytes(int64(slow)), FormatBytes(int64(fast)), ""
	}
	r := a
	if a != b {
		if unit == "" {
			r += "/s"
		}
		r += "–" + b
	}
	if unit == "" {
		return r + "/s"
	}
	return r + " " + unit + "/s"
}

// Remaining notes how much the step still has to move (bytes to relocate, raft entries a
// learner is behind), as read from the database now; the step's next Block publishes the
// run's ETA with this step's part from the rate it shrinks at (RateEstimate).
func (sc *StepContext) Remaining(left int64, unit string) {
	if sc == nil || sc.exec == nil {
		return
	}
	sc.blockMu.Lock()
	defer sc.blockMu.Unlock()
	if unit != sc.rateUnit {
		sc.rateUnit, sc.rate, sc.rateEvery = unit, nil, 0
	}
	now := sc.exec.Clock.Now()
	if n := len(sc.rate); n > 0 {
		// The last sample is always the latest reading (addRateSample replaces, never drops it).
		sc.rateEvery = max(sc.rateEvery, now.Sub(sc.rate[n-1].At))
	}
	sc.rate = addRateSample(sc.rate, RateSample{At: now, Left: left})
}

// waitingETA is the run's ETA while step sc moves data: this step's part from its rate
// (RateEstimate), the steps after it from this run's step times (Estimate). Nil when the
// step reported nothing left to move. Called with sc.blockMu held.
func (e *Executor) waitingETA(sc *StepContext) *ETA {
	if len(sc.rate) == 0 {
		return nil
	}
	now := e.Clock.Now()
	step := RateEstimate(now, sc.rate, sc.rateUnit, sc.rateEvery)
	e.mu.Lock()
	rest := e.estimate(sc.journal, sc.Ref.Index, 0, nil)
	e.mu.Unlock()
	return combineETA(now, step, rest)
}

// combineETA adds the rest of the run's estimate to the running step's own.
func combineETA(now time.Time, step, rest *ETA) *ETA {
	eta := &ETA{At: now, Step: step}
	switch {
	case step.Unknown != "":
		eta.Unknown = "this step: " + step.Unknown
	case rest.Unknown != "":
		eta.Unknown = "the steps after this one: " + rest.Unknown
	default:
		eta.Low, eta.High = step.Low+rest.Low, step.High+rest.High
		eta.Basis = "this step: " + step.Basis
		if rest.Basis != "" {
			eta.Basis += "; then " + rest.Basis
		}
	}
	return eta
}
