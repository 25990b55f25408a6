package commands

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/etcd"
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
	c, err := discovery.Discover(ctx, cl.Kube, discovery.Options{Namespace: ns, Name: name, Selector: g.Selector, Engine: g.Engine})
	if err != nil {
		return nil, nil, err
	}
	if mutating && c.Operator != "" && !g.IgnoreOperator {
		return nil, nil, ops.Preconditionf("cluster %s/%s is managed by an operator (%s); it would fight manual changes: pause it, or pass --ignore-operator",
			c.Namespace, c.Name, c.Operator)
	}
	return cl, c, nil
}

// planFunc asks a cluster's engine for the plan of one command.
type planFunc func(ctx context.Context, cl *Clients, c *ops.Cluster, eng ops.Engine) (*ops.Plan, error)

// operate is the body every mutating command shares: find the cluster, get
// its engine, plan from live state, then dry-run or execute within the
// timeout (--timeout, else the env variable timeoutEnv, else def).
func (g *GlobalOptions) operate(ctx context.Context, cluster, timeoutEnv string, def time.Duration, plan planFunc) error {
	cl, c, err := g.discover(ctx, cluster, true)
	if err != nil {
		return err
	}
	eng, err := g.engine(ctx, cl, c)
	if err != nil {
		return err
	}
	defer closeEngine(ctx, eng)
	timeout, err := g.timeoutOr(timeoutEnv, def)
	if err != nil {
		return err
	}
	if err := g.checkPlanPermissions(ctx, cl, c); err != nil {
		return err
	}
	p, err := plan(ctx, cl, c, eng)
	if err != nil {
		return err
	}
	return g.execute(ctx, cl, c, p, timeout)
}

// engine returns the adapter for a discovered cluster, after refusing
// flags of another engine and reading the Secrets the flags name (so a
// missing one is reported before the lock is taken).
func (g *GlobalOptions) engine(ctx context.Context, cl *Clients, c *ops.Cluster) (ops.Engine, error) {
	if err := g.checkEngineFlags(c); err != nil {
		return nil, err
	}
	switch c.Engine {
	case ops.EngineGeneric:
		return ops.GenericEngine{Client: cl.Kube}, nil
	case ops.EngineCrateDB:
		return g.crateEngine(ctx, cl, c)
	case ops.EngineEtcd:
		if err := g.Etcd.Validate(); err != nil {
			return nil, err
		}
		return etcd.New(cl.Kube, cl.Config, g.Etcd.Options), nil
	case ops.EngineReplicated:
		return g.replicatedEngine(cl)
	default:
		return nil, ops.Usagef("engine %s (cluster %s) is not supported by this build yet; pass --engine generic to operate it as plain StatefulSets without database health gates",
			c.Engine, c.Name)
	}
}

