package ops

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Plan is an ordered list of steps computed from live state. It is pure
// data until an Executor runs it, so --dry-run can print it safely.
type Plan struct {
	Operation string `json:"operation"`
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Engine    string `json:"engine"`
	// Args is a canonical rendering of the request (e.g. "--rolling
	// --group hot"); a journal only resumes a run with the same Args.
	Args string `json:"args"`
	// Destructive plans need confirmation on a TTY or --yes.
	Destructive bool    `json:"destructive"`
	Steps       []*Step `json:"steps"`
	// Notes are printed with the plan (e.g. "3 pods already restarted").
	Notes []string `json:"notes,omitempty"`
	// Command is the command line that re-runs this request; shown as the
	// resume hint after an interruption.
	Command string `json:"command,omitempty"`
	// Request is the command that asked for the plan, as data; the journal
	// keeps it so `resume` can run it again.
	Request *Request `json:"-"`
	// Preflight, when set, checks from live state, before the lock is taken
	// (and in --dry-run), that the cluster is fit for the first step still
	// to do, so a refusal happens with nothing written.
	Preflight func(ctx context.Context, st PreflightState) error `json:"-"`
	// Companion, when set, is a lock of the database's own that the steps take beside the
	// Lease (companion.go): renewed with the Lease, released when the run ends.
	Companion CompanionLock `json:"-"`
}

// NewPlan is the one way plans are made: operation on cluster c, planned
// by engine, with args the canonical rendering of what was asked (e.g.
// "--rolling --group hot"; a journal resumes only a run with the same
// args). The command that asked is attached by the caller (SetRequest), so
// engines never see it.
func NewPlan(operation string, c *Cluster, engine, args string) *Plan {
	return &Plan{Operation: operation, Cluster: c.Name, Namespace: c.Namespace, Engine: engine, Args: args}
}

// SetRequest records the command that asked for p, planned by engine, and
// renders the resume hint from it.
func (p *Plan) SetRequest(r *Request, engine string) {
	if r == nil {
		return
	}
	rr := *r
	rr.Engine = engine
	p.Request = &rr
	p.Command = rr.CommandLine()
}

// SkippedOnResume reports, per step ID, whether a run resuming j skips the step: done in j, or
// found done from the discovered cluster (Step.Resumed).
func (p *Plan) SkippedOnResume(j *Journal) map[string]bool {
	out := map[string]bool{}
	if j == nil {
		return out
	}
	for _, s := range p.Steps {
		if j.IsDone(s.ID) || (s.Resumed != nil && s.Resumed(j)) {
			out[s.ID] = true
		}
	}
	return out
}

// PreflightState is what a preflight check knows of an interrupted run of
// the same request (read from the journal without taking the lock).
type PreflightState struct {
	// Resuming is set when such a run did at least one step, or was in the
	// middle of one: the cluster may be degraded by that run's own work.
	Resuming bool
	// Done reports the steps that run finished.
	Done func(stepID string) bool
	// Data is that run's step data (read-only), e.g. the UIDs of the pods it
	// journaled before deleting them.
	Data map[string]string
}

// NextStep is the first step of p not done yet, or nil.
func (p *Plan) NextStep(st PreflightState) *Step {
	for _, s := range p.Steps {
		if st.Done == nil || !st.Done(s.ID) {
			return s
		}
	}
	return nil
}

// Step is one unit of work. Precheck, Action and Verify must each be
// idempotent: after a crash the executor may run a step again from the top.
type Step struct {
	// ID is stable across runs of the same request; the journal keys on it.
	ID          string `json:"id"`
	Group       string `json:"group,omitempty"`
	Target      string `json:"target"`
	Description string `json:"description"`
	// Preconditions and Details are human text for the plan view. Details
	// hold e.g. SQL statements with secrets redacted.
	Preconditions []string `json:"preconditions,omitempty"`
	Details       []string `json:"details,omitempty"`
	Mutating      bool     `json:"mutating"`
	// Pods are the pods a restart step deletes (one, or a batch), so an
	// engine can reorder or describe steps without parsing targets.
	Pods []string `json:"-"`
	// Needs are the RBAC permissions the step's own API calls need; they
	// are checked before the lock is taken.
	Needs []Permission `json:"-"`

	// Precheck verifies preconditions; return an ErrPrecondition error to
	// refuse. It may also report the step as already done.
	Precheck func(ctx context.Context, sc *StepContext) (done bool, err error) `json:"-"`
	// Action performs the change. It runs to completion even after Ctrl-C
	// (bounded by the executor's grace period), so it must be short: one
	// or a few API calls or statements.
	Action func(ctx context.Context, sc *StepContext) error `json:"-"`
	// Verify waits until the change has taken effect (watches, polls).
	Verify func(ctx context.Context, sc *StepContext) error `json:"-"`
	// Resumed, optional, reports from the discovered cluster whether a run resuming journal j
	// will find this step done without doing anything (a pod that run restarted already), so
	// the plan shown for a resume (--dry-run, the prompt, the plan event) marks exactly the
	// steps the resumed run skips.
	Resumed func(j *Journal) bool `json:"-"`
	// Prepare, optional, stages (StepContext.Stage) from cached state what the step must have
	// journaled before its action (a restart: the UIDs it deletes). The previous step's "done"
	// write then carries it and names this step as current, so this step needs no write of
	// its own before its action.
	Prepare func(sc *StepContext) `json:"-"`
}

