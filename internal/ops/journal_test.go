package ops

import (
	"encoding/json"
	"fmt"
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
