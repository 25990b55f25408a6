//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/bedwire"
)

// pause, continue and abort from a second process steer a running restart of the generic
// engine: paused at the step boundary after web-0 (no pod deleted while paused, the Lease
// renewed meanwhile), continued, then aborted while web-1's step is in flight: web-1's step
// finishes, web-2 is never touched, the run exits 7 with outcome aborted and the journal says
// who aborted it. Requests without a run, a continue on a run not paused and a repeated pause
// are refused with exit 5 and write nothing.
func TestSteerRestart(t *testing.T) {
	ns := newNamespace(t)
	createDBCluster(t, ns, webCluster, 3, podsStartIn("2s"))
	env := cliEnv(t)
	steer := func(want int, verb string, extra ...string) cliResult {
		t.Helper()
		res := runCLI(t, env, append([]string{verb, webCluster, "-n", ns, "--lock-id", "oncall"}, extra...)...)
		if res.Code != want {
			t.Fatalf("%s: exit %d, want %d\n%s", verb, res.Code, want, res)
		}
		if want != 0 && strings.Count(strings.TrimSpace(res.Stderr), "\n") != 0 {
			t.Errorf("%s: refusal is not one line:\n%s", verb, res.Stderr)
		}
		return res
	}
	// No run: refused, and no Lease written (there was none).
	steer(5, "pause", "--reason", "nothing runs")
	steer(5, "abort")
	if _, err := bed.Client.CoordinationV1().Leases(ns).Get(t.Context(), "dbops-"+webCluster, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused request wrote the Lease (get: %v)", err)
	}

	pods := recordPodWatch(t, ns)
	leases := recordLeaseWatch(t, ns)
	run := startCLI(t, env, "restart", webCluster, "-n", ns, "--rolling", "--yes", "-o", "json", "--lock-id", "e2e-steer", "--lock-duration", "10s")
	run.waitEvent("web-0's step started", func(ev ndEvent) bool {
		return ev.Type == "step-started" && ev.stepID() == "restart/web-0"
	})
	steer(5, "continue") // not paused: refused
	// Two pauses racing from two terminals: one is written, the other refused (exit 5).
	codes := make(chan int, 2)
	var wg sync.WaitGroup
	for _, id := range []string{"oncall", "oncall-2"} {
		wg.Go(func() {
			codes <- runCLI(t, env, "pause", webCluster, "-n", ns, "--lock-id", id, "--reason", "check lag").Code
		})
	}
	wg.Wait()
	close(codes)
	var got []int
	for c := range codes {
		got = append(got, c)
	}
	if slices.Sort(got); !slices.Equal(got, []int{0, 5}) {
		t.Fatalf("racing pauses exited %v, want one 0 and one 5", got)
	}
	steer(5, "pause") // already paused (or about to be): refused
	run.waitEvent("the pause", func(ev ndEvent) bool {
		return ev.Type == "control" && strings.HasPrefix(ev.Message, "paused by oncall")
	})
	holdsWhilePaused(t, pods, leases, len(pods.snapshot()), webCluster)
	if st := runCLI(t, env, "status", webCluster, "-n", ns); !strings.Contains(st.Stdout, "Paused:   paused by oncall") {
		t.Errorf("status while paused does not say so :\n%s", st)
	}
	if ls := runCLI(t, env, "list", "-n", ns, "-o", "json"); !strings.Contains(ls.Stdout, "paused by oncall") {
		t.Errorf("list while paused does not say so:\n%s", ls)
	}
	steer(0, "continue", "--reason", "lag ok")
	run.waitEvent("web-1's step started", func(ev ndEvent) bool {
		return ev.Type == "step-started" && ev.stepID() == "restart/web-1"
	})
	steer(0, "abort", "--reason", "incident")
	res := run.wait()
	if res.Code != 7 {
		t.Fatalf("aborted restart: exit %d, want 7\n%s", res.Code, res)
	}
	evs := run.all
	if started := stepsOf(evs, "step-started"); slices.Contains(started, "restart/web-2") {
		t.Errorf("web-2's step started after the abort: %v", started)
	}
	if done := stepsOf(evs, "step-done"); !slices.Equal(done, []string{"restart/web-0", "restart/web-1"}) {
		t.Errorf("steps done %v, want web-0 and web-1 (the one in flight at the abort)", done)
	}
	if got := lastOutcome(evs); got != "aborted" {
		t.Errorf("outcome %s, want aborted", got)
	}
	for _, e := range pods.snapshot() {
		if p, ok := e.Obj.(*corev1.Pod); ok && p.Name == "web-2" && (p.DeletionTimestamp != nil || e.Type == watch.Deleted) {
			t.Errorf("web-2 deleted (%s) after the abort", e.Type)
		}
	}
	l, j := getLockLease(t, ns, webCluster)
	if j.State != "aborted" || !strings.Contains(j.Error, "aborted by oncall") {
		t.Errorf("journal state %s, error %q; want aborted by oncall", j.State, j.Error)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("lock still held by %s after the abort", *h)
	}
	if _, ok := l.Annotations["dbops.io/control"]; ok {
		t.Errorf("the abort request outlived the run: %v", l.Annotations)
	}
	steer(5, "continue") // the run is over
	if h := runCLI(t, env, "history", webCluster, "-n", ns); !strings.Contains(h.Stdout, "aborted") {
		t.Errorf("history does not show the aborted run:\n%s", h)
	}
}

