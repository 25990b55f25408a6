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
