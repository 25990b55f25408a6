package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Exit codes are part of the CLI's contract with scripts; see README "Exit codes".
const (
	ExitOK           = 0
	ExitFailed       = 1
	ExitUsage        = 2
	ExitLocked       = 3
	ExitTimeout      = 4
	ExitPrecondition = 5
	ExitForbidden    = 6
	ExitInterrupted  = 130
)

// Sentinel kinds. Wrap them (with %w) so callers can test with errors.Is and
// main can map any error to its exit code.
var (
	ErrUsage        = errors.New("bad usage")
	ErrLocked       = errors.New("cluster lock not available")
	ErrTimeout      = errors.New("timed out")
	ErrPrecondition = errors.New("precondition not met")
	ErrInterrupted  = errors.New("interrupted")
	ErrForbidden    = errors.New("permission denied")
)

// CodedError carries one of the sentinel kinds with a human message. Its
// Error() is the message only, so the CLI prints one clean line.
type CodedError struct {
	Kind error
	Msg  string
	Err  error // optional underlying cause
	// Reason is the stable, machine-readable reason code (ReasonOf); empty: the kind's.
	Reason string
}

func (e *CodedError) Error() string {
	if e.Err != nil && e.Msg == "" {
		return e.Err.Error()
	}
	return e.Msg
}

// Unwrap exposes both the kind and the cause to errors.Is/As.
func (e *CodedError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// Usagef reports bad input (exit 2).
func Usagef(format string, a ...any) error {
	return &CodedError{Kind: ErrUsage, Msg: fmt.Sprintf(format, a...)}
}

// Preconditionf reports a live-state check that failed (exit 5).
func Preconditionf(format string, a ...any) error {
	return &CodedError{Kind: ErrPrecondition, Msg: fmt.Sprintf(format, a...)}
}

// Refusef reports a live-state check that failed (exit 5) with reason code reason.
func Refusef(reason, format string, a ...any) error {
	return &CodedError{Kind: ErrPrecondition, Msg: fmt.Sprintf(format, a...), Reason: reason}
}

// Lockedf reports a lock held by someone else or a denied ID (exit 3).
func Lockedf(format string, a ...any) error {
	return &CodedError{Kind: ErrLocked, Msg: fmt.Sprintf(format, a...)}
}

// Forbiddenf reports a permission the caller lacks (exit 6).
func Forbiddenf(format string, a ...any) error {
	return &CodedError{Kind: ErrForbidden, Msg: fmt.Sprintf(format, a...)}
}

// ExitCode maps an error to the documented process exit code.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, ErrPaused):
		return ExitPaused
	case errors.Is(err, ErrAborted):
		return ExitAborted
	case errors.Is(err, ErrLocked):
		return ExitLocked
	case errors.Is(err, ErrInterrupted), errors.Is(err, context.Canceled):
		return ExitInterrupted
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return ExitTimeout
	case errors.Is(err, ErrPrecondition):
		return ExitPrecondition
	// An API "forbidden" anywhere in the chain is a missing permission,
	// whatever the code that met it made of it.
	case errors.Is(err, ErrForbidden), apierrors.IsForbidden(err):
		return ExitForbidden
	default:
		return ExitFailed
	}
}

// JoinOneLine joins the errors of several pods (or other parallel work)
// into one error whose message is one line: "2 of them failed: a; b". It
// unwraps to every error, so errors.Is and ExitCode still see their kinds.
// errors.Join would put each on its own line, breaking the one-line error
// the CLI prints.
func JoinOneLine(errs ...error) error {
	var kept []error
	for _, e := range errs {
		if e != nil {
			kept = append(kept, e)
		}
	}
	switch len(kept) {
	case 0:
		return nil
	case 1:
		return kept[0]
	}
	return oneLineJoin(kept)
}

type oneLineJoin []error

func (j oneLineJoin) Error() string {
	msgs := make([]string, len(j))
	for i, e := range j {
		msgs[i] = e.Error()
	}
	return fmt.Sprintf("%d failures: %s", len(j), strings.Join(msgs, "; "))
}

func (j oneLineJoin) Unwrap() []error { return j }

// Stable reason codes of refusals and failures, carried by NDJSON `done` and `step-failed`
// events (`reasonCode`) next to the text; scripts match these, not the text. Documented in
// the README ("Reason codes").
const (
	ReasonInvalidInput       = "InvalidInput"
	ReasonLockHeld           = "LockHeld"
	ReasonDenied             = "Denied"
	ReasonLockLost           = "LockLost"
	ReasonTimeout            = "Timeout"
	ReasonInterrupted        = "Interrupted"
	ReasonPaused             = "Paused"
	ReasonPreconditionFailed = "PreconditionFailed"
	ReasonPodNotReady        = "PodNotReady"
	ReasonNotGreen           = "NotGreen"
	ReasonQuorumAtRisk       = "QuorumAtRisk"
	ReasonMemberUnhealthy    = "MemberUnhealthy"
	ReasonForbidden          = "Forbidden"
	ReasonFailed             = "Failed"
)

// ReasonCodes lists every reason code, in the README's order.
var ReasonCodes = []string{ReasonInvalidInput, ReasonLockHeld, ReasonDenied, ReasonLockLost, ReasonTimeout,
	ReasonPreconditionFailed, ReasonPodNotReady, ReasonNotGreen, ReasonQuorumAtRisk, ReasonMemberUnhealthy,
	ReasonForbidden, ReasonPaused, ReasonAborted, ReasonInterrupted, ReasonFailed}

// WithReason returns err carrying reason code: err itself when it is a CodedError (the
// code set on it), else err wrapped keeping its kind.
func WithReason(err error, reason string) error {
	if err == nil {
		return nil
	}
	var ce *CodedError
	if errors.As(err, &ce) && ce.Reason == "" {
		ce.Reason = reason
		return err
	}
	return &CodedError{Kind: kindFor(err), Err: err, Reason: reason}
}

// kindFor is the sentinel kind err maps to (nil: none, a plain failure).
func kindFor(err error) error {
	for _, k := range []error{ErrUsage, ErrPaused, ErrAborted, ErrLocked, ErrInterrupted, ErrTimeout, ErrPrecondition, ErrForbidden} {
		if errors.Is(err, k) {
			return k
		}
	}
	return errFailed
}

// errFailed is the kind of a failure with a reason code but no sentinel kind.
var errFailed = errors.New("failed")

// ReasonOf returns err's reason code: the first one set in its chain, else its kind's.
func ReasonOf(err error) string {
	if err == nil {
		return ""
	}
	if r := findReason(err); r != "" {
		return r
	}
	switch ExitCode(err) {
	case ExitUsage:
		return ReasonInvalidInput
	case ExitLocked:
		return ReasonLockHeld
	case ExitTimeout:
		return ReasonTimeout
	case ExitInterrupted:
		return ReasonInterrupted
	case ExitPaused:
		return ReasonPaused
	case ExitPrecondition:
		return ReasonPreconditionFailed
	case ExitForbidden:
		return ReasonForbidden
	default:
		return ReasonFailed
	}
}

// findReason walks err's chain (both branches of a CodedError) for a set reason.
func findReason(err error) string {
	var ce *CodedError
	if errors.As(err, &ce) {
		if ce.Reason != "" {
			return ce.Reason
		}
		if ce.Err != nil {
			return findReason(ce.Err)
		}
	}
	return ""
}
