package tui

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// A step stopped by the run (Ctrl-C or SIGTERM, --timeout, a lost lock) is not shown as FAILED.
func TestStepStoppedNotFailed(t *testing.T) {
	for _, tc := range []struct {
		reason, want string
	}{
		{ops.ReasonInterrupted, "INTERRUPTED: context canceled"},
		{ops.ReasonTimeout, "TIMED OUT: context canceled"},
		{ops.ReasonDenied, "STOPPED (lock lost): context canceled"},
		{"", "FAILED: context canceled"},
	} {
		var buf bytes.Buffer
		p := NewPlain(&buf, PlainOptions{})
		p.Emit(ops.Event{Type: ops.EventStepFailed, Time: time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC),
			Step: &ops.StepRef{Index: 1, Total: 1, Target: "pod/web-0"}, Error: "context canceled", ReasonCode: tc.reason})
		if !strings.Contains(buf.String(), tc.want) {
			t.Errorf("reason %q: %q, want %q", tc.reason, buf.String(), tc.want)
		}
	}
}
