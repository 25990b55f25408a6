package commands

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/discovery"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
	"github.com/kubectl-dbops/kubectl-dbops/internal/tui"
)

// Default operation timeouts, after the operators' seeds.
const (
	defaultBootstrapTimeout = 1800 * time.Second
	defaultScalingTimeout   = 3600 * time.Second
	defaultRestartTimeout   = 3600 * time.Second
)

// discover finds the cluster. Mutating commands refuse operator-owned
// clusters unless --ignore-operator is given, because the operator would
// undo or fight the changes.
func (g *GlobalOptions) discover(ctx context.Context, name string, mutating bool) (*Clients, *ops.Cluster, error) {
	cl, err := g.Clients()
	if err != nil {
		return nil, nil, err
	}
	ns, err := g.Namespace()
	if err != nil {
		return nil, nil, err
	}
	c, err := discovery.Discover(ctx, cl.Kube, discovery.Options{Namespace: ns, Name: name, Selector: g.Selector, Engine: g.Engine,
		Engines: g.engineNames(), Recognizers: g.recognizers(), Dynamic: cl.Dynamic})
	if err != nil {
		return nil, nil, didYouMean(ctx, cl, ns, name, ops.ResourceRecognizers(g.recognizers()), err)
	}
	// A flag of another engine is bad input, refused before anything else is checked.
	if err := g.checkEngineFlags(c); err != nil {
		return nil, nil, err
	}
	if mutating && c.Operator != "" && !g.IgnoreOperator {
		return nil, nil, ops.Preconditionf("cluster %s/%s is managed by an operator (%s); it would fight manual changes: pause it, or pass --ignore-operator",
			c.Namespace, c.Name, c.Operator)
	}
	return cl, c, nil
}

// commandOptions is how every command's options work, as in kubectl:
// Complete takes what the command line gave (and fills in defaults),
// Validate checks it without the API, Run does the work. Mutating commands
// run them through runE, the others through runOptions.
type commandOptions interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(cmd *cobra.Command) error
}

// Every command's options have the Complete/Validate/Run shape.
var (
	_ commandOptions = (*BootstrapOptions)(nil)
	_ commandOptions = (*ScaleOptions)(nil)
	_ commandOptions = (*RestartOptions)(nil)
	_ commandOptions = (*ReplaceOptions)(nil)
	_ commandOptions = (*ResumeOptions)(nil)
	_ commandOptions = (*StatusOptions)(nil)
	_ commandOptions = (*HistoryOptions)(nil)
	_ commandOptions = (*ListOptions)(nil)
	_ commandOptions = (*WaitOptions)(nil)
	_ commandOptions = (*LockStatusOptions)(nil)
	_ commandOptions = (*LockAcquireOptions)(nil)
	_ commandOptions = (*LockReleaseOptions)(nil)
	_ commandOptions = (*DenyOptions)(nil)
	_ commandOptions = (*DenyListOptions)(nil)
	_ commandOptions = (*VersionOptions)(nil)
	_ commandOptions = (*ExplainOptions)(nil)
	_ commandOptions = (*ReportOptions)(nil)
)

// runOptions is the RunE of a command that reads or changes only the lock or prints
// documents (lock, deny, status, version): Complete, Validate (which checks the shared flags
// too), Run. It has no engine flags to check, unlike runE.
func runOptions(o commandOptions) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd)
	}
}

// groupRunE is the RunE of a command that only groups subcommands (lock, deny): its help, or
// a usage error naming an unknown subcommand and the allowed ones.
func groupRunE(allowed string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return ops.Usagef("unknown %s subcommand %q; allowed: %s", cmd.Name(), args[0], allowed)
		}
		return cmd.Help()
	}
}

// planFunc asks a cluster's engine for the plan of one command. It may
// record on req what it picked from live state (Request.Picked). A nil plan
// with a nil error means it found nothing to do and said so.
type planFunc func(ctx context.Context, cl *Clients, c *ops.Cluster, eng ops.Engine, req *ops.Request) (*ops.Plan, error)