// StepContext is what a running step can use besides its closure state.
type StepContext struct {
	Step   *Step
	Ref    StepRef
	LockID string
	// Data is the step-visible part of the journal: a small string map
	// persisted with the lock so a re-run can see what an earlier run did
	// (e.g. the UID a pod had before it was deleted).
	journal *Journal
	exec    *Executor
	// pending are the events AuditAsync is writing; the executor waits for them.
	pending []*pendingAudit
	// started is when the step began; readyAt when its pods were Ready again (MarkReady);
	// catchUp what RecordCatchUp reported. They make the done event's StepTimes.
	started time.Time
	readyAt time.Time
	catchUp time.Duration
	// blocked is what the step last said it is blocked on (Block); blockedDirty: a change of
	// it not written to the journal yet.
	blockMu      sync.Mutex
	blocked      *Blocked
	blockedDirty bool
	// blockedAt is when the step first said it is blocked.
	blockedAt time.Time
	// rate is what the step had left to move at each Remaining (blockMu), in rateUnit;
	// rateEvery the longest time between two of its readings; etaRange the range of the ETA
	// last published from it.
	rate      []RateSample
	rateUnit  string
	rateEvery time.Duration
	etaRange  string
}

// MarkReady notes that the step's pods are Ready again: the time from here to the step's
// "done" is its gate time (Event.StepTimes). Called from the step's goroutine.
func (sc *StepContext) MarkReady() {
	if sc.exec != nil {
		sc.readyAt = sc.exec.Clock.Now()
	}
}

// RecordCatchUp notes how long a member took, once Ready, to catch up with its leader; for
// a step of several members, the longest counts.
func (sc *StepContext) RecordCatchUp(d time.Duration) { sc.catchUp = max(sc.catchUp, d) }

// Get reads a journal value ("" when unset).
func (sc *StepContext) Get(key string) string {
	return sc.journal.Data[key]
}

// Set stores a journal value and persists the journal before returning, so
// the value survives a crash right after the call.
func (sc *StepContext) Set(ctx context.Context, key, value string) error {
	if sc.journal.Data == nil {
		sc.journal.Data = map[string]string{}
	}
	sc.journal.Data[key] = value
	return sc.exec.saveJournal(ctx, sc.journal)
}

// Progress reports a count towards a total.
func (sc *StepContext) Progress(done, total int64, unit, msg string) {
	sc.exec.emitStep(EventStepProgress, sc.Ref, func(e *Event) {
		e.Progress = &Progress{Done: done, Total: total, Unit: unit}
		e.Message = msg
	})
}

// Waiting reports what the step waits for.
func (sc *StepContext) Waiting(reason string) {
	sc.exec.emitStep(EventStepWaiting, sc.Ref, func(e *Event) { e.Reason = reason })
}

// Pods publishes a pods snapshot for the TUI table.
func (sc *StepContext) Pods(c *Cluster) {
	sc.exec.emit(Event{Type: EventPods, Pods: PodSummaries(c)})
}

// Audit records a Kubernetes Event on the changed object, naming the lock ID. It is written
// before Audit returns (so before the step is reported done), even after Ctrl-C or the
// timeout, within the grace period: the change it records has happened.
func (sc *StepContext) Audit(ctx context.Context, obj ObjectRef, reason, message string) {
	if sc.exec.Auditor == nil {
		return
	}
	ctx, cancel := sc.exec.graceContext(ctx)
	defer cancel()
	sc.auditFailed(obj, sc.exec.Auditor.Record(ctx, obj, reason, sc.auditMessage(message)))
}

