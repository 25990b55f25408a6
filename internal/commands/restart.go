package commands

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// RestartOptions holds `restart` flags.
type RestartOptions struct {
	*GlobalOptions
	Cluster string
	Rolling bool
	Groups  []string
	// groupGiven records --group on the command line: pflag turns
	// --group "" into an empty list, which must not mean "all groups".
	groupGiven bool
}

// NewRestartOptions returns options bound to the shared flags.
func NewRestartOptions(g *GlobalOptions) *RestartOptions {
	return &RestartOptions{GlobalOptions: g}
}

// NewRestartCmd builds `restart CLUSTER --rolling`.
func NewRestartCmd(g *GlobalOptions) *cobra.Command {
	o := NewRestartOptions(g)
	cmd := &cobra.Command{
		Use:   "restart CLUSTER --rolling [--group NAME]...",
		Short: "Restart a cluster's pods one at a time, waiting for each to be back",
		Long: `Restart every pod of the cluster one at a time: node groups in order (masters
first), pods by ordinal. Each pod is deleted, and the next is touched only once
the same name is back with a new UID and Ready (and the engine's health gates
pass). Pods already restarted by an interrupted run are not restarted again.`,
		Example: `  # See the plan without changing anything
  kubectl dbops restart mycrate --rolling --dry-run

  # Restart only the "hot" data group, no prompt (CI)
  kubectl dbops restart mycrate --rolling --group hot --yes`,
		Args:              clusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.groupGiven = cmd.Flags().Changed("group")
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd)
		},
	}
	cmd.Flags().BoolVar(&o.Rolling, "rolling", false, "Restart pods one at a time (required)")
	cmd.Flags().StringSliceVar(&o.Groups, "group", nil, "Limit to these node groups (repeatable or comma separated)")
	_ = cmd.RegisterFlagCompletionFunc("group", completeGroups(g))
	g.CrateDB.AddHealthFlags(cmd.Flags())
	g.CrateDB.AddConnFlags(cmd.Flags())
	return cmd
}

// Complete fills in arguments.
func (o *RestartOptions) Complete(args []string) error {
	o.Cluster = args[0]
	return nil
}

// Validate checks flags without touching the API.
func (o *RestartOptions) Validate() error {
	if err := o.GlobalOptions.Validate(); err != nil {
		return err
	}
	if !o.Rolling {
		return ops.Usagef("restart needs --rolling (the only restart mode: one pod at a time)")
	}
	if err := o.CrateDB.Validate(); err != nil {
		return err
	}
	if o.groupGiven && len(o.Groups) == 0 {
		return ops.Usagef("--group must name a node group, got an empty value")
	}
	for _, gr := range o.Groups {
		if strings.TrimSpace(gr) == "" {
			return ops.Usagef("--group must name a node group, got an empty value")
		}
	}
	return nil
}

// Run discovers, plans and executes the restart.
func (o *RestartOptions) Run(cmd *cobra.Command) error {
	ctx := commandContext(cmd)
	cl, c, err := o.discover(ctx, o.Cluster, true)
	if err != nil {
		return err
	}
	eng, err := o.engine(cl, c)
	if err != nil {
		return err
	}
	defer closeEngine(ctx, eng)
	timeout, err := o.timeoutOr("", defaultRestartTimeout)
	if err != nil {
		return err
	}
	plan, err := eng.PlanRestart(ctx, c, ops.RestartOptions{Groups: o.Groups, Command: commandLine(cmd, o.Cluster)})
	if err != nil {
		return err
	}
	return o.execute(ctx, cl, c, plan, timeout)
}
