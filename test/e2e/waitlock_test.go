//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestWaitForLock: a restart that finds the lock held by someone else fails with exit 3
// naming the holder; with --wait-for-lock it reports the wait, watches the lock, and runs as
// soon as the holder releases it; with a bound that passes first it fails with exit 3 again.
func TestWaitForLock(t *testing.T) {
	ns := newNamespace(t)
	createDBCluster(t, ns, webCluster, 3)
	env := cliEnv(t)
	if res := runCLI(t, env, "lock", "acquire", webCluster, "-n", ns, "--lock-id", "alice", "--reason", "maintenance"); res.Code != 0 {
		t.Fatalf("lock acquire: %s", res)
	}
	args := []string{"restart", webCluster, "-n", ns, "--rolling", "--yes", "--lock-id", "bob", "-o", "json"}
	if res := runCLI(t, env, args...); res.Code != 3 || !strings.Contains(res.Stderr, "alice") {
		t.Fatalf("without --wait-for-lock: want exit 3 naming alice, got %s", res)
	}
	if res := runCLI(t, env, append(args, "--wait-for-lock=2s")...); res.Code != 3 || !strings.Contains(res.Stderr, "waited") {
		t.Fatalf("--wait-for-lock=2s: want exit 3 after waiting, got %s", res)
	}
	run := startCLI(t, env, append(args, "--wait-for-lock")...)
	run.waitEvent("the waiting warning", func(e ndEvent) bool {
		return e.Type == "warning" && strings.Contains(e.Message, "waiting for the lock") && strings.Contains(e.Message, "alice")
	})
	released := time.Now()
	if res := runCLI(t, env, "lock", "release", webCluster, "-n", ns, "--lock-id", "alice"); res.Code != 0 {
		t.Fatalf("lock release: %s", res)
	}
	run.waitEvent("the lock taken", func(e ndEvent) bool { return e.Type == "lock" && e.Lock != nil && e.Lock.Holder == "bob" })
	t.Logf("lock taken %s after alice released it", time.Since(released).Round(time.Millisecond))
	if res := run.wait(); res.Code != 0 || lastOutcome(run.all) != "succeeded" {
		t.Fatalf("restart after the wait: %s", res)
	}
}