// operation is what a mutating command hands the runner.
type operation struct {
	// req is the command as given; the journal keeps it for `resume`.
	req *ops.Request
	// timeoutEnv names the environment variable (seconds) that bounds the
	// run when --timeout is not given; defaultTimeout applies otherwise.
	timeoutEnv     string
	defaultTimeout time.Duration
	// check, when set, vets the discovered cluster before its engine is
	// built (replace: the named pods are members).
	check func(c *ops.Cluster) error
	plan  planFunc
}

// runOperation is the pipeline every mutating command runs: find the
// cluster, get its engine, plan from live state, then dry-run, or confirm,
// lock and execute within the timeout with the chosen view.
func (g *Runner) runOperation(ctx context.Context, op operation) error {
	operation := ""
	if len(op.req.Command) > 0 {
		operation = op.req.Command[0]
	}
	// The requests asked ahead end with the command: a refusal returns before they are
	// answered, and nothing the command started may outlive it.
	defer g.askAhead(ctx, op.req.Cluster, operation)()
	cl, c, err := g.Clusters.discover(ctx, op.req.Cluster, true)
	if err != nil {
		return err
	}
	if op.check != nil {
		if err := op.check(c); err != nil {
			return err
		}
	}
	eng, err := g.Clusters.engine(ctx, cl, c)
	if err != nil {
		return err
	}
	defer closeEngine(ctx, eng)
	timeout, err := g.timeoutOr(op.timeoutEnv, op.defaultTimeout)
	if err != nil {
		return err
	}
	if err := g.checkPlanPermissions(ctx, cl, c, operation); err != nil {
		return err
	}
	p, err := op.plan(ctx, cl, c, eng, op.req)
	if err != nil || p == nil {
		return err
	}
	p.SetRequest(op.req, c.Engine)
	return g.execute(ctx, cl, c, p, timeout)
}

// engine returns the adapter for a discovered cluster, after refusing
// flags of another engine; builders read the Secrets the flags name, so a
// missing one is reported before the lock is taken.
func (g *GlobalOptions) engine(ctx context.Context, cl *Clients, c *ops.Cluster) (ops.Engine, error) {
	if err := g.checkEngineFlags(c); err != nil {
		return nil, err
	}
	for _, k := range g.Engines {
		if k.Name == c.Engine {
			return k.Build(ctx, EngineDeps{Clients: cl, Cluster: c, Flags: g.engineFlagsOf(k.Name), Options: g})
		}
	}
	return nil, ops.Usagef("engine %s (cluster %s) is not supported by this build yet; pass --engine generic to operate it as plain StatefulSets without database health gates",
		c.Engine, c.Name)
}

// closeEngine ends an engine's database connections, if it keeps any.
func closeEngine(ctx context.Context, eng ops.Engine) {
	if c, ok := eng.(ops.Closer); ok {
		_ = c.Close(context.WithoutCancel(ctx))
	}
}

// timeoutOr returns --timeout, else the environment variable env (seconds),
// else def.
func (g *Runner) timeoutOr(env string, def time.Duration) (time.Duration, error) {
	if g.Timeout > 0 {
		return g.Timeout, nil
	}
	if env != "" {
		if v := g.Getenv(env); v != "" {
			var secs int
			if _, err := fmt.Sscanf(v, "%d", &secs); err != nil || secs <= 0 || fmt.Sprint(secs) != v {
				return 0, ops.Usagef("%s must be a positive number of seconds, got %q", env, v)
			}
			return time.Duration(secs) * time.Second, nil
		}
	}
	return def, nil
}

