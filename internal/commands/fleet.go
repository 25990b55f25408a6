package commands

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// fleetFlags select a fleet (#39, internal/fleet): the commands that take them (list, status,
// restart, resume) run over every target instead of the one kubeconfig context. kubectl's --context
// stays one context; a comma list in it, --contexts or --fleet selects a fleet.
type fleetFlags struct {
	Contexts    []string
	File        string
	MaxParallel int
}

func (ff *fleetFlags) addFlags(cmd *cobra.Command, g *GlobalOptions) {
	fs := cmd.Flags()
	fs.StringSliceVar(&ff.Contexts, "contexts", nil, "Fleet: run over the kubeconfig contexts with these names or globs, comma separated ('prod-*'); --context A,B also selects several")
	fs.StringVar(&ff.File, "fleet", "", "Fleet: run over the targets of this fleet file (contexts, namespaces, clusters, per-context targets)")
	fs.IntVar(&ff.MaxParallel, "max-parallel", 1, "Fleet: how many targets run at once")
	_ = cmd.RegisterFlagCompletionFunc("contexts", completeContexts(g))
	_ = cmd.RegisterFlagCompletionFunc("fleet", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
	})
}

// contextList is --context split on commas: more than one name selects a fleet.
func contextList(g *GlobalOptions) []string {
	if g.ConfigFlags == nil || g.ConfigFlags.Context == nil {
		return nil
	}
	return fleet.SplitList(*g.ConfigFlags.Context)
}

// active reports whether the command runs over a fleet.
func (ff *fleetFlags) active(g *GlobalOptions) bool {
	return len(ff.Contexts) > 0 || ff.File != "" || len(contextList(g)) > 1 ||
		(g.ConfigFlags != nil && g.ConfigFlags.Context != nil && strings.Contains(*g.ConfigFlags.Context, ","))
}

// validate checks the fleet flags without touching the API.
func (ff *fleetFlags) validate(g *GlobalOptions) error {
	ctxGiven := g.ConfigFlags != nil && g.ConfigFlags.Context != nil && *g.ConfigFlags.Context != ""
	switch {
	case len(ff.Contexts) > 0 && ctxGiven:
		return ops.Usagef("give --context or --contexts, not both")
	case ff.File != "" && (len(ff.Contexts) > 0 || ctxGiven):
		return ops.Usagef("--fleet names its contexts; give it without --context or --contexts")
	case !ff.active(g) && g.flagGiven("max-parallel"):
		return ops.Usagef("--max-parallel applies to a fleet (--context A,B, --contexts or --fleet)")
	case ff.MaxParallel < 1:
		return ops.Usagef("--max-parallel must be at least 1 (got %d)", ff.MaxParallel)
	}
	return nil
}

