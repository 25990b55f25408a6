package commands

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// explainProcedures are the procedures explain can check.
var explainProcedures = []string{"restart", "scale", "replace"}

// Explanation is the documented `explain -o json|yaml` schema.
type Explanation struct {
	// Context is the kubeconfig context of the cluster (fleet mode only).
	Context   string `json:"context,omitempty"`
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Engine    string `json:"engine"`
	For       string `json:"for"`
	// CanStart is true when every check passed: the procedure could start now (exit 0).
	CanStart bool        `json:"canStart"`
	Checks   []ops.Check `json:"checks"`
}

// ExplainOptions holds `explain` flags.
type ExplainOptions struct {
	*GlobalOptions
	// RunFlags are the shared run flags this command reads (--dry-run, the lock's, --timeout).
	RunFlags *RunFlags
	Cluster  string
	// For is the procedure whose preconditions are checked (--for).
	For   string
	fleet fleetFlags
	sel   clusterSelect
}

// NewExplainOptions returns options bound to the shared flags.
func NewExplainOptions(g *GlobalOptions, rf *RunFlags) *ExplainOptions {
	return &ExplainOptions{GlobalOptions: g, RunFlags: rf, For: "restart"}
}

// NewExplainCmd builds `explain CLUSTER [--for restart|scale|replace]`.
func NewExplainCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewExplainOptions(g, rf)
	cmd := &cobra.Command{
		Use:         "explain CLUSTER [--for restart|scale|replace]",
		Annotations: documentAnnotations(),
		Short:       "Check, without writing anything, whether a procedure could start now, and how to fix what stops it",
		Long: `Run every precondition the procedure checks before it starts - the engine's
own gates (health, quorum or fault-tolerance margin, maintenance zones,
allocation settings, operator reconciliation), the cluster lock and deny
list, operator ownership and the RBAC the procedure needs - and print them as
a checklist, each failed line with the command or setting that fixes it.

Nothing is written and no lock is taken. For restart the procedure's own
preflight runs on a dry plan (the default pod mode); scale and replace depend
on the request, so see their --dry-run for the checks that need it.

Exit 0 when the procedure could start now, 5 when a check fails.

Over a fleet (--contexts, --context A,B or --fleet) each target's checklist is
printed under its context (-o json|yaml: an ExplanationList whose items carry
their context, and "errors"); each target that would refuse is named on one
ERROR line and the exit code is the worst target's. Without CLUSTER, -l
selects the clusters of each target by their labels (-A: in every namespace).`,
		Example: `  kubectl dbops explain myfdb -n prod
  kubectl dbops explain mycrate --for scale -o json | jq '.checks[] | select(.ok|not)'

  # Could a fleet restart start now, on every cluster labelled tier=db in the contexts prod-*?
  kubectl dbops explain --contexts 'prod-*' -n db -l tier=db`,
		Args:              optionalClusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              runOptions(o),
	}
	cmd.Flags().StringVar(&o.For, "for", o.For, "The procedure to check: "+strings.Join(explainProcedures, "|"))
	_ = cmd.RegisterFlagCompletionFunc("for", cobra.FixedCompletions(explainProcedures, cobra.ShellCompDirectiveNoFileComp))
	o.fleet.addFlags(cmd, g)
	o.sel.addFlags(cmd)
	return cmd
}

// Complete fills in arguments.
func (o *ExplainOptions) Complete(_ *cobra.Command, args []string) error {
	o.Cluster = firstArg(args)
	return nil
}

// Validate checks flags without touching the API.
func (o *ExplainOptions) Validate() error {
	if err := o.GlobalOptions.Validate(); err != nil {
		return err
	}
	if err := o.RunFlags.Validate(); err != nil {
		return err
	}
	if !slices.Contains(explainProcedures, o.For) {
		return ops.Usagef("unknown --for %q; allowed: %s", o.For, strings.Join(explainProcedures, ", "))
	}
	if o.RunFlags.DryRun {
		return ops.Usagef("--dry-run does not apply to explain (it never changes anything)")
	}
	if err := o.fleet.validate(o.GlobalOptions); err != nil {
		return err
	}
	return o.sel.validate(o.GlobalOptions, &o.fleet, o.Cluster)
}

// Run checks and prints; a failed check is exit 5 after the checklist.
func (o *ExplainOptions) Run(cmd *cobra.Command) error {
	ctx := commandContext(cmd)
	if o.fleet.active(o.GlobalOptions) {
		return o.runFleet(ctx)
	}
	ex, err := o.explain(ctx)
	if err != nil {
		return err
	}
	doc, err := document(ex, "Explanation", ex.Cluster, ex.Namespace)
	if err != nil {
		return err
	}
	if err := o.printDocument(o.Out, doc, func(w io.Writer) error { return writeExplanation(w, ex) }); err != nil {
		return err
	}
	return ex.refusal()
}

