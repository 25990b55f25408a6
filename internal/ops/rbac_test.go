package ops

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
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

// countingChecker counts the reviews asked, failing the first one of fail.
type countingChecker struct {
	mu     sync.Mutex
	asked  map[string]int
	denied map[string]bool
	fail   string
}

func (c *countingChecker) Allowed(_ context.Context, ns string, p Permission) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := ns + "/" + p.String()
	c.asked[k]++
	if p.String() == c.fail && c.asked[k] == 1 {
		return false, errors.New("review failed")
	}
	return !c.denied[p.String()], nil
}

// TestCachedAccess: each question is asked once per command, prefetched answers serve the
// later check, and a failed review is asked again.
func TestCachedAccess(t *testing.T) {
	ctx := t.Context()
	cc := &countingChecker{asked: map[string]int{}, denied: map[string]bool{"delete pods": true}, fail: "create events"}
	a := &CachedAccess{Checker: cc}
	get := Permission{Verb: "get", Resource: "pods"}
	del := Permission{Verb: "delete", Resource: "pods"}
	ev := Permission{Verb: "create", Resource: "events"}
	a.Prefetch(ctx, "ns", []Permission{get, del})
	if err := CheckPermissions(ctx, a, "ns", []NeedFor{{Permission: get, For: "planning"}}); err != nil {
		t.Fatal(err)
	}
	err := CheckPermissions(ctx, a, "ns", []NeedFor{{Permission: get, For: "planning"}, {Permission: del, For: "step 1"}})
	if err == nil || !strings.Contains(err.Error(), "you may not delete pods (for step 1)") {
		t.Fatalf("check = %v, want delete pods refused", err)
	}
	if _, err := a.Allowed(ctx, "ns", ev); err == nil {
		t.Fatal("the first events review should fail")
	}
	if ok, err := a.Allowed(ctx, "ns", ev); err != nil || !ok {
		t.Fatalf("events asked again: %v %v", ok, err)
	}
	if ok, err := a.Allowed(ctx, "other", get); err != nil || !ok {
		t.Fatalf("another namespace: %v %v", ok, err)
	}
	want := map[string]int{"ns/get pods": 1, "ns/delete pods": 1, "ns/create events": 2, "other/get pods": 1}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !maps.Equal(cc.asked, want) {
		t.Errorf("asked %v, want %v", cc.asked, want)
	}
}

// prefetchGate answers once its gate opens and counts the answers it gave.
type prefetchGate struct {
	gate     chan struct{}
	answered atomic.Int32
}

func (g *prefetchGate) Allowed(ctx context.Context, _ string, _ Permission) (bool, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	g.answered.Add(1)
	return true, nil
}

// TestPrefetchWaitJoins: Prefetch's wait returns only once its questions are answered, so no
// review outlives the command that asked (they raced a test's fake client after the command
// had returned).
func TestPrefetchWaitJoins(t *testing.T) {
	g := &prefetchGate{gate: make(chan struct{})}
	a := &CachedAccess{Checker: g}
	wait := a.Prefetch(t.Context(), "ns", []Permission{{Verb: "get", Resource: "pods"}, {Verb: "delete", Resource: "pods"}})
	go func() {
		time.Sleep(20 * time.Millisecond) // let a wait that does not join return first
		close(g.gate)
	}()
	wait()
	if n := g.answered.Load(); n != 2 {
		t.Fatalf("wait returned with %d of 2 questions answered", n)
	}
}
