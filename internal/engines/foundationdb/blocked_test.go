package foundationdb

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// A zone restart whose maintenance zone must stay on (a storage lag above the operator's
// limit) says it is blocked on that zone, with how it ends; the processes it waits for first
// are named as the step's batch.
func TestRestartWaitNamesItsZoneAndProcesses(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	busy := fdbsim.Load{InFlightBytes: 1 << 30}
	lagging := busy
	lagging.DataLag = 90 * time.Second
	model.SetLoad(lagging)
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var zoneBlocked *ops.Blocked
	var zone string
	kinds := map[string]string{}
	sink := ops.SinkFunc(func(ev ops.Event) {
		if ev.Type != ops.EventStepWaiting {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if ev.Blocked != nil {
			kinds[ev.Blocked.Kind] = ev.Blocked.On
		}
		if strings.Contains(ev.Reason, "data lag") && zoneBlocked == nil {
			zoneBlocked = ev.Blocked
			zone, _ = model.MaintenanceZone()
			model.SetLoad(busy)
		}
	})
	if err := (&ops.Executor{LockID: "test", Sink: sink, Timeout: time.Minute}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if zoneBlocked == nil || zoneBlocked.Kind != ops.BlockedZone || zone == "" ||
		zoneBlocked.On != "maintenance zone "+zone+" (this run's)" || !strings.Contains(zoneBlocked.ToUnblock, "operator's limits") {
		t.Errorf("blocked while the zone %q stays on = %+v", zone, zoneBlocked)
	}
	if on := kinds[ops.BlockedProcess]; !strings.HasPrefix(on, "fdbserver processes of ") {
		t.Errorf("no wait named the batch's processes: %v", kinds)
	}
}
