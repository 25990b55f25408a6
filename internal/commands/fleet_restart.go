package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// fleetMutationFlags pace a mutating command over a fleet (fleet.Pacing): canary and
// fail-fast, beside fleetFlags' selection and --max-parallel.
type fleetMutationFlags struct {
	fleetFlags
	Canary   int
	FailFast bool
	// PauseBetween is --pause-between-clusters: the wait before each target's start but the first.
	PauseBetween time.Duration
}

func (ff *fleetMutationFlags) addFlags(cmd *cobra.Command, g *GlobalOptions) {
	ff.fleetFlags.addFlags(cmd, g)
	fs := cmd.Flags()
	fs.IntVar(&ff.Canary, "canary", 0, "Fleet: run the first N targets alone, one after the other; each must succeed before the rest start")
	fs.BoolVar(&ff.FailFast, "fail-fast", true, "Fleet: after a target fails, start no other and stop the running ones before their next batch (--fail-fast=false runs the rest)")
	fs.DurationVar(&ff.PauseBetween, "pause-between-clusters", 0, "Fleet: wait this long before starting each target after the first (a canary's too)")
}

// pacing is the fleet.Pacing of the flags, its pauses timed by f's FleetAfter (tests) or time's.
func (ff *fleetMutationFlags) pacing(f *Factory) fleet.Pacing {
	return fleet.Pacing{MaxParallel: ff.MaxParallel, Canary: ff.Canary, FailFast: ff.FailFast, PauseBetween: ff.PauseBetween, After: f.FleetAfter}
}

// validate checks the fleet flags without touching the API.
func (ff *fleetMutationFlags) validate(g *GlobalOptions) error {
	if err := ff.fleetFlags.validate(g); err != nil {
		return err
	}
	if !ff.active(g) {
		for _, n := range []string{"canary", "fail-fast", "pause-between-clusters"} {
			if g.flagGiven(n) {
				return ops.Usagef("--%s applies to a fleet (--context A,B, --contexts or --fleet)", n)
			}
		}
	}
	return nil
}

// fleetFlagNames are the flags that select or pace a fleet: a target's journal records its own
// request, which names its one context and no fleet (its resume resumes that target).
var fleetFlagNames = map[string]bool{"contexts": true, "fleet": true, "max-parallel": true, "canary": true, "fail-fast": true,
	"pause-between-clusters": true}

// targetRun is one target's run of a mutating command: the command's options over the
// target's context, with its output going to the fleet's stream through out and errOut.
type targetRun struct {
	out, errOut *targetWriter
}

// targetWriter passes one target's output to the fleet's shared stream a whole line at a time:
// plain lines prefixed with the target, NDJSON events with the target's "context" added.
type targetWriter struct {
	mu      *sync.Mutex
	w       io.Writer
	prefix  string
	context string
	ndjson  bool
	buf     []byte
}

