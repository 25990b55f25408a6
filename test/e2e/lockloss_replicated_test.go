//go:build e2e

package e2e

import (
	"testing"
)

// TestLockLossStopsReplicatedRestart: a replicated rolling restart whose lock ID is denied
// after its first pod is done execs no further role command (the application's command log,
// written by every exec the run makes, has none after the deny) and exits 3 (lock lost).
func TestLockLossStopsReplicatedRestart(t *testing.T) {
	a := newReplApp(t, "app", 3, 3, func(a *replApp) string { return a.config(3) })
	for o, v := range []string{"5", "3", "1"} {
		a.setSeq(o, v)
	}
	if r := a.run("bootstrap", "app"); r.Code != 0 {
		t.Fatalf("bootstrap: %s", r)
	}
	const lockID = "e2e-repl-lock-loss"
	run := startCLI(t, a.env, "restart", "app", "--rolling", "-n", a.ns, "--yes", "-o", "json", "--lock-id", lockID)
	run.waitEvent("the first step done", func(e ndEvent) bool { return e.Type == "step-done" })
	if res := runCLI(t, a.env, "deny", "add", "app", lockID, "-n", a.ns, "--reason", "stop the restart now"); res.Code != 0 {
		t.Fatalf("deny add: %s", res)
	}
	a.log() // what ran before the deny
	res := run.wait()
	t.Logf("the denied run's stderr:\n%s", res.Stderr)
	if res.Code != 3 {
		t.Fatalf("restart after its lock ID was denied: exit %d, want 3 (lock lost)\n%s", res.Code, res)
	}
	if m := mutations(a.log()); len(m) != 0 {
		t.Errorf("role commands exec'd after the deny: %q", m)
	}
}
