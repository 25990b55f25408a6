//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestLockLossStopsEtcdRestart (issue #37 item 3): an etcd rolling restart whose lock ID is
// denied while its second member restarts makes no further membership change: etcd's leader is
// the one it had (no move-leader hand-off, which the restart does before the leader's pod),
// the leader's pod is never deleted, and the run exits 3 (lock lost).
func TestLockLossStopsEtcdRestart(t *testing.T) {
	x := newEtcd(t, 3)
	x.waitHealthy(3)
	leader := etcdLeaderName(t, x.ctlTimeouts)
	pods := recordPodWatch(t, x.ns)
	env := cliEnv(t)
	const lockID = "e2e-etcd-lock-loss"
	run := startCLI(t, env, "restart", x.name, "-n", x.ns, "--rolling", "--yes", "-o", "json", "--lock-id", lockID)
	first := run.waitEvent("the first member's step done", func(e ndEvent) bool { return e.Type == "step-done" && e.Step != nil })
	firstPod := first.Step.Target
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	deleted := func(e recordedEvent) string {
		if p, ok := e.Obj.(*corev1.Pod); ok && (p.DeletionTimestamp != nil || e.Type == watch.Deleted) {
			return p.Name
		}
		return ""
	}
	// The second member's pod goes: the deny lands while the run waits for it to come back.
	if err := pods.waitUntil(ctx, func(evs []recordedEvent) bool {
		return slices.ContainsFunc(evs, func(e recordedEvent) bool {
			n := deleted(e)
			return n != "" && n != firstPod && n != leader
		})
	}); err != nil {
		t.Fatalf("waiting for the second member's pod to be deleted: %v", err)
	}
	if res := runCLI(t, env, "deny", "add", x.name, lockID, "-n", x.ns, "--reason", "stop the restart now"); res.Code != 0 {
		t.Fatalf("deny add: %s", res)
	}
	res := run.wait()
	if res.Code != 3 {
		t.Fatalf("restart after its lock ID was denied: exit %d, want 3 (lock lost)\n%s", res.Code, res)
	}
	for _, e := range pods.snapshot() {
		if deleted(e) == leader {
			t.Errorf("the leader's pod %s was deleted after the deny", leader)
		}
	}
	if m := moveLeaderLine.FindString(res.Stdout + res.Stderr); m != "" {
		t.Errorf("the denied run moved the leadership: %s", m)
	}
	x.waitHealthy(3)
	if now := etcdLeaderName(t, x.ctlTimeouts); now != leader {
		t.Errorf("etcd's leader is %s after the denied run, was %s: a move-leader went out", now, leader)
	}
}