// execute is the shared tail of every mutating command: dry-run, confirm,
// lock, run with the chosen view.
func (g *Runner) execute(ctx context.Context, cl *Clients, c *ops.Cluster, plan *ops.Plan, timeout time.Duration) error {
	// The journal as an interrupted run left it (read without the lock):
	// resumed when it is the same request, else replaced and its progress lost.
	output := g.Clusters.outputFormat()
	st := g.lockState(ctx, cl, c)
	prev, busy := journalOf(st)
	resuming := prev.Resumable(plan.Operation, plan.Args)
	// A run in progress under a held lock is not replaced: taking the lock
	// refuses (exit 3) and says who holds it.
	replacing := prev != nil && !resuming && !busy && len(plan.Steps) > 0
	if err := preflight(ctx, plan, prev); err != nil {
		if g.DryRun {
			// Show what would run, then say why a real run would refuse.
			_ = writePlan(g.Out, dryRunView(plan, prev), output)
		}
		return err
	}
	if g.DryRun {
		if output == "json" {
			// The same NDJSON stream as a run: the plan, then done with outcome dry-run.
			sink, now := tui.NewJSON(g.Out), cl.Clock.Now()
			sink.Emit(ops.Event{Type: ops.EventPlan, Time: now, Operation: plan.Operation, Cluster: plan.Cluster, Plan: dryRunView(plan, prev)})
			sink.Emit(ops.Event{Type: ops.EventDone, Time: now, Operation: plan.Operation, Cluster: plan.Cluster, Outcome: ops.OutcomeDryRun})
			g.streamEnded = true
			return nil
		}
		return writePlan(g.Out, dryRunView(plan, prev), output)
	}
	if output == "yaml" {
		return ops.Usagef("-o yaml is for status and --dry-run plans; operations stream -o text or -o json")
	}
	// -o json is for programs: it never asks, even with a terminal on stdin.
	canAsk := g.IsTerminal() && output != "json"
	if replacing && !g.Yes && !canAsk {
		return ops.Usagef("refusing to start %s on %s/%s: it would replace the record of the unfinished %s, whose progress would be lost; resume that with: %s, or pass --yes to run %s anyway",
			describeRequest(plan.Operation, plan.Args), c.Namespace, c.Name, describeJournal(prev), resumeHint(prev), plan.Operation)
	}
	if (plan.Destructive || replacing) && len(plan.Steps) > 0 && !g.Yes {
		if !canAsk {
			why := "no terminal to ask on"
			if output == "json" {
				why = "-o json never asks"
			}
			return ops.Usagef("refusing to %s %s/%s without confirmation: %s; pass --yes (see the plan with --dry-run)",
				plan.Operation, c.Namespace, c.Name, why)
		}
		v, left := remainingView(dryRunView(plan, prev))
		if err := writeConfirmPlan(g.ErrOut, v); err != nil {
			return err
		}
		question := fmt.Sprintf("Run %s on %s/%s (%d steps)?", plan.Operation, c.Namespace, c.Name, left)
		if left < len(plan.Steps) {
			question = fmt.Sprintf("Resume %s on %s/%s (%d of %d steps left)?", plan.Operation, c.Namespace, c.Name, left, len(plan.Steps))
		}
		if replacing {
			question = fmt.Sprintf("Run %s on %s/%s (%d steps) and lose the progress of the unfinished %s?",
				plan.Operation, c.Namespace, c.Name, left, prev.Operation)
		}
		ok, err := confirm(g.In, g.ErrOut, question)
		if err != nil {
			return err
		}
		if !ok {
			return ops.Usagef("aborted at the confirmation prompt; nothing was changed")
		}
	}
	if err := g.checkPermissions(ctx, cl, plan); err != nil {
		return err
	}
	lockID, err := g.resolveLockID()
	if err != nil {
		return err
	}
	exec := &ops.Executor{
		LockID:      lockID,
		Clock:       cl.Clock,
		Auditor:     &ops.KubeAuditor{Client: cl.Kube, Clock: cl.Clock, Instance: lockID},
		Objects:     c.OwnerRefs(),
		WaitForLock: g.WaitForLock,
		Timeout:     timeout,
		Pacing:      g.pacing(),
		Confirmed:   g.Yes,
	}
	if g.DisableLocks {
		fmt.Fprintf(g.ErrOut, "WARNING: --disable-locks: running %s on %s/%s WITHOUT the cluster lock; concurrent operations will not be stopped and no journal is kept\n",
			plan.Operation, c.Namespace, c.Name)
		for _, ref := range c.OwnerRefs() {
			exec.Auditor.Record(ctx, ref, "DbopsLocksDisabled", //nolint:errcheck // best effort: the run must not depend on it
				fmt.Sprintf("%s started with --disable-locks by %s", plan.Operation, lockID))
		}
	} else {
		m := lock.NewManager(cl.Kube, c.Namespace, c.Name, lockID, cl.Clock)
		m.Duration, m.Session = g.LockDuration, newSession()
		m.Seen(st) // the lease as read above: taking the lock need not read it again
		exec.Locker = m
	}
	return g.runWithView(ctx, exec, plan, cl, c)
}

