package commands

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// History is the `history -o json|yaml` document.
type History struct {
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
unfinished operation.`, lock.MaxHistory),
		Example: `  kubectl dbops history mycrate
  kubectl dbops history mycrate -o json | jq '.items[-1]'`,
		Args:              clusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              runOptions(o),
	}
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "Leave out the table's column headers (-o text)")
	return cmd
}

// Complete fills in arguments.
func (o *HistoryOptions) Complete(_ *cobra.Command, args []string) error {
	o.Cluster = args[0]
	return nil
}

// Run prints the history.
func (o *HistoryOptions) Run(cmd *cobra.Command) error {
	ctx := commandContext(cmd)
	m, err := o.manager(ctx)
	if err != nil {
		return err
	}
	items, unfinished, err := m.History(ctx)
	if err != nil {
		return err
	}
	h := History{Cluster: m.Cluster, Namespace: m.Namespace, Items: items, Unfinished: unfinished}
	doc, err := document(h, "History", m.Cluster, m.Namespace)
	if err != nil {
		return err
	}
	return o.printDocument(o.Out, doc, func(w io.Writer) error {
		if len(items) == 0 && unfinished == nil {
			_, err := ops.Fprintf(w, "no operations recorded on %s/%s\n", m.Namespace, m.Cluster)
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		if !o.NoHeaders {
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
	})
}

func joinNonEmpty(a, b string) string {
	if b == "" {
		return a
	}
	return a + " " + b
}
