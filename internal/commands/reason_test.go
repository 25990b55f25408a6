package commands

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Every refusal of an operation, before its run or during it, ends its NDJSON stream with a
// done event that carries a stable reason code beside the text; nothing is written.
func TestRefusalsCarryReasonCodes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		extra    []runtime.Object
		terminal bool
		code     int
		want     string
		errWant  string
	}{
		{name: "unknown group", args: []string{"restart", "db", "--rolling", "--group", "nope", "--yes"}, code: ops.ExitUsage, want: ops.ReasonInvalidInput},
		{name: "held by someone else", args: []string{"restart", "db", "--rolling", "--yes"}, code: ops.ExitLocked, want: ops.ReasonLockHeld,
			extra: []runtime.Object{heldLease("prod", "db", "bob@elsewhere", "s1", "restart --rolling", "INC-1")}},
		{name: "no terminal, no --yes", args: []string{"restart", "db", "--rolling"}, code: ops.ExitUsage, want: ops.ReasonInvalidInput},
		// -o json never asks, even with a terminal: the refusal, not a prompt.
		{name: "terminal, -o json, no --yes", args: []string{"restart", "db", "--rolling"}, terminal: true, code: ops.ExitUsage,
			want: ops.ReasonInvalidInput, errWant: "-o json never asks; pass --yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := append(fakecluster.Objects("prod", "db", "", webObjects()...), tc.extra...)
			h := newHarness(t, objs...)
			h.terminal = tc.terminal
			h.client.ClearActions()
			r := h.run(append(tc.args, "-o", "json", "-n", "prod")...)
			if r.code != tc.code || !strings.Contains(r.err, tc.errWant) || strings.Contains(r.err, "?") {
				t.Fatalf("exit %d, want %d; stderr %q, want %q and no question", r.code, tc.code, r.err, tc.errWant)
			}
			lines := strings.Split(strings.TrimSpace(r.out), "\n")
			var done ops.Event
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &done); err != nil {
				t.Fatalf("last stdout line %q: %v", lines[len(lines)-1], err)
			}
			if done.Type != ops.EventDone || done.ReasonCode != tc.want || done.Error == "" {
				t.Errorf("last event %+v, want done with reason code %s and the error", done, tc.want)
			}
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("refusal wrote %v", w)
			}
		})
	}
}

// The codes a run's lock loss and refusals carry through the error chain.
func TestReasonOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{ops.Refusef(ops.ReasonNotGreen, "yellow"), ops.ReasonNotGreen},
		{ops.WithReason(ops.Lockedf("denied"), ops.ReasonDenied), ops.ReasonDenied},
		{&ops.CodedError{Kind: ops.ErrLocked, Msg: "lost (while: ...)", Err: ops.WithReason(ops.Lockedf("x"), ops.ReasonLockLost)}, ops.ReasonLockLost},
		{ops.Preconditionf("plain"), ops.ReasonPreconditionFailed},
		{ops.Usagef("bad"), ops.ReasonInvalidInput},
	} {
		if got := ops.ReasonOf(tc.err); got != tc.want {
			t.Errorf("ReasonOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
