package commands

import (
	"context"
	"fmt"

	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// fleetSummaryRows are the summary table's rows of a plain fleet run as "context outcome".
func fleetSummaryRows(t *testing.T, out string) string {
	t.Helper()
	i := strings.Index(out, "\nCONTEXT ")
	if i < 0 {
		t.Fatalf("no summary:\n%s", out)
	}
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(out[i+1:]), "\n")[1:] {
		f := strings.Fields(l)
		rows = append(rows, f[0]+" "+f[3])
	}
	return strings.Join(rows, ",")
}

// resume --fleet continues only the targets with an unfinished operation, each from its own
// journal: ctx-a's restart paused after one pod (--pause-after 1, which its request records,
// so each resume restarts one more pod and pauses again, as a single-cluster resume does) is
// continued up to its end, no pod restarted twice; ctx-b, where nothing ran, is reported
// nothing-to-resume with a precondition (exit 5: its restart was never done) and gets no
// write; once ctx-b's restart ran, a resume of both has nothing to do and exits 0.
func TestFleetResume(t *testing.T) {
	fh := newFleetHarness(t)
	ca := fakecluster.Start(t, fh.clients["ctx-a"], "db")
	cb := fakecluster.Start(t, fh.clients["ctx-b"], "db")
	r := fh.run("restart", "orders", "--rolling", "--contexts", "ctx-a", "--pause-after", "1", "--yes", "--lock-id", "ci@test")
	if r.code != ops.ExitPaused || len(ca.Deleted()) != 1 {
		t.Fatalf("restart: exit %d, deleted %v: %s\n%s", r.code, ca.Deleted(), r.err, r.out)
	}
	r = fh.run("resume", "orders", "--contexts", "ctx-a,ctx-b", "--yes", "--lock-id", "ci@test")
	if r.code != ops.ExitPrecondition {
		t.Fatalf("resume: exit %d, want 5: %s\n%s", r.code, r.err, r.out)
	}
	if got := fleetSummaryRows(t, r.out); got != "ctx-a stopped,ctx-b nothing-to-resume" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	if d := ca.Deleted(); len(d) != 2 || d[0] == d[1] {
		t.Errorf("ctx-a deleted %v", d)
	}
	if !strings.Contains(r.out, "[ctx-a/db/orders] ") || !strings.Contains(r.err, "[ctx-a/db/orders] resuming restart") {
		t.Errorf("lines not prefixed by their target:\n%s\n%s", r.out, r.err)
	}
	if !strings.Contains(r.err, "ERROR: context ctx-b, cluster db/orders: nothing-to-resume: nothing to resume: no operation is recorded") {
		t.Errorf("stderr:\n%s", r.err)
	}
	// The final line does not count ctx-b, where nothing ran, among the failed targets.
	if !strings.Contains(r.err, "error: fleet: 1 of 2 targets stopped (ctx-a/db/orders); 1 of 2 targets nothing-to-resume (ctx-b/db/orders): nothing to resume") {
		t.Errorf("the final error counts ctx-b as failed:\n%s", r.err)
	}
	if len(cb.Deleted()) != 0 {
		t.Errorf("ctx-b deleted %v", cb.Deleted())
	}
	r = fh.run("resume", "orders", "--contexts", "ctx-a,ctx-b", "--yes", "--lock-id", "ci@test")
	if got := fleetSummaryRows(t, r.out); r.code != ops.ExitPrecondition || got != "ctx-a succeeded,ctx-b nothing-to-resume" {
		t.Errorf("resume again: exit %d, summary %s:\n%s", r.code, got, r.out)
	}
	if d := ca.Deleted(); len(d) != 3 || d[0] == d[2] || d[1] == d[2] {
		t.Errorf("ctx-a deleted %v", d)
	}
	if r := fh.run("restart", "orders", "--rolling", "--contexts", "ctx-b", "--yes"); r.code != 0 {
		t.Fatalf("restart ctx-b: exit %d: %s", r.code, r.err)
	}
	r = fh.run("resume", "orders", "--contexts", "ctx-a,ctx-b", "--yes")
	if r.code != 0 {
		t.Fatalf("second resume: exit %d: %s\n%s", r.code, r.err, r.out)
	}
	if got := fleetSummaryRows(t, r.out); got != "ctx-a nothing-to-resume,ctx-b nothing-to-resume" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	if len(ca.Deleted()) != 3 || len(cb.Deleted()) != 3 {
		t.Errorf("deleted again: ctx-a %v, ctx-b %v", ca.Deleted(), cb.Deleted())
	}
}

