package cratedb_test

import (
	"context"
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

// A drain with shards left says it is blocked on them, naming the node they are on and how
// to see why they stay.
func TestDrainWaitNamesItsShards(t *testing.T) {
	client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3}, fakecluster.Group{Name: "hot", Role: "data", Order: 1, Replicas: 3})
	fakecluster.Start(t, client, "prod")
	db.Do(func(d *cratedbtest.DB) { d.Shards["data-hot-2"] = 3; d.DrainPerPoll = 1 })
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
	if err := (&ops.Executor{Locker: &journalLock{}, Sink: rec, Timeout: time.Minute}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	var blocked []string
	for _, ev := range rec.Events() {
		if ev.Type == ops.EventStepWaiting && ev.Blocked != nil && ev.Blocked.Kind == ops.BlockedShard {
			blocked = append(blocked, ev.Blocked.On)
			if !strings.Contains(ev.Blocked.ToUnblock, "sys.allocations") {
				t.Errorf("to unblock: %q", ev.Blocked.ToUnblock)
			}
		}
	}
	if len(blocked) == 0 || !strings.HasSuffix(blocked[0], "shard(s) on data-hot-2 (sys.shards)") {
		t.Errorf("shard blockers = %q", blocked)
	}
}

// A drain whose shard CrateDB cannot move (every remaining node above the disk low
// watermark, as sys.allocations explains) is blocked on that table, shard and node, with a
// way to unblock it from the refusals; copies on nodes that stay and relocating copies are
// not named. Once the disk is freed the drain finishes.
func TestDrainWaitNamesTheShardThatCannotMove(t *testing.T) {
	client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3}, fakecluster.Group{Name: "hot", Role: "data", Order: 1, Replicas: 3})
	fakecluster.Start(t, client, "prod")
	full := func(node string) map[string]any {
		return map[string]any{"node_id": "id-" + node, "node_name": node, "explanations": []any{
			"the node is above the low watermark cluster setting [cluster.routing.allocation.disk.watermark.low=85%], using more disk space than the maximum allowed [85.0%], actual free: [12.0%]"}}
	}
	cannot := "cannot move shard to another node, even though it is not allowed to remain on its current node"
	db.Do(func(d *cratedbtest.DB) {
		d.Shards["data-hot-2"] = 3
		d.DrainPerPoll = 0
		d.Allocations = [][]any{
			// Not on the leaving node: not what the drain waits on.
			{"doc", "aaa", nil, int32(0), "id-data-hot-0", true, "STARTED", cannot, []any{}},
			{"doc", "events", nil, int32(5), "id-data-hot-2", false, "STARTED", cannot, []any{full("data-hot-0"), full("data-hot-1"),
				map[string]any{"node_id": "id-data-hot-2", "node_name": "data-hot-2", "explanations": []any{"node matches cluster setting [cluster.routing.allocation.exclude] filters [_name:\"data-hot-2\"]"}}}},
			{"doc", "events", nil, int32(3), "id-data-hot-2", true, "STARTED", cannot, []any{full("data-hot-0"), full("data-hot-1")}},
			{"doc", "aaa", nil, int32(1), "id-data-hot-2", true, "RELOCATING", "shard cannot remain on this node and is force-moved to another node", nil},
		}
	})
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
	var named []ops.Blocked
	waits := 0
	sink := ops.SinkFunc(func(ev ops.Event) {
		rec.Emit(ev)
		if ev.Type != ops.EventStepWaiting || ev.Blocked == nil || ev.Blocked.Kind != ops.BlockedShard {
			return
		}
		if waits++; !strings.Contains(ev.Blocked.On, "shard(s) on") {
			named = append(named, *ev.Blocked)
		}
		if waits == 3 {
			// Disk freed: CrateDB moves the shards.
			db.Do(func(d *cratedbtest.DB) { d.DrainPerPoll = 3; d.Allocations = nil })
		}
	})
	if err := (&ops.Executor{Locker: &journalLock{}, Sink: sink, Timeout: time.Minute}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if len(named) < 3 {
		t.Fatalf("the drain never named the shard it waits on in %d waits on shards", waits)
	}
	b := named[0]
	if want := "table doc.events shard 3 on node data-hot-2 (" + cannot + ")"; b.On != want {
		t.Errorf("blocked on %q, want %q", b.On, want)
	}
	if want := `free disk on data-hot-0, data-hot-1 (above cluster.routing.allocation.disk.watermark.low = 85%), or raise that setting: SET GLOBAL TRANSIENT "cluster.routing.allocation.disk.watermark.low" = '<higher>'`; b.ToUnblock != want {
		t.Errorf("to unblock %q, want %q", b.ToUnblock, want)
	}
	if b.Since.IsZero() || b.GiveUpAt.IsZero() || !named[2].Since.Equal(b.Since) {
		t.Errorf("since %v (then %v), give up at %v: want a kept since and the run's deadline", b.Since, named[2].Since, b.GiveUpAt)
	}
}
