package ops

import (
	"context"
	"sync"
	"testing"
	"time"
)

type fakeCompanion struct {
	mu              sync.Mutex
	renewed         chan struct{}
	renews          int
	released        int
	leaseReleasedAt int // the Lease's release count when the companion was released
	locker          *memLocker
}

func (f *fakeCompanion) Renew(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renews++
	if f.renews == 1 {
		close(f.renewed)
	}
	return nil
}

func (f *fakeCompanion) Release(context.Context) error {
	f.locker.mu.Lock()
	n := f.locker.released
	f.locker.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released++
	f.leaseReleasedAt = n
	return nil
}

// TestCompanionLockRenewedAndReleased: the plan's companion lock is renewed when the Lease is,
// and released once at the run's end, before the Lease.
func TestCompanionLockRenewedAndReleased(t *testing.T) {
	locker := &memLocker{id: "me", oneWriteEnd: true}
	comp := &fakeCompanion{renewed: make(chan struct{}), locker: locker}
	p := &Plan{Operation: "test", Cluster: "c", Namespace: "ns", Companion: comp}
	p.Steps = []*Step{{ID: "wait-renewal", Target: "x", Mutating: true,
		Action: func(ctx context.Context, sc *StepContext) error {
			select {
			case <-comp.renewed:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}}}
	ex := &Executor{Locker: locker, LockID: "me", RenewEvery: time.Millisecond, Timeout: time.Minute}
	if err := ex.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if comp.released != 1 || comp.leaseReleasedAt != 0 || locker.released != 1 {
		t.Fatalf("companion released %d times (Lease released %d times before it), Lease released %d times", comp.released, comp.leaseReleasedAt, locker.released)
	}
}
