package cratedb_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/fakes/cratedbtest"
)

// drainClock is the run's clock in TestDrainETAFromShardRate: 10s per shard the fake has
// moved off the node, so the shards leave at one per 10s whatever the polling.
type drainClock struct {
	db    *cratedbtest.DB
	node  string
	start int
	t0    time.Time
}

func (c *drainClock) Now() time.Time {
	var left int
	c.db.Do(func(d *cratedbtest.DB) { left = d.Shards[c.node] })
	return c.t0.Add(time.Duration(c.start-left) * 10 * time.Second)
}

// A drain feeds the bytes left on the node (sum of sys.shards' size) to the step's ETA: its
// waiting events carry the step's part as bytes left over the rate they leave at (unknown at
// the first reading). When CrateDB knows no size (NULL), the shards left stand in.
func TestDrainETAFromShardRate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		shardBytes int64
		first      string // the first waiting event's step ETA
		progress   string // the first progress text
	}{
		{name: "bytes", shardBytes: 1 << 20, first: "unknown (6.0 MiB left, one reading so far",
			progress: "6 shards (6.0 MiB) left on data-hot-2"},
		{name: "no sizes: shards", first: "unknown (6 shards left, one reading so far",
			progress: "6 shards left on data-hot-2"},
	} {
		t.Run(tc.name, func(t *testing.T) { testDrainETA(t, tc.shardBytes, tc.first, tc.progress) })
	}
}

func testDrainETA(t *testing.T, shardBytes int64, first, progress string) {
	client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3}, fakecluster.Group{Name: "hot", Role: "data", Order: 1, Replicas: 3})
	fakecluster.Start(t, client, "prod")
	db.Do(func(d *cratedbtest.DB) { d.Shards["data-hot-2"] = 6; d.DrainPerPoll = 1; d.ShardBytes = shardBytes })
	e := engine(client, db, nil)
	p, err := e.PlanScale(context.Background(), c, ops.ScaleRequest{Data: map[string]int32{"hot": 2}})
	if err != nil {
		t.Fatal(err)
	}
	client.PrependReactor("patch", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		_ = client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "prod", "db-hot-2")
		db.RemoveNodes("data-hot-2")
		return false, nil, nil
	})
	rec := &ops.Recorder{}
	clock := &drainClock{db: db, node: "data-hot-2", start: 6, t0: time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)}
	if err := (&ops.Executor{Locker: &journalLock{}, Sink: rec, Timeout: time.Hour, Clock: clock}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	var got []string
	ranged := 0
	for _, ev := range rec.Events() {
		if ev.Type != ops.EventStepWaiting || ev.Blocked == nil || ev.Blocked.Kind != ops.BlockedShard {
			continue
		}
		if ev.ETA == nil || ev.ETA.Step == nil {
			t.Fatalf("a drain's waiting event without the step's ETA: %+v", ev)
		}
		step := ev.ETA.Step
		got = append(got, step.String())
		if step.Unknown != "" {
			continue
		}
		var left int
		if _, err := fmt.Sscanf(ev.Blocked.On, "%d shard(s)", &left); err != nil {
			t.Fatal(err)
		}
		// Read once per shard moved: the reading that sees none left comes up to 10s after.
		if want := time.Duration(left) * 10 * time.Second; step.Low != want || step.High != want+10*time.Second {
			t.Errorf("with %d shard(s) left at one per 10s, read every 10s, the step's ETA is %s, want %s–%s", left, step.Range(), want, want+10*time.Second)
		}
		ranged++
	}
	t.Logf("step ETAs %q", got)
	if len(got) == 0 || !strings.HasPrefix(got[0], first) || ranged == 0 {
		t.Errorf("the drain's step ETAs: %q, want the first to start %q", got, first)
	}
	var texts []string
	for _, ev := range rec.Events() {
		if ev.Progress != nil {
			texts = append(texts, ev.Message)
		}
	}
	if !slices.Contains(texts, progress) {
		t.Errorf("the drain's progress texts %q lack %q", texts, progress)
	}
}

// recoveryClock is the run's clock in TestRestartETAFromRecovery: 10s per MiB each busy copy
// of the fake has recovered, so the bytes arrive at a fixed rate whatever the polling.
type recoveryClock struct {
	db *cratedbtest.DB
	t0 time.Time
}

func (c *recoveryClock) Now() time.Time {
	var got int64
	c.db.Do(func(d *cratedbtest.DB) { got = d.BusyRecovered })
	return c.t0.Add(time.Duration(got>>20) * 10 * time.Second)
}

// A rolling restart's gate feeds the bytes its busy copies still have to recover
// (recovery['size']['used'] - ['recovered'] in sys.shards, read with the count) to the step's
// ETA, and its waiting events name the recovery as a shard blocker, as the drain does.
func TestRestartETAFromRecovery(t *testing.T) {
	client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3})
	fakecluster.Start(t, client, "prod")
	// Two copies of 10 MiB recover 1 MiB each per read: 2 MiB per 10s.
	db.Do(func(d *cratedbtest.DB) { d.Busy, d.BusyBytes, d.RecoverPerPoll = 2, 10<<20, 1<<20 })
	e := engine(client, db, nil)
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Groups: []string{"master"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &ops.Recorder{}
	clock := &recoveryClock{db: db, t0: time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)}
	if err := (&ops.Executor{Locker: &journalLock{}, Sink: rec, Timeout: time.Hour, Clock: clock}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	var got []string
	ranged := 0
	for _, ev := range rec.Events() {
		if ev.Type != ops.EventStepWaiting || ev.Blocked == nil || ev.Blocked.Kind != ops.BlockedShard {
			continue
		}
		if !strings.Contains(ev.Blocked.On, "shard copies recovering") || ev.Blocked.ToUnblock == "" {
			t.Errorf("a recovery wait's blocker: %+v", ev.Blocked)
		}
		if ev.ETA == nil || ev.ETA.Step == nil {
			t.Fatalf("a recovery's waiting event without the step's ETA: %+v", ev)
		}
		step := ev.ETA.Step
		got = append(got, step.String())
		if step.Unknown != "" {
			continue
		}
		var copies int
		var mib float64
		if _, err := fmt.Sscanf(ev.Blocked.On, "%d shard copies recovering, %f MiB left", &copies, &mib); err != nil {
			t.Fatalf("%q: %v", ev.Blocked.On, err)
		}
		// 2 MiB per 10s, read once per 10s: the reading that sees none left comes up to 10s after.
		if want := time.Duration(mib * 5 * float64(time.Second)); step.Low != want || step.High != want+10*time.Second {
			t.Errorf("with %.1f MiB left at 2 MiB per 10s, read every 10s, the step's ETA is %s, want %s–%s", mib, step.Range(), want, want+10*time.Second)
		}
		ranged++
	}
	t.Logf("step ETAs %q", got)
	if first := "unknown (20.0 MiB left, one reading so far"; len(got) == 0 || !strings.HasPrefix(got[0], first) || ranged == 0 {
		t.Errorf("the recovery's step ETAs: %q, want the first to start %q and later ones ranged", got, first)
	}
}
