package ops

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"
)

// Journal states. Anything but JournalSucceeded can be resumed by running
// the same command again.
const (
	JournalRunning     = "running"
	JournalInterrupted = "interrupted"
	JournalFailed      = "failed"
	JournalTimeout     = "timeout"
	JournalSucceeded   = "succeeded"
	// JournalDenied: the run stopped because its lock ID was denied (deny add) while it ran;
	// JournalLockLost: because its lock was released, taken over or its Lease deleted.
	JournalDenied   = "denied"
	JournalLockLost = "lock-lost"
)

// Journal is the record of an operation, stored on the cluster's lock object
// so that `status` can show it and a re-run can resume it.
type Journal struct {
	Operation string    `json:"operation"`
	Args      string    `json:"args"`
	Holder    string    `json:"holder"`
	State     string    `json:"state"`
	Started   time.Time `json:"started"`
	// RunStarted is when the run writing this journal started (Started is the operation's
	// start, which a resumed run keeps).
	RunStarted time.Time         `json:"runStarted,omitzero"`
	Updated    time.Time         `json:"updated"`
	Steps      int               `json:"steps"`
	Done       []string          `json:"done,omitempty"`
	Current    string            `json:"current,omitempty"`
	Data       map[string]string `json:"data,omitempty"`
	Error      string            `json:"error,omitempty"`
	// Control is the pause the run waits in, or the abort that ended it (ControlRequest).
	Control *ControlRequest `json:"control,omitempty"`
	// Request is the command that started the run, as data, so `resume`
	// can run it again (nil in journals written before resume existed).
	Request *Request `json:"request,omitempty"`
	// Blocked is what the current step was last blocked on (ops.StepContext.Block).
	Blocked *Blocked `json:"blocked,omitempty"`
	// ETA is the run's remaining time as estimated at its last step start or end.
	ETA *ETA `json:"eta,omitempty"`
}

// Request is a command as the user gave it, kept as data (not a rendered
// command line) so that `resume` can run it again and a hint can be
// rendered from it.
type Request struct {
	// Command is the subcommand path below `kubectl dbops`, e.g. ["restart"].
	Command []string `json:"command"`
	// Cluster is the cluster argument; Args any further arguments (replace's
	// pods).
	Cluster string   `json:"cluster"`
	Args    []string `json:"args,omitempty"`
	// Namespace and Context are where the command ran (Context only when
	// one was chosen with --context).
	Namespace string `json:"namespace"`
	Context   string `json:"context,omitempty"`
	// Engine is the engine that planned the run; a resume plans with the
	// same one.
	Engine string `json:"engine,omitempty"`
	// Flags are the command's own flags that were set, and the shared flags
	// that change what it does (never connection or credential flags, nor
	// run-only ones like --timeout or -o), in name order.
	Flags []RequestFlag `json:"flags,omitempty"`
	// Picked are the targets the command chose from live state (replace
	// --failed's pods): a resumed run keeps them rather than choosing again,
	// since a replaced pod looks healthy and would not be chosen twice.
	Picked []string `json:"picked,omitempty"`
	// Fleet is the fleet run (#39) the operation was started by, if any: resume --fleet tells
	// a target that run never started (its journal is of another operation) from one it did.
	Fleet *FleetRun `json:"fleet,omitempty"`
}

// FleetRun names one fleet run and its targets.
type FleetRun struct {
	ID string `json:"id"`
	// Targets are every target of the run, as context/namespace/cluster.
	Targets []string `json:"targets"`
}

// Same reports whether o asks for what r asks: the same command, cluster,
// arguments and flags (who acts, --lock-id, and what was picked aside).
func (r *Request) Same(o *Request) bool {
	if r == nil || o == nil {
		return false
	}
	flags := func(q *Request) []RequestFlag {
		return slices.DeleteFunc(slices.Clone(q.Flags), func(f RequestFlag) bool { return f.Name == "lock-id" })
	}
	return slices.Equal(r.Command, o.Command) && r.Cluster == o.Cluster && r.Namespace == o.Namespace &&
		slices.Equal(r.Args, o.Args) && slices.EqualFunc(flags(r), flags(o), func(a, b RequestFlag) bool {
		return a.Name == b.Name && a.Bool == b.Bool && slices.Equal(a.Values, b.Values)
	})
}

// RequestFlag is one flag of a Request; a repeated or list flag has several
// values.
type RequestFlag struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
	// Bool flags are rendered as --name or --name=false.
	Bool bool `json:"bool,omitempty"`
}

// Flag returns the values of flag name, and whether it was set.
func (r *Request) Flag(name string) ([]string, bool) {
	for _, f := range r.Flags {
		if f.Name == name {
			return f.Values, true
		}
	}
	return nil, false
}

// FlagArgs renders the flags as command-line arguments (unquoted).
func (r *Request) FlagArgs() []string {
	var out []string
	for _, f := range r.Flags {
		for _, v := range f.Values {
			if f.Bool && v == "true" {
				out = append(out, "--"+f.Name)
				continue
			}
			out = append(out, "--"+f.Name+"="+v)
		}
	}
	return out
}

// CommandLine renders r as a command the user can paste into a shell:
// `kubectl dbops`, the command, its arguments, -n, --context when one was
// chosen, then the flags; values are shell-quoted.
func (r *Request) CommandLine() string {
	return ShellLine(r.Argv(nil))
}

