package ops

import (
	"context"
	"sync"
	"testing"
	"time"
)

// manualClock moves only when told.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// The done event says, per finished step, how long it took, how much of that came after its
// pods were Ready (the gate) and an etcd member's catch-up.
func TestDoneEventStepTimes(t *testing.T) {
	clock := &manualClock{t: time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)}
	step := func(id string, start, gate, catchUp time.Duration) *Step {
		return &Step{ID: id, Target: "pod " + id, Description: "restart " + id, Mutating: true,
			Verify: func(_ context.Context, sc *StepContext) error {
				clock.advance(start)
				sc.MarkReady()
				clock.advance(gate)
				if catchUp > 0 {
					sc.RecordCatchUp(catchUp)
				}
				return nil
			}}
	}
	p := &Plan{Operation: "restart", Cluster: "web", Namespace: "prod", Engine: EngineGeneric, Steps: []*Step{
		step("restart/web-0", 4*time.Second, 3*time.Second, 0),
		step("restart/web-1", 2*time.Second, 500*time.Millisecond, 200*time.Millisecond),
		{ID: "check", Target: "cluster", Description: "no pods", Verify: func(context.Context, *StepContext) error { return nil }},
	}}
	rec := &Recorder{}
	ex := &Executor{Locker: &memLocker{id: "me"}, Sink: rec, Clock: clock, Timeout: time.Minute}
	if err := ex.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	evs := rec.Events()
	done := evs[len(evs)-1]
	if done.Type != EventDone {
		t.Fatalf("last event %s, want done", done.Type)
	}
	want := []StepTime{
		{Step: "restart/web-0", Target: "pod restart/web-0", Took: 7 * time.Second, Gate: 3 * time.Second},
		{Step: "restart/web-1", Target: "pod restart/web-1", Took: 2500 * time.Millisecond, Gate: 500 * time.Millisecond, CatchUp: 200 * time.Millisecond},
		{Step: "check", Target: "cluster"},
	}
	if len(done.StepTimes) != len(want) {
		t.Fatalf("stepTimes = %+v, want %+v", done.StepTimes, want)
	}
	for i := range want {
		if done.StepTimes[i] != want[i] {
			t.Errorf("stepTimes[%d] = %+v, want %+v", i, done.StepTimes[i], want[i])
		}
	}
}
