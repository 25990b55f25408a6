package commands

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// outcomeNothingToResume is the summary's word for a target whose lock records no unfinished
// operation: its last one succeeded, or none is recorded (a target a fleet run never started).
const outcomeNothingToResume = "nothing-to-resume"

// runFleet resumes every target of the fleet that has an unfinished operation (#39): each is
// the single-cluster resume (its own journal on its own Lease, its own lock) over its context,
// paced like a fleet restart (--canary, --max-parallel, --fail-fast). The journals are read
// first: a target whose last operation succeeded is reported nothing-to-resume and counts as
// done; a target with no operation recorded (a fleet run stopped before starting it) is
// reported nothing-to-resume with a precondition error (exit 5), because nothing was done
// there and the command that was meant for it has to be run again. Neither is run. A summary
// table (or NDJSON fleet-summary) ends the run; the exit code is the worst target's.
func (o *ResumeOptions) runFleet(cmd *cobra.Command) error {
	ctx := commandContext(cmd)
	ts, err := o.fleet.targets(o.g, argClusters(o.Cluster), false)
	if err != nil {
		return err
	}
	if err := requireClusters(o.fleet.File, ts); err != nil {
		return err
	}
	pacing := o.fleet.pacing(o.Factory)
	if err := pacing.Validate(len(ts)); err != nil {
		return err
	}
	if o.g.Output == "yaml" {
		return ops.Usagef("-o yaml is for status and --dry-run plans; resume --fleet streams -o text or -o json")
	}
	if err := fleetCanConfirm(o.Runner, o.g.Output == "json", "resume", "see what each target would run with --dry-run", ts); err != nil {
		return err
	}
	if err := checkDistinctTargets(ctx, o.g, ts); err != nil {
		return err
	}
	pool := newClientsPool(o.g)
	// Which targets have something to resume: each one's journal, read from its lock.
	nothing := make([]bool, len(ts))
	journals := make([]*ops.Journal, len(ts))
	read := make([]bool, len(ts))
	checks := fleet.Run(ctx, ts, fleet.Pacing{MaxParallel: o.fleet.MaxParallel}, func(ctx context.Context, t fleet.Target, _ <-chan struct{}) error {
		cl, err := fleetTargetOptions(o.g, pool, t).Clients()
		if err != nil {
			return err
		}
		st, err := lock.NewManager(cl.Kube, t.Namespace, t.Cluster, "reader", cl.Clock).Status(ctx)
		if err != nil {
			return err
		}
		journals[indexOf(ts, t)], read[indexOf(ts, t)] = st.Journal, true
		switch j := st.Journal; {
		case j == nil:
			nothing[indexOf(ts, t)] = true
			return ops.Preconditionf("nothing to resume: no operation is recorded on its lock (a target the fleet run never started has none: run its command again for it)")
		case j.State == ops.JournalSucceeded:
			nothing[indexOf(ts, t)] = true
		}
		return nil
	})
	// A target the latest fleet run named but never started (no journal, or one of another
	// operation) is neither resumed nor done: that run's command is started there.
	lastRun, runCmd, notStarted := fleetRunOf(ts, journals)
	var todo []fleet.Target
	held := make([]bool, len(ts))
	for i := range checks {
		switch {
		case notStarted[i] && read[i] && o.StartNotStarted:
			checks[i].Err, nothing[i] = nil, false
		case notStarted[i] && read[i]:
			// The command comes from another cluster's journal: not run unless asked for.
			line := *runCmd
			line.Cluster, line.Namespace, line.Context = ts[i].Cluster, ts[i].Namespace, ts[i].Context
			checks[i].Err, nothing[i], held[i] = ops.Preconditionf("the fleet run %s never started this target; start it with --start-not-started (it runs that run's command, read from another target's journal), or run: %s",
				ops.Printable(lastRun.ID), line.CommandLine()), false, true
		}
		if checks[i].Err == nil && !nothing[i] {
			todo = append(todo, ts[i])
		}
	}
	if !o.DryRun && !o.Yes && len(todo) > 0 {
		ok, err := confirm(o.In, o.ErrOut, resumeQuestion(todo, notStarted, ts, lastRun, runCmd))
		if err != nil {
			return err
		}
		if !ok {
			return ops.Usagef("aborted at the confirmation prompt; nothing was changed")
		}
	}
	if pacing.Canary > len(todo) {
		pacing.Canary = len(todo)
	}
	outcome := func(r fleet.Result) string {
		switch {
		case nothing[indexOf(ts, r.Target)]:
			return outcomeNothingToResume
		case held[indexOf(ts, r.Target)]:
			return fleet.OutcomeNotStarted
		case o.DryRun && r.Started && r.Err == nil:
			return ops.OutcomeDryRun
		}
		return r.Outcome()
	}
	var mu sync.Mutex
	view := newFleetView(o.Runner, "resume", ts, outcome)
	results, err := view.run(ctx, cmd, func(ctx context.Context) []fleet.Result {
		for i, c := range checks {
			if !slices.Contains(todo, ts[i]) {
				view.show(c)
			}
		}
		rs := fleet.Run(ctx, todo, pacing, func(ctx context.Context, t fleet.Target, stop <-chan struct{}) error {
			var start *ops.Request
			if notStarted[indexOf(ts, t)] {
				start = runCmd
			}
			run := func() error { return o.resumeTarget(ctx, t, pool, &mu, stop, view, lastRun, start) }
			return view.target(t, func() error {
				if o.WrapFleetTarget != nil {
					return o.WrapFleetTarget(ctx, t, stop, run)
				}
				return run()
			})
		})
		results := checks
		for _, r := range rs {
			results[indexOf(ts, r.Target)] = r
		}
		return results
	})
	if err != nil {
		return err
	}
	o.streamEnded = true
	for _, r := range results {
		switch {
		case r.Started && r.Err != nil:
			ops.Fprintf(o.ErrOut, "ERROR: context %s, cluster %s/%s: %s\n", r.Target.Context, r.Target.Namespace, r.Target.Cluster,
				outcomeLine(outcome(r), r.Err))
		case outcome(r) == outcomeNothingToResume:
			ops.Fprintf(o.ErrOut, "context %s, cluster %s/%s: nothing to resume: its last operation succeeded\n",
				r.Target.Context, r.Target.Namespace, r.Target.Cluster)
		}
	}
	if err := writeFleetSummary(o.Runner, results, outcome); err != nil {
		return err
	}
	return fleetFailureBy(results, outcome)
}