// preflight runs the plan's own fitness check before anything is written,
// knowing which steps an interrupted run of the same request (prev) already did.
func preflight(ctx context.Context, plan *ops.Plan, prev *ops.Journal) error {
	if plan.Preflight == nil || len(plan.Steps) == 0 {
		return nil
	}
	st := ops.PreflightState{}
	if prev.Resumable(plan.Operation, plan.Args) {
		st.Done, st.Data = prev.IsDone, prev.Data
		st.Resuming = len(prev.Done) > 0 || prev.Current != ""
	}
	return plan.Preflight(ctx, st)
}

// dryRunView marks the steps an interrupted run of the same request (prev,
// read from the journal on the lock) already did, so the plan shows what a
// re-run would really do; for another request it notes the progress the
// run would throw away.
func dryRunView(plan *ops.Plan, prev *ops.Journal) *ops.PlanView {
	v := plan.View()
	switch {
	case prev == nil:
	case prev.Resumable(plan.Operation, plan.Args):
		done := 0
		skipped := plan.SkippedOnResume(prev)
		for i := range v.Steps {
			if skipped[v.Steps[i].ID] {
				v.Steps[i].Done = true
				done++
			}
		}
		v.Notes = append(v.Notes, fmt.Sprintf("resumes the %s run started %s by %s: %d step(s) already done",
			prev.State, prev.Started.UTC().Format(time.RFC3339), prev.Holder, done))
	case len(plan.Steps) > 0:
		v.Notes = append(v.Notes, fmt.Sprintf("WARNING: replaces the record of the unfinished %s: its progress is lost (resume it instead with: %s)",
			describeJournal(prev), resumeHint(prev)))
	}
	return v
}

// confirmPlanLines is the most a plan may take at the confirmation prompt before it is shown
// as a summary: the question and the plan fit a 24-line terminal.
const confirmPlanLines = 20

// writeConfirmPlan shows the plan asked about: whole when it fits one screen, else as a
// summary per node group (ops.WritePlanSummary).
func writeConfirmPlan(w io.Writer, v *ops.PlanView) error {
	var b strings.Builder
	if err := ops.WritePlanText(&b, v); err != nil {
		return err
	}
	if strings.Count(b.String(), "\n") <= confirmPlanLines {
		_, err := io.WriteString(w, b.String())
		return err
	}
	return ops.WritePlanSummary(w, v)
}

// remainingView leaves out the steps done by an earlier run (the prompt
// asks only about what is left) and returns how many are left.
func remainingView(v *ops.PlanView) (*ops.PlanView, int) {
	out := *v
	out.Steps = nil
	for _, s := range v.Steps {
		if !s.Done {
			out.Steps = append(out.Steps, s)
		}
	}
	if done := len(v.Steps) - len(out.Steps); done > 0 {
		out.Notes = append(slices.Clone(v.Notes), fmt.Sprintf("%d step(s) done by the interrupted run are not shown", done))
	}
	return &out, len(out.Steps)
}

