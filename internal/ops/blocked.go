package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kinds of object a step can be blocked on (Blocked.Kind).
const (
	BlockedPod      = "pod"
	BlockedShard    = "shard"
	BlockedMember   = "member"
	BlockedProcess  = "process"
	BlockedZone     = "zone"
	BlockedLease    = "lease"
	BlockedOperator = "operator"
	BlockedCluster  = "cluster"
)

// Blocked is what a waiting step is blocked on, published on its waiting events and in the
// journal on the Lease, so `status` in another terminal shows it.
type Blocked struct {
	// Kind is one of the Blocked* kinds; On names the object ("pod prod/web-1", "zone z2").
	Kind string `json:"kind"`
	On   string `json:"on"`
	// Since is when the step became blocked on this object.
	Since time.Time `json:"since"`
	// GiveUpAt is the step's deadline (the run's --timeout); zero without one.
	GiveUpAt time.Time `json:"giveUpAt,omitzero"`
	// ToUnblock is one sentence or a command that would unblock it.
	ToUnblock string `json:"toUnblock,omitempty"`
	// Stalled is set when the step has run longer than the slowest finished step of its kind
	// in this run.
	Stalled string `json:"stalled,omitempty"`
}

// same reports whether b and o name the same blocker (Since, GiveUpAt and Stalled aside).
func (b *Blocked) same(o *Blocked) bool {
	return b != nil && o != nil && b.Kind == o.Kind && b.On == o.On && b.ToUnblock == o.ToUnblock
}

// String is the one-line form the views and `status` print.
func (b *Blocked) String() string {
	if b == nil {
		return ""
	}
	s := "blocked on " + b.On
	if !b.Since.IsZero() {
		s += " since " + b.Since.UTC().Format("15:04:05")
	}
	if !b.GiveUpAt.IsZero() {
		s += ", gives up at " + b.GiveUpAt.UTC().Format("15:04:05") + " UTC"
	}
	if b.ToUnblock != "" {
		s += "; to unblock: " + b.ToUnblock
	}
	if b.Stalled != "" {
		s += " (" + b.Stalled + ")"
	}
	return s
}

// blockedWriteEvery bounds how often a changed blocker is written to the Lease: waits poll
// every few seconds and each write is a Lease update other clients see.
const blockedWriteEvery = 5 * time.Second

// Block reports what the step waits for (reason, as Waiting does) and the object it is
// blocked on. Since is kept while the blocker stays the same; GiveUpAt is ctx's deadline.
// The blocker goes to the journal on the Lease when it changed, at most every
// blockedWriteEvery (a pending change goes out with the next call or the next write).
func (sc *StepContext) Block(ctx context.Context, kind, on, toUnblock, reason string) {
	if sc == nil || sc.exec == nil {
		return
	}
	// Waiters of one step may run at once (replace's one per pod).
	sc.blockMu.Lock()
	defer sc.blockMu.Unlock()
	e := sc.exec
	now := e.Clock.Now()
	b := &Blocked{Kind: kind, On: on, ToUnblock: toUnblock, Since: now}
	if sc.blocked.same(b) {
		b.Since = sc.blocked.Since
	}
	// The run's --timeout on the run's clock; a deadline of a wait's own context otherwise.
	if e.Timeout > 0 && !e.start.IsZero() {
		b.GiveUpAt = e.start.Add(e.Timeout).UTC()
	} else if d, ok := ctx.Deadline(); ok {
		b.GiveUpAt = d.UTC()
	}
	b.Stalled = e.stalled(sc, now)
	changed := !sc.blocked.same(b) || (sc.blocked.Stalled == "") != (b.Stalled == "")
	sc.blocked = b
	published := *b
	// A step that moves data publishes the run's ETA with its own part from the rate;
	// a new range is a change the journal gets (status shows it from another terminal).
	eta := e.waitingETA(sc)
	if r := eta.Range(); r != sc.etaRange {
		sc.etaRange = r
		changed = true
	}
	e.emitStep(EventStepWaiting, sc.Ref, func(ev *Event) { ev.Reason, ev.Blocked, ev.ETA = reason, &published, eta })
	if changed {
		sc.blockedDirty = true
	}
	if sc.blockedAt.IsZero() {
		sc.blockedAt = now
	}
	if !sc.blockedDirty || sc.journal == nil {
		return
	}
	jb := *b
	e.mu.Lock()
	sc.journal.Blocked = &jb // goes out with the next write of the journal in any case
	if eta != nil {
		sc.journal.ETA = eta
	}
	// A wait that ends within blockedWriteEvery costs no write; after that a change is
	// written here when the last one is blockedWriteEvery old, else by the lock renewal
	// (flushBlocked), which writes the Lease anyway.
	if now.Sub(sc.blockedAt) < blockedWriteEvery || (!e.lastBlockedWrite.IsZero() && now.Sub(e.lastBlockedWrite) < blockedWriteEvery) {
		e.pendingBlocked, e.pendingETA = &jb, eta
		e.mu.Unlock()
		return
	}
	e.lastBlockedWrite = now
	e.pendingBlocked, e.pendingETA = nil, nil
	err := e.saveLocked(ctx, sc.journal)
	e.mu.Unlock()
	sc.blockedDirty = false
	if err != nil && ctx.Err() == nil {
		e.emit(Event{Type: EventWarning, Message: fmt.Sprintf("could not publish what %s is blocked on: %v", sc.Ref.Target, err)})
	}
}