// With --fail-fast a target's failure stops a running resumed target before its next step
// (the fleet's stop reaches the resumed command's executor): ctx-a, started, waits for ctx-b
// to fail, then runs and stops at once (stopped, journal kept: its pods untouched by this run).
func TestFleetResumeFailFastStops(t *testing.T) {
	fh := newFleetHarness(t)
	ca := fakecluster.Start(t, fh.clients["ctx-a"], "db")
	fakecluster.Start(t, fh.clients["ctx-b"], "db")
	r := fh.run("restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b", "--max-parallel", "2", "--fail-fast=false", "--pause-after", "1", "--yes")
	if r.code != ops.ExitPaused || len(ca.Deleted()) != 1 {
		t.Fatalf("restart: exit %d: %s\n%s", r.code, r.err, r.out)
	}
	r = fh.runWith(func(g *GlobalOptions) {
		g.ContextClients = func(c string) (*Clients, error) { return &Clients{Kube: fh.clients[c], Clock: fh.clock}, nil }
		g.WrapFleetTarget = func(_ context.Context, tg fleet.Target, stop <-chan struct{}, run func() error) error {
			if tg.Context == "ctx-b" {
				return ops.Preconditionf("ctx-b broke")
			}
			<-stop
			return run()
		}
	}, "resume", "orders", "--contexts", "ctx-a,ctx-b", "--max-parallel", "2", "--yes")
	if r.code != ops.ExitPrecondition {
		t.Fatalf("resume: exit %d: %s\n%s", r.code, r.err, r.out)
	}
	if got := fleetSummaryRows(t, r.out); got != "ctx-a stopped,ctx-b failed" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	if len(ca.Deleted()) != 1 {
		t.Errorf("ctx-a deleted %v", ca.Deleted())
	}
}

// --pause-between-clusters reaches the fleet's pacing on restart and resume: one pause of that
// length before the second target (on the factory's timer, no real wait); without a fleet it
// is exit 2 with nothing written.
func TestFleetPauseBetweenClusters(t *testing.T) {
	fh := newFleetHarness(t)
	fakecluster.Start(t, fh.clients["ctx-a"], "db")
	fakecluster.Start(t, fh.clients["ctx-b"], "db")
	var pauses []time.Duration
	run := func(args ...string) result {
		return fh.runWith(func(g *GlobalOptions) {
			g.ContextClients = func(c string) (*Clients, error) { return &Clients{Kube: fh.clients[c], Clock: fh.clock}, nil }
			g.FleetAfter = func(d time.Duration) <-chan time.Time {
				pauses = append(pauses, d)
				c := make(chan time.Time, 1)
				c <- time.Time{}
				return c
			}
		}, args...)
	}
	if r := run("restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b", "--pause-after", "1", "--pause-between-clusters", "90s", "--fail-fast=false", "--yes"); r.code != ops.ExitPaused {
		t.Fatalf("restart: exit %d: %s", r.code, r.err)
	}
	if fmt.Sprint(pauses) != "[1m30s]" {
		t.Errorf("restart pauses %v", pauses)
	}
	pauses = nil
	if r := run("resume", "orders", "--contexts", "ctx-a,ctx-b", "--pause-between-clusters", "2m", "--fail-fast=false", "--yes"); r.code != ops.ExitPaused {
		t.Fatalf("resume: exit %d: %s", r.code, r.err)
	}
	if fmt.Sprint(pauses) != "[2m0s]" {
		t.Errorf("resume pauses %v", pauses)
	}
	for _, c := range []string{"restart", "resume"} {
		fh := newFleetHarness(t)
		args := []string{c, "orders", "--pause-between-clusters", "1m", "--yes"}
		if c == "restart" {
			args = append(args, "--rolling")
		}
		r := fh.run(args...)
		if r.code != ops.ExitUsage || !strings.Contains(r.err, "--pause-between-clusters applies to a fleet") {
			t.Errorf("%s without a fleet: exit %d: %s", c, r.code, r.err)
		}
		fh.noWrites(t)
	}
}
