package lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// A held lock's watch tells the run, as the lease changes, that the lock is no longer its
// own: denied, released or taken over by someone else, or the lease deleted. The run's own
// writes (a journal save) are not a loss.
func TestWatchLockSeesLoss(t *testing.T) {
	for _, tc := range []struct {
		name string
		// change is "someone else" writing the lease, after the run's own journal write: the
		// loss reported (once) is the change's, so the run's own write was not taken for one.
		change func(f *fixture)
		want   string // in the loss's error
	}{
		{name: "denied", change: func(f *fixture) {
			f.put(withDenied(DenyEntry{ID: me, By: bob, At: t0, Reason: "stop now"}))
		}, want: "deny list"},
		{name: "released by someone else", change: func(f *fixture) { f.put(clearHolder) }, want: "released by someone else"},
		{name: "taken over", change: func(f *fixture) { f.put(heldBy(bob, "restart", t0, 600)) }, want: "now held by " + bob},
		{name: "lease deleted", change: func(f *fixture) {
			if err := f.cs.Tracker().Delete(leaseGVR, testNS, leaseName); err != nil {
				f.t.Fatal(err)
			}
		}, want: "was deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			held, err := f.manager(me).Acquire(t.Context(), "restart")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			lost := make(chan error, 2)
			done := make(chan struct{})
			go func() {
				defer close(done)
				held.(ops.LockWatcher).WatchLock(ctx, func(err error) { lost <- err })
			}()
			// The informer has listed once the lease's list was asked for; then the run writes.
			waitFor(t, func() bool {
				for _, v := range f.verbs() {
					if v == "watch" {
						return true
					}
				}
				return false
			})
			if err := held.SaveJournal(t.Context(), &ops.Journal{Operation: "restart", Holder: me, State: ops.JournalRunning}); err != nil {
				t.Fatal(err)
			}
			tc.change(f)
			select {
			case err := <-lost:
				if !errors.Is(err, ops.ErrLocked) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("lost = %v, want ErrLocked saying %q", err, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the watch did not report the loss")
			}
			cancel()
			<-done
			if len(lost) > 0 {
				t.Errorf("loss reported more than once: %v", <-lost)
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A run that lost its lock records what it finished where the lease still carries its journal
// and nobody else holds it (denied: it also gives the lock up; released by someone else), and
// writes nothing where someone else holds it or the lease is gone.
func TestSaveJournalAfterLoss(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(f *fixture)
		writes bool
	}{
		{name: "denied", change: func(f *fixture) {
			f.put(withDenied(DenyEntry{ID: me, By: bob, At: t0, Reason: "stop now"}))
		}, writes: true},
		{name: "released by someone else", change: func(f *fixture) { f.put(clearHolder) }, writes: true},
		{name: "taken over", change: func(f *fixture) { f.put(heldBy(bob, "restart", t0, 600)) }},
		{name: "released, then another run's journal", change: func(f *fixture) {
			f.put(clearHolder)
			f.put(withJournal(&ops.Journal{Operation: "scale", Holder: bob, State: ops.JournalSucceeded}))
		}},
		{name: "taken over by another session of the same ID", change: func(f *fixture) {
			f.put(withAnnotation(AnnotationSession, "someone-elses-session"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			held, err := f.manager(me).Acquire(t.Context(), "restart")
			if err != nil {
				t.Fatal(err)
			}
			if err := held.SaveJournal(t.Context(), &ops.Journal{Operation: "restart", Holder: me, State: ops.JournalRunning}); err != nil {
				t.Fatal(err)
			}
			tc.change(f)
			before := f.stored()
			final := &ops.Journal{Operation: "restart", Holder: me, State: ops.JournalFailed, Done: []string{"restart/db-0"}}
			err = held.(ops.LossRecorder).SaveJournalAfterLoss(t.Context(), final)
			after := f.stored()
			if !tc.writes {
				if !errors.Is(err, ops.ErrLocked) {
					t.Errorf("err = %v, want ErrLocked", err)
				}
				f.assertUnchanged(before.ResourceVersion)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			j, err := decodeJournal(after)
			if err != nil || j == nil || j.State != ops.JournalFailed || len(j.Done) != 1 {
				t.Errorf("journal after the loss = %+v (%v), want the run's final one", j, err)
			}
			if holderOf(after) != "" {
				t.Errorf("holder %q after the loss's write, want the lock given up", holderOf(after))
			}
			if after.Annotations[AnnotationDenyList] != before.Annotations[AnnotationDenyList] {
				t.Error("the deny list changed")
			}
		})
	}
	t.Run("lease deleted", func(t *testing.T) {
		f := newFixture(t)
		held, err := f.manager(me).Acquire(t.Context(), "restart")
		if err != nil {
			t.Fatal(err)
		}
		if err := f.cs.Tracker().Delete(leaseGVR, testNS, leaseName); err != nil {
			t.Fatal(err)
		}
		err = held.(ops.LossRecorder).SaveJournalAfterLoss(t.Context(), &ops.Journal{Operation: "restart", Holder: me})
		if !errors.Is(err, ops.ErrLocked) || f.exists() {
			t.Errorf("err = %v, lease exists %v: want ErrLocked and no lease created", err, f.exists())
		}
	})
}

// An operation that extends a hold its lock ID took by hand learns that hold's reason
// (LockInfo.HandReason), so it can say so: the same ID may be someone else's.
func TestAcquireOverHandHoldNamesItsReason(t *testing.T) {
	f := newFixture(t, testLease(heldBy(me, ManualOperation, t0, 600), withAnnotation(AnnotationReason, "INC-7: bob investigating")))
	held, err := f.manager(me).Acquire(t.Context(), "restart --rolling")
	if err != nil {
		t.Fatal(err)
	}
	if info := held.Info(); info.Action != ops.LockExtended || info.HandReason != "INC-7: bob investigating" {
		t.Errorf("info = %+v, want extended with the hand hold's reason", info)
	}
	f2 := newFixture(t, testLease(heldBy(me, "scale", t0, 600), withAnnotation(AnnotationReason, "nightly")))
	held, err = f2.manager(me).Acquire(t.Context(), "restart --rolling")
	if err != nil {
		t.Fatal(err)
	}
	if info := held.Info(); info.HandReason != "" {
		t.Errorf("info = %+v, want no hand reason when extending an operation's lock", info)
	}
}

// A run's last journal write records the run in the history once (written twice, one record),
// and the history keeps the last MaxHistory runs.
func TestHistoryRecordsRunsBounded(t *testing.T) {
	f := newFixture(t)
	for i := range MaxHistory + 2 {
		m := f.manager(me)
		m.Session = fmt.Sprintf("session-%d", i)
		held, err := m.Acquire(t.Context(), "restart --rolling")
		if err != nil {
			t.Fatal(err)
		}
		j := &ops.Journal{Operation: "restart", Args: "--rolling", Holder: me, State: ops.JournalSucceeded, Steps: 3,
			Done: []string{"a", "b", "c"}, Started: t0, Updated: t0.Add(time.Duration(i) * time.Minute)}
		if err := held.SaveJournal(t.Context(), j); err != nil {
			t.Fatal(err)
		}
		if err := held.(ops.JournalReleaser).SaveJournalAndRelease(t.Context(), j); err != nil {
			t.Fatal(err)
		}
	}
	list, unfinished, err := f.manager(me).History(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != MaxHistory || unfinished != nil {
		t.Fatalf("%d records (unfinished %v), want %d", len(list), unfinished, MaxHistory)
	}
	if list[0].Run != "session-2" || list[MaxHistory-1].Run != fmt.Sprintf("session-%d", MaxHistory+1) || list[0].StepsDone != 3 {
		t.Errorf("records %s..%s, want session-2..session-%d (oldest dropped)", list[0].Run, list[MaxHistory-1].Run, MaxHistory+1)
	}
}
