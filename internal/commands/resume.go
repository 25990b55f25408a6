package commands

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// resumeGlobalFlags are the shared flags that change what an operation
// does, so a re-run needs them too. Everything else global is left out of
// the request on purpose: kubectl's connection and credential flags
// (--token, --client-key, --kubeconfig...) must never be printed, and
// --timeout, -o, --dry-run or --yes belong to one run, not to the request.
var resumeGlobalFlags = []string{"engine", "selector", "ignore-operator", "lock-id"}

// resumableCommands are the commands `resume` may run again: the mutating
// ones that keep a journal. The journal is read from the cluster, where
// anyone allowed to write the Lease could edit it, so nothing else runs.
var resumableCommands = []string{"restart", "scale", "bootstrap", "replace"}

// request records the command as data (the journal keeps it for `resume`):
// the command's own flags that were set and its arguments, the namespace,
// the kubeconfig context when one was chosen, and resumeGlobalFlags.
func (g *GlobalOptions) request(cmd *cobra.Command, cluster string, args ...string) *ops.Request {
	var path []string
	for c := cmd; c.HasParent(); c = c.Parent() {
		path = append([]string{c.Name()}, path...)
	}
	r := &ops.Request{Command: path, Cluster: cluster, Args: args}
	if ns, err := g.Namespace(); err == nil {
		r.Namespace = ns
	}
	if c := g.ConfigFlags.Context; c != nil && *c != "" {
		r.Context = *c
	}
	add := func(f *pflag.Flag) {
		// A fleet's target records its own request: its one context, no fleet.
		if !f.Changed || fleetFlagNames[f.Name] {
			return
		}
		rf := ops.RequestFlag{Name: f.Name, Bool: f.Value.Type() == "bool"}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			rf.Values = sv.GetSlice()
		} else {
			rf.Values = []string{f.Value.String()}
		}
		r.Flags = append(r.Flags, rf)
	}
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" {
			add(f)
		}
	})
	for _, name := range resumeGlobalFlags {
		if f := cmd.Flags().Lookup(name); f != nil {
			add(f)
		}
	}
	slices.SortStableFunc(r.Flags, func(a, b ops.RequestFlag) int { return strings.Compare(a.Name, b.Name) })
	r.Fleet = g.fleetRun
	return r
}

// ResumeOptions holds `resume` arguments.
type ResumeOptions struct {
	// Runner runs the operation (plan, dry-run, confirm, lock, execute) with the shared
	// run flags.
	*Runner
	// g are the shared flags that pick the cluster (Runner.Clusters) and the engines' flags.
	g       *GlobalOptions
	Cluster string
	// fleet selects and paces a fleet of targets to resume (runFleet, fleet_resume.go).
	fleet fleetMutationFlags
	// StartNotStarted (--start-not-started): start the fleet run's command on the targets it
	// never started. That command comes from another target's journal, in another cluster,
	// which anyone allowed to write Leases there can edit: it runs only when asked for.
	StartNotStarted bool
}

// NewResumeCmd builds `resume CLUSTER`.
func NewResumeCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := &ResumeOptions{Runner: NewRunner(g.Factory, rf, g), g: g}
	cmd := &cobra.Command{
		Use:   "resume CLUSTER",
		Short: "Continue the cluster's unfinished operation with the arguments it was started with",
		Long: `Read the journal on the cluster's lock and run its unfinished operation
(restart, scale, bootstrap or replace) again with the engine, arguments and
flags it was started with: steps the interrupted run finished are skipped.

It is the same as pasting the command printed when the run stopped. Like
every operation it takes the cluster lock (as your lock ID: the message names
the ID that started the run when it was someone else), plans from live state,
and honours --dry-run, --yes, -o and --timeout of this invocation. With no
unfinished operation it changes nothing and exits 0.

Over a fleet (--contexts, --context A,B or --fleet; paced by --canary,
--max-parallel, --fail-fast and --pause-between-clusters like restart) it
resumes each target that has an unfinished operation, each from its own
journal, and with --start-not-started starts the fleet run's command on the
targets that run never started (its journals record the run and its targets;
without the flag they are reported not-started with that command); a target whose last
operation succeeded is reported as nothing-to-resume, and one with no
operation recorded and no fleet run naming it too, with exit 5: its command
must be run again. With --fleet FILE and no CLUSTER argument, the targets
are the clusters the file names.`,
		Example: `  # What would the resumed run do?
  kubectl dbops resume mycrate -n prod --dry-run

  # Finish an interrupted rolling restart from CI
  kubectl dbops resume mycrate -n prod --yes

  # Finish a fleet restart that stopped on a failure, two targets at once
  kubectl dbops resume mycrate -n prod --contexts 'prod-*' --max-parallel 2 --yes`,
		Args:              fleetClusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              o.Runner.runE(o),
	}
	o.fleet.addFlags(cmd, g)
	cmd.Flags().BoolVar(&o.StartNotStarted, "start-not-started", false,
		"Fleet: also start the fleet run's command on the targets that run never started (the command is read from another target's journal: review it with --dry-run or at the question)")
	return cmd
}

