package commands

import (
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
func NewDenyCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deny",
		Short: "Keep a lock ID from taking a cluster's lock (deny list)",
		Long: `A denied lock ID can never take the cluster lock, even while it holds it, and
anyone else may take over a lock held by a denied ID. Use it to stop a runaway
pipeline or a colleague's stuck session. Who denied or allowed, when and why is
recorded on the lock object.`,
		Example: `  # Stop a runaway pipeline: its running command stops before its next change
  kubectl dbops deny add mycrate ci-bot@api.example:6443 --reason "runaway pipeline"
  kubectl dbops deny list mycrate
  kubectl dbops deny allow mycrate ci-bot@api.example:6443 --reason "pipeline fixed"`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE("add, allow, list"),
	}
	cmd.AddCommand(newDenyAddCmd(g, rf), newDenyAllowCmd(g, rf), newDenyListCmd(g, rf))
	return cmd
}

// DenyOptions holds `deny add` and `deny allow` flags: the same command for both actions.
type DenyOptions struct {
	*LockOptions
	// Action is deny or allow.
	Action string
	// Target is the lock ID to deny or allow; the lock manager acts as the caller.
	Target string
	// OperatorInstance is a FoundationDB operator instance to deny or allow in the
	// FoundationDBCluster's spec.lockOptions.denyList instead of a lock ID.
	OperatorInstance string
}

// NewDenyOptions returns options for action (deny or allow) bound to the shared flags.
func NewDenyOptions(g *GlobalOptions, rf *RunFlags, action string) *DenyOptions {
	return &DenyOptions{LockOptions: NewLockOptions(g, rf), Action: action}
}

func newDenyAddCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewDenyOptions(g, rf, "deny")
	cmd := &cobra.Command{
		Use:         "add CLUSTER ID [--reason R] | add CLUSTER --operator-instance ID | add ID -l SELECTOR (fleet)",
		Annotations: documentAnnotations(),
		Short:       "Deny a lock ID",
		Example: `  kubectl dbops deny add mycrate ci-bot@api.example:6443 --reason "runaway pipeline"
  # FoundationDB: keep the operator instance dc2 from taking the operator's lock
  kubectl dbops deny add myfdb --operator-instance dc2
  # Fleet: stop a runaway pipeline on orders in every context named prod-*
  kubectl dbops deny add orders ci-bot@api.example:6443 --contexts 'prod-*' -n db --reason "runaway pipeline" --yes
  # Fleet, no CLUSTER: on every cluster labelled tier=db in every namespace of the contexts prod-*
  kubectl dbops deny add ci-bot@api.example:6443 --contexts 'prod-*' -A -l tier=db --reason "runaway pipeline" --yes`,
		Args: rangeArgs(0, 2, "CLUSTER and ID (or CLUSTER with --operator-instance)"),
		ValidArgsFunction: o.completeUnlessSelecting(func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return completeClusters(g)(cmd, args, toComplete)
			}
			if len(args) > 1 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeHolder(g, rf)(cmd, args, toComplete)
		}),
		RunE: runOptions(o),
	}
	cmd.Flags().StringVar(&o.Reason, "reason", "", "Why the ID is denied (recorded)")
	cmd.Flags().StringVar(&o.OperatorInstance, "operator-instance", "", "FoundationDB: deny this operator instance in the FoundationDBCluster's spec.lockOptions.denyList instead of a lock ID")
	o.addWriteFleetFlags(cmd, g)
	return cmd
}

func newDenyAllowCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewDenyOptions(g, rf, "allow")
	cmd := &cobra.Command{
		Use:         "allow CLUSTER ID [--reason R] | allow CLUSTER --operator-instance ID | allow ID -l SELECTOR (fleet)",
		Annotations: documentAnnotations(),
		Short:       "Remove a lock ID from the deny list",
		Example: `  kubectl dbops deny allow mycrate ci-bot@api.example:6443 --reason "pipeline fixed"
  kubectl dbops deny allow myfdb --operator-instance dc2
  # Fleet, no CLUSTER: on every cluster labelled tier=db of the contexts prod-*
  kubectl dbops deny allow ci-bot@api.example:6443 --contexts 'prod-*' -l tier=db --reason "pipeline fixed" --yes`,
		Args:              rangeArgs(0, 2, "CLUSTER and ID (or CLUSTER with --operator-instance)"),
		ValidArgsFunction: o.completeUnlessSelecting(completeDenied(g, rf)),
		RunE:              runOptions(o),
	}
	cmd.Flags().StringVar(&o.Reason, "reason", "", "Why the ID is allowed again (recorded)")
	cmd.Flags().StringVar(&o.OperatorInstance, "operator-instance", "", "FoundationDB: allow this operator instance ({id, allow: true} in spec.lockOptions.denyList; entries are never removed)")
	o.addWriteFleetFlags(cmd, g)
	return cmd
}

// completeUnlessSelecting is complete, except over a fleet with -l: there the first argument
// is the ID (Complete below), not a cluster, and IDs are not offered (whose lock or deny list
// would they come from, of all the selected clusters?).
func (o *DenyOptions) completeUnlessSelecting(complete func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if o.fleet.active(o.GlobalOptions) && o.Selector != "" {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return complete(cmd, args, toComplete)
	}
}

// Complete fills in arguments: CLUSTER and ID, or CLUSTER with --operator-instance; over a
// fleet with -l the clusters may be selected instead of named (lock_fleet.go), leaving ID
// alone (or nothing, with --operator-instance).
func (o *DenyOptions) Complete(cmd *cobra.Command, args []string) error {
	instance := o.OperatorInstance != "" || cmd.Flags().Changed("operator-instance")
	// Without a CLUSTER: a fleet whose clusters -l selects (clusterSelect.validate checks the rest).
	selecting := o.fleet.active(o.GlobalOptions) && o.Selector != ""
	want := 2
	if instance {
		want = 1
	}
	if selecting && len(args) == want-1 {
		args = append([]string{""}, args...)
	}
	if len(args) < want || len(args) > 2 {
		return ops.Usagef("%s expects CLUSTER and ID (or CLUSTER with --operator-instance; over a fleet, ID with -l SELECTOR selecting the clusters): usage: %s", cmd.CommandPath(), cmd.UseLine())
	}
	o.Cluster, o.Target = args[0], ""
	if len(args) > 1 {
		o.Target = strings.TrimSpace(args[1])
	}
	return nil
}

// Validate checks the ID and the flags without touching the API.
func (o *DenyOptions) Validate() error {
	switch {
	case o.OperatorInstance != "" && o.Target != "":
		return ops.Usagef("give a lock ID or --operator-instance, not both")
	case o.OperatorInstance == "" && o.Target == "":
		return ops.Usagef("ID must not be empty")
	case o.OperatorInstance != "" && strings.TrimSpace(o.OperatorInstance) != o.OperatorInstance:
		return ops.Usagef("--operator-instance %q: must not have surrounding spaces", o.OperatorInstance)
	}
	return o.LockOptions.Validate()
}

// Run denies or allows the ID, or says what it would do (--dry-run).
func (o *DenyOptions) Run(cmd *cobra.Command) error {
	if o.fleet.active(o.GlobalOptions) {
		what := o.Target
		if o.OperatorInstance != "" {
			what = "operator instance " + o.OperatorInstance
		}
		verb := o.Action + " " + what + " on"
		return o.runFleet(cmd, &fleetWrite{verb, titleCase(verb)}, func(lo *LockOptions) error {
			d := *o
			d.LockOptions = lo
			return d.Run(cmd)
		})
	}
	ctx := commandContext(cmd)
	if o.OperatorInstance != "" {
		return o.runOperatorInstance(ctx)
	}
	m, err := o.manager(ctx)
	if err != nil {
		return err
	}
	action, target := o.Action, o.Target
	verb := map[string]string{"deny": "denied", "allow": "allowed"}[action]
	print := func(a DenyAction, text func(io.Writer) error) error {
		doc, err := document(a, "DenyAction", m.Cluster, m.Namespace)
		if err != nil {
			return err
		}
		return o.printDocument(o.Out, doc, text)
	}
	if o.RunFlags.DryRun {
		return print(DenyAction{Action: action, ID: target, By: m.ID, Reason: o.Reason, DryRun: true}, func(w io.Writer) error {
			_, err := ops.Fprintf(w, "would %s %s on %s/%s\n", action, target, m.Namespace, m.Cluster)
			return err
		})
	}
	// The deny list lives on the cluster's Lease: a caller who may create it but not update it
	// would leave a new Lease behind (or fail on an existing one); refuse before writing.
	var needs []ops.NeedFor
	for _, p := range ops.LockNeeds {
		needs = append(needs, ops.NeedFor{Permission: p, For: "the deny list on the cluster lock"})
	}
	if err := ops.CheckPermissions(ctx, o.clients.access(), m.Namespace, needs); err != nil {
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
	msg := fmt.Sprintf("lock ID %s %s by %s", target, verb, m.ID)
	if o.Reason != "" {
		msg += ": " + o.Reason
	}
	o.recordLockEvent(ctx, m, "DbopsLockID"+titleCase(verb), action == "deny", msg)
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
	// OperatorInstance: ID is a FoundationDB operator instance in the FoundationDBCluster's
	// deny list, not a lock ID; Changed is false when the entry already said so.
	OperatorInstance bool  `json:"operatorInstance,omitempty"`
	Changed          *bool `json:"changed,omitempty"`
}

// DenyListOptions holds `deny list` flags.
type DenyListOptions struct{ *LockOptions }

// NewDenyListOptions returns options bound to the shared flags.
func NewDenyListOptions(g *GlobalOptions, rf *RunFlags) *DenyListOptions {
	return &DenyListOptions{LockOptions: NewLockOptions(g, rf)}
}

func newDenyListCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewDenyListOptions(g, rf)
	cmd := &cobra.Command{
		Use:               "list CLUSTER",
		Annotations:       documentAnnotations(),
		Short:             "List denied lock IDs with who denied them, when and why",
		Example:           "  kubectl dbops deny list mycrate -o yaml\n\n  # Fleet, no CLUSTER: the deny lists of the clusters labelled tier=db in every namespace\n  kubectl dbops deny list --contexts 'prod-*' -A -l tier=db",
		Args:              optionalClusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              runOptions(o),
	}
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "Leave out the table's column headers (-o text)")
	o.addReadFleetFlags(cmd, g)
	return cmd
}

// Complete fills in arguments.
func (o *DenyListOptions) Complete(_ *cobra.Command, args []string) error {
	o.Cluster = firstArg(args)
	return nil
}

// Run reads and prints the deny list.
func (o *DenyListOptions) Run(cmd *cobra.Command) error {
	if o.fleet.active(o.GlobalOptions) {
		return o.runFleet(cmd, nil, func(lo *LockOptions) error { return (&DenyListOptions{lo}).Run(cmd) })
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
	fdb := o.readOperatorLocks(ctx)
	fdb.addTo(doc.Object)
	return o.printDocument(o.Out, doc, func(w io.Writer) error {
		if fdb != nil {
			defer fdb.writeText(w)
		}
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
}