// flushBlocked writes a blocker Block left pending, on the journal as last written (the
// step's live journal belongs to its goroutine); the lock renewal calls it in place of its
// own write. It reports whether it wrote.
func (e *Executor) flushBlocked(ctx context.Context) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pendingBlocked == nil || e.lastWritten == nil || e.held == nil {
		return false, nil
	}
	j := e.lastWritten.clone()
	j.Blocked = e.pendingBlocked
	if e.pendingETA != nil {
		j.ETA = e.pendingETA
	}
	e.pendingBlocked, e.pendingETA = nil, nil
	e.lastBlockedWrite = e.Clock.Now()
	return true, e.writeLocked(ctx, j, e.held.SaveJournal)
}

// stepKind is the kind of step id: the id without its last path element ("restart/web-1" ->
// "restart"); an id without one is its own kind.
func stepKind(id string) string {
	if i := strings.LastIndex(id, "/"); i > 0 {
		return id[:i]
	}
	return id
}

// stalled says so when step sc has run longer than the slowest finished step of its kind.
func (e *Executor) stalled(sc *StepContext, now time.Time) string {
	if sc.started.IsZero() {
		return ""
	}
	kind := stepKind(sc.Ref.ID)
	e.timesMu.Lock()
	var slowest time.Duration
	n := 0
	for _, t := range e.stepTimes {
		if stepKind(t.Step) == kind {
			slowest = max(slowest, t.Took)
			n++
		}
	}
	e.timesMu.Unlock()
	ran := now.Sub(sc.started)
	if n == 0 || ran <= slowest {
		return ""
	}
	return fmt.Sprintf("no progress: running %s, longer than the slowest of %d finished %s step(s) (%s)",
		ran.Round(time.Second), n, kind, slowest.Round(time.Second))
}

// ETA is the estimate of a run's remaining time, as a range; Unknown says why there is none.
type ETA struct {
	// At is when it was estimated.
	At   time.Time     `json:"at"`
	Low  time.Duration `json:"lowNs,omitempty"`
	High time.Duration `json:"highNs,omitempty"`
	// Basis says what the range rests on; Unknown, when set, why there is no range.
	Basis   string `json:"basis,omitempty"`
	Unknown string `json:"unknown,omitempty"`
	// Step, on the waiting events of a step that moves data, is that step's own remaining
	// time from the rate the data moves at (RateEstimate); the run's range above includes it.
	Step *ETA `json:"step,omitempty"`
}

