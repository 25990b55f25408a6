package foundationdb

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestRestartWaitsOutAForeignZoneBetweenBatches: a maintenance zone someone else sets after one
// batch's gate passed and before the next batch starts is waited out, as the gate after a batch
// waits for it (published as blocked on that zone), never refused half-way through the run nor
// taken over: nothing of the next batch is sent while it is on, and the run finishes once it ends.
func TestRestartWaitsOutAForeignZoneBetweenBatches(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) < 2 || p.Steps[1].Precheck == nil {
		t.Fatalf("plan: %d step(s), want at least two bounces", len(p.Steps))
	}
	// Someone else's zone appears between the first batch and the second one's gate.
	s := p.Steps[1]
	pre := s.Precheck
	var once sync.Once
	s.Precheck = func(ctx context.Context, sc *ops.StepContext) (bool, error) {
		once.Do(func() { runFdbcli(t, model, "maintenance on zone-x 300") })
		return pre(ctx, sc)
	}
	// It ends once the run says it is blocked on it.
	var mu sync.Mutex
	var blocked *ops.Blocked
	var offAt int
	sink := ops.SinkFunc(func(ev ops.Event) {
		if ev.Type != ops.EventStepWaiting || ev.Blocked == nil || !strings.Contains(ev.Blocked.On, "zone-x") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if blocked == nil {
			b := *ev.Blocked
			blocked = &b
			offAt = len(mutations(model))
			runFdbcli(t, model, "maintenance off")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := (&ops.Executor{LockID: "test", Sink: sink, Timeout: time.Minute}).Run(ctx, p); err != nil {
		t.Fatalf("run = %v (exit %d), want the zone waited out", err, ops.ExitCode(err))
	}
	mu.Lock()
	defer mu.Unlock()
	if blocked == nil {
		t.Fatal("the run never said it was blocked on zone-x")
	}
	if blocked.Kind != ops.BlockedZone || !strings.Contains(blocked.On, "set by someone else") || !strings.Contains(blocked.ToUnblock, "maintenance off") {
		t.Fatalf("blocked = %+v, want kind zone on zone-x set by someone else, with the maintenance off hint", blocked)
	}
	muts := mutations(model)
	// While zone-x was on: nothing but zone-x itself (the second batch waited).
	on := -1
	for i, m := range muts {
		if strings.HasPrefix(m, "maintenance on zone-x") {
			on = i
		}
	}
	if on < 0 || offAt != on+1 {
		t.Fatalf("fdbcli writes %q: want nothing sent between someone else's zone-x (at %d) and its end (at %d)", muts, on, offAt)
	}
	kills := 0
	for _, m := range muts {
		if strings.HasPrefix(m, "kill ") {
			kills++
		}
	}
	if kills != len(p.Steps) {
		t.Fatalf("%d kill(s) for %d batch(es): %q", kills, len(p.Steps), muts)
	}
}

// TestRestartByPodWaitsOutAForeignZone: --method pod waits out someone else's zone before its
// batch the same way (its Before hook is that batch's gate): no pod is deleted and no zone of
// the run's own is set while the other one is on.
func TestRestartByPodWaitsOutAForeignZone(t *testing.T) {
	c, model, e, client := podCluster(t)
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone, Method: MethodPod})
	if err != nil {
		t.Fatal(err)
	}
	runFdbcli(t, model, "maintenance on zone-x 300")
	// The first delete ends the test: nothing brings a deleted pod back here.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var deleted []string
	var blocked bool
	var writesAtOff int
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		deleted = append(deleted, a.(k8stesting.DeleteAction).GetName())
		cancel()
		return false, nil, nil
	})
	sink := ops.SinkFunc(func(ev ops.Event) {
		if ev.Type != ops.EventStepWaiting || ev.Blocked == nil || !strings.Contains(ev.Blocked.On, "zone-x") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !blocked {
			blocked = true
			writesAtOff = len(mutations(model))
			if len(deleted) > 0 {
				t.Errorf("pods deleted while zone-x was on: %q", deleted)
			}
			runFdbcli(t, model, "maintenance off")
		}
	})
	err = (&ops.Executor{LockID: "test", Sink: sink, Timeout: time.Minute}).Run(ctx, p)
	mu.Lock()
	defer mu.Unlock()
	if !blocked {
		t.Fatalf("run = %v (exit %d): it never said it was blocked on zone-x", err, ops.ExitCode(err))
	}
	if len(deleted) == 0 {
		t.Fatalf("run = %v (exit %d): no pod deleted once zone-x ended", err, ops.ExitCode(err))
	}
	if muts := mutations(model); writesAtOff != 1 || !strings.HasPrefix(muts[0], "maintenance on zone-x") {
		t.Fatalf("fdbcli writes %q, %d before zone-x ended: want only zone-x itself", muts, writesAtOff)
	}
}
