package ops

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
)

// A wait's blocker reaches the waiting event and the journal on the lock (so `status` in
// another terminal reads it): Since is kept while the blocker stays the same, GiveUpAt is the
// run's deadline; a wait that ends within blockedWriteEvery costs no write, and a change is
// written at most every blockedWriteEvery, else by the lock renewal (flushBlocked).
func TestBlockPublishesToEventsAndJournal(t *testing.T) {
	start := time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)
	clock := &manualClock{t: start}
	locker := &memLocker{id: "me"}
	var seen []*Journal
	step := &Step{ID: "restart/web-0", Target: "pod web-0", Description: "restart web-0", Mutating: true,
		Verify: func(ctx context.Context, sc *StepContext) error {
			pod := func() {
				sc.Block(ctx, BlockedPod, "pod prod/web-0", "kubectl describe pod -n prod web-0", "pod web-0 not Ready")
			}
			saves := locker.saves
			pod()
			clock.advance(time.Second)
			pod()
			if locker.saves != saves {
				t.Errorf("a blocker younger than %s was written", blockedWriteEvery)
			}
			clock.advance(blockedWriteEvery)
			pod()
			if locker.saves != saves+1 {
				t.Errorf("a blocker %s old was not written", blockedWriteEvery)
			}
			seen = append(seen, locker.stored(t))
			clock.advance(time.Second) // a change inside blockedWriteEvery of the last write waits
			sc.Block(ctx, BlockedMember, "member web-0", "wait", "catching up")
			if locker.saves != saves+1 {
				t.Errorf("a change within %s of the last blocker write was written at once", blockedWriteEvery)
			}
			if wrote, err := sc.exec.flushBlocked(ctx); !wrote || err != nil {
				t.Errorf("renewal's flush: wrote %v, %v", wrote, err)
			}
			seen = append(seen, locker.stored(t))
			return nil
		}}
	p := &Plan{Operation: "restart", Cluster: "web", Namespace: "prod", Engine: EngineGeneric, Steps: []*Step{step}}
	rec := &Recorder{}
	ex := &Executor{Locker: locker, Sink: rec, Clock: clock, Timeout: time.Hour}
	if err := ex.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if b := seen[0].Blocked; b == nil || b.On != "pod prod/web-0" || b.Kind != BlockedPod || !b.Since.Equal(start) ||
		b.ToUnblock == "" || !b.GiveUpAt.Equal(start.Add(time.Hour)) {
		t.Errorf("journal blocked after the first wait = %+v", b)
	}
	if b := seen[1].Blocked; b == nil || b.On != "member web-0" || !b.Since.Equal(start.Add(7*time.Second)) || seen[1].Current != "restart/web-0" {
		t.Errorf("journal after the renewal's flush = %+v", seen[1])
	}
	var waits []*Blocked
	for _, ev := range rec.Events() {
		if ev.Type == EventStepWaiting {
			waits = append(waits, ev.Blocked)
		}
	}
	if len(waits) != 4 || waits[2] == nil || !waits[2].Since.Equal(start) {
		t.Fatalf("waiting events' blockers = %+v", waits)
	}
	if j := locker.stored(t); j.Blocked != nil {
		t.Errorf("a succeeded run's journal still says blocked on %+v", j.Blocked)
	}
}

// A step running longer than the slowest finished step of its kind says so.
func TestBlockSaysStalled(t *testing.T) {
	clock := &manualClock{t: time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)}
	var last *Blocked
	mk := func(id string, took time.Duration, block bool) *Step {
		return &Step{ID: id, Target: id, Description: id, Mutating: true,
			Verify: func(ctx context.Context, sc *StepContext) error {
				clock.advance(took)
				if block {
					sc.Block(ctx, BlockedPod, "pod "+id, "", "not Ready")
					last = sc.blocked
				}
				return nil
			}}
	}
	p := &Plan{Operation: "restart", Cluster: "web", Namespace: "prod", Engine: EngineGeneric, Steps: []*Step{
		mk("restart/a", 10*time.Second, true), mk("restart/b", 20*time.Second, false), mk("restart/c", 21*time.Second, true)}}
	ex := &Executor{Locker: &memLocker{id: "me"}, Sink: &Recorder{}, Clock: clock}
	if err := ex.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if last == nil || !strings.Contains(last.Stalled, "longer than the slowest of 2 finished restart step(s) (20s)") {
		t.Errorf("stalled = %+v", last)
	}
}

