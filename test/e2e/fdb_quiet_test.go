//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// TestFoundationDBRestartMaintenanceOffWaitsForLag: after a batch comes back, the run ends its
// maintenance zone only once the storage servers have caught up (the operator's QoS checks),
// not while they lag; data distribution's background moving (in_flight_bytes above 0 the
// whole run, as on a busy cluster) does not hold it. No "maintenance off" from the run is on
// the simulator's log while the lag is reported; released, the run finishes and clears it.
func TestFoundationDBRestartMaintenanceOffWaitsForLag(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	env := cliEnv(t)
	busy := fdbsim.Load{InFlightBytes: 1 << 30}
	model.SetLoad(busy)
	model.HoldRestarts(true)
	run := startCLI(t, env, "restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--method", "process", "--yes", "-o", "json")
	waitFDBKill(t, model)
	// The batch comes back behind: its storage servers lag (a restart's catch-up).
	lagging := busy
	lagging.DataLag, lagging.DurabilityLag = 2*time.Minute, 2*time.Minute
	model.SetLoad(lagging)
	model.HoldRestarts(false)
	run.waitEvent("the wait for the lag before maintenance off", func(ev ndEvent) bool {
		return ev.Type == "step-waiting" && strings.Contains(ev.Reason, "worst storage data lag") && strings.Contains(ev.Reason, "before maintenance off")
	})
	for _, e := range model.Log() {
		if e.Client != "operator" && e.OK && e.Command == "maintenance off" {
			t.Fatalf("maintenance off while the storage servers lag (from %s)", e.Client)
		}
	}
	if z, _ := model.MaintenanceZone(); z == "" {
		t.Fatal("the batch's maintenance zone ended while its storage servers lag")
	}
	model.SetLoad(busy)
	if res := run.wait(); res.Code != 0 {
		t.Fatalf("restart after the lag cleared (data still moving in the background): %s", res)
	}
	if z, _ := model.MaintenanceZone(); z != "" {
		t.Fatalf("maintenance zone %s left", z)
	}
}
