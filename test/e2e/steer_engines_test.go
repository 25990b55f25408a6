//go:build e2e

package e2e

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestSteerEtcd: pause, continue and abort from a second process steer a rolling restart of a
// real etcd cluster (three etcd processes, kwok pods). Paused at the boundary after the first
// member: no pod deleted while paused, the Lease renewed meanwhile, status says paused;
// continued; aborted while the second member's step is in flight: that step finishes (its
// member back and healthy), the third member is never touched, exit 7, outcome aborted,
// history shows it, and etcd has three healthy voting members.
func TestSteerEtcd(t *testing.T) {
	x := newEtcd(t, 3)
	x.writeKeys("before", 10)
	env := cliEnv(t)
	steer := func(want int, verb string, extra ...string) {
		t.Helper()
		res := runCLI(t, env, append([]string{verb, x.name, "-n", x.ns, "--lock-id", "oncall"}, extra...)...)
		if res.Code != want {
			t.Fatalf("%s: exit %d, want %d\n%s", verb, res.Code, want, res)
		}
	}
	pods := recordPodWatch(t, x.ns)
	leases := recordLeaseWatch(t, x.ns)
	run := startCLI(t, env, "restart", x.name, "-n", x.ns, "--rolling", "--yes", "-o", "json", "--lock-id", "e2e-steer", "--lock-duration", "10s")
	var first string
	run.waitEvent("the first member's step started", func(ev ndEvent) bool {
		if ev.Type == "step-started" && ev.Step != nil && ev.Step.Index == 1 {
			first = ev.stepID()
			return true
		}
		return false
	})
	steer(5, "continue") // not paused: refused
	steer(0, "pause", "--reason", "check raft lag")
	run.waitEvent("the pause", func(ev ndEvent) bool {
		return ev.Type == "control" && strings.HasPrefix(ev.Message, "paused by oncall")
	})
	holdsWhilePaused(t, pods, leases, len(pods.snapshot()), x.name)
	if st := runCLI(t, env, "status", x.name, "-n", x.ns); !strings.Contains(st.Stdout, "paused by oncall") {
		t.Errorf("status while paused does not say so:\n%s", st)
	}
	steer(0, "continue")
	var second string
	run.waitEvent("the second member's step started", func(ev ndEvent) bool {
		if ev.Type == "step-started" && ev.Step != nil && ev.Step.Index == 2 {
			second = ev.stepID()
			return true
		}
		return false
	})
	steer(0, "abort", "--reason", "incident")
	res := run.wait()
	if res.Code != 7 {
		t.Fatalf("aborted restart: exit %d, want 7\n%s", res.Code, res)
	}
	evs := run.all
	if done := stepsOf(evs, "step-done"); !slices.Equal(done, []string{first, second}) {
		t.Errorf("steps done %v, want %s and %s (the one in flight at the abort)", done, first, second)
	}
	if started := stepsOf(evs, "step-started"); len(started) != 2 {
		t.Errorf("steps started %v: a third started after the abort", started)
	}
	if got := lastOutcome(evs); got != "aborted" {
		t.Errorf("outcome %s, want aborted", got)
	}
	restarted := map[string]bool{strings.TrimPrefix(first, "restart/"): true, strings.TrimPrefix(second, "restart/"): true}
	for _, e := range pods.snapshot() {
		if p, ok := e.Obj.(*corev1.Pod); ok && !restarted[p.Name] && (p.DeletionTimestamp != nil || e.Type == watch.Deleted) {
			t.Errorf("%s deleted (%s): only %s and %s were to restart", p.Name, e.Type, first, second)
		}
	}
	if _, j := getLockLease(t, x.ns, x.name); j.State != "aborted" || !strings.Contains(j.Error, "aborted by oncall") {
		t.Errorf("journal state %s, error %q; want aborted by oncall", j.State, j.Error)
	}
	if h := runCLI(t, env, "history", x.name, "-n", x.ns); !strings.Contains(h.Stdout, "aborted") {
		t.Errorf("history does not show the aborted run:\n%s", h)
	}
	x.waitHealthy(3)
	x.checkKeys()
}