func TestEstimate(t *testing.T) {
	now := time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)
	st := func(id string, took time.Duration) StepTime { return StepTime{Step: id, Took: took} }
	for _, tc := range []struct {
		name      string
		finished  []StepTime
		remaining []string
		current   time.Duration
		low, high time.Duration
		unknown   string
	}{
		{name: "nothing finished", remaining: []string{"restart/a"}, unknown: "0 of 1 restart step(s) finished in this run, 2 needed"},
		{name: "one sample is no evidence", finished: []StepTime{st("restart/a", time.Minute)}, remaining: []string{"restart/b"},
			unknown: "1 of 2 restart step(s) finished in this run, 2 needed"},
		{name: "median and spread", finished: []StepTime{st("restart/a", 40*time.Second), st("restart/b", 60*time.Second), st("restart/c", 50*time.Second)},
			remaining: []string{"restart/d", "restart/e"}, low: 80 * time.Second, high: 120 * time.Second},
		{name: "the current step's time so far counts", finished: []StepTime{st("restart/a", 40*time.Second), st("restart/b", 60*time.Second)},
			remaining: []string{"restart/c", "restart/d"}, current: 30 * time.Second, low: 50 * time.Second, high: 90 * time.Second},
		{name: "a kind without evidence makes it unknown", finished: []StepTime{st("restart/a", time.Second), st("restart/b", time.Second)},
			remaining: []string{"restart/c", "cleanup"}, unknown: "0 of 1 cleanup step(s) finished in this run, 2 needed"},
		{name: "nothing left", finished: nil, remaining: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Estimate(now, tc.finished, tc.remaining, tc.current)
			if got.Unknown != tc.unknown || got.Low != tc.low || got.High != tc.high {
				t.Errorf("got %+v (%s), want low %s high %s unknown %q", got, got, tc.low, tc.high, tc.unknown)
			}
		})
	}
}

// The journal and the step events carry the ETA from this run's own step times: unknown
// until two steps of the kind finished, then a range.
func TestRunETA(t *testing.T) {
	clock := &manualClock{t: time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)}
	locker := &memLocker{id: "me"}
	var journaled *ETA // as the journal on the lock had it while restart/d ran
	mk := func(id string, took time.Duration) *Step {
		return &Step{ID: id, Target: id, Description: id, Mutating: true,
			Verify: func(context.Context, *StepContext) error {
				if id == "restart/d" {
					journaled = locker.stored(t).ETA
				}
				clock.advance(took)
				return nil
			}}
	}
	p := &Plan{Operation: "restart", Cluster: "web", Namespace: "prod", Engine: EngineGeneric, Steps: []*Step{
		mk("restart/a", 10*time.Second), mk("restart/b", 30*time.Second), mk("restart/c", 20*time.Second), mk("restart/d", 20*time.Second)}}
	rec := &Recorder{}
	ex := &Executor{Locker: locker, Sink: rec, Clock: clock}
	if err := ex.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if journaled == nil || journaled.Unknown != "" || journaled.Low != 10*time.Second || journaled.High != 30*time.Second {
		t.Errorf("journal ETA while the last step ran = %+v", journaled)
	}
	var etas []string
	for _, ev := range rec.Events() {
		if ev.Type == EventStepDone && ev.ETA != nil {
			etas = append(etas, ev.Step.ID+" "+ev.ETA.String())
		}
	}
	want := []string{
		"restart/a unknown (1 of 4 restart step(s) finished in this run, 2 needed)",
		"restart/b 20s–1m0s (2 restart step(s) left, median 20s ± 10s of 2)",
		"restart/c 10s–30s (1 restart step(s) left, median 20s ± 10s of 3)",
		"restart/d 0s",
	}
	if strings.Join(etas, "\n") != strings.Join(want, "\n") {
		t.Errorf("step-done ETAs:\n%s\nwant:\n%s", strings.Join(etas, "\n"), strings.Join(want, "\n"))
	}
}

// A restarted pod that never comes back Ready (generic, replicated and etcd wait for it with
// WaitReplaced): the wait names the pod as what the step is blocked on, on its event and in
// the journal `status` reads.
func TestRestartWaitBlockedOnPod(t *testing.T) {
	c, client := testCluster(map[string]int{"web": 2}, []string{"web"}, "")
	ctrl := fakecluster.Start(t, client, "prod")
	ctrl.SetHold(true) // the pod never comes back
	p, _ := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	locker := &memLocker{id: "me"}
	ctx, cancel := context.WithCancel(context.Background())
	var blocked *Blocked
	waited := false
	sink := SinkFunc(func(e Event) {
		if e.Type == EventStepWaiting && !waited {
			waited, blocked = true, e.Blocked
			cancel()
		}
	})
	if err := (&Executor{Locker: locker, Sink: sink, Timeout: time.Minute}).Run(ctx, p); ExitCode(err) != ExitInterrupted {
		t.Fatalf("err = %v", err)
	}
	if blocked == nil || blocked.Kind != BlockedPod || blocked.On != "pod prod/db-web-0" ||
		!strings.Contains(blocked.ToUnblock, "kubectl describe pod -n prod db-web-0") || blocked.GiveUpAt.IsZero() {
		t.Errorf("waiting event's blocker = %+v", blocked)
	}
	if j := locker.stored(t); j.Blocked == nil || j.Blocked.On != "pod prod/db-web-0" {
		t.Errorf("journal blocker = %+v", j.Blocked)
	}
}