func (tw *targetWriter) Write(p []byte) (int, error) {
	tw.buf = append(tw.buf, p...)
	for {
		i := bytes.IndexByte(tw.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if err := tw.emit(tw.buf[:i+1]); err != nil {
			return len(p), err
		}
		tw.buf = tw.buf[i+1:]
	}
}

// flush writes a last line without its newline.
func (tw *targetWriter) flush() error {
	if len(tw.buf) == 0 {
		return nil
	}
	err := tw.emit(append(tw.buf, '\n'))
	tw.buf = nil
	return err
}

func (tw *targetWriter) emit(line []byte) error {
	var out []byte
	if tw.ndjson && len(line) > 2 && line[0] == '{' && line[1] != '}' {
		ctx, _ := json.Marshal(tw.context)
		out = append(append(append([]byte(`{"context":`), ctx...), ','), line[1:]...)
	} else {
		out = append([]byte(tw.prefix), line...)
	}
	tw.mu.Lock()
	defer tw.mu.Unlock()
	_, err := tw.w.Write(out)
	return err
}

// runFleet runs the restart over every target of the fleet (#39): each target is the normal
// single-cluster restart (its own lock, plan, journal, events, in its own cluster) through a
// runner over its context (Runner.ForTarget), paced by fleet.Run: --canary targets first, alone,
// then --max-parallel at once; with --fail-fast a failure starts no new target and stops the
// running ones before their next batch. One confirmation names the contexts and clusters;
// --dry-run prints every target's plan under its context and writes nothing. A summary table
// (or NDJSON fleet-summary event) ends the run; the exit code is the worst target's.
func (o *RestartOptions) runFleet(cmd *cobra.Command) error {
	ctx := commandContext(cmd)
	ts, err := o.sel.targets(o.g, &o.fleet.fleetFlags, o.Cluster)
	if err != nil {
		return err
	}
	if o.sel.selecting() {
		// -l (or -A): each target's matching clusters, every target answering, before anything starts.
		if ts, err = selectFleetClusters(ctx, o.g, &o.fleet.fleetFlags, ts, o.sel.sel); err != nil {
			return err
		}
	} else if err := requireClusters(o.fleet.File, ts); err != nil {
		return err
	}
	pacing := o.fleet.pacing(o.Factory)
	if err := pacing.Validate(len(ts)); err != nil {
		return err
	}
	if o.g.Output == "yaml" && !o.DryRun {
		return ops.Usagef("-o yaml is for status and --dry-run plans; operations stream -o text or -o json")
	}
	ndjson := o.g.Output == "json"
	if err := fleetCanConfirm(o.Runner, ndjson, "restart", "see every target's plan with --dry-run", ts); err != nil {
		return err
	}
	var mu, reqMu sync.Mutex
	// Every target's journal names this run (resume --fleet tells the targets it never started).
	run := newFleetRun(ts)
	// view is the fleet's terminal UI (fleet_view.go), set once the plans were shown; nil: plain
	// lines or NDJSON.
	var view *fleetView
	// target is the restart of t, writing to out and errOut (lines prefixed by the target, but
	// not a dry run's, which is grouped under its context; NDJSON with its context).
	target := func(t fleet.Target, out, errOut io.Writer, stop <-chan struct{}, dryRun bool) (*RestartOptions, *targetRun) {
		// Each target its own clients: no run state is shared between targets.
		g := fleetTargetOptions(o.g, newClientsPool(o.g), t)
		if o.Cluster == "" {
			// -l selected the cluster: discovery finds it by name, not by the selector.
			g.Selector = ""
		}
		prefix := "[" + t.String() + "] "
		if dryRun {
			prefix = ""
		}
		tr := &targetRun{
			out:    &targetWriter{mu: &mu, w: out, prefix: prefix, context: t.Context, ndjson: ndjson},
			errOut: &targetWriter{mu: &mu, w: errOut, prefix: prefix, context: t.Context},
		}
		g.IOStreams = genericiooptions.IOStreams{In: o.In, Out: tr.out, ErrOut: tr.errOut}
		g.fleetSink = view.sink(t)
		r := o.Runner.ForTarget(g.Factory)
		if o.Cluster == "" {
			// The target's flags as g has them: without the selector (ForTarget copies o's).
			r = NewRunner(g.Factory, r.RunFlags, g)
		}
		r.Pacing = o.Pacing
		r.Pacing.Stop = stop
		// The target's own copy of the run flags (ForTarget shares them, read-only).
		rf := *o.RunFlags
		// One line per event, prefixed by its target (or the fleet's view): the TUI shows one cluster.
		rf.NoTUI = true
		rf.DryRun = dryRun
		// The fleet was confirmed as a whole (or --yes was given).
		rf.Yes = true
		r.RunFlags = &rf
		ro := *o
		// The target's restart is the single-cluster one: no fleet of its own.
		ro.Runner, ro.g, ro.Cluster, ro.fleet = r, g, t.Cluster, fleetMutationFlags{}
		// cobra's flag sets change as they are read: one target at a time.
		reqMu.Lock()
		ro.targetRequest = ro.g.request(cmd, t.Cluster)
		ro.targetRequest.Fleet = run
		reqMu.Unlock()
		if o.sel.selecting() {
			ro.targetRequest.Flags = selectedTargetFlags(ro.targetRequest.Flags, o.Cluster == "")
		}
		return &ro, tr
	}
	runOne := func(ctx context.Context, t fleet.Target, out, errOut io.Writer, stop <-chan struct{}, dryRun bool) error {
		ro, tr := target(t, out, errOut, stop, dryRun)
		err := ro.endStream(cmd.Name(), t.Cluster, ro.Run(cmd))
		_ = tr.out.flush()
		_ = tr.errOut.flush()
		return err
	}
	// plans runs every target's dry run (reads only), each into its own buffer.
	plans := func(w io.Writer) []fleet.Result {
		bufs := make([]*bytes.Buffer, len(ts))
		for i := range bufs {
			bufs[i] = &bytes.Buffer{}
		}
		rs := fleet.Run(ctx, ts, fleet.Pacing{MaxParallel: o.fleet.MaxParallel}, func(ctx context.Context, t fleet.Target, _ <-chan struct{}) error {
			i := indexOf(ts, t)
			return runOne(ctx, t, bufs[i], bufs[i], nil, true)
		})
		for i, t := range ts {
			switch o.g.Output {
			case "text":
				ops.Fprintf(w, "=== context %s: %s/%s\n", t.Context, t.Namespace, t.Cluster)
			case "yaml":
				ops.Fprintf(w, "---\n# context %s: %s/%s\n", t.Context, t.Namespace, t.Cluster)
			}
			_, _ = w.Write(bufs[i].Bytes())
			if rs[i].Err != nil && !ndjson {
				ops.Fprintf(w, "ERROR: %s\n", oneLineErr(rs[i].Err))
			}
		}
		return rs
	}
	if o.DryRun {
		rs := plans(o.Out)
		o.streamEnded = true
		if err := o.writeFleetSummary(rs, true); err != nil {
			return err
		}
		return fleetFailure(rs)
	}
	if !o.Yes {
		rs := plans(o.ErrOut)
		if err := fleetFailure(rs); err != nil {
			return fmt.Errorf("not asking: %w", err)
		}
		ok, err := confirm(o.In, o.ErrOut, fmt.Sprintf("Restart %s (%s)?", fleet.Describe(ts), targetList(ts)))
		if err != nil {
			return err
		}
		if !ok {
			return ops.Usagef("aborted at the confirmation prompt; nothing was changed")
		}
	}
	view = newFleetView(o.Runner, "restart", ts, fleet.Result.Outcome)
	rs, err := view.run(ctx, cmd, func(ctx context.Context) []fleet.Result {
		return fleet.Run(ctx, ts, pacing, func(ctx context.Context, t fleet.Target, stop <-chan struct{}) error {
			out, errOut := view.streams(t, o.Out, o.ErrOut)
			run := func() error { return runOne(ctx, t, out, errOut, stop, false) }
			return view.target(t, func() error {
				if o.WrapFleetTarget != nil {
					return o.WrapFleetTarget(ctx, t, stop, run)
				}
				return run()
			})
		})
	})
	if err != nil {
		return err
	}
	o.streamEnded = true
	reportFleetTargets(o.g, rs)
	if err := o.writeFleetSummary(rs, false); err != nil {
		return err
	}
	return fleetFailure(rs)
}

// fleetCanConfirm refuses (exit 2) a fleet run that must ask and cannot: no --yes, no
// --dry-run, and no terminal to ask on (or NDJSON output, which never asks).
func fleetCanConfirm(r *Runner, ndjson bool, verb, hint string, ts []fleet.Target) error {
	if r.DryRun || r.Yes || (r.IsTerminal() && !ndjson) {
		return nil
	}
	why := "no terminal to ask on"
	if ndjson {
		why = "-o json never asks"
	}
	return ops.Usagef("refusing to %s %s (%s) without confirmation: %s; pass --yes (%s)", verb, fleet.Describe(ts), targetList(ts), why, hint)
}

func indexOf(ts []fleet.Target, t fleet.Target) int {
	for i := range ts {
		if ts[i] == t {
			return i
		}
	}
	return -1
}

// targetList names the targets for the prompt: "ctx/ns/cluster, ...".
func targetList(ts []fleet.Target) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.String()
	}
	return strings.Join(names, ", ")
}