// Argv is r as an argument vector: `kubectl dbops`, the command, its arguments, -n,
// --context when one was chosen, then the flags, less those named in drop.
func (r *Request) Argv(drop map[string]bool) []string {
	parts := append([]string{"kubectl", "dbops"}, r.Command...)
	parts = append(append(parts, r.Cluster), r.Args...)
	if r.Namespace != "" {
		parts = append(parts, "-n", r.Namespace)
	}
	if r.Context != "" {
		parts = append(parts, "--context", r.Context)
	}
	for _, f := range r.Flags {
		if drop[f.Name] {
			continue
		}
		for _, v := range f.Values {
			if f.Bool && v == "true" {
				parts = append(parts, "--"+f.Name)
				continue
			}
			parts = append(parts, "--"+f.Name+"="+v)
		}
	}
	return parts
}

// ShellLine joins argv into a line a POSIX shell reads back as argv (each word quoted where
// it needs it).
func ShellLine(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--") {
			q[i] = k + "=" + ShellQuote(v)
			continue
		}
		q[i] = ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// ResumeCommand is the `resume` command line for r's cluster.
func (r *Request) ResumeCommand() string {
	parts := []string{"kubectl", "dbops", "resume", ShellQuote(r.Cluster)}
	if r.Namespace != "" {
		parts = append(parts, "-n", ShellQuote(r.Namespace))
	}
	if r.Context != "" {
		parts = append(parts, "--context", ShellQuote(r.Context))
	}
	return strings.Join(parts, " ")
}

// Resumable reports whether j is an unfinished run of the same request.
func (j *Journal) Resumable(operation, args string) bool {
	return j != nil && j.State != JournalSucceeded && j.Operation == operation && j.Args == args
}

// clone returns a copy of j that later changes to j do not touch (the Request is shared: it
// is not changed once the run started).
func (j *Journal) clone() *Journal {
	c := *j
	c.Done = slices.Clone(j.Done)
	c.Data = maps.Clone(j.Data)
	return &c
}

// StateText is State for people: a run waiting in a pause, or ended by an abort, says who
// asked, when and why ("paused by ID at TIME: reason").
func (j *Journal) StateText() string {
	if c := j.Control; c != nil && ((j.State == JournalRunning && c.Action == ControlPause) || j.State == JournalAborted) {
		return c.Describe()
	}
	return j.State
}

// IsDone reports whether step id completed in an earlier or this run.
func (j *Journal) IsDone(id string) bool {
	return slices.Contains(j.Done, id)
}

// Locker takes the per-cluster lock.
type Locker interface {
	// Acquire takes the lock for operation, extends it when already held by
	// this ID, or fails with an ErrLocked error naming the holder.
	Acquire(ctx context.Context, operation string) (HeldLock, error)
}

// JournalAcquirer is a Locker that stores the run's first journal with the write that takes
// the lock, so a run's start costs one write, not two. first gets the journal found on the
// lock (nil when there is none) and the lock ID taking it, and returns the journal to store;
// it is called again when the write has to be decided again on a fresh read (a conflict), so
// it must not act on anything but its result.
type JournalAcquirer interface {
	AcquireJournal(ctx context.Context, operation string, first func(prev *Journal, holder string) (*Journal, error)) (HeldLock, error)
}

// LockWaiter is a Locker that can wait, with a watch, for the lock to change (released,
// taken, expired, or its holder's session gone), so --wait-for-lock retries only then.
type LockWaiter interface {
	// WaitChange returns when the lock's object changed, or when its current holder's claim
	// runs out by time alone (expiry, a dead session), or with ctx's error.
	WaitChange(ctx context.Context) error
}

// JournalReleaser is a HeldLock that can save the last journal and release the lock in one
// write; the executor uses it at a run's end when the lock does not stay held.
type JournalReleaser interface {
	SaveJournalAndRelease(ctx context.Context, j *Journal) error
}

// LockWatcher is a HeldLock that follows its lock object while the run works, so a deny, a
// release or takeover by someone else, or the object's deletion stops the run before its next
// change rather than at its next journal write or renewal.
type LockWatcher interface {
	// WatchLock follows the lock object until ctx ends. lost is called, at most once, as soon
	// as a change shows the lock is no longer this process's, with an ErrLocked error that
	// says why.
	WatchLock(ctx context.Context, lost func(error))
}

// LossRecorder is a HeldLock that can still record a run's progress after the lock was lost:
// the steps that finished stay recorded as done, so a later run (once allowed) resumes
// after them.
type LossRecorder interface {
	// SaveJournalAfterLoss stores j only while the lock object still carries this ID's
	// journal and nobody else holds it (a deny, or a release by someone else), and gives
	// up the lock if this ID still holds it; it writes nothing otherwise (taken over, deleted).
	SaveJournalAfterLoss(ctx context.Context, j *Journal) error
}

// HeldLock is a lock this process holds. It carries the journal.
type HeldLock interface {
	// ID is the lock ID this process acts as.
	ID() string
	// Info describes the lock as acquired or last renewed.
	Info() LockInfo
	// Renew pushes the expiry out by the lock duration.
	Renew(ctx context.Context) (LockInfo, error)
	// Release gives the lock up; the journal stays on the lock object.
	Release(ctx context.Context) error
	// Journal is the journal found on the lock object at acquisition (nil
	// when there was none).
	Journal() *Journal
	// SaveJournal persists j on the lock object (conflict-safe).
	SaveJournal(ctx context.Context, j *Journal) error
	// Detach ends this process's claim on a lock that stays held (a hold
	// taken by hand before the run), so the user's next command may use it.
	Detach(ctx context.Context) error
}