// Range is the short form: "4m0s–6m0s", or "unknown".
func (t *ETA) Range() string {
	switch {
	case t == nil:
		return ""
	case t.Unknown != "" && t.Step != nil && t.Step.Unknown == "":
		return "unknown; this step " + t.Step.Range()
	case t.Unknown != "":
		return "unknown"
	case t.Low == 0 && t.High == 0:
		return "0s"
	}
	return roundETA(t.Low).String() + "–" + roundETA(t.High).String()
}

// String is the one-line form: "4m0s–6m0s (median ...)" or "unknown (...)".
func (t *ETA) String() string {
	if t == nil {
		return ""
	}
	if t.Unknown != "" {
		s := "unknown (" + t.Unknown + ")"
		if t.Step != nil && t.Step.Unknown == "" {
			s += "; this step " + t.Step.String()
		}
		return s
	}
	s := t.Range()
	if t.Basis != "" && s != "0s" {
		s += " (" + t.Basis + ")"
	}
	return s
}

func roundETA(d time.Duration) time.Duration {
	if d >= 10*time.Minute {
		return d.Round(time.Minute)
	}
	return d.Round(time.Second)
}

// minETASamples is how many finished steps of a kind make evidence: one step's time has no
// spread.
const minETASamples = 2

// Estimate is the remaining time of the steps in remaining (their IDs, the current one first
// when current > 0: how long it has run so far) from finished, this run's finished steps:
// per kind, the median of its times plus and minus their spread (the larger distance from
// the median to the fastest or slowest). Unknown until every kind left has minETASamples.
func Estimate(now time.Time, finished []StepTime, remaining []string, current time.Duration) *ETA {
	eta := &ETA{At: now}
	if len(remaining) == 0 {
		return eta
	}
	byKind := map[string][]time.Duration{}
	for _, t := range finished {
		byKind[stepKind(t.Step)] = append(byKind[stepKind(t.Step)], t.Took)
	}
	count := map[string]int{}
	var kinds []string
	for _, id := range remaining {
		k := stepKind(id)
		if count[k] == 0 {
			kinds = append(kinds, k)
		}
		count[k]++
	}
	var basis []string
	for _, k := range kinds {
		times := slices.Clone(byKind[k])
		if len(times) < minETASamples {
			eta.Unknown = fmt.Sprintf("%d of %d %s step(s) finished in this run, %d needed", len(times), len(times)+count[k], k, minETASamples)
			eta.Low, eta.High = 0, 0
			return eta
		}
		slices.Sort(times)
		med := times[len(times)/2]
		if len(times)%2 == 0 {
			med = (times[len(times)/2-1] + times[len(times)/2]) / 2
		}
		spread := max(med-times[0], times[len(times)-1]-med)
		n := time.Duration(count[k])
		eta.Low += n * (med - spread)
		eta.High += n * (med + spread)
		basis = append(basis, fmt.Sprintf("%d %s step(s) left, median %s ± %s of %d", count[k], k, med.Round(time.Second), spread.Round(time.Second), len(times)))
	}
	eta.Low = max(0, eta.Low-current)
	eta.High = max(0, eta.High-current)
	eta.Basis = strings.Join(basis, "; ")
	return eta
}

// estimate is the run's ETA with the steps from index from (0-based) on left, the first of
// them running for current.
func (e *Executor) estimate(j *Journal, from int, current time.Duration, extra *StepTime) *ETA {
	var remaining []string
	for _, s := range e.plan.Steps[min(from, len(e.plan.Steps)):] {
		if j == nil || !j.IsDone(s.ID) {
			remaining = append(remaining, s.ID)
		}
	}
	e.timesMu.Lock()
	finished := slices.Clone(e.stepTimes)
	e.timesMu.Unlock()
	if extra != nil {
		finished = append(finished, *extra)
	}
	return Estimate(e.Clock.Now(), finished, remaining, current)
}