// resumeTarget is the single-cluster resume of t: a command tree of its own over the target's
// context (the resumed command's flags are parsed into that tree's commands, so targets running
// at once share no flag set), its output prefixed with the target (NDJSON: with its context)
// or, under the fleet's view, its events there, its executor stopped by stop. With start, the
// target is one the fleet run never started: start, that run's command, runs there instead of
// the target's journal.
func (o *ResumeOptions) resumeTarget(ctx context.Context, t fleet.Target, pool *fleet.Pool[*Clients], mu *sync.Mutex, stop <-chan struct{}, view *fleetView,
	run *ops.FleetRun, start *ops.Request) error {
	g := fleetTargetOptions(o.g, pool, t)
	g.fleetStop = stop
	g.fleetSink = view.sink(t)
	if start != nil {
		g.fleetRun, g.fleetStart = run, start
	}
	w, errW := view.streams(t, o.Out, o.ErrOut)
	out := &targetWriter{mu: mu, w: w, prefix: "[" + t.String() + "] ", context: t.Context, ndjson: o.g.Output == "json"}
	errOut := &targetWriter{mu: mu, w: errW, prefix: "[" + t.String() + "] ", context: t.Context}
	defer func() {
		_ = out.flush()
		_ = errOut.flush()
	}()
	g.IOStreams = genericiooptions.IOStreams{In: o.In, Out: out, ErrOut: errOut}
	given := maps.Clone(o.g.given)
	// The target's resume is the single-cluster one: no fleet of its own.
	for n := range fleetFlagNames {
		delete(given, n)
	}
	// The target's own copy of the run flags: one line per event, prefixed by its target; the
	// fleet was confirmed as a whole.
	rf := *o.RunFlags
	rf.NoTUI, rf.Yes = true, true
	root := newRootCmd(g.IOStreams, &rf, func(ng *GlobalOptions) {
		ng.Factory = g.Factory
		ng.Output = o.g.Output
		ng.Engine, ng.Selector, ng.IgnoreOperator = o.g.Engine, o.g.Selector, o.g.IgnoreOperator
		ng.Verbosity, ng.ConfigFile = o.g.Verbosity, o.g.ConfigFile
		ng.given = given
	})
	sub, _, err := root.Find([]string{"resume"})
	if err != nil {
		return fmt.Errorf("resume of %s: %w", t, err)
	}
	sub.SetContext(ctx)
	return sub.RunE(sub, []string{t.Cluster})
}