// refusal is the error of an explanation some check of which failed (nil when it can start).
func (ex *Explanation) refusal() error {
	if ex.CanStart {
		return nil
	}
	var failed []string
	for _, c := range ex.Checks {
		if !c.OK {
			failed = append(failed, c.Name)
		}
	}
	return ops.Refusef(ops.ReasonPreconditionFailed, "%s cannot start on %s/%s now: failed %s", ex.For, ex.Namespace, ex.Cluster, strings.Join(failed, ", "))
}

// runFleet checks every cluster of the fleet's targets, --max-parallel targets at once: text,
// each checklist under a Context: line; -o json|yaml, an ExplanationList whose items carry their
// context. A target that would refuse, or cannot be read, is named on its own ERROR line (and
// in "errors"); the exit code is the worst target's.
func (o *ExplainOptions) runFleet(ctx context.Context) error {
	ts, err := o.sel.targets(o.GlobalOptions, &o.fleet, o.Cluster)
	if err != nil {
		return err
	}
	per := make([][]*Explanation, len(ts))
	var mu sync.Mutex
	rs := runFleetClusterReads(ctx, o.GlobalOptions, &o.fleet, ts, o.sel.sel, func(ctx context.Context, i int, cg *GlobalOptions, ct fleet.Target) error {
		eo := &ExplainOptions{GlobalOptions: cg, RunFlags: o.RunFlags, Cluster: ct.Cluster, For: o.For}
		ex, err := eo.explain(ctx)
		if err != nil {
			return err
		}
		ex.Context = ct.Context
		mu.Lock()
		per[i] = append(per[i], ex)
		mu.Unlock()
		return ex.refusal()
	})
	return printFleetItems(ctx, o.GlobalOptions, per, rs, "ExplanationList", "Explanation", o.Cluster,
		func(ex *Explanation) *Explanation { return ex }, func(ex *Explanation) string { return ex.Cluster },
		func(w io.Writer, ex *Explanation) error {
			if _, err := ops.Fprintf(w, "Context:  %s\n", ex.Context); err != nil {
				return err
			}
			return writeExplanation(w, ex)
		})
}

func writeExplanation(w io.Writer, ex *Explanation) error {
	verdict := "could start now"
	if !ex.CanStart {
		verdict = "would refuse now"
	}
	if _, err := fmt.Fprintf(w, "%s of %s/%s (%s) %s:\n", ex.For, ex.Namespace, ex.Cluster, ex.Engine, verdict); err != nil {
		return err
	}
	return ops.WriteChecks(w, ex.Checks)
}

// explain collects the checks: the shared ones here (operator ownership, lock, deny list,
// RBAC), the engine's (ops.Explainer), and for restart the procedure's own preflight on a
// dry plan, so explain answers what the procedure would. Nothing is written.
func (o *ExplainOptions) explain(ctx context.Context) (*Explanation, error) {
	cl, c, err := o.discover(ctx, o.Cluster, false)
	if err != nil {
		return nil, err
	}
	ex := &Explanation{Cluster: c.Name, Namespace: c.Namespace, Engine: c.Engine, For: o.For}
	add := func(ch ops.Check) { ex.Checks = append(ex.Checks, ch) }

	// Operator ownership: the refusal of discover for mutating commands (run.go).
	if c.Operator != "" && !o.IgnoreOperator {
		add(ops.Check{Name: "operator-owned", Detail: fmt.Sprintf("managed by an operator (%s); it would fight manual changes", c.Operator),
			Fix: "pause the operator, or pass --ignore-operator"})
	} else {
		add(ops.Check{Name: "operator-owned", OK: true, Detail: "no operator fights manual changes (or --ignore-operator)"})
	}
	add(o.lockCheck(ctx, cl, c.Namespace, c.Name))
	add(o.rbacCheck(ctx, cl, c.Namespace, c.Engine))

	eng, err := o.engine(ctx, cl, c)
	if err != nil {
		add(ops.Check{Name: "engine", Detail: err.Error(), Fix: "pass the engine's connection flags, or --engine generic"})
		return finish(ex), nil
	}
	defer closeEngine(ctx, eng)
	if x, ok := eng.(ops.Explainer); ok {
		checks, err := x.Explain(ctx, c, o.For)
		if err != nil {
			add(ops.Check{Name: "engine", Detail: err.Error()})
		}
		ex.Checks = append(ex.Checks, checks...)
	}
	if o.For == "restart" {
		if pf := o.restartPreflight(ctx, cl, c, eng); pf.OK || !repeatsFailed(ex.Checks, pf) {
			add(pf)
		}
	}
	return finish(ex), nil
}

