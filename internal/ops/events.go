package ops

import (
	"sync"
	"time"
)

// EventType names a progress event. The TUI, plain and JSON views all render
// the same stream, and the JSON view emits these names verbatim, so they are
// part of the documented output schema.
type EventType string

const (
	EventPlan         EventType = "plan"
	EventLock         EventType = "lock"
	EventStepStarted  EventType = "step-started"
	EventStepProgress EventType = "step-progress"
	EventStepWaiting  EventType = "step-waiting"
	EventStepDone     EventType = "step-done"
	EventStepSkipped  EventType = "step-skipped"
	EventStepFailed   EventType = "step-failed"
	EventPods         EventType = "pods"
	EventWarning      EventType = "warning"
	// EventControl: the run honoured a pause, continue or abort written on its lock (Control).
	EventControl EventType = "control"
	EventDone    EventType = "done"
)

// Lock actions reported in EventLock.
const (
	LockAcquired = "acquired"
	LockExtended = "extended"
	LockTakeover = "takeover"
	LockRenewed  = "renewed"
	LockReleased = "released"
	LockDisabled = "disabled"
)

// Outcomes reported in EventDone.
const (
	OutcomeSucceeded   = "succeeded"
	OutcomeFailed      = "failed"
	OutcomeInterrupted = "interrupted"
	OutcomeTimeout     = "timeout"
	OutcomeDryRun      = "dry-run"
	// OutcomeRefused: the command stopped before its run started (bad input, a preflight
	// refusal, the lock, permissions); nothing was changed by it.
	OutcomeRefused = "refused"
)

// Event is one typed progress report from a procedure.
type Event struct {
	Type      EventType `json:"type"`
	Time      time.Time `json:"time"`
	Operation string    `json:"operation,omitempty"`
	Cluster   string    `json:"cluster,omitempty"`
	Step      *StepRef  `json:"step,omitempty"`
	Message   string    `json:"message,omitempty"`
	// Reason says what a waiting step waits for, or why a step was skipped.
	Reason   string    `json:"reason,omitempty"`
	Progress *Progress `json:"progress,omitempty"`
	// Blocked (step-waiting) names the object the step is blocked on, since when, until when
	// it waits and how to unblock it.
	Blocked *Blocked `json:"blocked,omitempty"`
	// ETA (step-started, step-done) is the run's remaining time as estimated then.
	ETA  *ETA      `json:"eta,omitempty"`
	Plan *PlanView `json:"plan,omitempty"`
	Lock *LockInfo `json:"lock,omitempty"`
	// Control (control event) is the request the run honoured.
	Control *ControlRequest `json:"control,omitempty"`
	Pods    []PodSummary    `json:"pods,omitempty"`
	Error   string          `json:"error,omitempty"`
	// ReasonCode (done, step-failed) is Error's stable, machine-readable reason (ops.ReasonOf).
	ReasonCode string        `json:"reasonCode,omitempty"`
	Outcome    string        `json:"outcome,omitempty"`
	Elapsed    time.Duration `json:"elapsedNs,omitempty"`
	Timeout    time.Duration `json:"timeoutNs,omitempty"`
	// Resume tells the user how to continue after an interruption: a sentence ending in the
	// shell line of ResumeArgv.
	Resume string `json:"resume,omitempty"`
	// ResumeArgv (done event) is the command that resumes the run, as an argument vector:
	// the interrupted run's command, cluster, -n/--context, flags and --yes when it had it.
	ResumeArgv []string `json:"resumeArgv,omitempty"`
	// APIRequests (done event) counts the run's Kubernetes API requests by "verb resource",
	// plus "total".
	APIRequests map[string]int `json:"apiRequests,omitempty"`
	// StepTimes (done event) says where the time of each step this run finished went, in
	// the order they finished.
	StepTimes []StepTime `json:"stepTimes,omitempty"`
}

// StepTime is where one finished step's time went.
type StepTime struct {
	Step   string `json:"step"`
	Target string `json:"target,omitempty"`
	// Took is the whole step, from its start to its "done".
	Took time.Duration `json:"tookNs"`
	// Gate is from the step's pods being Ready again to its "done": what the database's
	// gate (CrateDB: rejoin, recovery, stability; etcd: catch-up) added to the pods' start.
	Gate time.Duration `json:"gateNs,omitempty"`
	// CatchUp (etcd) is from the member's pod being Ready to its raft index reaching the
	// leader's.
	CatchUp time.Duration `json:"catchUpNs,omitempty"`
}

// StepRef identifies a plan step inside events.
type StepRef struct {
	Index       int    `json:"index"` // 1-based
	Total       int    `json:"total"`
	ID          string `json:"id"`
	Target      string `json:"target"`
	Description string `json:"description"`
}

// Progress is a count towards a total (shards left, pods restarted...).
type Progress struct {
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
	Unit  string `json:"unit,omitempty"`
}

// LockInfo describes the cluster lock as last seen.
type LockInfo struct {
	Action    string    `json:"action"`
	Holder    string    `json:"holder"`
	Operation string    `json:"operation,omitempty"`
	Expires   time.Time `json:"expires,omitzero"`
	// Previous is the holder a takeover replaced.
	Previous string `json:"previous,omitempty"`
	// HandReason is the reason of a hold taken by hand (lock acquire) that this acquisition
	// extended: the same lock ID may be someone else's (a shared kubeconfig user).
	HandReason string `json:"handReason,omitempty"`
}

// PodSummary is the pods-table row the TUI shows.
type PodSummary struct {
	Name     string `json:"name"`
	Group    string `json:"group"`
	Ready    bool   `json:"ready"`
	Phase    string `json:"phase"`
	Node     string `json:"node,omitempty"`
	Zone     string `json:"zone,omitempty"`
	UID      string `json:"uid"`
	Restarts int32  `json:"restarts"`
}

// Sink receives events. Implementations must be safe for concurrent use:
// lock renewal reports from its own goroutine.
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(Event)

// Emit calls f.
func (f SinkFunc) Emit(e Event) { f(e) }

// Recorder is a Sink that keeps every event; used by tests and by views
// that need the full history.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

// Emit records e.
func (r *Recorder) Emit(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Events returns a copy of what was recorded.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Discard drops events.
type Discard struct{}

// Emit does nothing.
func (Discard) Emit(Event) {}

// PodSummaries converts discovered pods for EventPods.
func PodSummaries(c *Cluster) []PodSummary {
	var out []PodSummary
	for _, p := range c.AllPods() {
		out = append(out, PodSummary{Name: p.Name, Group: p.Group, Ready: p.Ready, Phase: p.Phase,
			Node: p.Node, Zone: p.Zone, UID: string(p.UID), Restarts: p.Restarts})
	}
	return out
}
