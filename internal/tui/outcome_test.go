package tui

import (
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// outcomeText says the outcome's word once when the error starts with it ("interrupted in
// step 3/4", "interrupted before step 2/2"), and joins any other error after a colon.
func TestOutcomeTextSaysTheOutcomeOnce(t *testing.T) {
	for _, tc := range []struct{ err, want string }{
		{"interrupted in step 3/4 (pod/x: restart pod)", "interrupted in step 3/4 (pod/x: restart pod)"},
		{"interrupted before step 2/2 (pod/x: restart pod), at a step boundary", "interrupted before step 2/2 (pod/x: restart pod), at a step boundary"},
		{"waiting for pod db/x", "interrupted: waiting for pod db/x"},
	} {
		if got := outcomeText(ops.Event{Type: ops.EventDone, Outcome: ops.OutcomeInterrupted, Error: tc.err}); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.err, got, tc.want)
		}
	}
}
