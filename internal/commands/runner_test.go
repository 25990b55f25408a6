package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/discovery"
)

// fakeOperation is a command's options whose Run returns err, after ending the NDJSON
// stream itself when endsStream is set (as a run or a dry-run does).
type fakeOperation struct {
	r          *Runner
	err        error
	endsStream bool
	ran        bool
}

func (f *fakeOperation) Complete(*cobra.Command, []string) error { return nil }
func (f *fakeOperation) Validate() error                         { return nil }
func (f *fakeOperation) Run(*cobra.Command) error {
	f.ran = true
	if f.endsStream {
		f.r.streamEnded = true
	}
	return f.err
}

// The runner ends an NDJSON stream with exactly one done event: one for a refusal before the
// run, none when the run ended the stream itself, none on success or for other outputs.
func TestRunnerEndsStreamOnce(t *testing.T) {
	refusal := ops.Usagef("bad input")
	for _, tc := range []struct {
		name       string
		output     string
		err        error
		endsStream bool
		wantDone   int
	}{
		{"refusal", "json", refusal, false, 1},
		{"run ended the stream", "json", errors.New("step failed"), true, 0},
		{"success", "json", nil, false, 0},
		{"text output", "text", refusal, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			g := NewGlobalOptions(streams)
			g.Output = tc.output
			r := NewRunner(g.Factory, NewRunFlags(), g)
			op := &fakeOperation{r: r, err: tc.err, endsStream: tc.endsStream}
			cmd := &cobra.Command{Use: "restart"}
			err := r.runE(op)(cmd, []string{"db"})
			if !errors.Is(err, tc.err) || !op.ran {
				t.Fatalf("err = %v (ran %v), want %v", err, op.ran, tc.err)
			}
			if tc.err != nil {
				// A second error on the same runner never adds a second done event.
				_ = r.endStream("restart", "db", refusal)
			}
			done := 0
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				if line == "" {
					continue
				}
				var ev ops.Event
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
				if ev.Type == ops.EventDone {
					done++
					if ev.Outcome != ops.OutcomeRefused || ev.Cluster != "db" || ev.ReasonCode != ops.ReasonOf(refusal) {
						t.Errorf("done event = %+v", ev)
					}
				}
			}
			if done != tc.wantDone {
				t.Errorf("%d done events, want %d:\n%s", done, tc.wantDone, out.String())
			}
		})
	}
}

// fakeClusters finds clusters with discovery's generic paths over a Factory and builds no
// engine: a Runner's command line without GlobalOptions.
type fakeClusters struct{ f *Factory }

func (c fakeClusters) discover(ctx context.Context, name string, _ bool) (*Clients, *ops.Cluster, error) {
	cl, err := c.f.Clients()
	if err != nil {
		return nil, nil, err
	}
	ns, err := c.f.Namespace()
	if err != nil {
		return nil, nil, err
	}
	cluster, err := discovery.Discover(ctx, cl.Kube, discovery.Options{Namespace: ns, Name: name, Engines: c.f.engineNames(),
		Recognizers: c.f.recognizers(), Dynamic: cl.Dynamic})
	return cl, cluster, err
}
func (fakeClusters) engine(context.Context, *Clients, *ops.Cluster) (ops.Engine, error) {
	return nil, nil
}
func (fakeClusters) planNeeds(string) []ops.Permission { return nil }
func (fakeClusters) outputFormat() string              { return "text" }
func (fakeClusters) verbosity() int                    { return 0 }
func (fakeClusters) onFactory(f *Factory) Clusters     { return fakeClusters{f: f} }
func (fakeClusters) Validate() error                   { return nil }