// AuditAsync is Audit without waiting: the event is written beside the executor's write of
// the step's "done" to the journal, and the executor waits for it before it reports the step
// done (a restart's event on the new incarnation would otherwise add a round trip between
// one pod Ready and the next delete).
func (sc *StepContext) AuditAsync(ctx context.Context, obj ObjectRef, reason, message string) {
	if sc.exec.Auditor == nil {
		return
	}
	p := &pendingAudit{obj: obj, done: make(chan struct{})}
	msg := sc.auditMessage(message)
	p.start = func() {
		gctx, cancel := sc.exec.graceContext(ctx)
		go func() {
			defer close(p.done)
			defer cancel()
			p.err = sc.exec.Auditor.Record(gctx, obj, reason, msg)
		}()
	}
	sc.pending = append(sc.pending, p)
}

// pendingAudit is an event AuditAsync is writing, or will write once started.
type pendingAudit struct {
	obj   ObjectRef
	start func() // nil once started
	done  chan struct{}
	err   error
}

// startAudits starts writing the events AuditAsync queued, beside the step's "done" journal
// write.
func (sc *StepContext) startAudits() {
	for _, p := range sc.pending {
		if p.start != nil {
			start := p.start
			p.start = nil
			start()
		}
	}
}

// waitAudits waits for the events AuditAsync is writing and reports their failures.
func (sc *StepContext) waitAudits() {
	sc.startAudits()
	for _, p := range sc.pending {
		<-p.done
		sc.auditFailed(p.obj, p.err)
	}
	sc.pending = nil
}

func (sc *StepContext) auditMessage(message string) string {
	return fmt.Sprintf("%s (kubectl-dbops %s, lock id %s)", message, sc.exec.plan.Operation, sc.LockID)
}

// auditFailed reports err, if any: an audit failure must not abort a half-done operation, but
// it must be visible.
func (sc *StepContext) auditFailed(obj ObjectRef, err error) {
	if err != nil {
		sc.exec.emit(auditFailedEvent(obj, err))
	}
}

func auditFailedEvent(obj ObjectRef, err error) Event {
	return Event{Type: EventWarning, Message: fmt.Sprintf("could not record audit event on %s/%s: %v", obj.Kind, obj.Name, err)}
}

// ObjectRef names an object for audit events.
type ObjectRef struct {
	// Warning makes the event a Warning (a failed or interrupted operation).
	Warning    bool
	Kind       string
	APIVersion string
	Namespace  string
	Name       string
	UID        string
}

// AuditOnce is Audit unless obj (by UID) has an event with reason already: for a change an
// earlier, interrupted run of the request made, which may or may not have recorded it. When
// that cannot be read, the event is recorded: a duplicate is better than none.
func (sc *StepContext) AuditOnce(ctx context.Context, obj ObjectRef, reason, message string) {
	if sc.exec.Auditor == nil {
		return
	}
	rctx, cancel := sc.exec.graceContext(ctx)
	found, err := sc.exec.Auditor.Recorded(rctx, obj, reason)
	cancel()
	if err == nil && found {
		return
	}
	sc.Audit(ctx, obj, reason, message)
}

// Auditor records Kubernetes Events for mutating steps.
type Auditor interface {
	Record(ctx context.Context, obj ObjectRef, reason, message string) error
	// Recorded reports whether obj (by UID) has an event with reason.
	Recorded(ctx context.Context, obj ObjectRef, reason string) (bool, error)
}

// PlanView is the serialisable shape of a plan, for the JSON view and
// dry-run output.
type PlanView struct {
	Operation   string     `json:"operation"`
	Cluster     string     `json:"cluster"`
	Namespace   string     `json:"namespace"`
	Engine      string     `json:"engine"`
	Args        string     `json:"args,omitempty"`
	Destructive bool       `json:"destructive"`
	Notes       []string   `json:"notes,omitempty"`
	Steps       []StepView `json:"steps"`
	Command     string     `json:"command,omitempty"`
}

// StepView is one step of a PlanView.
type StepView struct {
	Index         int      `json:"index"`
	ID            string   `json:"id"`
	Group         string   `json:"group,omitempty"`
	Target        string   `json:"target"`
	Description   string   `json:"description"`
	Preconditions []string `json:"preconditions,omitempty"`
	Details       []string `json:"details,omitempty"`
	Mutating      bool     `json:"mutating"`
	// Done is true when a journal says an earlier run completed the step.
	Done bool `json:"done,omitempty"`
}