// Complete takes the cluster argument.
func (o *ResumeOptions) Complete(_ *cobra.Command, args []string) error {
	// No argument only with --fleet FILE naming the clusters (fleetClusterArg).
	o.Cluster = firstArg(args)
	return nil
}

// Validate refuses --disable-locks: the journal lives on the lock. The
// recorded command's flags are checked when they are set (resumeCommand),
// before it runs.
func (o *ResumeOptions) Validate() error {
	if o.DisableLocks {
		return ops.Usagef("resume reads the journal on the cluster's lock; it cannot run with --disable-locks")
	}
	if o.StartNotStarted && !o.fleet.active(o.g) {
		return ops.Usagef("--start-not-started applies to a fleet (--context A,B, --contexts or --fleet)")
	}
	return o.fleet.validate(o.g)
}

// Run reads the journal and runs the recorded command.
func (o *ResumeOptions) Run(cmd *cobra.Command) error {
	if o.fleet.active(o.g) {
		return o.runFleet(cmd)
	}
	if o.fleetStart != nil {
		return o.startForFleet(cmd)
	}
	ctx := commandContext(cmd)
	cl, err := o.Clients()
	if err != nil {
		return err
	}
	ns, err := o.Namespace()
	if err != nil {
		return err
	}
	st, err := lock.NewManager(cl.Kube, ns, o.Cluster, "reader", cl.Clock).Status(ctx)
	if err != nil {
		return err
	}
	j := st.Journal
	switch {
	case j == nil:
		return ops.Preconditionf("nothing to resume on %s/%s: no operation is recorded on its lock", ns, o.Cluster)
	case j.State == ops.JournalSucceeded:
		_, err := fmt.Fprintf(o.ErrOut, "nothing to resume on %s/%s: the last operation (%s %s by %s) succeeded at %s\n",
			ops.PrintableArgs(ns, o.Cluster, j.Operation, j.Args, j.Holder, j.Updated.UTC().Format(time.RFC3339))...)
		return err
	case j.Request == nil:
		return ops.Preconditionf("the unfinished %s %s on %s/%s was recorded without its command (by an older kubectl-dbops); run that command again to resume it",
			j.Operation, j.Args, ns, o.Cluster)
	}
	sub, args, err := o.resumeCommand(cmd, j.Request, ns)
	if err != nil {
		return err
	}
	me, err := o.resolveLockID()
	if err != nil {
		return err
	}
	// The run goes on under this invocation's lock ID, never the recorded one (which may be
	// the ID someone denied): the banner names both when they differ.
	as := ""
	if me != j.Holder {
		as = ", now as " + ops.Printable(me)
	}
	if _, err := fmt.Fprintf(o.ErrOut, "resuming %s %s on %s/%s, started %s by %s, left %s with %d of %d step(s) done%s: %s\n",
		append(ops.PrintableArgs(j.Operation, j.Args, ns, o.Cluster, j.Started.UTC().Format(time.RFC3339), j.Holder, j.State,
			len(j.Done), j.Steps), as, ops.Printable(j.Request.CommandLine()))...); err != nil {
		return err
	}
	sub.SetContext(ctx)
	return sub.RunE(sub, args)
}