// TestSteerCrateDBAbort: an abort written while a CrateDB pod's step is in flight (its gate
// holds shard allocation at primaries) lets that step finish, allocation re-enabled by it,
// and ends the run before the next pod: exit 7, outcome aborted, allocation back to all, no
// cluster-changing statement after the step's RESET.
func TestSteerCrateDBAbort(t *testing.T) {
	x := newCrateEnvLayout(t, true, bedwire.LayoutPodName)
	seq0 := x.lastSeq()
	run := startCLI(t, x.env, x.args("restart", "--rolling", "--yes", "--health-checks", "2", "--health-interval", "200ms", "-o", "json", "--lock-id", "e2e-crate-steer")...)
	first := run.waitEvent("the first step started", func(e ndEvent) bool { return e.Type == "step-started" }).stepID()
	if res := runCLI(t, x.env, "abort", x.name, "-n", x.ns, "--lock-id", "oncall", "--reason", "incident"); res.Code != 0 {
		t.Fatalf("abort: %s", res)
	}
	res := run.wait()
	if res.Code != 7 {
		t.Fatalf("aborted restart: exit %d, want 7\n%s", res.Code, res)
	}
	evs := run.all
	if started := stepsOf(evs, "step-started"); !slices.Equal(started, []string{first}) {
		t.Errorf("steps started %v, want only %s (in flight at the abort)", started, first)
	}
	if done := stepsOf(evs, "step-done"); !slices.Equal(done, []string{first}) {
		t.Errorf("steps done %v, want %s", done, first)
	}
	if got := lastOutcome(evs); got != "aborted" {
		t.Errorf("outcome %s, want aborted", got)
	}
	set, reset := 0, 0
	for _, s := range x.sim.Statements() {
		if s.Seq <= seq0 || s.Error != "" {
			continue
		}
		u := strings.ToUpper(strings.TrimSpace(s.Statement))
		switch {
		case strings.Contains(u, "ALLOCATION.ENABLE") && strings.HasPrefix(u, "SET GLOBAL"):
			set = s.Seq
		case strings.Contains(u, "ALLOCATION.ENABLE") && strings.HasPrefix(u, "RESET GLOBAL"):
			reset = s.Seq
		}
	}
	if set == 0 || reset < set {
		t.Errorf("the step in flight did not hold and then re-enable allocation (SET #%d, RESET #%d):\n%s", set, reset, dumpStatements(x.sim.Statements()))
	}
	r := x.sql(`SELECT settings['cluster']['routing']['allocation']['enable'] FROM sys.cluster`)
	if len(r.Rows) != 1 || fmt.Sprint(r.Rows[0][0]) != "all" {
		t.Errorf("cluster.routing.allocation.enable = %v after the abort, want all", r.Rows)
	}
	if _, j := getLockLease(t, x.ns, x.name); j.State != "aborted" {
		t.Errorf("journal state %s, want aborted", j.State)
	}
}

// TestSteerCrateDBPauseContinue: a CrateDB rolling restart paused from a second process while
// its first pod's step is in flight finishes that step, then holds: no pod deleted, no
// statement that changes the cluster (only reads) and the Lease renewed while paused, and
// `status` says so; continued, it restarts every other pod and ends with allocation back to all.
func TestSteerCrateDBPauseContinue(t *testing.T) {
	x := newCrateEnvLayout(t, true, bedwire.LayoutPodName)
	steer := func(want int, verb string, extra ...string) {
		t.Helper()
		res := runCLI(t, x.env, append([]string{verb, x.name, "-n", x.ns, "--lock-id", "oncall"}, extra...)...)
		if res.Code != want {
			t.Fatalf("%s: exit %d, want %d\n%s", verb, res.Code, want, res)
		}
	}
	pods := recordPodWatch(t, x.ns)
	leases := recordLeaseWatch(t, x.ns)
	run := startCLI(t, x.env, x.args("restart", "--rolling", "--yes", "--health-checks", "2", "--health-interval", "200ms", "-o", "json",
		"--lock-id", "e2e-crate-steer", "--lock-duration", "10s")...)
	var first ndEvent
	run.waitEvent("the first step started", func(e ndEvent) bool {
		first = e
		return e.Type == "step-started" && e.Step != nil
	})
	if first.Step.Total < 2 {
		t.Fatalf("%d step(s): nothing to hold after the first", first.Step.Total)
	}
	steer(0, "pause", "--reason", "check shard recovery")
	run.waitEvent("the pause", func(ev ndEvent) bool {
		return ev.Type == "control" && strings.HasPrefix(ev.Message, "paused by oncall")
	})
	seq := x.lastSeq()
	holdsWhilePaused(t, pods, leases, len(pods.snapshot()), x.name)
	for _, s := range x.toolStatements(seq) {
		if u := strings.ToUpper(strings.TrimSpace(s.Statement)); !strings.HasPrefix(u, "SELECT") {
			t.Errorf("statement #%d while paused: %s", s.Seq, s.Statement)
		}
	}
	if done := stepsOf(run.all, "step-done"); !slices.Equal(done, []string{first.stepID()}) {
		t.Errorf("steps done at the pause %v, want only %s (in flight when it was asked)", done, first.stepID())
	}
	if st := runCLI(t, x.env, "status", x.name, "-n", x.ns); !strings.Contains(st.Stdout, "paused by oncall") {
		t.Errorf("status while paused does not say so:\n%s", st)
	}
	steer(0, "continue")
	res := run.wait()
	if res.Code != 0 || lastOutcome(run.all) != "succeeded" {
		t.Fatalf("continued restart: exit %d, outcome %s\n%s", res.Code, lastOutcome(run.all), res)
	}
	if done := stepsOf(run.all, "step-done"); len(done) != first.Step.Total {
		t.Errorf("steps done %v, want all %d", done, first.Step.Total)
	}
	r := x.sql(`SELECT settings['cluster']['routing']['allocation']['enable'] FROM sys.cluster`)
	if len(r.Rows) != 1 || fmt.Sprint(r.Rows[0][0]) != "all" {
		t.Errorf("cluster.routing.allocation.enable = %v after the run, want all", r.Rows)
	}
}

