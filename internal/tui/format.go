// Package tui renders the ops event stream for humans and machines: a plain
// line printer for CI logs, an NDJSON printer (the documented machine
// schema), and an interactive Bubble Tea view for on-call engineers.
package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// stepLabel renders a step reference the same way in every human view:
// "[2/6] pod/web-1 restart pod".
// shortStepLabel is "[i/n] target": a step without its description.
func shortStepLabel(s *ops.StepRef) string {
	if s == nil {
		return ""
	}
	short := *s
	short.Description = ""
	return stepLabel(&short)
}

func stepLabel(s *ops.StepRef) string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	if s.Total > 0 {
		fmt.Fprintf(&b, "[%d/%d]", s.Index, s.Total)
	} else {
		fmt.Fprintf(&b, "[%d]", s.Index)
	}
	if s.Target != "" {
		b.WriteString(" " + s.Target)
	}
	if s.Description != "" {
		b.WriteString(" " + s.Description)
	}
	return b.String()
}

// stepKey identifies a step across events; IDs are stable, indexes are the
// fallback for procedures that leave the ID empty.
func stepKey(s *ops.StepRef) string {
	if s == nil {
		return ""
	}
	if s.ID != "" {
		return s.ID
	}
	return fmt.Sprintf("#%d", s.Index)
}

// progressText renders "12/40 shards".
func progressText(p *ops.Progress) string {
	if p == nil {
		return ""
	}
	if p.Unit == "bytes" {
		// "1.2 GiB/3.0 GiB moved" reads; "1288490188/3221225472 bytes" does not.
		return ops.FormatBytes(p.Done) + "/" + ops.FormatBytes(p.Total)
	}
	s := fmt.Sprintf("%d/%d", p.Done, p.Total)
	if p.Unit != "" {
		s += " " + p.Unit
	}
	return s
}

// fraction is p as 0..1, clamped so a bad report cannot break a bar.
func fraction(p *ops.Progress) float64 {
	if p == nil || p.Total <= 0 {
		return 0
	}
	f := float64(p.Done) / float64(p.Total)
	return min(max(f, 0), 1)
}

// formatDuration keeps durations readable in logs: whole seconds above a
// second ("3m12s"), milliseconds below.
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// lockText describes a lock event without a timestamp prefix; format is
// the layout for the expiry time.
func lockText(l *ops.LockInfo, message string, format string) string {
	if l == nil {
		return joinMessage("lock", message)
	}
	var b strings.Builder
	switch l.Action {
	case ops.LockAcquired:
		b.WriteString("lock acquired")
	case ops.LockExtended:
		b.WriteString("lock extended")
	case ops.LockTakeover:
		b.WriteString("lock taken over")
	case ops.LockRenewed:
		b.WriteString("lock renewed")
	case ops.LockReleased:
		b.WriteString("lock released")
	case ops.LockDisabled:
		b.WriteString("lock disabled")
	default:
		fmt.Fprintf(&b, "lock %s", l.Action)
	}
	// Renewals and releases repeat the holder only as noise; acquisition,
	// extension and takeover are where on-call needs to see who holds it.
	switch l.Action {
	case ops.LockAcquired, ops.LockExtended, ops.LockTakeover:
		if l.Holder != "" {
			fmt.Fprintf(&b, " by %s", l.Holder)
		}
		if l.Operation != "" {
			fmt.Fprintf(&b, " for %s", l.Operation)
		}
	}
	if l.Action != ops.LockReleased && l.Action != ops.LockDisabled && !l.Expires.IsZero() {
		fmt.Fprintf(&b, ", expires %s", l.Expires.UTC().Format(format))
	}
	return joinMessage(b.String(), message)
}

// outcomeText is the first line of a done report: "interrupted after 3m12s".
func outcomeText(e ops.Event) string {
	outcome := e.Outcome
	if outcome == "" {
		outcome = "finished"
	}
	s := outcome
	if e.Elapsed > 0 {
		if outcome == ops.OutcomeSucceeded || outcome == ops.OutcomeDryRun {
			s += " in " + formatDuration(e.Elapsed)
		} else {
			s += " after " + formatDuration(e.Elapsed)
		}
	}
	switch {
	case e.Error != "" && (strings.HasPrefix(e.Error, outcome+" in ") || strings.HasPrefix(e.Error, outcome+" before ")):
		// "interrupted in step 3/4 (...)": the outcome's word once.
		s += strings.TrimPrefix(e.Error, outcome)
	case e.Error != "":
		s += ": " + e.Error
	case e.Message != "":
		s += ": " + e.Message
	}
	return s
}

// joinMessage appends an optional free-text message to a status.
func joinMessage(status, message string) string {
	if message == "" {
		return status
	}
	return status + ": " + message
}

// oneLine keeps a multi-line error or message from breaking line-oriented
// output (CI logs, table cells).
func oneLine(s string) string {
	return ops.Printable(s)
}