// The runner's pipeline with a fake plan (one destructive step), the runner built from a
// Factory, run flags and a command line that is no GlobalOptions: a dry-run prints the plan
// and writes nothing; without a terminal and without --yes it refuses with exit 2 before any
// write; with --yes the step runs.
func TestRunnerOperationWithFakePlan(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dryRun   bool
		yes      bool
		wantCode int
		wantRan  bool
	}{
		{name: "dry-run", dryRun: true},
		{name: "no terminal, no --yes", wantCode: ops.ExitUsage},
		{name: "--yes", yes: true, wantRan: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "web", "", webObjects()...)...)
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			f := NewFactory(streams)
			h.wire(f)
			rf := NewRunFlags()
			rf.DryRun, rf.Yes = tc.dryRun, tc.yes
			var ran atomic.Bool
			plan := func(_ context.Context, _ *Clients, c *ops.Cluster, _ ops.Engine, _ *ops.Request) (*ops.Plan, error) {
				p := ops.NewPlan("restart", c, c.Engine, "--fake")
				p.Destructive = true
				p.Steps = []*ops.Step{{ID: "fake-1", Target: "web-0", Description: "the fake step", Mutating: true,
					Action: func(context.Context, *ops.StepContext) error { ran.Store(true); return nil }}}
				return p, nil
			}
			h.client.ClearActions()
			err := NewRunner(f, rf, fakeClusters{f: f}).runOperation(context.Background(), operation{
				req: &ops.Request{Cluster: "web", Command: []string{"restart", "web", "--fake"}}, defaultTimeout: time.Minute, plan: plan})
			if code := ops.ExitCode(err); code != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d", code, err, tc.wantCode)
			}
			if ran.Load() != tc.wantRan {
				t.Errorf("step ran = %v, want %v", ran.Load(), tc.wantRan)
			}
			if !tc.wantRan {
				if w := fakecluster.Writes(h.client); len(w) > 0 {
					t.Errorf("writes without a run: %v", w)
				}
			}
			if tc.dryRun && !strings.Contains(out.String(), "the fake step") {
				t.Errorf("dry-run output lacks the plan:\n%s", out.String())
			}
		})
	}
}

// Runners for two targets (each its own Factory: clients, streams) from one command's flags
// plan on their own cluster and print to their own streams only.
func TestRunnerForTarget(t *testing.T) {
	streams, _, rootOut, _ := genericiooptions.NewTestIOStreams()
	g, rf := NewGlobalOptions(streams), NewRunFlags()
	rf.DryRun = true
	r := NewRunner(g.Factory, rf, g)
	var outs []fmt.Stringer
	var runners []*Runner
	for _, name := range []string{"alpha", "beta"} {
		h := newHarness(t, fakecluster.Objects("prod", name, "", webObjects()...)...)
		s, _, out, _ := genericiooptions.NewTestIOStreams()
		f := NewFactory(s)
		h.wire(f)
		runners, outs = append(runners, r.ForTarget(f)), append(outs, out)
	}
	plan := func(_ context.Context, _ *Clients, c *ops.Cluster, _ ops.Engine, _ *ops.Request) (*ops.Plan, error) {
		p := ops.NewPlan("restart", c, c.Engine, "--fake")
		p.Steps = []*ops.Step{{ID: "fake-1", Target: c.Name + "-0", Description: "restart " + c.Name, Mutating: true}}
		return p, nil
	}
	for i, name := range []string{"alpha", "beta"} {
		err := runners[i].runOperation(context.Background(), operation{
			req: &ops.Request{Cluster: name, Command: []string{"restart", name}}, defaultTimeout: time.Minute, plan: plan})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for i, name := range []string{"alpha", "beta"} {
		other := []string{"beta", "alpha"}[i]
		if got := outs[i].String(); !strings.Contains(got, "restart "+name) || strings.Contains(got, "restart "+other) {
			t.Errorf("target %s printed:\n%s", name, got)
		}
	}
	if rootOut.Len() > 0 || r.Factory == runners[0].Factory {
		t.Errorf("the command's own runner was used: %q", rootOut.String())
	}
}

// The run flags are checked by every command that reads them, not only by mutating ones:
// a read-only command refuses a bad --timeout or --lock-duration with exit 2 and no write.
func TestReadOnlyCommandsCheckRunFlags(t *testing.T) {
	for _, args := range [][]string{
		{"status", "web", "--timeout", "-1s"},
		{"wait", "web", "--for", "ready", "--timeout", "-1s"},
		{"lock", "acquire", "web", "--lock-duration", "1s"},
		{"lock", "status", "web", "--timeout", "-1s"},
		{"deny", "add", "web", "bob@test", "--lock-duration", "1s"},
		{"list", "--timeout", "-1s"},
		{"version", "--timeout", "-1s"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "web", "", webObjects()...)...)
			r := h.run(append(args, "-n", "prod")...)
			if r.code != ops.ExitUsage || !strings.Contains(r.err, "must") {
				t.Fatalf("exit %d, stderr %q; want exit 2 naming the flag", r.code, r.err)
			}
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("writes: %v", w)
			}
		})
	}
}
