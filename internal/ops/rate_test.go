package ops

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRateEstimate(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)
	at := func(sec int, left int64) RateSample {
		return RateSample{At: t0.Add(time.Duration(sec) * time.Second), Left: left}
	}
	for _, tc := range []struct {
		name      string
		samples   []RateSample
		unit      string
		every     time.Duration
		low, high time.Duration
		unknown   string
		basis     string
	}{
		{name: "no reading", unit: UnitBytes, unknown: "nothing measured yet"},
		{name: "one reading is no rate", samples: []RateSample{at(0, 100<<20)}, unit: UnitBytes,
			unknown: "100.0 MiB left, one reading so far: a rate needs two"},
		{name: "nothing moved", samples: []RateSample{at(0, 500), at(10, 500)}, unit: UnitEntries,
			unknown: "500 raft entries left, none moved since 15:00:00"},
		{name: "a steady rate is a point", samples: []RateSample{at(0, 300), at(10, 200)}, unit: UnitEntries,
			low: 20 * time.Second, high: 20 * time.Second, basis: "200 raft entries left at 10.0 raft entries/s over 2 readings since 15:00:00"},
		// 40 then 10 per second: low at the fastest, high at the slowest.
		{name: "fastest and slowest interval", samples: []RateSample{at(0, 1000), at(10, 600), at(20, 500)}, unit: UnitShards,
			low: 500 * time.Second / 40, high: 50 * time.Second},
		{name: "done", samples: []RateSample{at(0, 10), at(5, 0)}, unit: UnitBytes},
		// The step ends at the reading that sees nothing left: up to one reading interval
		// after the data is gone.
		{name: "the high end waits for the reading that sees it done", samples: []RateSample{at(0, 300), at(10, 200)}, unit: UnitEntries,
			every: 10 * time.Second, low: 20 * time.Second, high: 30 * time.Second,
			basis: "200 raft entries left at 10.0 raft entries/s over 2 readings since 15:00:00, read every 10s at most"},
		// A figure the database updates every 10s, polled every second: the rate is 100 per
		// 10s, not 100 in the last second (which would promise 9s).
		{name: "a rate spans the time since the figure last changed", samples: []RateSample{at(0, 1000), at(9, 1000), at(10, 900)},
			unit: UnitShards, low: 90 * time.Second, high: 90 * time.Second},
		// 20/s, a rise of 50 (more queued), then 25/s: the rise is kept and slows the average
		// (400 in 30s), so the high end is 600 at 13.3/s.
		{name: "a small rise slows the average", samples: []RateSample{at(0, 1000), at(10, 800), at(20, 850), at(30, 600)},
			unit: UnitShards, low: 24 * time.Second, high: 45 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RateEstimate(t0.Add(time.Minute), tc.samples, tc.unit, tc.every)
			if got.Unknown != tc.unknown || got.Low != tc.low || got.High != tc.high {
				t.Errorf("got %+v (%s), want low %s high %s unknown %q", got, got, tc.low, tc.high, tc.unknown)
			}
			if tc.basis != "" && got.Basis != tc.basis {
				t.Errorf("basis %q, want %q", got.Basis, tc.basis)
			}
		})
	}
}

// Readings that stop moving for a while widen the high end to the average since the first
// reading: a rate taken only between readings that moved would promise too much.
func TestRateEstimateCountsStalls(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)
	s := []RateSample{{t0, 2000}, {t0.Add(10 * time.Second), 1000}, {t0.Add(40 * time.Second), 1000}}
	got := RateEstimate(t0.Add(40*time.Second), s, UnitBytes, 0)
	// moved 100/s while moving, 25/s on average: 1000 left is 10s–40s.
	if got.Unknown != "" || got.Low != 10*time.Second || got.High != 40*time.Second {
		t.Errorf("got %+v", got)
	}
}

func TestAddRateSample(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)
	var s []RateSample
	s = addRateSample(s, RateSample{t0, 100})
	s = addRateSample(s, RateSample{t0.Add(time.Second), 90})
	s = addRateSample(s, RateSample{t0.Add(time.Second), 80}) // same time: replaces
	if len(s) != 2 || s[1].Left != 80 {
		t.Fatalf("same-time reading: %+v", s)
	}
	s = addRateSample(s, RateSample{t0.Add(2 * time.Second), 95}) // a rise below the first: kept
	if len(s) != 3 || s[2].Left != 95 {
		t.Fatalf("a rise below the first reading was not kept: %+v", s)
	}
	s = addRateSample(s, RateSample{t0.Add(3 * time.Second), 200}) // above the first: starts over
	if len(s) != 1 || s[0].Left != 200 {
		t.Fatalf("more than the window's first reading did not start over: %+v", s)
	}
	s = nil
	for i := range 3 * maxRateSamples {
		s = addRateSample(s, RateSample{t0.Add(time.Duration(3+i) * time.Second), int64(100 - i)})
	}
	if len(s) != maxRateSamples || s[len(s)-1].Left != int64(100-3*maxRateSamples+1) {
		t.Fatalf("kept %d readings, last %+v", len(s), s[len(s)-1])
	}
}