// repeatsFailed: the preflight refuses for a reason an engine line already shows failed (the
// engine's lines run the same gates, e.g. FoundationDB's maintenance zone): one cause, one
// failed line, so the preflight's copy is left out. Any other refusal keeps its own line.
func repeatsFailed(checks []ops.Check, pf ops.Check) bool {
	for _, ch := range checks {
		if !ch.OK && ch.Detail != "" && strings.Contains(pf.Detail, ch.Detail) {
			return true
		}
	}
	return false
}

func finish(ex *Explanation) *Explanation {
	ex.CanStart = ops.ChecksPass(ex.Checks)
	return ex
}

// lockCheck reads the lock as a run would before taking it: held by someone else (until
// when), or this lock ID on the deny list.
func (o *ExplainOptions) lockCheck(ctx context.Context, cl *Clients, ns, name string) ops.Check {
	if o.RunFlags.DisableLocks {
		return ops.Check{Name: "lock", OK: true, Detail: "--disable-locks: not checked"}
	}
	id, err := o.RunFlags.ResolveLockID(o.ConfigFlags)
	if err != nil {
		return ops.Check{Name: "lock", Detail: err.Error(), Fix: "pass --lock-id"}
	}
	st := cl.readLock(ctx, ns, name).wait(ctx)
	if st == nil {
		return ops.Check{Name: "lock", Detail: "cannot read the cluster lock (Lease)", Fix: "needs get on leases.coordination.k8s.io in " + ns}
	}
	for _, d := range st.DenyList {
		if d.ID == id {
			return ops.Check{Name: "lock", Detail: fmt.Sprintf("your lock ID %s is on the deny list (by %s: %s)", id, d.By, d.Reason),
				Fix: fmt.Sprintf("kubectl dbops deny allow %s %s -n %s, or use another --lock-id", name, id, ns)}
		}
	}
	if st.Held && !st.Mine {
		until := ""
		if st.Expires != nil {
			until = " until " + st.Expires.UTC().Format(time.RFC3339)
		}
		return ops.Check{Name: "lock", Detail: fmt.Sprintf("held by %s (%s: %s)%s", st.Holder, st.Operation, st.Reason, until),
			Fix: fmt.Sprintf("wait for it (--wait-for-lock), or, if its holder is gone, deny it: kubectl dbops deny add %s %s -n %s", name, st.Holder, ns)}
	}
	detail := "free"
	if st.Holder != "" {
		detail = fmt.Sprintf("last held by %s, expired or denied: may be taken over", st.Holder)
		if st.Mine {
			detail = "held by you (" + id + ")"
		}
	}
	return ops.Check{Name: "lock", OK: true, Detail: detail}
}

// rbacCheck asks the reviews the run would (planning, then the run's likely needs).
func (o *ExplainOptions) rbacCheck(ctx context.Context, cl *Clients, ns, engine string) ops.Check {
	perms := append(o.planNeeds(engine), likelyRunNeeds(o.RunFlags.DisableLocks, o.runNeeds(engine, o.For))...)
	var missing []string
	seen := map[ops.Permission]bool{}
	for _, p := range perms {
		if seen[p] {
			continue
		}
		seen[p] = true
		ok, err := cl.access().Allowed(ctx, ns, p)
		if err != nil {
			return ops.Check{Name: "rbac", Detail: err.Error()}
		}
		if !ok {
			missing = append(missing, p.String())
		}
	}
	if len(missing) > 0 {
		return ops.Check{Name: "rbac", Detail: "you may not " + strings.Join(missing, ", "),
			Fix: "a Role in namespace " + ns + " granting them (see the RBAC section of the README)"}
	}
	return ops.Check{Name: "rbac", OK: true, Detail: fmt.Sprintf("all %d permissions %s needs are granted", len(seen), o.For)}
}

// restartPreflight plans a restart (pod mode, every group) and runs its preflight, as
// `restart --dry-run` does: the same checks, so explain cannot drift from the procedure.
func (o *ExplainOptions) restartPreflight(ctx context.Context, cl *Clients, c *ops.Cluster, eng ops.Engine) ops.Check {
	const fix = "see the refusal; kubectl dbops restart %s --rolling --dry-run shows the plan"
	p, err := eng.PlanRestart(ctx, c, ops.RestartOptions{Mode: ops.ModePod})
	if err == nil {
		err = preflight(ctx, p, o.RunFlags.unfinishedJournal(ctx, cl, c))
	}
	if err != nil {
		return ops.Check{Name: "preflight", Detail: err.Error(), Fix: fmt.Sprintf(fix, c.Name)}
	}
	return ops.Check{Name: "preflight", OK: true, Detail: fmt.Sprintf("restart's own preflight passes (%d step(s) planned)", len(p.Steps))}
}