// describeRequest is "operation args".
func describeRequest(op, args string) string {
	if args == "" {
		return op
	}
	return op + " " + args
}

// describeJournal says what an unfinished journal is: which request, who
// started it, how it ended and how far it got.
func describeJournal(j *ops.Journal) string {
	return fmt.Sprintf("%s (started %s by %s, %s, %d of %d step(s) done)", describeRequest(j.Operation, j.Args),
		j.Started.UTC().Format(time.RFC3339), j.Holder, j.State, len(j.Done), j.Steps)
}

// resumeHint is the command that resumes j: `resume` when the journal
// records its request, else the advice to re-run the original command.
func resumeHint(j *ops.Journal) string {
	if j.Request != nil {
		return j.Request.ResumeCommand()
	}
	return "the command that started it"
}

// askAhead sends, while discovery runs (once its first request was answered, on the same
// connection), what a run asks whatever discovery finds: the read of the lock of the cluster
// named (namespace and name as given; used only when discovery finds that cluster), and the
// permission reviews that do not depend on the engine (not for a dry run). Errors are left to
// discovery, which meets them too. The returned stop cancels what is still in flight and
// waits for it; call it when the command ends.
func (g *Runner) askAhead(ctx context.Context, name, operation string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = func() {
		cancel()
		wg.Wait()
	}
	cl, err := g.Clients()
	if err != nil {
		return stop
	}
	ns, err := g.Namespace()
	if err != nil {
		return stop
	}
	if !g.DisableLocks {
		r := cl.readLock(ctx, ns, name)
		wg.Go(func() { <-r.done })
	}
	if !g.DryRun && operation != "" {
		access, needs := cl.access(), append(g.Clusters.planNeeds(""), likelyRunNeeds(g.DisableLocks, g.runNeeds("", operation))...)
		wg.Go(func() {
			cl.waitAnswered(ctx)              // on discovery's connection (firstAnswer)
			access.Prefetch(ctx, ns, needs)() // joined by stop
		})
	}
	return stop
}

// lockRead is a read of a cluster's lock, in flight or done.
type lockRead struct {
	done chan struct{}
	st   *lock.State
}

// readLock starts reading the lock of cluster name in ns, unless a read of it was started
// already, and returns that read. One per command: every reader gets the same state.
func (cl *Clients) readLock(ctx context.Context, ns, name string) *lockRead {
	cl.lockMu.Lock()
	defer cl.lockMu.Unlock()
	key := ns + "/" + name
	if r := cl.lockReads[key]; r != nil {
		return r
	}
	r := &lockRead{done: make(chan struct{})}
	if cl.lockReads == nil {
		cl.lockReads = map[string]*lockRead{}
	}
	cl.lockReads[key] = r
	go func() {
		defer close(r.done)
		cl.waitAnswered(ctx) // on discovery's connection (firstAnswer)
		if st, err := lock.NewManager(cl.Kube, ns, name, "reader", cl.Clock).Status(ctx); err == nil {
			r.st = st
		}
	}()
	return r
}

// wait returns the state read, nil when it could not be read (or ctx ended first).
func (r *lockRead) wait(ctx context.Context) *lock.State {
	select {
	case <-r.done:
		return r.st
	case <-ctx.Done():
		return nil
	}
}

// journalOf is the unfinished journal on the lock as st read it, and whether its run is in
// progress (see journalState).
func journalOf(st *lock.State) (j *ops.Journal, busy bool) {
	if st == nil || st.Journal == nil || st.Journal.State == ops.JournalSucceeded {
		return nil, false
	}
	return st.Journal, st.Journal.State == ops.JournalRunning && st.Held
}

// newSession returns a random token identifying this process on the lock.
func newSession() string {
	return rand.Text()[:16]
}

// writePlan prints a plan as text, JSON or YAML.
func writePlan(w io.Writer, v *ops.PlanView, format string) error {
	if format == "text" {
		return ops.WritePlanText(w, v)
	}
	return writeStructured(w, v, format)
}