// A data-moving step's waits carry the run's ETA: its own part from the rate, the steps
// after it from this run's step times; unknown until both have evidence; the journal on
// the lock gets it so `status` shows it from another terminal.
func TestWaitingETAFromRate(t *testing.T) {
	clock := &manualClock{t: time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)}
	locker := &memLocker{id: "me"}
	var journaled *ETA
	mk := func(id string, took time.Duration) *Step {
		return &Step{ID: id, Target: id, Description: id, Mutating: true,
			Verify: func(context.Context, *StepContext) error { clock.advance(took); return nil }}
	}
	drain := &Step{ID: "drain/data-0", Target: "data-0", Description: "drain", Mutating: true,
		Verify: func(ctx context.Context, sc *StepContext) error {
			for _, left := range []int64{4000, 3000, 2500} {
				sc.Remaining(left, UnitBytes)
				sc.Block(ctx, BlockedShard, "shards on data-0", "", "shards to move")
				clock.advance(10 * time.Second)
			}
			if _, err := sc.exec.flushBlocked(ctx); err != nil {
				return err
			}
			journaled = locker.stored(t).ETA
			return nil
		}}
	p := &Plan{Operation: "scale", Cluster: "db", Namespace: "prod", Engine: EngineGeneric, Steps: []*Step{
		mk("restart/a", 10*time.Second), mk("restart/b", 30*time.Second), drain, mk("restart/c", 20*time.Second)}}
	rec := &Recorder{}
	ex := &Executor{Locker: locker, Sink: rec, Clock: clock}
	if err := ex.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range rec.Events() {
		if ev.Type == EventStepWaiting {
			if ev.ETA == nil {
				t.Fatalf("waiting event without an ETA: %+v", ev)
			}
			got = append(got, ev.ETA.String())
		}
	}
	// Rates 100 B/s then 50 B/s: 2500 B left is 25s–50s, +10s to the reading that sees it
	// done, then one restart step 10s–30s.
	want := []string{
		"unknown (this step: 3.9 KiB left, one reading so far: a rate needs two)",
		"40s–1m10s (this step: 2.9 KiB left at 100 B/s over 2 readings since 15:00:40, read every 10s at most; then 1 restart step(s) left, median 20s ± 10s of 2)",
		"35s–1m30s (this step: 2.4 KiB left at 50 B/s–100 B/s over 3 readings since 15:00:40, read every 10s at most; then 1 restart step(s) left, median 20s ± 10s of 2)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("waiting ETAs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if journaled == nil || journaled.Low != 35*time.Second || journaled.High != 90*time.Second || journaled.Step == nil {
		t.Errorf("journal ETA during the drain = %+v", journaled)
	}
}

func TestETAStringWithStep(t *testing.T) {
	e := &ETA{Unknown: "the steps after this one: 0 of 2 restart step(s) finished in this run, 2 needed",
		Step: &ETA{Low: time.Minute, High: 2 * time.Minute, Basis: "1.0 GiB left"}}
	if got := e.Range(); got != "unknown; this step 1m0s–2m0s" {
		t.Errorf("Range = %q", got)
	}
	if got := e.String(); !strings.HasSuffix(got, "; this step 1m0s–2m0s (1.0 GiB left)") {
		t.Errorf("String = %q", got)
	}
}

// A long stall keeps the readings that moved before it: a run of equal readings keeps its
// first and its latest, so the rate still rests on what moved.
func TestRateSamplesKeepWhatMovedThroughAStall(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)
	var s []RateSample
	s = addRateSample(s, RateSample{t0, 1000})
	s = addRateSample(s, RateSample{t0.Add(10 * time.Second), 900})
	for i := 11; i <= 30; i++ {
		s = addRateSample(s, RateSample{t0.Add(time.Duration(i) * time.Second), 900})
	}
	s = addRateSample(s, RateSample{t0.Add(40 * time.Second), 800})
	want := []RateSample{{t0, 1000}, {t0.Add(10 * time.Second), 900}, {t0.Add(30 * time.Second), 900}, {t0.Add(40 * time.Second), 800}}
	if !slices.Equal(s, want) {
		t.Fatalf("kept %+v, want %+v", s, want)
	}
	// 10/s, then 100 in the 30s since 900 was first read: 800 left is 80s–240s.
	got := RateEstimate(t0.Add(40*time.Second), s, UnitShards, 0)
	if got.Unknown != "" || got.Low != 80*time.Second || got.High != 240*time.Second {
		t.Errorf("got %+v", got)
	}
}