// resumeCommand finds the recorded command, sets its flags from the
// request and checks them as if they had been typed; it returns the
// command and its arguments. The request comes from the cluster, so
// anything this build would not have recorded is refused.
func (o *ResumeOptions) resumeCommand(cmd *cobra.Command, r *ops.Request, ns string) (*cobra.Command, []string, error) {
	bad := func(format string, a ...any) error {
		return ops.Preconditionf("the journal on %s/%s cannot be resumed: "+format, append([]any{ns, o.Cluster}, a...)...)
	}
	if len(r.Command) != 1 || !slices.Contains(resumableCommands, r.Command[0]) {
		return nil, nil, bad("it records the command %q (resumable: %s)", strings.Join(r.Command, " "), strings.Join(resumableCommands, ", "))
	}
	if r.Cluster != o.Cluster || r.Namespace != ns {
		return nil, nil, bad("it records a run on %s/%s", r.Namespace, r.Cluster)
	}
	sub, rest, err := cmd.Root().Find(r.Command)
	if err != nil || len(rest) > 0 || sub.RunE == nil {
		return nil, nil, bad("this build has no command %q", strings.Join(r.Command, " "))
	}
	var flagArgs []string
	for _, f := range r.Flags {
		fl := sub.Flags().Lookup(f.Name)
		persistent := cmd.Root().PersistentFlags().Lookup(f.Name) != nil
		if fl == nil {
			fl = cmd.Root().PersistentFlags().Lookup(f.Name)
		}
		switch {
		case fl == nil:
			return nil, nil, bad("%s has no flag --%s", r.Command[0], f.Name)
		case persistent && !slices.Contains(resumeGlobalFlags, f.Name):
			return nil, nil, bad("--%s is not a flag a request records", f.Name)
		case f.Name == "lock-id":
			// The lock ID is who acts, not what is done: resume runs as
			// this invocation's ID; the executor names the one that
			// started the run.
			continue
		case persistent && o.g.flagGiven(f.Name):
			if want := strings.Join(f.Values, ","); want != fl.Value.String() {
				return nil, nil, ops.Usagef("--%s %s differs from the interrupted run's --%s %s; resume runs the request as it was started",
					f.Name, fl.Value.String(), f.Name, want)
			}
			continue
		}
		rf := ops.Request{Flags: []ops.RequestFlag{f}}
		flagArgs = append(flagArgs, rf.FlagArgs()...)
	}
	if r.Engine != "" && !o.g.flagGiven("engine") {
		if _, set := r.Flag("engine"); !set {
			if !slices.Contains(o.engineNames(), r.Engine) {
				return nil, nil, bad("unknown engine %q", r.Engine)
			}
			// The engine the run was planned by, even if detection would
			// now say otherwise; not marked as given, so the request the
			// resumed run records stays the one the user typed.
			o.g.Engine = r.Engine
		}
	} else if o.g.flagGiven("engine") && r.Engine != "" && o.g.Engine != r.Engine {
		return nil, nil, ops.Usagef("--engine %s differs from the engine %s the interrupted run was planned by", o.g.Engine, r.Engine)
	}
	if err := sub.ParseFlags(flagArgs); err != nil {
		return nil, nil, bad("%v", err)
	}
	if len(sub.Flags().Args()) > 0 {
		return nil, nil, bad("flag values %q are not flags", sub.Flags().Args())
	}
	args := append([]string{r.Cluster}, r.Args...)
	for _, f := range r.Flags {
		if f.Name != "lock-id" {
			o.g.given[f.Name] = true
		}
	}
	if err := checkInput(sub, args); err != nil {
		return nil, nil, err
	}
	if err := checkExplicitlyEmpty(sub); err != nil {
		return nil, nil, err
	}
	// The engine flags are the resumed command's.
	o.g.flagEngines = engineClaims(sub)
	if err := checkFlagDependencies(o.g); err != nil {
		return nil, nil, err
	}
	if sub.Args != nil {
		if err := sub.Args(sub, args); err != nil {
			return nil, nil, bad("%v", err)
		}
	}
	return sub, args, nil
}
