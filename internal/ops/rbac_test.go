package ops

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// gatedChecker answers a review only once inflight reviews wait at the same time (or the
// test's patience runs out), denying the permissions in denied.
type gatedChecker struct {
	mu       sync.Mutex
	waiting  int
	inflight int
	all      chan struct{}
	denied   map[string]bool
	fail     string
}

func (g *gatedChecker) Allowed(ctx context.Context, _ string, p Permission) (bool, error) {
	g.mu.Lock()
	g.waiting++
	if g.waiting == g.inflight {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-time.After(5 * time.Second):
		return false, errors.New("reviews were sent one after the other")
	case <-ctx.Done():
		return false, ctx.Err()
	}
	if p.String() == g.fail {
		return false, errors.New("review failed")
	}
	return !g.denied[p.String()], nil
}

func TestCheckPermissionsAsksAtOnce(t *testing.T) {
	needs := []NeedFor{
		{Permission: Permission{Verb: "get", Resource: "pods"}, For: "planning"},
		{Permission: Permission{Verb: "delete", Resource: "pods"}, For: "step 1 (pod/web-0)"},
		{Permission: Permission{Verb: "update", Group: "coordination.k8s.io", Resource: "leases"}, For: "the cluster lock"},
		{Permission: Permission{Verb: "create", Resource: "events"}, For: "the audit trail"},
	}
	for _, tc := range []struct {
		name    string
		denied  []string
		fail    string
		wantErr string
	}{
		{name: "all allowed"},
		{name: "missing ones named in the order of needs", denied: []string{"create events", "delete pods"},
			wantErr: "permission denied in namespace ns: you may not delete pods (for step 1 (pod/web-0)), create events (for the audit trail)"},
		{name: "a failed review fails the check", fail: "update leases.coordination.k8s.io",
			wantErr: "review failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gatedChecker{inflight: len(needs), all: make(chan struct{}), denied: map[string]bool{}, fail: tc.fail}
			for _, d := range tc.denied {
				g.denied[d] = true
			}
			err := CheckPermissions(t.Context(), g, "ns", needs)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("CheckPermissions: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("CheckPermissions: %v, want %q", err, tc.wantErr)
			}
		})
	}
}
