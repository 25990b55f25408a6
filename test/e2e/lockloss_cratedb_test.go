//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/bedwire"
)

// TestLockLossStopsCrateDBRollingRestart: a CrateDB rolling restart whose lock ID is denied
// after its first node is done sends CrateDB no further cluster-changing statement (SET
// GLOBAL, RESET GLOBAL, ALTER CLUSTER) once the deny is in — not even the RESET of its own
// allocation setting, which it tells the user to run instead — and exits 3 (lock lost).
// Those statements are not Kubernetes writes: only the lock guard in front of them stops them.
func TestLockLossStopsCrateDBRollingRestart(t *testing.T) {
	x := newCrateEnvLayout(t, true, bedwire.LayoutPodName)
	const lockID = "e2e-crate-lock-loss"
	run := startCLI(t, x.env, x.args("restart", "--rolling", "--yes", "--health-checks", "2", "--health-interval", "200ms", "-o", "json", "--lock-id", lockID)...)
	run.waitEvent("the first step done", func(e ndEvent) bool { return e.Type == "step-done" })
	if res := runCLI(t, x.env, "deny", "add", x.name, lockID, "-n", x.ns, "--reason", "stop the restart now"); res.Code != 0 {
		t.Fatalf("deny add: %s", res)
	}
	denied := x.lastSeq()
	res := run.wait()
	t.Logf("the denied run's stderr:\n%s", res.Stderr)
	if res.Code != 3 {
		t.Fatalf("restart after its lock ID was denied: exit %d, want 3 (lock lost)\n%s", res.Code, res)
	}
	for _, s := range x.sim.Statements() {
		if s.Seq <= denied || s.Error != "" {
			continue
		}
		u := strings.ToUpper(strings.TrimSpace(s.Statement))
		if strings.HasPrefix(u, "SET GLOBAL") || strings.HasPrefix(u, "RESET GLOBAL") || strings.HasPrefix(u, "ALTER CLUSTER") {
			t.Errorf("cluster-changing statement after the deny (seq %d, node %s): %s", s.Seq, s.Node, s.Statement)
		}
	}
}