// TestSteerReplicated: the same for the replicated engine (primaries and secondaries given
// their roles by exec): paused at the boundary after the first pod, no pod deleted and no role
// command exec'd while paused (the application's command log), the Lease renewed; continued;
// aborted while the second pod's step is in flight: that step finishes (its pod given its role
// again), the third pod is never touched, exit 7, outcome aborted.
func TestSteerReplicated(t *testing.T) {
	// Pods take 2s to start, as real ones take longer: a request lands inside a step.
	a := newReplApp(t, "app", 3, 3, func(a *replApp) string { return a.config(3) }, podsStartIn("2s"))
	for o, v := range []string{"5", "3", "1"} {
		a.setSeq(o, v)
	}
	if r := a.run("bootstrap", "app"); r.Code != 0 {
		t.Fatalf("bootstrap: %s", r)
	}
	a.log()
	steer := func(want int, verb string, extra ...string) {
		t.Helper()
		res := runCLI(t, a.env, append([]string{verb, "app", "-n", a.ns, "--lock-id", "oncall"}, extra...)...)
		if res.Code != want {
			t.Fatalf("%s: exit %d, want %d\n%s", verb, res.Code, want, res)
		}
	}
	pods := recordPodWatch(t, a.ns)
	leases := recordLeaseWatch(t, a.ns)
	run := startCLI(t, a.env, "restart", "app", "--rolling", "-n", a.ns, "--yes", "-o", "json", "--lock-id", "e2e-steer", "--lock-duration", "10s")
	// Pause as soon as the run holds its lock: honoured at the first step boundary it meets
	// (the steps of kwok pods are quick: which one is not fixed).
	run.waitEvent("the lock", func(ev ndEvent) bool { return ev.Type == "lock" })
	steer(0, "pause", "--reason", "check replication")
	run.waitEvent("the pause", func(ev ndEvent) bool {
		return ev.Type == "control" && strings.HasPrefix(ev.Message, "paused by oncall")
	})
	a.log() // what ran before the pause took effect
	holdsWhilePaused(t, pods, leases, len(pods.snapshot()), "app")
	if m := mutations(a.log()); len(m) != 0 {
		t.Errorf("role commands exec'd while paused: %q", m)
	}
	steer(0, "continue")
	var next ndEvent
	run.waitEvent("the next pod's step started", func(ev ndEvent) bool {
		next = ev
		return ev.Type == "step-started" && ev.Step != nil
	})
	k, second := next.Step.Index, next.stepID()
	if k >= next.Step.Total {
		t.Fatalf("the pause was honoured only before the last step (%d of %d): nothing left to abort", k, next.Step.Total)
	}
	steer(0, "abort", "--reason", "incident")
	res := run.wait()
	if res.Code != 7 {
		t.Fatalf("aborted restart: exit %d, want 7\n%s", res.Code, res)
	}
	evs := run.all
	if done := stepsOf(evs, "step-done"); len(done) != k || done[k-1] != second {
		t.Errorf("steps done %v, want %d, the last %s (in flight at the abort)", done, k, second)
	}
	if started := stepsOf(evs, "step-started"); len(started) != k {
		t.Errorf("steps started %v: one started after the abort", started)
	}
	if got := lastOutcome(evs); got != "aborted" {
		t.Errorf("outcome %s, want aborted", got)
	}
	var deleted []string
	for _, c := range podTransitions(pods.snapshot()) {
		if c.Type == watch.Deleted {
			deleted = append(deleted, c.Name)
		}
	}
	if len(deleted) != k {
		t.Errorf("pods deleted %v, want %d (the rest untouched after the abort)", deleted, k)
	}
	if m := mutations(a.log()); len(deleted) == 0 || len(m) != 1 || !strings.HasPrefix(m[0], deleted[len(deleted)-1]+" ") {
		t.Errorf("role commands after the continue %q, want one, for %v's last pod (the step in flight finished)", m, deleted)
	}
}
