package tui

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// PlainOptions configures the plain printer.
type PlainOptions struct {
	// Now stamps events that carry no Time of their own. Defaults to
	// time.Now; tests pass a fixed clock.
	Now func() time.Time
	// TimeFormat is the layout for timestamps, always rendered in UTC.
	// Defaults to time.RFC3339.
	TimeFormat string
}

// maxNotReadyNames bounds the pods summary line so a cluster-wide outage
// does not print hundreds of names per change.
const maxNotReadyNames = 5

// Plain prints one timestamped line per event, for CI logs and pipes.
// It is safe for concurrent use.
type Plain struct {
	mu     sync.Mutex
	w      io.Writer
	now    func() time.Time
	format string
	err    error

	// lastRepeat holds, per step, the last waiting/progress line printed, so
	// a procedure polling every few seconds does not flood the log.
	lastRepeat map[string]string
	// lastReady is the readiness signature of the last pods summary
	// printed; pods snapshots are only summarised when it changes.
	lastReady string
	// started holds, per step, when it started: waiting lines say for how long.
	started map[string]time.Time
	// lastBlocked holds, per step, when its blocked-on line was last printed.
	lastBlocked map[string]time.Time
}

// blockedRepeat is how often an unchanged blocked-on line is printed again.
const blockedRepeat = 10 * time.Second

var _ ops.Sink = (*Plain)(nil)

// NewPlain returns a plain printer writing to w.
func NewPlain(w io.Writer, opts PlainOptions) *Plain {
	p := &Plain{w: w, now: opts.Now, format: opts.TimeFormat, lastRepeat: map[string]string{}, started: map[string]time.Time{},
		lastBlocked: map[string]time.Time{}}
	if p.now == nil {
		p.now = time.Now
	}
	if p.format == "" {
		p.format = time.RFC3339
	}
	return p
}

// Err returns the first write error; later events are dropped after one,
// since a closed log pipe will not recover.
func (p *Plain) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Emit prints e.
func (p *Plain) Emit(e ops.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	ts := e.Time
	if ts.IsZero() {
		ts = p.now()
	}
	stamp := ts.UTC().Format(p.format)
	text := p.render(e.Printable(), stamp)
	if text == "" {
		return
	}
	_, p.err = io.WriteString(p.w, stamp+" "+text)
}

// render returns the lines for e, newline terminated, without the leading
// timestamp of the first line; "" when e is not worth a line.
func (p *Plain) render(e ops.Event, stamp string) string {
	label := stepLabel(e.Step)
	key := stepKey(e.Step)
	line := func(s string) string {
		if label != "" {
			s = label + ": " + s
		}
		return oneLine(s) + "\n"
	}
	// Waiting and progress lines name the step by its index and target only: its
	// description was on its started line.
	short := func(s string) string {
		return oneLine(shortStepLabel(e.Step)+" "+s) + "\n"
	}
	switch e.Type {
	case ops.EventPlan:
		if e.Plan == nil {
			return oneLine(joinMessage("plan", e.Message)) + "\n"
		}
		var b strings.Builder
		// WritePlanText to a strings.Builder cannot fail.
		_ = ops.WritePlanText(&b, e.Plan)
		return b.String()
	case ops.EventLock:
		return oneLine(lockText(e.Lock, e.Message, p.format)) + "\n"
	case ops.EventStepStarted:
		delete(p.lastRepeat, key)
		p.started[key] = e.Time
		return line(joinMessage("started", e.Message))
	case ops.EventStepWaiting:
		reason := e.Reason
		if reason == "" {
			reason = e.Message
		}
		if e.Blocked != nil {
			// What it is blocked on is repeated while it lasts, at most every
			// blockedRepeat: a log read later shows the step was still stuck.
			// The signature leaves out what changes with time alone (how long it has run).
			sig := fmt.Sprintf("waiting: %s\x00%s\x00%s\x00%t", reason, e.Blocked.On, e.Blocked.ToUnblock, e.Blocked.Stalled != "")
			reason = joinMessage(reason, e.Blocked.String())
			if e.ETA != nil {
				// The ETA changes with every reading: it rides on the lines the blocker prints.
				reason += "; ETA " + e.ETA.String()
			}
			now := e.Time
			if now.IsZero() {
				now = p.now()
			}
			if p.lastRepeat[key] == sig && now.Sub(p.lastBlocked[key]) < blockedRepeat {
				return ""
			}
			p.lastRepeat[key] = sig
			p.lastBlocked[key] = now
		} else if p.repeated(key, "waiting: "+reason) {
			return ""
		}
		waited := ""
		if t, ok := p.started[key]; ok && !e.Time.IsZero() && e.Time.After(t) {
			waited = " " + e.Time.Sub(t).Round(time.Second).String()
		}
		return short("waiting" + waited + ": " + reason)
	case ops.EventStepProgress:
		text := joinMessage(progressText(e.Progress), e.Message)
		if p.repeated(key, text) {
			return ""
		}
		return short(text)
	case ops.EventStepDone:
		delete(p.lastRepeat, key)
		msg := e.Message
		if e.ETA != nil && msg != "" {
			msg += "; ETA " + e.ETA.String()
		} else if e.ETA != nil {
			msg = "ETA " + e.ETA.String()
		}
		return line(joinMessage("done", msg))
	case ops.EventStepSkipped:
		delete(p.lastRepeat, key)
		reason := e.Reason
		if reason == "" {
			reason = e.Message
		}
		return line(joinMessage("skipped", reason))
	case ops.EventStepFailed:
		delete(p.lastRepeat, key)
		msg := e.Error
		if msg == "" {
			msg = e.Message
		}
		return line(joinMessage(FailedLabel(e.ReasonCode), msg))
	case ops.EventPods:
		return p.podsSummary(e.Pods)
	case ops.EventControl:
		// "paused by ID at TIME: reason" (ops.ControlRequest.Describe: already escaped).
		label := "CONTROL"
		if e.Control != nil {
			label = strings.ToUpper(e.Control.Action)
		}
		return label + ": " + oneLine(e.Message) + "\n"
	case ops.EventWarning:
		msg := e.Message
		if msg == "" {
			msg = e.Error
		}
		if label != "" {
			msg = label + ": " + msg
		}
		return "WARNING: " + oneLine(msg) + "\n"
	case ops.EventDone:
		s := "done: " + oneLine(outcomeText(e)) + "\n"
		s += stepTimesLines(stamp, e.StepTimes)
		if e.Resume != "" {
			// Resume is a complete sentence ("re-run the same command to
			// resume: ..."); a line of its own keeps it easy to copy.
			s += stamp + " " + oneLine(e.Resume) + "\n"
		}
		return s
	default:
		// Unknown types come from a newer executor; print them rather than
		// hide them.
		return line(joinMessage(string(e.Type), e.Message))
	}
}