// timeoutOr returns --timeout, else the environment variable env (seconds),
// else def.
func (g *GlobalOptions) timeoutOr(env string, def time.Duration) (time.Duration, error) {
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
func (g *GlobalOptions) execute(ctx context.Context, cl *Clients, c *ops.Cluster, plan *ops.Plan, timeout time.Duration) error {
	if err := g.preflight(ctx, cl, c, plan); err != nil {
		if g.DryRun {
			// Show what would run, then say why a real run would refuse.
			_ = writePlan(g.Out, g.dryRunView(ctx, cl, c, plan), g.Output)
		}
		return err
	}
	if g.DryRun {
		if g.Output == "json" {
			// The same NDJSON stream as a run: the plan, then done with outcome dry-run.
			sink, now := tui.NewJSON(g.Out), cl.Clock.Now()
			sink.Emit(ops.Event{Type: ops.EventPlan, Time: now, Operation: plan.Operation, Cluster: plan.Cluster, Plan: g.dryRunView(ctx, cl, c, plan)})
			sink.Emit(ops.Event{Type: ops.EventDone, Time: now, Operation: plan.Operation, Cluster: plan.Cluster, Outcome: ops.OutcomeDryRun})
			return nil
		}
		return writePlan(g.Out, g.dryRunView(ctx, cl, c, plan), g.Output)
	}
	if g.Output == "yaml" {
		return ops.Usagef("-o yaml is for status and --dry-run plans; operations stream -o text or -o json")
	}
	if plan.Destructive && len(plan.Steps) > 0 && !g.Yes {
		if !g.IsTerminal() {
			return ops.Usagef("refusing to %s %s/%s without confirmation: no terminal to ask on; pass --yes (see the plan with --dry-run)",
				plan.Operation, c.Namespace, c.Name)
		}
		if err := ops.WritePlanText(g.ErrOut, plan.View()); err != nil {
			return err
		}
		ok, err := confirm(g.In, g.ErrOut, fmt.Sprintf("Run %s on %s/%s (%d steps)?", plan.Operation, c.Namespace, c.Name, len(plan.Steps)))
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
	lockID, err := g.ResolveLockID()
	if err != nil {
		return err
	}
	exec := &ops.Executor{
		LockID:      lockID,
		Clock:       cl.Clock,
		Auditor:     &ops.KubeAuditor{Client: cl.Kube, Clock: cl.Clock, Instance: lockID},
		Objects:     statefulSetRefs(c),
		WaitForLock: g.WaitForLock,
		Timeout:     timeout,
	}
	if g.DisableLocks {
		fmt.Fprintf(g.ErrOut, "WARNING: --disable-locks: running %s on %s/%s WITHOUT the cluster lock; concurrent operations will not be stopped and no journal is kept\n",
			plan.Operation, c.Namespace, c.Name)
		for _, grp := range c.Groups {
			exec.Auditor.Record(ctx, ops.ObjectRef{Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: c.Namespace, //nolint:errcheck // best effort: the run must not depend on it
				Name: grp.StatefulSet, UID: string(grp.Object.GetUID())}, "DbopsLocksDisabled",
				fmt.Sprintf("%s started with --disable-locks by %s", plan.Operation, lockID))
		}
	} else {
		exec.Locker = &lock.Manager{Client: cl.Kube, Namespace: c.Namespace, Cluster: c.Name, ID: lockID,
			Duration: g.LockDuration, Clock: cl.Clock, Session: newSession()}
	}
	return g.runWithView(ctx, exec, plan, cl, c)
}

// preflight runs the plan's own fitness check before anything is written,
// knowing which steps an interrupted run of the same request already did.
func (g *GlobalOptions) preflight(ctx context.Context, cl *Clients, c *ops.Cluster, plan *ops.Plan) error {
	if plan.Preflight == nil || len(plan.Steps) == 0 {
		return nil
	}
	st := ops.PreflightState{}
	if j := g.unfinishedJournal(ctx, cl, c); j.Resumable(plan.Operation, plan.Args) {
		st.Done = j.IsDone
		st.Resuming = len(j.Done) > 0 || j.Current != ""
	}
	return plan.Preflight(ctx, st)
}

// dryRunView marks the steps an interrupted run of the same request already
// did, read from the journal on the lock (read-only), so the plan shows what
// a re-run would really do.
func (g *GlobalOptions) dryRunView(ctx context.Context, cl *Clients, c *ops.Cluster, plan *ops.Plan) *ops.PlanView {
	v := plan.View()
	if g.DisableLocks {
		return v
	}
	j := g.unfinishedJournal(ctx, cl, c)
	if !j.Resumable(plan.Operation, plan.Args) {
		return v
	}
	done := 0
	for i := range v.Steps {
		if j.IsDone(v.Steps[i].ID) {
			v.Steps[i].Done = true
			done++
		}
	}
	v.Notes = append(v.Notes, fmt.Sprintf("resumes the %s run started %s by %s: %d step(s) already done",
		j.State, j.Started.UTC().Format(time.RFC3339), j.Holder, done))
	return v
}

// unfinishedJournal reads the journal on the cluster's lock without taking
// it; nil when there is none, it is finished, or it cannot be read (the
// executor reads it again under the lock anyway).
func (g *GlobalOptions) unfinishedJournal(ctx context.Context, cl *Clients, c *ops.Cluster) *ops.Journal {
	if g.DisableLocks {
		return nil
	}
	st, err := (&lock.Manager{Client: cl.Kube, Namespace: c.Namespace, Cluster: c.Name, ID: "reader", Clock: cl.Clock}).Status(ctx)
	if err != nil || st.Journal == nil || st.Journal.State == ops.JournalSucceeded {
		return nil
	}
	return st.Journal
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

// statefulSetRefs names the cluster's StatefulSets, which receive the
// operation-level audit events.
func statefulSetRefs(c *ops.Cluster) []ops.ObjectRef {
	var out []ops.ObjectRef
	for _, g := range c.Groups {
		ref := ops.ObjectRef{Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: c.Namespace, Name: g.StatefulSet}
		if g.Object != nil {
			ref.UID = string(g.Object.GetUID())
		}
		out = append(out, ref)
	}
	return out
}
