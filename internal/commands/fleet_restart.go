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
	var reqMu sync.Mutex
	return o.Runner.runOperationFleet(cmd, o.g, &o.fleet, ts, fleetMutation{verb: "restart", question: "Restart", title: "restart",
		bySelector: o.Cluster == "",
		run: func(r *Runner, g *GlobalOptions, t fleet.Target) error {
			ro := *o
			// The target's restart is the single-cluster one: no fleet of its own.
			ro.Runner, ro.g, ro.Cluster, ro.fleet = r, g, t.Cluster, fleetMutationFlags{}
			ro.targetRequest = fleetTargetRequest(&reqMu, cmd, g, t, &o.sel, o.Cluster)
			return ro.endStream(cmd.Name(), t.Cluster, ro.Run(cmd))
		}})
}

// fleetTargetRequest is the request target t's journal records: cmd's for t's cluster (cobra's
// flag sets change as they are read: one target at a time, under mu), naming its cluster and
// namespace rather than the selection that found it (arg: the command's CLUSTER argument).
func fleetTargetRequest(mu *sync.Mutex, cmd *cobra.Command, g *GlobalOptions, t fleet.Target, sel *clusterSelect, arg string) *ops.Request {
	mu.Lock()
	req := g.request(cmd, t.Cluster)
	mu.Unlock()
	if sel.selecting() {
		req.Flags = selectedTargetFlags(req.Flags, arg == "")
	}
	return req
}

// fleetMutation is a mutating command over a fleet, for runMutationFleet: its words and its
// single-cluster run of one target.
type fleetMutation struct {
	// verb names the command in the refusal to run unconfirmed ("refusing to VERB 2 clusters
	// ..."); question starts the prompt ("QUESTION 2 clusters in ... ?").
	verb, question string
	// title is the fleet view's (fleet_view.go); "": no view (the command sends no events).
	title string
	// ndjson: -o json streams NDJSON events (each gets its target's context) and never asks.
	ndjson bool
	// documents: -o json|yaml is one document for the whole fleet that summary prints (lock,
	// deny): no per-target headings or error lines go to stdout then; the preview before the
	// question is text.
	documents bool
	// one runs the command on target t: plain output to out and errOut (prefixed by the
	// target), events also to sink (the view's; nil without it), stopped by stop, only
	// planning (writing nothing) with dryRun. preview: the plans shown before the question.
	one func(ctx context.Context, t fleet.Target, out, errOut io.Writer, sink ops.Sink, stop <-chan struct{}, dryRun, preview bool) error
	// summary ends the output (dryRun: of a --dry-run).
	summary func(rs []fleet.Result, dryRun bool) error

	// For runOperationFleet: run is a Runner command's single-cluster run of t with r and g,
	// the target's own; bySelector: -l selected the targets' clusters (a target's discovery
	// finds its cluster by name, not by the selector).
	run        func(r *Runner, g *GlobalOptions, t fleet.Target) error
	bySelector bool
}

