//go:build e2e

package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// TestBlockedOnPodStatusFromSecondTerminal: a restarted pod that can never be scheduled again
// (its StatefulSet asks for a node that does not exist; OnDelete keeps the controller from
// replacing the others) blocks the run; `status` run as a second process reads from the
// Lease what the step is blocked on (that pod), until when and how to unblock it.
func TestBlockedOnPodStatusFromSecondTerminal(t *testing.T) {
	ns := newNamespace(t)
	createDBCluster(t, ns, webCluster, 3)
	env := cliEnv(t)
	updateStatefulSet(t.Context(), t, ns, webCluster, func(sts *appsv1.StatefulSet) {
		sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		sts.Spec.Template.Spec.NodeSelector = map[string]string{"dbops.io/e2e-no-such-node": "true"}
	})
	run := startCLI(t, env, "restart", webCluster, "-n", ns, "--rolling", "--yes", "--lock-id", "alice",
		"--lock-duration", "15s", "--timeout", "3m", "-o", "json")
	ev := run.waitEvent("a step waiting for its pod", func(ev ndEvent) bool {
		return ev.Type == "step-waiting"
	})
	pod := strings.TrimPrefix(ev.Step.Target, "pod/")
	want := []string{"Blocked:  on pod " + ns + "/" + pod + " (pod) since ", ", gives up at ",
		"  to unblock: see why it is not there or not Ready: kubectl describe pod -n " + ns + " " + pod}
	// The blocker reaches the Lease once the wait has lasted a few seconds (with the lock's
	// renewal): poll what a second terminal sees, bounded.
	deadline := time.Now().Add(90 * time.Second)
	var out string
	for {
		res := runCLI(t, env, "status", webCluster, "-n", ns)
		out = res.Stdout
		if res.Code == 0 && containsAll(out, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed the blocker %q:\n%s", want, out)
		}
		time.Sleep(time.Second)
	}
	_ = run.cmd.Process.Signal(os.Interrupt)
	run.wait()
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
