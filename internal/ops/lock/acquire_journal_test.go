package lock

import (
	"context"
	"errors"
	"slices"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// journalOn decodes the journal stored on the fixture's lease.
func journalOn(t *testing.T, f *fixture) *ops.Journal {
	t.Helper()
	j, err := decodeJournal(f.stored())
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// AcquireJournal stores the run's first journal with the write that takes the lock; first
// sees the journal found, is asked again after a conflict, and the held lock's Journal is
// the one found.
func TestAcquireJournal(t *testing.T) {
	ctx := context.Background()
	old := &ops.Journal{Operation: "restart", Args: "--rolling", State: ops.JournalInterrupted, Done: []string{"a"}}
	tests := []struct {
		name      string
		start     []*coordinationv1.Lease
		interfere func(l *coordinationv1.Lease) // before our first update
		wantVerbs []string
		wantPrev  []string // the State of prev at each call of first ("" = nil)
	}{
		{name: "no lease", wantVerbs: []string{"get", "create"}, wantPrev: []string{""}},
		{name: "free lease with an old journal", start: []*coordinationv1.Lease{testLease(withJournal(old))},
			wantVerbs: []string{"get", "update"}, wantPrev: []string{ops.JournalInterrupted}},
		{name: "journal changed in between", start: []*coordinationv1.Lease{testLease()},
			interfere: func(l *coordinationv1.Lease) { withJournal(old)(l) },
			wantVerbs: []string{"get", "update", "get", "update"}, wantPrev: []string{"", ops.JournalInterrupted}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.start...)
			if tc.interfere != nil {
				f.beforeUpdate = func() { f.put(tc.interfere) }
			}
			var prevs []string
			held, err := f.manager(me).AcquireJournal(ctx, "restart --rolling", func(prev *ops.Journal, holder string) (*ops.Journal, error) {
				st := ""
				if prev != nil {
					st = prev.State
					prev.State = "scribbled" // first owns its copy
				}
				prevs = append(prevs, st)
				if holder != me {
					t.Errorf("holder = %q, want %q", holder, me)
				}
				return &ops.Journal{Operation: "restart", Args: "--rolling", Holder: holder, State: ops.JournalRunning, Current: "s1"}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.verbs(); !slices.Equal(got, tc.wantVerbs) {
				t.Errorf("calls = %v, want %v", got, tc.wantVerbs)
			}
			if !slices.Equal(prevs, tc.wantPrev) {
				t.Errorf("first saw journals %q, want %q", prevs, tc.wantPrev)
			}
			stored := f.stored()
			if holderOf(stored) != me {
				t.Errorf("holder = %q, want %q", holderOf(stored), me)
			}
			if j := journalOn(t, f); j == nil || j.State != ops.JournalRunning || j.Current != "s1" || j.Holder != me {
				t.Errorf("stored journal = %+v, want this run's, running at s1", j)
			}
			want := tc.wantPrev[len(tc.wantPrev)-1]
			if got := held.Journal(); (want == "" && got != nil) || (want != "" && (got == nil || got.State != want)) {
				t.Errorf("held.Journal() = %+v, want the one found (state %q)", got, want)
			}
		})
	}

	// A refusal writes nothing and never asks for a journal.
	f := newFixture(t, testLease(heldBy(bob, "scale", t0, 600)))
	_, err := f.manager(me).AcquireJournal(ctx, "restart", func(*ops.Journal, string) (*ops.Journal, error) {
		t.Error("first called for a refused acquisition")
		return nil, nil
	})
	if !errors.Is(err, ops.ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
	f.assertNoWrites()
}

// Seen: the acquisition after a Status decides and writes from that read, with no read of
// its own; a stale copy is refused by the API server (conflict, or "already exists") and
// the acquisition is decided again on a fresh read, and a refusal decided from the copy is
// checked on a fresh read before it stands.
func TestAcquireFromSeen(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// start is the lease when Status reads it; after, what someone else does before we
		// acquire.
		start     []*coordinationv1.Lease
		after     func(f *fixture)
		wantVerbs []string
		wantErr   error
		wantHeld  string
	}{
		{name: "missing, still missing", wantVerbs: []string{"create"}, wantHeld: me},
		{name: "free, unchanged", start: []*coordinationv1.Lease{testLease()},
			wantVerbs: []string{"update"}, wantHeld: me},
		{name: "missing, created by bob meanwhile", after: func(f *fixture) {
			f.putNew(testLease(heldBy(bob, "scale", t0, 600)))
		}, wantVerbs: []string{"create", "get"}, wantErr: ops.ErrLocked, wantHeld: bob},
		{name: "free, taken by bob meanwhile", start: []*coordinationv1.Lease{testLease()}, after: func(f *fixture) {
			f.put(heldBy(bob, "scale", t0, 600))
		}, wantVerbs: []string{"update", "get"}, wantErr: ops.ErrLocked, wantHeld: bob},
		{name: "held by bob, released meanwhile", start: []*coordinationv1.Lease{testLease(heldBy(bob, "scale", t0, 600))},
			after:     func(f *fixture) { f.put(clearHolder) },
			wantVerbs: []string{"get", "update"}, wantHeld: me},
		{name: "held by bob, still held", start: []*coordinationv1.Lease{testLease(heldBy(bob, "scale", t0, 600))},
			wantVerbs: []string{"get"}, wantErr: ops.ErrLocked, wantHeld: bob},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.start...)
			st, err := f.manager("reader").Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.after != nil {
				tc.after(f)
			}
			m := f.manager(me)
			m.Seen(st)
			f.cs.ClearActions()
			_, err = m.AcquireJournal(ctx, "restart", func(prev *ops.Journal, holder string) (*ops.Journal, error) {
				return &ops.Journal{Operation: "restart", Holder: holder, State: ops.JournalRunning}, nil
			})
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got := f.verbs(); !slices.Equal(got, tc.wantVerbs) {
				t.Errorf("calls = %v, want %v", got, tc.wantVerbs)
			}
			if got := holderOf(f.stored()); got != tc.wantHeld {
				t.Errorf("holder = %q, want %q", got, tc.wantHeld)
			}
			// The copy is used once: the next acquisition reads.
			f.cs.ClearActions()
			_, _ = m.Acquire(ctx, "restart")
			if got := f.verbs(); len(got) == 0 || got[0] != "get" {
				t.Errorf("second acquisition calls = %v, want a fresh read first", got)
			}
		})
	}

	// A Status of another cluster's lock is not taken for this one's.
	f := newFixture(t)
	other := NewManager(f.cs, testNS, "other", "reader", f.clock)
	st, err := other.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := f.manager(me)
	m.Seen(st)
	f.cs.ClearActions()
	if _, err := m.Acquire(ctx, "restart"); err != nil {
		t.Fatal(err)
	}
	if got := f.verbs(); !slices.Equal(got, []string{"get", "create"}) {
		t.Errorf("calls = %v, want get, create (another cluster's read ignored)", got)
	}
}