// reportFleetTargets writes one line per target that did not succeed, naming its context and
// cluster (the target's own lines said more).
func reportFleetTargets(g *GlobalOptions, rs []fleet.Result) {
	for _, r := range rs {
		if r.Started && r.Err != nil {
			ops.Fprintf(g.ErrOut, "ERROR: context %s, cluster %s/%s: %s\n", r.Target.Context, r.Target.Namespace, r.Target.Cluster,
				outcomeLine(r.Outcome(), r.Err))
		}
	}
}

// fleetSummaryTarget is one target of the NDJSON fleet-summary event.
type fleetSummaryTarget struct {
	Context    string        `json:"context"`
	Namespace  string        `json:"namespace"`
	Cluster    string        `json:"cluster"`
	Outcome    string        `json:"outcome"`
	Duration   time.Duration `json:"durationNs"`
	ReasonCode string        `json:"reasonCode,omitempty"`
	Error      string        `json:"error,omitempty"`
}

// writeFleetSummary ends the fleet's output: a table (context, cluster, outcome, duration,
// reason) on -o text, one NDJSON event of type fleet-summary on -o json.
func (o *RestartOptions) writeFleetSummary(rs []fleet.Result, dryRun bool) error {
	return writeFleetSummary(o.Runner, rs, func(r fleet.Result) string {
		if dryRun && r.Started && r.Err == nil {
			return ops.OutcomeDryRun
		}
		return r.Outcome()
	})
}

// writeFleetSummary writes the summary of rs to o's output, each target's outcome named by outcome.
func writeFleetSummary(o *Runner, rs []fleet.Result, outcome func(fleet.Result) string) error {
	if o.Clusters.outputFormat() == "json" {
		ev := struct {
			Type    string               `json:"type"`
			Time    time.Time            `json:"time"`
			Targets []fleetSummaryTarget `json:"targets"`
			Exit    int                  `json:"exitCode"`
		}{Type: "fleet-summary", Time: time.Now(), Exit: fleet.WorstExit(rs)}
		for _, r := range rs {
			st := fleetSummaryTarget{Context: r.Target.Context, Namespace: r.Target.Namespace, Cluster: r.Target.Cluster,
				Outcome: outcome(r), Duration: r.Duration, ReasonCode: r.Reason()}
			if r.Err != nil {
				st.Error = oneLineErr(r.Err)
			}
			ev.Targets = append(ev.Targets, st)
		}
		b, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encoding the fleet summary: %w", err)
		}
		_, err = o.Out.Write(append(ops.JSONPrintable(b), '\n'))
		return err
	}
	if o.Clusters.outputFormat() != "text" {
		return nil
	}
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nCONTEXT\tNAMESPACE\tCLUSTER\tOUTCOME\tDURATION\tREASON")
	for _, r := range rs {
		dur := "-"
		if r.Started {
			dur = r.Duration.Round(time.Second).String()
		}
		ops.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Target.Context, r.Target.Namespace, r.Target.Cluster, outcome(r), dur, dash(r.Reason()))
	}
	return tw.Flush()
}
