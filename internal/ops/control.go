package ops

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Steering a running operation from any terminal (`kubectl dbops pause|continue|abort`): the
// request is written on the cluster's lock object, and the run honours it between steps,
// never inside one.
const (
	ControlPause    = "pause"
	ControlContinue = "continue"
	ControlAbort    = "abort"
)

// An aborted run stopped as asked, like a run paused by --pause-after: the same exit code,
// its own outcome, journal state and reason code.
const (
	ExitAborted    = ExitPaused
	OutcomeAborted = "aborted"
	JournalAborted = "aborted"
	ReasonAborted  = "Aborted"
)

// ErrAborted is the kind of the error a run stopped by `kubectl dbops abort` ends with.
var ErrAborted = errors.New("aborted as asked")

// ControlRequest is the last pause, continue or abort written for the running operation: who
// asked, when (the API server's time) and why.
type ControlRequest struct {
	Action string    `json:"action"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// Describe is the request as one line: "paused by ID at TIME: reason". Every part is escaped
// (Printable): the ID and the reason are whatever the requester typed.
func (c *ControlRequest) Describe() string {
	if c == nil {
		return ""
	}
	verb := map[string]string{ControlPause: "paused", ControlContinue: "continued", ControlAbort: "aborted"}[c.Action]
	if verb == "" {
		verb = Printable(c.Action)
	}
	s := fmt.Sprintf("%s by %s at %s", verb, Printable(c.By), c.At.UTC().Format(time.RFC3339))
	if c.Reason != "" {
		s += ": " + Printable(c.Reason)
	}
	return s
}

// ControlWatcher is a held lock that follows the control requests written on it.
type ControlWatcher interface {
	// Control returns the request last seen on the lock (nil: none) and a channel closed when
	// a different one is seen.
	Control() (*ControlRequest, <-chan struct{})
}

// honourControl is called between steps, before the next one touches anything: a pause waits
// here (the lock keeps renewing on its own goroutine) until a continue or an abort; an abort
// ends the run with ErrAborted. The wait follows the lock object's watch (ControlWatcher),
// never a timer.
func (e *Executor) honourControl(ctx context.Context, j *Journal) error {
	cw, ok := e.held.(ControlWatcher)
	if !ok {
		return nil
	}
	c, changed := cw.Control()
	paused := false
	for {
		action := ""
		if c != nil {
			action = c.Action
		}
		switch action {
		case ControlAbort:
			j.Control = c
			e.emit(Event{Type: EventControl, Control: c, Message: c.Describe()})
			return &CodedError{Kind: ErrAborted, Reason: ReasonAborted,
				Msg: c.Describe() + "; the run stopped between steps, the journal is kept"}
		case ControlPause:
			if !paused {
				paused = true
				j.Control = c
				// Durable first: `status` from another terminal says paused once the run does.
				if err := e.saveJournal(ctx, j); err != nil {
					return err
				}
				e.emit(Event{Type: EventControl, Control: c, Message: c.Describe() + "; waiting before the next step (the lock stays held): kubectl dbops continue " + e.plan.Cluster + " -n " + e.plan.Namespace})
			}
		default:
			if paused {
				j.Control = nil
				if err := e.saveJournal(ctx, j); err != nil {
					return err
				}
				e.emit(Event{Type: EventControl, Control: c, Message: c.Describe()})
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-changed:
		}
		c, changed = cw.Control()
	}
}
