package lock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Two invocations under the same lock ID (one user, two terminals) must
// not both run: the second sees the first's live session and is refused.
func TestAcquireSessions(t *testing.T) {
	tests := []struct {
		name    string
		lease   *coordinationv1.Lease
		session string
		want    string // action, or "" when refused
		errHas  string
	}{
		{name: "other live session of mine", session: "s2",
			lease:  testLease(heldBy(me, "restart --rolling", t0.Add(-10*time.Second), 600), withAnnotation(AnnotationSession, "s1")),
			errHas: "locked by another kubectl-dbops session of " + me + " (restart --rolling), renewed 10s ago; wait for it to finish, or if that process is gone, it counts as dead in 50s (at 2026-11-22T10:00:50Z)"},
		{name: "other session stopped renewing", session: "s2",
			lease: testLease(heldBy(me, "restart --rolling", t0.Add(-2*time.Minute), 600), withAnnotation(AnnotationSession, "s1")),
			want:  ops.LockExtended},
		{name: "same session", session: "s1",
			lease: testLease(heldBy(me, "restart --rolling", t0.Add(-10*time.Second), 600), withAnnotation(AnnotationSession, "s1")),
			want:  ops.LockExtended},
		{name: "manual hold has no session", session: "s2",
			lease: testLease(heldBy(me, "manual lock", t0.Add(-10*time.Second), 600)),
			want:  ops.LockExtended},
		{name: "manual acquire during a live session is refused too", session: "",
			lease:  testLease(heldBy(me, "scale", t0.Add(-5*time.Second), 600), withAnnotation(AnnotationSession, "s1")),
			errHas: "another kubectl-dbops session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.lease)
			m := f.manager(me)
			m.Session = tt.session
			held, err := m.Acquire(context.Background(), "restart --rolling")
			if tt.want == "" {
				if !errors.Is(err, ops.ErrLocked) || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("err = %v, want ErrLocked containing %q", err, tt.errHas)
				}
				f.assertNoWrites()
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if held.Info().Action != tt.want {
				t.Errorf("action %s, want %s", held.Info().Action, tt.want)
			}
			if got := f.stored().Annotations[AnnotationSession]; got != tt.session {
				t.Errorf("session annotation %q, want %q", got, tt.session)
			}
		})
	}
}

// A session whose lease was taken over by another session of the same ID
// (after it stopped renewing) must stop: renewing fails.
func TestRenewAfterSessionTakeover(t *testing.T) {
	f := newFixture(t)
	first := f.manager(me)
	first.Session = "s1"
	held, err := first.Acquire(context.Background(), "restart")
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Set(t0.Add(2 * time.Minute))
	second := f.manager(me)
	second.Session = "s2"
	if _, err := second.Acquire(context.Background(), "restart"); err != nil {
		t.Fatalf("second session after the first went quiet: %v", err)
	}
	if _, err := held.Renew(context.Background()); !errors.Is(err, ops.ErrLocked) || !strings.Contains(err.Error(), "another kubectl-dbops session") {
		t.Fatalf("renew of the old session: %v", err)
	}
}

// Detach hands a kept lock back to the user's manual hold.
func TestDetach(t *testing.T) {
	f := newFixture(t, testLease(heldBy(me, "manual lock", t0.Add(-time.Minute), 600)))
	m := f.manager(me)
	m.Session = "s1"
	held, err := m.Acquire(context.Background(), "restart")
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Detach(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := f.stored()
	if _, ok := l.Annotations[AnnotationSession]; ok || holderOf(l) != me {
		t.Errorf("after detach: holder %q annotations %v", holderOf(l), l.Annotations)
	}
	other := f.manager(me)
	other.Session = "s2"
	if _, err := other.Acquire(context.Background(), "scale"); err != nil {
		t.Errorf("next command after detach: %v", err)
	}
}