// runOperationFleet is runMutationFleet for a command run by a Runner (restart, scale): each
// target's run is run with the target's own runner (Runner.ForTarget over its context, its
// own copy of the run flags, plain lines or the fleet's view) and options g; the summary is the
// table or NDJSON fleet-summary event.
func (o *Runner) runOperationFleet(cmd *cobra.Command, g *GlobalOptions, ff *fleetMutationFlags, ts []fleet.Target, m fleetMutation) error {
	if g.Output == "yaml" && !o.DryRun {
		return ops.Usagef("-o yaml is for status and --dry-run plans; operations stream -o text or -o json")
	}
	run := m.run
	// Every target's journal names this run (resume --fleet tells the targets it never started).
	fleetRun := newFleetRun(ts)
	m.ndjson = g.Output == "json"
	m.one = func(_ context.Context, t fleet.Target, out, errOut io.Writer, sink ops.Sink, stop <-chan struct{}, dryRun, _ bool) error {
		// Each target its own clients: no run state is shared between targets.
		tg := fleetTargetOptions(g, newClientsPool(g), t)
		if m.bySelector {
			// -l selected the cluster: discovery finds it by name, not by the selector.
			tg.Selector = ""
		}
		tg.IOStreams = genericiooptions.IOStreams{In: o.In, Out: out, ErrOut: errOut}
		tg.fleetSink = sink
		tg.fleetRun = fleetRun
		r := o.ForTarget(tg.Factory)
		if m.bySelector {
			// The target's flags as tg has them: without the selector (ForTarget copies o's).
			r = NewRunner(tg.Factory, r.RunFlags, tg)
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
		return run(r, tg, t)
	}
	m.summary = func(rs []fleet.Result, dryRun bool) error {
		o.streamEnded = true
		return writeFleetSummary(o, rs, func(r fleet.Result) string {
			if dryRun && r.Started && r.Err == nil {
				return ops.OutcomeDryRun
			}
			return r.Outcome()
		})
	}
	return runMutationFleet(commandContext(cmd), cmd, o, g, ff, ts, m)
}

// runMutationFleet runs a mutating command over the targets ts (#39), each target the
// command's single-cluster run (m.one), paced by ff through fleet.Run. --dry-run prints every
// target's plan grouped under its context; otherwise, without --yes, the plans are shown and
// one question names the contexts and clusters (fleetCanConfirm: none to ask on is exit 2,
// nothing written). Each target that did not succeed gets a line naming its context; m.summary
// ends the output; the error is fleetFailure's (the worst target's exit code).
func runMutationFleet(ctx context.Context, cmd *cobra.Command, o *Runner, g *GlobalOptions, ff *fleetMutationFlags, ts []fleet.Target, m fleetMutation) error {
	pacing := ff.pacing(o.Factory)
	if err := pacing.Validate(len(ts)); err != nil {
		return err
	}
	if err := fleetCanConfirm(o, m.ndjson, m.verb, "see every target's plan with --dry-run", ts); err != nil {
		return err
	}
	if err := checkDistinctTargets(ctx, g, ts); err != nil {
		return err
	}
	var mu sync.Mutex
	// view is the fleet's terminal UI (fleet_view.go), set once the plans were shown; nil: plain
	// lines or NDJSON.
	var view *fleetView
	// runOne runs t, writing to out and errOut (lines prefixed by the target, but not a dry
	// run's, which is grouped under its context; NDJSON with its context).
	runOne := func(ctx context.Context, t fleet.Target, out, errOut io.Writer, stop <-chan struct{}, dryRun, preview bool) error {
		prefix := "[" + t.String() + "] "
		if dryRun {
			prefix = ""
		}
		tw := &targetWriter{mu: &mu, w: out, prefix: prefix, context: t.Context, ndjson: m.ndjson}
		tew := &targetWriter{mu: &mu, w: errOut, prefix: prefix, context: t.Context}
		err := m.one(ctx, t, tw, tew, view.sink(t), stop, dryRun, preview)
		_ = tw.flush()
		_ = tew.flush()
		return err
	}
	// plans runs every target's dry run (reads only), each into its own buffer.
	plans := func(w io.Writer, preview bool) []fleet.Result {
		bufs := make([]*bytes.Buffer, len(ts))
		for i := range bufs {
			bufs[i] = &bytes.Buffer{}
		}
		rs := fleet.Run(ctx, ts, fleet.Pacing{MaxParallel: ff.MaxParallel}, func(ctx context.Context, t fleet.Target, _ <-chan struct{}) error {
			i := indexOf(ts, t)
			return runOne(ctx, t, bufs[i], bufs[i], nil, true, preview)
		})
		format := g.Output
		switch {
		case m.documents && preview:
			format = "text"
		case m.documents && format != "text":
			return rs
		}
		for i, t := range ts {
			switch format {
			case "text":
				ops.Fprintf(w, "=== context %s: %s/%s\n", t.Context, t.Namespace, t.Cluster)
			case "yaml":
				ops.Fprintf(w, "---\n# context %s: %s/%s\n", t.Context, t.Namespace, t.Cluster)
			}
			_, _ = w.Write(bufs[i].Bytes())
			if rs[i].Err != nil && !m.ndjson {
				ops.Fprintf(w, "ERROR: %s\n", oneLineErr(rs[i].Err))
			}
		}
		return rs
	}
	if o.DryRun {
		rs := plans(o.Out, false)
		if err := m.summary(rs, true); err != nil {
			return err
		}
		return fleetFailure(rs)
	}
	if !o.Yes {
		rs := plans(o.ErrOut, true)
		if err := fleetFailure(rs); err != nil {
			return fmt.Errorf("not asking: %w", err)
		}
		ok, err := confirm(o.In, o.ErrOut, fmt.Sprintf("%s %s (%s)?", m.question, fleet.Describe(ts), targetList(ts)))
		if err != nil {
			return err
		}
		if !ok {
			return ops.Usagef("aborted at the confirmation prompt; nothing was changed")
		}
	}
	if m.title != "" {
		view = newFleetView(o, m.title, ts, fleet.Result.Outcome)
	}
	rs, err := view.run(ctx, cmd, func(ctx context.Context) []fleet.Result {
		return fleet.Run(ctx, ts, pacing, func(ctx context.Context, t fleet.Target, stop <-chan struct{}) error {
			out, errOut := view.streams(t, o.Out, o.ErrOut)
			run := func() error { return runOne(ctx, t, out, errOut, stop, false, false) }
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
	reportFleetTargets(g, rs)
	if err := m.summary(rs, false); err != nil {
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
