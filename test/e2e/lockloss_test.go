//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// A running restart whose lock is taken away — its ID denied (`deny add`), or its Lease
// deleted — deletes no further pod: the loss is seen on the run's watch of its Lease while it
// waits for web-1 to come back, so web-2 is never touched. The run exits 3 (lock lost), web-0's
// step stays reported and recorded as done, and the resume hint carries no denied lock ID.
func TestLockLossStopsRunningRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// take takes the lock away from the run (lock ID lockID) in namespace ns.
		take func(t *testing.T, env []string, ns, lockID string)
		// recorded: the journal still records web-0 done (the Lease survives).
		recorded bool
	}{
		{
			name: "denied",
			take: func(t *testing.T, env []string, ns, lockID string) {
				if res := runCLI(t, env, "deny", "add", webCluster, lockID, "-n", ns, "--reason", "stop the restart now"); res.Code != 0 {
					t.Fatalf("deny add: %s", res)
				}
			},
			recorded: true,
		},
		{
			name: "lease deleted",
			take: func(t *testing.T, _ []string, ns, _ string) {
				if err := bed.Client.CoordinationV1().Leases(ns).Delete(t.Context(), "dbops-"+webCluster, metav1.DeleteOptions{}); err != nil {
					t.Fatalf("delete lease: %v", err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			// Pods take 2s to start: the loss lands while web-1 is waited for.
			old := uidsByName(createDBCluster(t, ns, webCluster, 3, podsStartIn("2s")))
			pods := recordPodWatch(t, ns)
			env := cliEnv(t)
			const lockID = "e2e-lock-loss"
			run := startCLI(t, env, "restart", webCluster, "-n", ns, "--rolling", "--yes", "-o", "json", "--lock-id", lockID)
			run.waitEvent("web-0's step done", func(ev ndEvent) bool {
				return ev.Type == "step-done" && ev.Step != nil && ev.Step.ID == "restart/web-0"
			})
			ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
			defer cancel()
			if err := pods.waitUntil(ctx, func(evs []recordedEvent) bool {
				for _, e := range evs {
					if p, ok := e.Obj.(*corev1.Pod); ok && p.Name == "web-1" && p.UID == old["web-1"] && (p.DeletionTimestamp != nil || e.Type == watch.Deleted) {
						return true
					}
				}
				return false
			}); err != nil {
				t.Fatalf("waiting for web-1's delete: %v", err)
			}
			tc.take(t, env, ns, lockID)
			res := run.wait()
			if res.Code != 3 {
				t.Fatalf("restart after the lock was taken away: exit %d, want 3 (lock lost)\n%s", res.Code, res)
			}
			evs := run.all
			if started := stepsOf(evs, "step-started"); slices.Contains(started, "restart/web-2") {
				t.Errorf("web-2's step started after the lock was lost (steps started: %v)", started)
			}
			if done := stepsOf(evs, "step-done"); !slices.Equal(done, []string{"restart/web-0"}) {
				t.Errorf("steps reported done %v, want [restart/web-0]", done)
			}
			for _, e := range pods.snapshot() {
				if p, ok := e.Obj.(*corev1.Pod); ok && p.Name == "web-2" && (p.DeletionTimestamp != nil || e.Type == watch.Deleted) {
					t.Errorf("web-2 was deleted (%s) after the lock was lost", e.Type)
				}
			}
			last := evs[len(evs)-1]
			if last.Type != "done" || last.Outcome != "failed" {
				t.Errorf("last event %s/%s, want done/failed", last.Type, last.Outcome)
			}
			if strings.Contains(res.Stdout+res.Stderr, "--lock-id "+lockID) {
				t.Errorf("the output suggests running again as the lock ID that lost the lock:\n%s", res)
			}
			if !tc.recorded {
				return
			}
			l, j := getLockLease(t, ns, webCluster)
			if !slices.Equal(j.Done, []string{"restart/web-0"}) || j.State != "denied" {
				t.Errorf("journal after the deny: state %s, done %v; want denied with restart/web-0 done", j.State, j.Done)
			}
			if h := l.Spec.HolderIdentity; h != nil && *h != "" {
				t.Errorf("lock still held by %s after the denied run ended", *h)
			}
		})
	}
}
