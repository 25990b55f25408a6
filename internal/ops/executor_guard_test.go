package ops

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestActionNotStartedWhenLockLostAtItsStartWrite: a lock lost while the step's start is
// written (a deny seen by the lock watch just then) stops the step before its action, even an
// action that makes no Kubernetes write of its own (an fdbcli kill, a SQL statement), which
// no write guard would stop: the executor checks the lock right before each action.
func TestActionNotStartedWhenLockLostAtItsStartWrite(t *testing.T) {
	var acted atomic.Int32
	locker := &memLocker{id: "alice@api:6443", watched: true}
	once := false
	locker.beforeSave = func(j *Journal) error {
		if j.Current != "bounce" || once {
			return nil
		}
		once = true
		locker.loseLock(t, Lockedf("lost the lock on cluster ns/c: denied"))
		return nil
	}
	p := &Plan{Operation: "restart", Cluster: "c", Namespace: "ns"}
	// Two steps: the second's start is written right before its action (the first's is
	// written when the lock is taken).
	p.Steps = []*Step{{ID: "first", Target: "x", Mutating: true, Action: func(context.Context, *StepContext) error { return nil }}, {ID: "bounce", Target: "x", Mutating: true,
		Action: func(context.Context, *StepContext) error {
			acted.Add(1)
			return nil
		}}}
	err := (&Executor{Locker: locker, Sink: &Recorder{}, Timeout: time.Minute}).Run(context.Background(), p)
	if ExitCode(err) != ExitLocked {
		t.Fatalf("run = %v (exit %d), want a lost lock (exit %d)", err, ExitCode(err), ExitLocked)
	}
	if !once {
		t.Fatal("the step's start was never written")
	}
	if n := acted.Load(); n != 0 {
		t.Fatalf("the action ran %d time(s) after the lock was lost", n)
	}
}
