package commands

import (
	"context"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// History is the `history -o json|yaml` document.
type History struct {
	// Context is the kubeconfig context of the cluster (fleet mode only).
	Context   string               `json:"context,omitempty"`
	Cluster   string               `json:"cluster"`
	Namespace string               `json:"namespace"`
	Items     []lock.HistoryRecord `json:"items"`
	// Unfinished is the journal of an operation whose run has not recorded its end (running
	// now, or killed without a last write).
	Unfinished *ops.Journal `json:"unfinished,omitempty"`
}

// HistoryOptions holds `history` flags.
type HistoryOptions struct {
	*LockOptions
	fleet fleetFlags
	sel   clusterSelect
}

// NewHistoryOptions returns options bound to the shared flags.
func NewHistoryOptions(g *GlobalOptions, rf *RunFlags) *HistoryOptions {
	return &HistoryOptions{LockOptions: NewLockOptions(g, rf)}
}

// NewHistoryCmd builds `history CLUSTER`.
func NewHistoryCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewHistoryOptions(g, rf)
	cmd := &cobra.Command{
		Use:         "history CLUSTER",
		Annotations: documentAnnotations(),
		Short:       "Show the cluster's last operations: who, lock ID, command, start and end, outcome, steps done",
		Long: fmt.Sprintf(`Show the cluster's last %d operation runs, oldest first: who ran them (lock ID),
the command, when each started and ended, how it ended, how many steps were done and
why it failed. They are kept on the cluster's lock Lease, so they outlive Events
(which expire after an hour). A run killed without its last write shows as the
unfinished operation.

Over a fleet (--contexts, --context A,B or --fleet) each target's history is
printed under its context (-o json|yaml: a HistoryList whose items carry their
context, and "errors" for the targets that could not be read). Without CLUSTER,
-l selects the clusters of each target by their labels (-A: in every namespace).`, lock.MaxHistory),
		Example: `  kubectl dbops history mycrate
  kubectl dbops history mycrate -o json | jq '.items[-1]'

  # The last operation on every cluster labelled tier=db in the contexts prod-*
  kubectl dbops history --contexts 'prod-*' -A -l tier=db -o json | jq -r '.items[] | .context + " " + .cluster + " " + (.items[-1].outcome // "-")'`,
		Args:              optionalClusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              runOptions(o),
	}
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "Leave out the table's column headers (-o text)")
	o.fleet.addFlags(cmd, g)
	o.sel.addFlags(cmd)
	return cmd
}

// Complete fills in arguments.
func (o *HistoryOptions) Complete(_ *cobra.Command, args []string) error {
	o.Cluster = firstArg(args)
	return nil
}

// Validate checks flags without touching the API.
func (o *HistoryOptions) Validate() error {
	if err := o.LockOptions.Validate(); err != nil {
		return err
	}
	if err := o.fleet.validate(o.GlobalOptions); err != nil {
		return err
	}
	return o.sel.validate(o.GlobalOptions, &o.fleet, o.Cluster)
}

// Run prints the history.
func (o *HistoryOptions) Run(cmd *cobra.Command) error {
	ctx := commandContext(cmd)
	if o.fleet.active(o.GlobalOptions) {
		return o.runFleet(ctx)
	}
	h, err := o.collect(ctx)
	if err != nil {
		return err
	}
	doc, err := document(h, "History", h.Cluster, h.Namespace)
	if err != nil {
		return err
	}
	return o.printDocument(o.Out, doc, func(w io.Writer) error { return writeHistoryText(w, h, o.NoHeaders) })
}

// collect reads the cluster's history from its lock.
func (o *HistoryOptions) collect(ctx context.Context) (*History, error) {
	m, err := o.manager(ctx)
	if err != nil {
		return nil, err
	}
	items, unfinished, err := m.History(ctx)
	if err != nil {
		return nil, err
	}
	return &History{Cluster: m.Cluster, Namespace: m.Namespace, Items: items, Unfinished: unfinished}, nil
}

// runFleet prints the history of every cluster of the fleet's targets, --max-parallel targets
// at once: text, each under a Context: line; -o json|yaml, a HistoryList whose items carry their
// context. A target that cannot be read is named on its own ERROR line (and in "errors"); the
// exit code is the worst target's.
func (o *HistoryOptions) runFleet(ctx context.Context) error {
	ts, err := o.sel.targets(o.GlobalOptions, &o.fleet, o.Cluster)
	if err != nil {
		return err
	}
	per := make([][]*History, len(ts))
	var mu sync.Mutex
	rs := runFleetClusterReads(ctx, o.GlobalOptions, &o.fleet, ts, o.sel.sel, func(ctx context.Context, i int, cg *GlobalOptions, ct fleet.Target) error {
		lo := *o.LockOptions
		lo.GlobalOptions, lo.Cluster = cg, ct.Cluster
		h, err := (&HistoryOptions{LockOptions: &lo}).collect(ctx)
		if err != nil {
			return err
		}
		h.Context = ct.Context
		mu.Lock()
		per[i] = append(per[i], h)
		mu.Unlock()
		return nil
	})
	return printFleetItems(ctx, o.GlobalOptions, per, rs, "HistoryList", "History", o.Cluster,
		func(h *History) *History { return h }, func(h *History) string { return h.Cluster },
		func(w io.Writer, h *History) error {
			if _, err := ops.Fprintf(w, "Context:  %s\nCluster:  %s/%s\n", h.Context, h.Namespace, h.Cluster); err != nil {
				return err
			}
			return writeHistoryText(w, h, o.NoHeaders)
		})
}

// writeHistoryText prints one cluster's history as a table.
func writeHistoryText(w io.Writer, h *History, noHeaders bool) error {
	items, unfinished := h.Items, h.Unfinished
	{
		if len(items) == 0 && unfinished == nil {
			_, err := ops.Fprintf(w, "no operations recorded on %s/%s\n", h.Namespace, h.Cluster)
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		if !noHeaders {
			fmt.Fprintln(tw, "#\tSTARTED\tDURATION\tLOCK ID\tOPERATION\tOUTCOME\tSTEPS\tERROR")
		}
		for i, r := range items {
			ops.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", i+1, r.Started.UTC().Format(time.RFC3339),
				r.Ended.Sub(r.Started).Round(time.Second), r.LockID, dash(joinNonEmpty(r.Operation, r.Args)), r.Outcome,
				r.StepsDone, r.Steps, dash(r.Error))
		}
		if j := unfinished; j != nil {
			started := j.RunStarted
			if started.IsZero() {
				started = j.Started
			}
			ops.Fprintf(tw, "-\t%s\t-\t%s\t%s\t%s\t%d/%d\t%s\n", started.UTC().Format(time.RFC3339), j.Holder,
				dash(joinNonEmpty(j.Operation, j.Args)), "unfinished (running, or killed)", len(j.Done), j.Steps, dash(j.Error))
		}
		return tw.Flush()
	}
}

func joinNonEmpty(a, b string) string {
	if b == "" {
		return a
	}
	return a + " " + b
}
