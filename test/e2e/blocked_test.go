//go:build e2e

package e2e

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
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

// TestBlockedOnFDBZoneFromSecondTerminal: someone else puts a zone into maintenance while a
// FoundationDB zone restart runs (FoundationDB has one maintenance zone: theirs replaces the
// run's). The run's gate before the next batch waits on that zone, and `status` run as a
// second process reads from the Lease what it is blocked on (the zone, set by someone else),
// until when, and how to unblock it; once the zone ends the run finishes.
func TestBlockedOnFDBZoneFromSecondTerminal(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	env := cliEnv(t)
	run := startCLI(t, env, "restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--yes", "--lock-id", "alice",
		"--lock-duration", "15s", "--timeout", "5m", "-o", "json")
	ev := run.waitEvent("the first batch", func(ev ndEvent) bool {
		return ev.Type == "step-started" && ev.Step != nil && ev.Step.Index == 1
	})
	batch := ev.Step.ID[strings.LastIndex(ev.Step.ID, "/")+1:]
	// Once the batch's kill is out (the simulator's command log), its processes come back
	// within a second: the zone set now lands while the run waits for them.
	killDeadline := time.Now().Add(time.Minute)
	for !slices.ContainsFunc(model.Log(), func(e fdbsim.LogEntry) bool { return strings.HasPrefix(e.Command, "kill ") }) {
		if time.Now().After(killDeadline) {
			t.Fatal("the first batch's kill never went out")
		}
		time.Sleep(5 * time.Millisecond) // test-side poll of the in-process simulator's log
	}
	var zone string
	for _, z := range fdbZones(model, "storage") {
		if z != batch {
			zone = z
			break
		}
	}
	if zone == "" {
		t.Fatalf("no storage zone besides the batch's %s: %v", batch, fdbZones(model, "storage"))
	}
	var out, errb strings.Builder
	if code := model.Run(t.Context(), []string{"--exec", "maintenance on " + zone + " 300"}, &out, &errb); code != 0 {
		t.Fatalf("maintenance on %s: %s", zone, errb.String())
	}
	want := []string{"Blocked:  on maintenance zone " + zone + " (set by someone else) (zone) since ", ", gives up at ",
		"to unblock: wait for it to expire, or when it is stale end it with fdbcli --exec 'maintenance off'"}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		res := runCLI(t, env, "status", "myfdb", "-n", ns)
		if res.Code == 0 && containsAll(res.Stdout, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed the blocker %q:\n%s", want, res.Stdout)
		}
		time.Sleep(time.Second)
	}
	js := runCLI(t, env, "status", "myfdb", "-n", ns, "-o", "json")
	if !strings.Contains(js.Stdout, `"kind": "zone"`) || !strings.Contains(js.Stdout, `"on": "maintenance zone `+zone+` (set by someone else)"`) || !strings.Contains(js.Stdout, `"giveUpAt"`) {
		t.Errorf("status -o json does not carry the blocker:\n%s", js.Stdout)
	}
	out.Reset()
	if code := model.Run(t.Context(), []string{"--exec", "maintenance off"}, &out, &errb); code != 0 {
		t.Fatalf("maintenance off: %s", errb.String())
	}
	if res := run.wait(); res.Code != 0 {
		t.Fatalf("restart after the zone ended: exit %d\n%s", res.Code, res)
	}
}

// TestBlockedOnEtcdLearnerFromSecondTerminal: a scale-up whose new member, added as a learner,
// cannot catch up (its etcd process is held down) waits before promoting it; `status` run as
// a second process reads from the Lease that the step is blocked on that learner (kind
// member), until when and how to unblock it. Once the process runs, the learner catches up,
// is promoted, and the run finishes.
func TestBlockedOnEtcdLearnerFromSecondTerminal(t *testing.T) {
	x := newEtcd(t, 3)
	x.writeKeys("before", 10)
	x.runner.Suspend("etcd-3")
	env := cliEnv(t)
	run := startCLI(t, env, "scale", x.name, "-n", x.ns, "--replicas", "4", "--yes", "--lock-id", "alice",
		"--lock-duration", "15s", "--timeout", "5m", "-o", "json")
	want := []string{"Blocked:  on etcd learner etcd-3 (peer URL ", "(member) since ", ", gives up at ",
		"to unblock: it is promoted once its raft index is within "}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		res := runCLI(t, env, "status", x.name, "-n", x.ns)
		if res.Code == 0 && containsAll(res.Stdout, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed the blocker %q:\n%s", want, res.Stdout)
		}
		time.Sleep(time.Second)
	}
	js := runCLI(t, env, "status", x.name, "-n", x.ns, "-o", "json")
	if !strings.Contains(js.Stdout, `"kind": "member"`) || !strings.Contains(js.Stdout, `"on": "etcd learner etcd-3 (peer URL `) {
		t.Errorf("status -o json does not carry the blocker:\n%s", js.Stdout)
	}
	x.runner.Resume("etcd-3")
	if res := run.wait(); res.Code != 0 {
		t.Fatalf("scale after the learner's process came back: exit %d\n%s", res.Code, res)
	}
	x.waitHealthy(4)
	x.checkKeys()
}