// targets resolves the fleet from the kubeconfig: the contexts of --context A,B, --contexts or
// the fleet file; the namespace of -n (else the file's, else each context's); clusters (the
// argument's, else the file's).
func (ff *fleetFlags) targets(g *GlobalOptions, clusters []string, allNamespaces bool) ([]fleet.Target, error) {
	var spec fleet.Spec
	if ff.File != "" {
		f, err := fleet.ReadFile(ff.File)
		if err != nil {
			return nil, err
		}
		spec = f.Spec()
	} else {
		spec.Contexts = append(fleet.SplitList(ff.Contexts...), contextList(g)...)
	}
	if len(clusters) > 0 {
		// status and restart act on the argument's cluster: a fleet file naming others would
		// leave it unclear which one runs.
		named := slices.Clone(spec.Clusters)
		for _, o := range spec.Overrides {
			named = append(named, o.Clusters...)
		}
		for _, c := range named {
			if c != clusters[0] {
				return nil, ops.Usagef("fleet file %s names cluster %q; this command acts on the cluster %q of its argument (leave clusters out of the file, or name only that one)", ff.File, c, clusters[0])
			}
		}
		spec.Clusters = clusters
	}
	if g.ConfigFlags.Namespace != nil && *g.ConfigFlags.Namespace != "" {
		spec.Namespaces = []string{*g.ConfigFlags.Namespace}
	}
	spec.AllNamespaces = spec.AllNamespaces || allNamespaces
	// The kubeconfig as every context's factory reads it (same files, no --context).
	raw, err := g.ForContext("").ConfigFlags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, kubeconfigError(err)
	}
	ts, err := fleet.Resolve(&raw, spec)
	if err != nil {
		return nil, err
	}
	// A target named twice (a fleet file's overlapping lists) runs once.
	var out []fleet.Target
	for _, t := range ts {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// fleetTargetOptions are the shared options over one target: a factory for its context with
// -n set to the target's namespace, whose API clients are the context's from pool (one set of
// clients per context, however many namespaces or clusters it has).
func fleetTargetOptions(g *GlobalOptions, pool *fleet.Pool[*Clients], t fleet.Target) *GlobalOptions {
	f := g.ForContext(t.Context)
	ns := t.Namespace
	f.ConfigFlags.Namespace = &ns
	f.NewClients = func() (*Clients, error) { return pool.Get(t.Context) }
	cp := *g
	cp.Factory = f
	return &cp
}

// newClientsPool is the pool of one fleet run's API clients: each context's built on first use.
func newClientsPool(g *GlobalOptions) *fleet.Pool[*Clients] {
	return &fleet.Pool[*Clients]{Build: func(c string) (*Clients, error) { return g.ForContext(c).Clients() }}
}

// fleetFailure is the error of a fleet run some of whose targets failed: it names them and
// carries the worst target's error, so the exit code is the worst of the targets
// (fleet.WorstExit). Each failure was reported on its own line before.
func fleetFailure(rs []fleet.Result) error {
	return fleetFailureBy(rs, fleet.Result.Outcome)
}

// fleetFailureBy is fleetFailure naming the targets by their outcome (outcome of the summary),
// so a stopped, skipped or nothing-to-resume target is not counted as failed. The targets a
// stop left not started are named too: the last line must not read as if the rest were done.
func fleetFailureBy(rs []fleet.Result, outcome func(fleet.Result) string) error {
	var worst error
	code := fleet.WorstExit(rs)
	var order []string
	byOutcome := map[string][]string{}
	for _, r := range rs {
		if r.Err == nil && outcome(r) != fleet.OutcomeNotStarted {
			continue
		}
		oc := outcome(r)
		if _, ok := byOutcome[oc]; !ok {
			order = append(order, oc)
		}
		byOutcome[oc] = append(byOutcome[oc], r.Target.String())
		if worst == nil && ops.ExitCode(r.Err) == code {
			worst = r.Err
		}
	}
	if worst == nil {
		return nil
	}
	parts := make([]string, 0, len(order))
	for _, oc := range order {
		parts = append(parts, fmt.Sprintf("%d of %d targets %s (%s)", len(byOutcome[oc]), len(rs), oc, strings.Join(byOutcome[oc], ", ")))
	}
	return fmt.Errorf("fleet: %s: %w", strings.Join(parts, "; "), worst)
}

// reportTargetErrors writes one line per failed target, naming its context.
func reportTargetErrors(g *GlobalOptions, rs []fleet.Result) {
	for _, r := range rs {
		if r.Started && r.Err != nil {
			ops.Fprintf(g.ErrOut, "ERROR: context %s: %s\n", r.Target.Context, oneLineErr(r.Err))
		}
	}
}

func oneLineErr(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// outcomeLine is "OUTCOME: error" on one line, the outcome's word once when the error starts
// with it ("interrupted in step 2/3 ...").
func outcomeLine(outcome string, err error) string {
	msg := oneLineErr(err)
	if strings.HasPrefix(msg, outcome+" ") {
		return msg
	}
	return outcome + ": " + msg
}

// runFleetReads runs read, a read-only command's work for one target, over every target,
// at most --max-parallel at once; a failing target stops nothing.
func runFleetReads(ctx context.Context, ff *fleetFlags, ts []fleet.Target, read fleet.RunFunc) []fleet.Result {
	return fleet.Run(ctx, ts, fleet.Pacing{MaxParallel: ff.MaxParallel}, read)
}

// fleetErrors are the failed targets of rs for a -o json|yaml document's "errors".
func fleetErrors(rs []fleet.Result) []any {
	var out []any
	for _, r := range rs {
		if r.Started && r.Err != nil {
			out = append(out, map[string]any{"context": r.Target.Context, "namespace": r.Target.Namespace,
				"error": oneLineErr(r.Err), "reasonCode": ops.ReasonOf(r.Err)})
		}
	}
	return out
}

// printFleetItems ends a fleet read: every target's items in the targets' order, printed as one
// kind document of itemKind items (doc of each; -o json|yaml, the failed targets under
// "errors") or as text (write of each, a blank line after it); then one ERROR line per failed
// target, and the worst target's error.
func printFleetItems[T, D any](ctx context.Context, g *GlobalOptions, per [][]T, rs []fleet.Result, kind, itemKind, cluster string,
	doc func(T) D, name func(D) string, write func(io.Writer, T) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var items []T
	var docs []D
	for _, p := range per {
		for _, it := range p {
			items = append(items, it)
			docs = append(docs, doc(it))
		}
	}
	list, err := documentList(docs, kind, itemKind, cluster, "", name)
	if err != nil {
		return err
	}
	if errs := fleetErrors(rs); len(errs) > 0 {
		list.Object["errors"] = errs
	}
	err = g.printDocument(g.Out, list, func(w io.Writer) error {
		for _, it := range items {
			if err := write(w, it); err != nil {
				return err
			}
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	reportTargetErrors(g, rs)
	return fleetFailure(rs)
}
