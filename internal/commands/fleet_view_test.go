package commands

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// plainEventLine is a target's event as a plain line: "[context/namespace/cluster] TIME ...".
var plainEventLine = regexp.MustCompile(`(?m)^\[ctx-[ab]/db/orders\] \d{4}-\d\d-\d\dT`)

// A fleet restart on a terminal is shown in the fleet view (one line per target, its state),
// with no plain line of a target's events; the summary table still follows. With --no-tui,
// or without a terminal, the targets' events are plain lines prefixed with the target.
func TestFleetRestartView(t *testing.T) {
	for _, tc := range []struct {
		name     string
		terminal bool
		args     []string
		view     bool
	}{
		{name: "terminal", terminal: true, view: true},
		{name: "terminal, --no-tui", terminal: true, args: []string{"--no-tui"}},
		{name: "no terminal", terminal: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fh := newFleetHarness(t)
			fh.env["NO_COLOR"] = "1"
			fh.terminal = tc.terminal
			ca := fakecluster.Start(t, fh.clients["ctx-a"], "db")
			cb := fakecluster.Start(t, fh.clients["ctx-b"], "db")
			r := fh.run(append([]string{"restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b", "--yes", "--lock-id", "ci@test"}, tc.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
			}
			if len(ca.Deleted()) != 3 || len(cb.Deleted()) != 3 {
				t.Errorf("deleted %v, %v", ca.Deleted(), cb.Deleted())
			}
			if got := fleetSummaryRows(t, r.out); got != "ctx-a succeeded,ctx-b succeeded" {
				t.Errorf("summary %s:\n%s", got, r.out)
			}
			body := r.out[:strings.Index(r.out, "\nCONTEXT ")]
			prefixed := plainEventLine.MatchString(body)
			shown := strings.Contains(body, "fleet restart") && strings.Contains(body, "2 targets: 2 succeeded")
			if tc.view && (prefixed || !shown) {
				t.Errorf("want the fleet view, no plain lines:\n%s", body)
			}
			if !tc.view && (!prefixed || shown) {
				t.Errorf("want plain lines prefixed with their target, no view:\n%s", body)
			}
		})
	}
}

// resume --fleet on a terminal is shown in the fleet view too: the target resumed and the
// one with nothing to resume; a target's lines beside its events ("resuming ...") are printed,
// prefixed with the target, once the view has exited.
func TestFleetResumeView(t *testing.T) {
	fh := newFleetHarness(t)
	fh.env["NO_COLOR"] = "1"
	ca := fakecluster.Start(t, fh.clients["ctx-a"], "db")
	fakecluster.Start(t, fh.clients["ctx-b"], "db")
	r := fh.run("restart", "orders", "--rolling", "--contexts", "ctx-a", "--pause-after", "1", "--yes", "--lock-id", "ci@test")
	if r.code != ops.ExitPaused || len(ca.Deleted()) != 1 {
		t.Fatalf("restart: exit %d, deleted %v: %s\n%s", r.code, ca.Deleted(), r.err, r.out)
	}
	fh.terminal = true
	r = fh.run("resume", "orders", "--contexts", "ctx-a,ctx-b", "--yes", "--lock-id", "ci@test")
	if r.code != ops.ExitPrecondition {
		t.Fatalf("resume: exit %d, want 5: %s\n%s", r.code, r.err, r.out)
	}
	if got := fleetSummaryRows(t, r.out); got != "ctx-a stopped,ctx-b nothing-to-resume" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	body := r.out[:strings.Index(r.out, "\nCONTEXT ")]
	for _, want := range []string{"fleet resume", "ctx-a/db/orders", "stopped", "nothing-to-resume"} {
		if !strings.Contains(body, want) {
			t.Errorf("view lacks %q:\n%s", want, body)
		}
	}
	if plainEventLine.MatchString(body) {
		t.Errorf("plain lines beside the view:\n%s", body)
	}
	if !strings.Contains(r.err, "[ctx-a/db/orders] resuming restart") {
		t.Errorf("the target's own line was not printed after the view:\n%s", r.err)
	}
}

// q in the fleet view is the fleet's interrupt, the path a SIGINT takes (the fleet's context
// cancelled): the running target's run ends interrupted before its first step (exit 130),
// no other target starts, and the summary still follows the view.
func TestFleetViewInterrupt(t *testing.T) {
	fh := newFleetHarness(t)
	fh.env["NO_COLOR"] = "1"
	fh.terminal = true
	ca := fakecluster.Start(t, fh.clients["ctx-a"], "db")
	fakecluster.Start(t, fh.clients["ctx-b"], "db")
	keys, press := io.Pipe()
	r := fh.runWith(func(g *GlobalOptions) {
		g.In = keys
		g.ContextClients = func(c string) (*Clients, error) { return &Clients{Kube: fh.clients[c], Clock: fh.clock}, nil }
		g.WrapFleetTarget = func(ctx context.Context, tg fleet.Target, _ <-chan struct{}, run func() error) error {
			// The operator presses q while this target runs; its run goes on once the
			// fleet's context is cancelled.
			_, _ = press.Write([]byte("q"))
			_ = press.Close()
			<-ctx.Done()
			return run()
		}
	}, "restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b", "--yes", "--lock-id", "ci@test")
	if r.code != ops.ExitInterrupted {
		t.Fatalf("exit %d, want 130: %s\n%s", r.code, r.err, r.out)
	}
	if got := fleetSummaryRows(t, r.out); got != "ctx-a failed,ctx-b not-started" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	if !strings.Contains(r.out, "fleet restart") {
		t.Errorf("no fleet view:\n%s", r.out)
	}
	if len(ca.Deleted()) != 0 {
		t.Errorf("ctx-a deleted %v after the interrupt", ca.Deleted())
	}
	if w := fakecluster.Writes(fh.clients["ctx-b"]); len(w) > 0 {
		t.Errorf("ctx-b: wrote %v", w)
	}
}
