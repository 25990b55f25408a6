package commands

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// NewDenyCmd builds `deny add|allow|list`.
func NewDenyCmd(g *GlobalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deny",
		Short: "Keep a lock ID from taking a cluster's lock (deny list)",
		Long: `A denied lock ID can never take the cluster lock, even while it holds it, and
anyone else may take over a lock held by a denied ID. Use it to stop a runaway
pipeline or a colleague's stuck session. Who denied or allowed, when and why is
recorded on the lock object.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return ops.Usagef("unknown %s subcommand %q; allowed: %s", cmd.Name(), args[0], "add, allow, list")
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(newDenyAddCmd(g), newDenyAllowCmd(g), newDenyListCmd(g))
	return cmd
}

func newDenyAddCmd(g *GlobalOptions) *cobra.Command {
	o := NewLockOptions(g)
	cmd := &cobra.Command{
		Use:               "add CLUSTER ID [--reason R]",
		Short:             "Deny a lock ID",
		Example:           `  kubectl dbops deny add mycrate ci-bot@api.example:6443 --reason "runaway pipeline"`,
		Args:              rangeArgs(2, 2, "CLUSTER and ID"),
		ValidArgsFunction: completeClusters(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.denyOrAllow(commandContext(cmd), args, "deny")
		},
	}
	cmd.Flags().StringVar(&o.Reason, "reason", "", "Why the ID is denied (recorded)")
	return cmd
}

func newDenyAllowCmd(g *GlobalOptions) *cobra.Command {
	o := NewLockOptions(g)
	cmd := &cobra.Command{
		Use:               "allow CLUSTER ID [--reason R]",
		Short:             "Remove a lock ID from the deny list",
		Example:           `  kubectl dbops deny allow mycrate ci-bot@api.example:6443 --reason "pipeline fixed"`,
		Args:              rangeArgs(2, 2, "CLUSTER and ID"),
		ValidArgsFunction: completeClusters(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.denyOrAllow(commandContext(cmd), args, "allow")
		},
	}
	cmd.Flags().StringVar(&o.Reason, "reason", "", "Why the ID is allowed again (recorded)")
	return cmd
}

func (o *LockOptions) denyOrAllow(ctx context.Context, args []string, action string) error {
	o.Cluster, o.ID = args[0], strings.TrimSpace(args[1])
	if o.ID == "" {
		return ops.Usagef("ID must not be empty")
	}
	if err := o.Validate(); err != nil {
		return err
	}
	target := o.ID
	// The manager acts as the caller, not as the ID being denied.
	o.ID = ""
	m, err := o.manager(ctx)
	if err != nil {
		return err
	}
	if o.DryRun {
		_, err := ops.Fprintf(o.Out, "would %s %s on %s/%s\n", action, target, m.Namespace, m.Cluster)
		return err
	}
	if action == "deny" {
		err = m.Deny(ctx, target, o.Reason)
	} else {
		err = m.Allow(ctx, target, o.Reason)
	}
	if err != nil {
		return err
	}
	verb := map[string]string{"deny": "denied", "allow": "allowed"}[action]
	_, err = ops.Fprintf(o.Out, "%s %s on %s/%s (by %s)\n", target, verb, m.Namespace, m.Cluster, m.ID)
	return err
}

func newDenyListCmd(g *GlobalOptions) *cobra.Command {
	o := NewLockOptions(g)
	return &cobra.Command{
		Use:               "list CLUSTER",
		Short:             "List denied lock IDs with who denied them, when and why",
		Example:           "  kubectl dbops deny list mycrate -o yaml",
		Args:              clusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Cluster = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			ctx := commandContext(cmd)
			m, err := o.manager(ctx)
			if err != nil {
				return err
			}
			list, err := m.DenyList(ctx)
			if err != nil {
				return err
			}
			if o.Output != "text" {
				return writeStructured(o.Out, list, o.Output)
			}
			if len(list) == 0 {
				_, err := ops.Fprintf(o.Out, "no denied IDs on %s/%s\n", m.Namespace, m.Cluster)
				return err
			}
			tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tDENIED BY\tAT\tREASON")
			for _, d := range list {
				ops.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.ID, d.By, d.At.UTC().Format(time.RFC3339), dash(d.Reason))
			}
			return tw.Flush()
		},
	}
}