// View returns the serialisable form of the plan.
func (p *Plan) View() *PlanView {
	v := &PlanView{Operation: p.Operation, Cluster: p.Cluster, Namespace: p.Namespace, Engine: p.Engine,
		Args: p.Args, Destructive: p.Destructive, Notes: p.Notes, Command: p.Command, Steps: make([]StepView, 0, len(p.Steps))}
	for i, s := range p.Steps {
		v.Steps = append(v.Steps, StepView{Index: i + 1, ID: s.ID, Group: s.Group, Target: s.Target,
			Description: s.Description, Preconditions: s.Preconditions, Details: s.Details, Mutating: s.Mutating})
	}
	return v
}

// ShownArgs renders a plan's Args as the CLI takes them: the pods of --pods a,b and
// --member a as arguments (a b), so that every flag a plan header prints is one the CLI has.
func ShownArgs(args string) string {
	words := strings.Fields(args)
	var flags, positional []string
	for i := 0; i < len(words); i++ {
		// Flags of the journal's key that the CLI takes as arguments: the pods a
		// replacement (or an etcd member repair) acts on.
		if (words[i] == "--pods" || words[i] == "--member") && i+1 < len(words) {
			positional = append(positional, strings.Split(words[i+1], ",")...)
			i++
			continue
		}
		flags = append(flags, words[i])
	}
	return strings.Join(append(positional, flags...), " ")
}

// WritePlanText renders a plan for humans; golden-tested, so keep it stable.
func WritePlanText(w io.Writer, v *PlanView) error {
	var b strings.Builder
	b.Grow(256 + 160*len(v.Steps)) // a step's line and its precondition, without regrowing
	Fprintf(&b, "Plan: %s %s/%s (engine %s)", v.Operation, v.Namespace, v.Cluster, v.Engine)
	if v.Args != "" {
		Fprintf(&b, " %s", ShownArgs(v.Args))
	}
	b.WriteString("\n")
	for _, n := range v.Notes {
		Fprintf(&b, "  note: %s\n", n)
	}
	if len(v.Steps) == 0 {
		b.WriteString("  nothing to do\n")
	}
	width := len(fmt.Sprint(len(v.Steps)))
	for _, s := range v.Steps {
		mark := ""
		if s.Done {
			mark = " (done)"
		}
		Fprintf(&b, "  %*d. %s: %s%s\n", width, s.Index, s.Target, s.Description, mark)
		for _, p := range s.Preconditions {
			Fprintf(&b, "  %*s    requires: %s\n", width, "", p)
		}
		for _, d := range s.Details {
			Fprintf(&b, "  %*s    > %s\n", width, "", d)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WritePlanSummary renders a plan in a few lines, for a confirmation that must fit one
// screen: the header and notes, then per node group how many steps, the first and last
// target and what the group's steps require (each distinct precondition once). Details
// (statements) are left to --dry-run, which the last line names.
func WritePlanSummary(w io.Writer, v *PlanView) error {
	var b strings.Builder
	Fprintf(&b, "Plan: %s %s/%s (engine %s)", v.Operation, v.Namespace, v.Cluster, v.Engine)
	if v.Args != "" {
		Fprintf(&b, " %s", ShownArgs(v.Args))
	}
	b.WriteString("\n")
	for _, n := range v.Notes {
		Fprintf(&b, "  note: %s\n", n)
	}
	type group struct {
		name          string
		steps         []StepView
		preconditions []string
	}
	var groups []*group
	byName := map[string]*group{}
	for _, s := range v.Steps {
		g := byName[s.Group]
		if g == nil {
			g = &group{name: s.Group}
			byName[s.Group] = g
			groups = append(groups, g)
		}
		g.steps = append(g.steps, s)
		for _, p := range s.Preconditions {
			if !slices.Contains(g.preconditions, p) {
				g.preconditions = append(g.preconditions, p)
			}
		}
	}
	for _, g := range groups {
		name := g.name
		if name == "" {
			// Steps of no one node group: batches by zone or by count span the groups.
			name = "across groups"
		}
		first, last := g.steps[0], g.steps[len(g.steps)-1]
		span := first.Target
		if len(g.steps) > 1 {
			span = fmt.Sprintf("%s .. %s", first.Target, last.Target)
		}
		Fprintf(&b, "  %s: %d step(s) %d-%d, %s\n", name, len(g.steps), first.Index, last.Index, span)
		for _, p := range g.preconditions {
			Fprintf(&b, "      requires: %s\n", p)
		}
	}
	b.WriteString("  (every step, with its statements: the same command with --dry-run)\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// Clock tells the time. The lock judges expiry by the API server's clock, so
// production uses a clock corrected by the server's Date header.
type Clock interface {
	Now() time.Time
}

// RealClock is the local wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }
