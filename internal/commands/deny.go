package commands

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
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
		Use:         "add CLUSTER ID [--reason R]",
		Annotations: documentAnnotations(),
		Short:       "Deny a lock ID",
		Example:     `  kubectl dbops deny add mycrate ci-bot@api.example:6443 --reason "runaway pipeline"`,
		Args:        rangeArgs(2, 2, "CLUSTER and ID"),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return completeClusters(g)(cmd, args, toComplete)
			}
			if len(args) > 1 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeHolder(g)(cmd, args, toComplete)
		},
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
		Annotations:       documentAnnotations(),
		Short:             "Remove a lock ID from the deny list",
		Example:           `  kubectl dbops deny allow mycrate ci-bot@api.example:6443 --reason "pipeline fixed"`,
		Args:              rangeArgs(2, 2, "CLUSTER and ID"),
		ValidArgsFunction: completeDenied(g),
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
	verb := map[string]string{"deny": "denied", "allow": "allowed"}[action]
	print := func(a DenyAction, text func(io.Writer) error) error {
		doc, err := document(a, "DenyAction", m.Cluster, m.Namespace)
		if err != nil {
			return err
		}
		return o.printDocument(o.Out, doc, text)
	}
	if o.DryRun {
		return print(DenyAction{Action: action, ID: target, By: m.ID, Reason: o.Reason, DryRun: true}, func(w io.Writer) error {
			_, err := ops.Fprintf(w, "would %s %s on %s/%s\n", action, target, m.Namespace, m.Cluster)
			return err
		})
	}
	if action == "deny" {
		err = m.Deny(ctx, target, o.Reason)
	} else {
		err = m.Allow(ctx, target, o.Reason)
	}
	if err != nil {
		return err
	}
	return print(DenyAction{Action: verb, ID: target, By: m.ID, Reason: o.Reason}, func(w io.Writer) error {
		_, err := ops.Fprintf(w, "%s %s on %s/%s (by %s)\n", target, verb, m.Namespace, m.Cluster, m.ID)
		return err
	})
}

// DenyAction is the `deny add|allow -o json|yaml` document.
type DenyAction struct {
	// Action is denied or allowed; with DryRun (nothing changed) deny or allow.
	Action string `json:"action"`
	ID     string `json:"id"`
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
	DryRun bool   `json:"dryRun,omitempty"`
}

func newDenyListCmd(g *GlobalOptions) *cobra.Command {
	o := NewLockOptions(g)
	cmd := &cobra.Command{
		Use:               "list CLUSTER",
		Annotations:       documentAnnotations(),
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
			doc, err := documentList(list, "DenyList", "DeniedID", m.Cluster, m.Namespace, func(d lock.DenyEntry) string { return d.ID })
			if err != nil {
				return err
			}
			return o.printDocument(o.Out, doc, func(w io.Writer) error {
				if len(list) == 0 {
					_, err := ops.Fprintf(w, "no denied IDs on %s/%s\n", m.Namespace, m.Cluster)
					return err
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				if !o.NoHeaders {
					fmt.Fprintln(tw, "ID\tDENIED BY\tAT\tREASON")
				}
				for _, d := range list {
					ops.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.ID, d.By, d.At.UTC().Format(time.RFC3339), dash(d.Reason))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "Leave out the table's column headers (-o text)")
	return cmd
}
