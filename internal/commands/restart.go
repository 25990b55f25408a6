package commands

import (
	"time"

	"context"

	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// RestartOptions holds `restart` flags.
type RestartOptions struct {
	// Runner runs the operation (plan, dry-run, confirm, lock, execute) with the shared
	// run flags.
	*Runner
	// g are the shared flags that pick the cluster (Runner.Clusters) and the engines' flags.
	g       *GlobalOptions
	Cluster string
	Rolling bool
	Groups  []string
	// Mode is pod, zone or all (--mode).
	Mode string
	// Method is how each pod restarts (--method): pod (delete) or, for FoundationDB,
	// process (bounce its processes); empty: the engine's default.
	Method string
	// MaxUnavailableZones is --max-unavailable-zones; zonesGiven says it
	// was on the command line (0 is a meaningful value).
	MaxUnavailableZones int
	zonesGiven          bool
	// groupGiven records --group on the command line: pflag turns
	// --group "" into an empty list, which must not mean "all groups".
	groupGiven bool
	// fleet selects and paces a fleet of targets (runFleet).
	fleet fleetMutationFlags
	// sel is -l without CLUSTER (and -A) over a fleet: the clusters restarted (fleet_select.go).
	sel clusterSelect
	// targetRequest is a fleet target's request, built before its run (cobra's flag sets
	// are not safe to read from parallel targets); nil: built from the command.
	targetRequest *ops.Request
}

// NewRestartOptions returns options bound to the shared flags.
func NewRestartOptions(g *GlobalOptions, rf *RunFlags) *RestartOptions {
	return &RestartOptions{Runner: NewRunner(g.Factory, rf, g), g: g}
}

// NewRestartCmd builds `restart CLUSTER --rolling`.
func NewRestartCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewRestartOptions(g, rf)
	cmd := &cobra.Command{
		Use:   "restart CLUSTER --rolling [--mode pod|zone|all] [--group NAME]...",
		Short: "Restart a cluster's pods one at a time (or a zone at a time), waiting for each to be back",
		Long: `Restart every pod of the cluster one at a time: node groups in order (masters
first), pods by ordinal. Each pod is deleted, and the next is touched only once
the same name is back with a new UID and Ready (and the engine's health gates
pass). Pods already restarted by an interrupted run are not restarted again.

--mode zone restarts all pods of one zone (topology.kubernetes.io/zone of the
pod's node) together, zones in name order; --mode all deletes every pod at
once (the cluster is down until they are back). The engine's gates run for
each pod of a batch before it is deleted and after the whole batch is back.
--max-unavailable-zones K makes each batch wait, watching pods, until at most
K zones other than its own have unavailable pods, instead of refusing.

Bounded by --timeout, else 4 h.`,
		Example: `  # See the plan without changing anything
  kubectl dbops restart mycrate --rolling --dry-run

  # One zone at a time, never while another zone has pods down
  kubectl dbops restart mycrate --rolling --mode zone --max-unavailable-zones 0 --yes

  # Restart only the "hot" data group, no prompt (CI)
  kubectl dbops restart mycrate --rolling --group hot --yes

  # Canary: restart one pod and stop (exit 7), check, then continue one pod a minute
  kubectl dbops restart mycrate --rolling --pause-after 1 --yes
  kubectl dbops restart mycrate --rolling --pause-between 1m --yes

  # Fleet: the cluster orders in every context named prod-*, the first alone as a canary,
  # then two at a time; a failure stops the rest
  kubectl dbops restart orders --rolling --contexts 'prod-*' -n db --canary 1 --max-parallel 2 --yes

  # Fleet, no CLUSTER: every cluster labelled tier=db in every namespace of the contexts prod-*
  kubectl dbops restart --rolling --contexts 'prod-*' -A -l tier=db --dry-run

  # Fleet file without a CLUSTER argument: the clusters (of any engine) it names per context
  kubectl dbops restart --rolling --fleet fleet.yaml --canary 1 --max-parallel 2 --yes`,
		Args:              optionalClusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              o.Runner.runE(o),
	}
	cmd.Flags().BoolVar(&o.Rolling, "rolling", false, "Restart pods batch by batch, waiting for each batch to be back (required)")
	cmd.Flags().StringSliceVar(&o.Groups, "group", nil, "Limit to these node groups (repeatable or comma separated)")
	cmd.Flags().StringVar(&o.Mode, "mode", ops.ModePod, "How many pods at once: "+strings.Join(ops.RestartModes, "|"))
	cmd.Flags().StringVar(&o.Method, "method", "", "How each pod restarts: pod (delete it) or, for FoundationDB, process (bounce its fdbserver processes with fdbcli kill; the default there)")
	cmd.Flags().IntVar(&o.MaxUnavailableZones, "max-unavailable-zones", 0, "Before each batch, wait until at most K other zones have unavailable pods (default: refuse if any other pod is not Ready)")
	cmd.Flags().DurationVar(&o.Pacing.Between, "pause-between", 0, "Wait this long between pods (batches) for a human or a check to look at the cluster")
	cmd.Flags().IntVar(&o.Pacing.After, "pause-after", 0, "Stop cleanly (exit 7) after restarting N pods (batches) in this run; re-run the same command to continue")
	_ = cmd.RegisterFlagCompletionFunc("mode", cobra.FixedCompletions(ops.RestartModes, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("group", completeGroups(g))
	o.fleet.addFlags(cmd, g)
	o.sel.addFlags(cmd)
	g.addEngineFlags("restart", cmd.Flags())
	return cmd
}

// Complete fills in arguments.
func (o *RestartOptions) Complete(cmd *cobra.Command, args []string) error {
	o.Cluster = firstArg(args)
	o.groupGiven = cmd.Flags().Changed("group")
	o.zonesGiven = cmd.Flags().Changed("max-unavailable-zones")
	return nil
}

// Validate checks flags without touching the API.
func (o *RestartOptions) Validate() error {
	if !o.Rolling {
		return ops.Usagef("restart needs --rolling (pods go batch by batch: --mode pod, zone or all)")
	}
	if o.groupGiven && len(o.Groups) == 0 {
		return ops.Usagef("--group must name a node group, got an empty value")
	}
	for _, gr := range o.Groups {
		if strings.TrimSpace(gr) == "" {
			return ops.Usagef("--group must name a node group, got an empty value")
		}
	}
	if o.Pacing.Between < 0 {
		return ops.Usagef("--pause-between must not be negative (got %s)", o.Pacing.Between)
	}
	if o.Pacing.After < 0 {
		return ops.Usagef("--pause-after must be 0 (no pause) or more, got %d", o.Pacing.After)
	}
	if o.Method != "" && o.Method != ops.MethodPod && o.Method != "process" {
		return ops.Usagef("unknown --method %q; allowed: pod, process", o.Method)
	}
	if !slices.Contains(ops.RestartModes, o.Mode) {
		return ops.Usagef("unknown --mode %q; allowed: %s", o.Mode, strings.Join(ops.RestartModes, ", "))
	}
	if err := o.fleet.validate(o.g); err != nil {
		return err
	}
	if err := o.sel.validate(o.g, &o.fleet.fleetFlags, o.Cluster); err != nil {
		return err
	}
	if o.zonesGiven {
		if o.MaxUnavailableZones < 0 {
			return ops.Usagef("--max-unavailable-zones must be 0 or more, got %d", o.MaxUnavailableZones)
		}
		if o.Mode == ops.ModeAll {
			return ops.Usagef("--max-unavailable-zones does not apply to --mode all (every pod goes at once)")
		}
	}
	return nil
}

// restartOptions is the engine-facing form of the flags.
func (o *RestartOptions) restartOptions() ops.RestartOptions {
	ro := ops.RestartOptions{Groups: o.Groups, Mode: o.Mode, Method: o.Method}
	if o.zonesGiven {
		k := o.MaxUnavailableZones
		ro.MaxUnavailableZones = &k
	}
	return ro
}

// defaultRollingRestartTimeout bounds a whole rolling restart: a large
// CrateDB cluster restarts a node at a time with health gates of minutes
// each, and the CrateDB operator allows 4 hours.
const defaultRollingRestartTimeout = 4 * time.Hour

// Run discovers, plans and executes the restart.
func (o *RestartOptions) Run(cmd *cobra.Command) error {
	if o.fleet.active(o.g) {
		return o.runFleet(cmd)
	}
	req := o.targetRequest
	if req == nil {
		req = o.g.request(cmd, o.Cluster)
	}
	return o.runOperation(commandContext(cmd), operation{req: req, defaultTimeout: defaultRollingRestartTimeout,
		plan: func(ctx context.Context, _ *Clients, c *ops.Cluster, eng ops.Engine, _ *ops.Request) (*ops.Plan, error) {
			return eng.PlanRestart(ctx, c, o.restartOptions())
		}})
}