// throttled suppresses s when it repeats the last repeatable line of the
// same step.
// repeated reports whether s is what the step's last waiting or progress line said, and
// notes s as its last.
func (p *Plain) repeated(key, s string) bool {
	if p.lastRepeat[key] == s {
		return true
	}
	p.lastRepeat[key] = s
	return false
}

// podsSummary returns one line when readiness changed since the last one.
func (p *Plain) podsSummary(pods []ops.PodSummary) string {
	var sig strings.Builder
	var notReady []string
	for _, pod := range pods {
		fmt.Fprintf(&sig, "%s=%t;", pod.Name, pod.Ready)
		if !pod.Ready {
			notReady = append(notReady, pod.Name)
		}
	}
	if sig.String() == p.lastReady {
		return ""
	}
	p.lastReady = sig.String()
	s := fmt.Sprintf("pods: %d/%d ready", len(pods)-len(notReady), len(pods))
	if len(notReady) > 0 {
		shown := notReady[:min(len(notReady), maxNotReadyNames)]
		s += ", not ready: " + strings.Join(shown, ", ")
		if extra := len(notReady) - len(shown); extra > 0 {
			s += fmt.Sprintf(" (+%d more)", extra)
		}
	}
	return s + "\n"
}

// FailedLabel is how a step that did not finish is shown: stopped by the run (Ctrl-C or
// SIGTERM, --timeout, a lost lock) rather than failed by itself.
func FailedLabel(reasonCode string) string {
	switch reasonCode {
	case ops.ReasonInterrupted:
		return "INTERRUPTED"
	case ops.ReasonTimeout:
		return "TIMED OUT"
	case ops.ReasonLockLost, ops.ReasonDenied:
		return "STOPPED (lock lost)"
	default:
		return "FAILED"
	}
}

// stepTimesLines says where the steps' time went, one line per kind of time any step has:
// the gate (pods Ready to step done) and an etcd member's catch-up with its leader.
func stepTimesLines(stamp string, times []ops.StepTime) string {
	var gate, catchUp []string
	for _, t := range times {
		name := t.Target
		if name == "" {
			name = t.Step
		}
		if t.Gate > 0 {
			gate = append(gate, name+" "+t.Gate.Round(time.Millisecond).String())
		}
		if t.CatchUp > 0 {
			catchUp = append(catchUp, name+" "+t.CatchUp.Round(time.Millisecond).String())
		}
	}
	var b strings.Builder
	if len(gate) > 0 {
		b.WriteString(stamp + " gate time (pods Ready to step done): " + strings.Join(gate, ", ") + "\n")
	}
	if len(catchUp) > 0 {
		b.WriteString(stamp + " catch-up time (pod Ready to raft index at the leader's): " + strings.Join(catchUp, ", ") + "\n")
	}
	return b.String()
}