// TestSteerFoundationDB: a FoundationDB zone restart paused while its first batch is away
// (bounced with fdbcli kill, held back by a slow fdbmonitor) finishes that batch and then
// sends FoundationDB nothing while paused; an abort then ends it before the next batch: exit
// 7, outcome aborted, no maintenance zone left, no kill or maintenance after the pause.
func TestSteerFoundationDB(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	env := cliEnv(t)
	model.HoldRestarts(true)
	run := startCLI(t, env, "restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--method", "process", "--yes", "-o", "json", "--lock-id", "e2e-fdb-steer")
	waitFDBKill(t, model)
	if res := runCLI(t, env, "pause", "myfdb", "-n", ns, "--lock-id", "oncall", "--reason", "look at the recovery"); res.Code != 0 {
		t.Fatalf("pause: %s", res)
	}
	model.HoldRestarts(false)
	run.waitEvent("the pause", func(ev ndEvent) bool {
		return ev.Type == "control" && strings.HasPrefix(ev.Message, "paused by oncall")
	})
	paused := len(model.Log())
	if done := stepsOf(run.all, "step-done"); len(done) != 1 {
		t.Fatalf("steps done when the pause was honoured: %v, want the batch in flight", done)
	}
	if z, _ := model.MaintenanceZone(); z != "" {
		t.Errorf("maintenance zone %s still set while paused after the batch", z)
	}
	if res := runCLI(t, env, "abort", "myfdb", "-n", ns, "--lock-id", "oncall"); res.Code != 0 {
		t.Fatalf("abort: %s", res)
	}
	res := run.wait()
	if res.Code != 7 || lastOutcome(run.all) != "aborted" {
		t.Fatalf("aborted restart: exit %d, outcome %s; want 7, aborted\n%s", res.Code, lastOutcome(run.all), res)
	}
	for _, e := range model.Log()[paused:] {
		if e.Client == "operator" || e.Client == "" {
			continue
		}
		if strings.HasPrefix(e.Command, "kill") || strings.HasPrefix(e.Command, "maintenance on") {
			t.Errorf("fdbcli write after the pause (from %s): %q", e.Client, e.Command)
		}
	}
	if started := stepsOf(run.all, "step-started"); len(started) != 1 {
		t.Errorf("steps started %v, want only the batch in flight at the pause", started)
	}
	if z, _ := model.MaintenanceZone(); z != "" {
		t.Errorf("maintenance zone %s left after the abort", z)
	}
}

// holdsWhilePaused checks a paused run from outside: the Lease of cluster is renewed twice
// (the lock kept; --lock-duration 10s renews every few seconds) and no pod is deleted from
// the pods recorder's event index pausedAt on.
func holdsWhilePaused(t *testing.T, pods, leases *watchRecorder, pausedAt int, cluster string) {
	t.Helper()
	renewals := func(evs []recordedEvent) int {
		n := 0
		for _, e := range evs {
			if l, ok := e.Obj.(*coordinationv1.Lease); ok && e.Type == watch.Modified && l.Name == "dbops-"+cluster {
				n++
			}
		}
		return n
	}
	base := renewals(leases.snapshot())
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if err := leases.waitUntil(ctx, func(evs []recordedEvent) bool { return renewals(evs) >= base+2 }); err != nil {
		t.Fatalf("the Lease was not renewed while paused: %v", err)
	}
	for _, e := range pods.snapshot()[pausedAt:] {
		if p, ok := e.Obj.(*corev1.Pod); ok && (p.DeletionTimestamp != nil || e.Type == watch.Deleted) {
			t.Errorf("pod %s deleted (%s) while paused", p.Name, e.Type)
		}
	}
}
