//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

// TestLockLossStopsFoundationDBRestart: a `restart --method process` whose lock ID is denied
// while its first batch is away (bounced with fdbcli kill, held back by a slow fdbmonitor)
// sends FoundationDB nothing more: no further kill and no maintenance command from a pod
// appears on the simulator's command log after the deny, and the run exits 3 (lock lost).
// fdbcli writes are not Kubernetes writes: only the lock guard in front of them stops them.
func TestLockLossStopsFoundationDBRestart(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	env := cliEnv(t)
	const lockID = "e2e-fdb-lock-loss"
	model.HoldRestarts(true)
	run := startCLI(t, env, "restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--method", "process", "--yes", "-o", "json", "--lock-id", lockID)
	// The first batch's kill is on the log: the run now waits for its processes to report.
	waitFDBKill(t, model)
	if res := runCLI(t, env, "deny", "add", "myfdb", lockID, "-n", ns, "--reason", "stop the restart now"); res.Code != 0 {
		t.Fatalf("deny add: %s", res)
	}
	denied := len(model.Log())
	// The batch comes back: a run that ignored the loss would go on to the next batch now.
	model.HoldRestarts(false)
	res := run.wait()
	t.Logf("the denied run's stderr:\n%s", res.Stderr)
	if res.Code != 3 {
		t.Fatalf("restart after its lock ID was denied: exit %d, want 3 (lock lost)\n%s", res.Code, res)
	}
	for _, e := range model.Log()[denied:] {
		if e.Client == "operator" || e.Client == "" {
			continue
		}
		if strings.HasPrefix(e.Command, "kill") || strings.HasPrefix(e.Command, "maintenance on") || strings.HasPrefix(e.Command, "exclude") {
			t.Errorf("fdbcli write after the deny (from %s): %q", e.Client, e.Command)
		}
	}
	if done := stepsOf(run.all, "step-done"); len(done) != 0 {
		t.Errorf("steps reported done after the lock was lost: %v", done)
	}
}
