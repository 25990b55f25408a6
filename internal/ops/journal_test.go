package ops

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestRequestHints: the command lines rendered from a journal's request
// (the resume hint, `resume`) are what a shell needs to run them again:
// no doubled `dbops`, -n and --context kept, values quoted; and a request
// survives the journal's JSON unchanged.
func TestRequestHints(t *testing.T) {
	tests := []struct {
		name string
		req  Request
	}{
		{"restart", Request{Command: []string{"restart"}, Cluster: "db", Namespace: "prod",
			Flags: []RequestFlag{{Name: "rolling", Values: []string{"true"}, Bool: true}}}},
		{"groups and context", Request{Command: []string{"restart"}, Cluster: "db", Namespace: "prod", Context: "kind-prod",
			Flags: []RequestFlag{{Name: "group", Values: []string{"hot", "cold"}}, {Name: "mode", Values: []string{"zone"}},
				{Name: "rolling", Values: []string{"true"}, Bool: true}}}},
		{"replace pods", Request{Command: []string{"replace"}, Cluster: "db", Args: []string{"db-hot-1", "db-hot-2"}, Namespace: "team a",
			Flags: []RequestFlag{{Name: "ignore-operator", Values: []string{"false"}, Bool: true}, {Name: "strategy", Values: []string{"deletion"}}}}},
		{"quoting", Request{Command: []string{"scale"}, Cluster: "it's", Namespace: "prod",
			Flags: []RequestFlag{{Name: "data", Values: []string{"hot=3"}}, {Name: "selector", Values: []string{"app in (a,b)"}}}}},
	}
	var b strings.Builder
	for _, tt := range tests {
		fmt.Fprintf(&b, "%s:\n  %s\n  %s\n", tt.name, tt.req.CommandLine(), tt.req.ResumeCommand())
		raw, err := json.Marshal(Journal{Request: &tt.req})
		if err != nil {
			t.Fatal(err)
		}
		var back Journal
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if got, want := back.Request.CommandLine(), tt.req.CommandLine(); got != want {
			t.Errorf("%s: after the journal's JSON: %q, want %q", tt.name, got, want)
		}
	}
	assertGolden(t, "request-hints.txt", []byte(b.String()))
}

// The done event's resume hint works where it is printed: the request as argv and as a shell
// line, with --yes when the run had it; after a lost lock, without the lock ID that lost it.
func TestResumeHint(t *testing.T) {
	req := &Request{Command: []string{"restart"}, Cluster: "db", Namespace: "prod", Context: "staging",
		Flags: []RequestFlag{{Name: "lock-id", Values: []string{"ci@test"}}, {Name: "rolling", Values: []string{"true"}, Bool: true},
			{Name: "reason", Values: []string{"it's late"}}}}
	for _, tc := range []struct {
		name      string
		err       error
		held      bool
		confirmed bool
		argv      []string
		line      string
	}{
		{name: "timeout", err: &CodedError{Kind: ErrTimeout, Msg: "timed out"}, held: true,
			argv: []string{"kubectl", "dbops", "restart", "db", "-n", "prod", "--context", "staging", "--lock-id=ci@test", "--rolling", "--reason=it's late"},
			line: `re-run the same command to resume: kubectl dbops restart db -n prod --context staging --lock-id=ci@test --rolling --reason='it'\''s late'`},
		{name: "interrupted, with --yes", err: &CodedError{Kind: ErrInterrupted, Msg: "interrupted"}, held: true, confirmed: true,
			argv: []string{"kubectl", "dbops", "restart", "db", "-n", "prod", "--context", "staging", "--lock-id=ci@test", "--rolling", "--reason=it's late", "--yes"},
			line: `re-run the same command to resume: kubectl dbops restart db -n prod --context staging --lock-id=ci@test --rolling --reason='it'\''s late' --yes`},
		{name: "lock lost", err: Lockedf("denied"), held: true, confirmed: true,
			argv: []string{"kubectl", "dbops", "restart", "db", "-n", "prod", "--context", "staging", "--rolling", "--reason=it's late", "--yes"},
			line: `this run's lock ID ci@test lost the lock (see the error); the journal is kept: once the cluster may be changed again, resume as a lock ID that is not denied: kubectl dbops restart db -n prod --context staging --rolling --reason='it'\''s late' --yes`},
		{name: "lock never held", err: Lockedf("held by bob")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Executor{plan: &Plan{Request: req}, Confirmed: tc.confirmed}
			if tc.held {
				e.held = &memHeld{m: &memLocker{id: "ci@test"}}
			}
			line, argv := e.resumeHint(outcomeOf(tc.err), tc.err)
			if line != tc.line || !slices.Equal(argv, tc.argv) {
				t.Errorf("hint %q %q, want %q %q", line, argv, tc.line, tc.argv)
			}
		})
	}
}
