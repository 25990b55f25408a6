package commands

import (
	"context"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// ScaleOptions holds `scale` flags.
type ScaleOptions struct {
	// Runner runs the operation (plan, dry-run, confirm, lock, execute) with the shared
	// run flags.
	*Runner
	// g are the shared flags that pick the cluster (Runner.Clusters) and the engines' flags.
	g        *GlobalOptions
	Cluster  string
	Masters  int32
	Data     []string
	Replicas int32

	mastersGiven  bool
	replicasGiven bool
	data          map[string]int32

	// fleet selects and paces a fleet of targets (runFleet, scale_fleet.go).
	fleet fleetMutationFlags
	// sel is -l without CLUSTER (and -A) over a fleet: the clusters scaled (fleet_select.go).
	sel clusterSelect
	// targetRequest is a fleet target's request (as RestartOptions'); nil: from the command.
	targetRequest *ops.Request
}

// NewScaleOptions returns options bound to the shared flags.
func NewScaleOptions(g *GlobalOptions, rf *RunFlags) *ScaleOptions {
	return &ScaleOptions{Runner: NewRunner(g.Factory, rf, g), g: g}
}

// NewScaleCmd builds `scale CLUSTER`.
func NewScaleCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewScaleOptions(g, rf)
	cmd := &cobra.Command{
		Use:   "scale CLUSTER [--master N] [--data GROUP=N]... | --replicas N [--primaries P] | --processes CLASS=N[,CLASS=N]",
		Short: "Change node group sizes safely: masters first, grow, then drain and shrink",
		Long: `Scale node groups. For CrateDB: masters first (an odd number, at least 3),
then every data group that grows (waiting for the new nodes to join), then
every data group that shrinks: only when the cluster is green, every node is
in, and the tables' replicas fit on the nodes that remain; their shards are
moved off by an allocation exclusion before the pods are removed. The nodes
of those pods are read from sys.nodes (name, hostname, IP, cross-checked with
-Cnode.name); a pod whose node cannot be told refuses the run before anything
is written. Finally the expected-nodes and recover-after (quorum N/2+1)
arguments of every StatefulSet follow the new totals (setting names by the
running version), the exclusions this run added are removed and both node
checks are acknowledged. A StatefulSet not using updateStrategy OnDelete is
refused unless --allow-rolling-update is given.

For etcd (--replicas N): one member per step. Growing adds the new member as
a learner, records the initial cluster, adds the pod and promotes it once it
is in sync; shrinking removes the highest ordinal first, only when every
remaining member is healthy and quorum holds after the removal, and deletes
the removed pod's PVC so its data is never reused.

For replicated applications (--replicas N and/or --primaries P): the roles of
pods the scale-down removes are stopped first, the StatefulSet is resized and
its pods awaited, then extra primaries are stopped (lowest sequence number,
then highest ordinal, first), missing primaries started on the highest
sequence numbers and, when a secondary command is configured, every other pod
started as a secondary. P defaults to the configuration (DBOPS_PRIMARIES,
the config file's replicated.primaries, the StatefulSet annotation
dbops.io/replicated-config), else 1.

For FoundationDB (--processes CLASS=N[,CLASS=N]): spec.processCounts of the
FoundationDBCluster is patched once, with the resourceVersion it was planned
from (a class someone else changed meanwhile is refused, never overwritten);
the operator grows or shrinks (excluding before removing) and the run waits
until each class has N process groups, none marked for removal, the resource
reconciled and healthy. As the operator reads it, N=0 is its default for the
redundancy mode and N=-1 is none of the class. Storage or log counts below the redundancy mode's
replicas are refused before anything is written. --remove GROUP[,GROUP]
names the process groups that go: they are added to
spec.processGroupsToRemove in the same patch, and the run also waits until
they are gone; exactly as many per class as the new count removes, each of a
class --processes lowers (anything else is refused, nothing written).


For FoundationDB run as a StatefulSet (FoundationDB's Kubernetes sample;
--replicas N): the engine does the operator's work. Down, highest ordinals
first: once the database is healthy, the leaving pods are excluded (fdbcli
exclude locality_instance_id:POD) until fdbcli reports them "Successfully
excluded", the coordinators are moved off them, replicas are lowered (resourceVersion
precondition), their PVCs deleted and they are included again. Up: replicas
are raised and the run waits for the new processes to report. Fewer
replicas than the redundancy mode's team size, or than the coordinators,
are refused before anything is written.

Bounded by --timeout, else SCALING_TIMEOUT seconds, else 3600 s.`,
		Example: `  # See the plan (every SQL statement) without changing anything
  kubectl dbops scale mycrate --data hot=5 --data cold=2 --dry-run

  # Five masters, no prompt (CI)
  kubectl dbops scale mycrate --master 5 --yes

  # etcd: five members
  kubectl dbops scale myetcd --replicas 5

  # Replicated app: five pods, two of them primaries
  kubectl dbops scale myapp --replicas 5 --primaries 2

  # FoundationDB: four storage processes
  kubectl dbops scale myfdb --processes storage=4

  # FoundationDB: from five storage processes to four, naming the one that goes
  kubectl dbops scale myfdb --processes storage=4 --remove storage-5

  # FoundationDB StatefulSet: three pods (exclude, coordinators, replicas, PVCs, include)
  kubectl dbops scale fdb-kubernetes-example --replicas 3

  # Fleet: the same change in every context named prod-*, the first alone as a canary
  kubectl dbops scale orders --replicas 5 --contexts 'prod-*' -n db --canary 1 --dry-run

  # Fleet, no CLUSTER: every cluster labelled tier=db in every namespace of the contexts prod-*
  kubectl dbops scale --replicas 5 --contexts 'prod-*' -A -l tier=db --dry-run`,
		Args:              optionalClusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              o.Runner.runE(o),
	}
	cmd.Flags().Int32Var(&o.Masters, "master", 0, "Wanted number of master nodes (odd, at least 3)")
	cmd.Flags().StringArrayVar(&o.Data, "data", nil, "Wanted size of a data node group as GROUP=N (repeatable or comma separated)")
	cmd.Flags().Int32Var(&o.Replicas, "replicas", 0, "Wanted size of a single-group cluster (etcd, replicated apps, a FoundationDB StatefulSet), at least 1")
	_ = cmd.RegisterFlagCompletionFunc("data", completeGroupSizes(g))
	o.fleet.addFlags(cmd, g)
	o.sel.addFlags(cmd)
	g.addEngineFlags("scale", cmd.Flags())
	return cmd
}

// completeGroupSizes offers "GROUP=" for each node group.
func completeGroupSizes(g *GlobalOptions) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	groups := completeGroups(g)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		names, dir := groups(cmd, args, toComplete)
		if dir == cobra.ShellCompDirectiveError {
			return nil, dir
		}
		out := make([]string, 0, len(names))
		for _, n := range names {
			out = append(out, n+"=")
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// Complete fills in arguments.
func (o *ScaleOptions) Complete(cmd *cobra.Command, args []string) error {
	o.Cluster = firstArg(args)
	o.mastersGiven = cmd.Flags().Changed("master")
	o.replicasGiven = cmd.Flags().Changed("replicas")
	return nil
}

// Validate checks flags without touching the API.
func (o *ScaleOptions) Validate() error {
	if o.replicasGiven && (o.mastersGiven || len(o.Data) > 0) {
		return ops.Usagef("--replicas cannot be combined with --master or --data: use --replicas for single-group clusters (etcd), --master/--data for CrateDB")
	}
	if o.replicasGiven && o.Replicas < 1 {
		return ops.Usagef("--replicas %d: must be at least 1", o.Replicas)
	}
	// The engines' own scale flags (FoundationDB's --processes, the replicated engine's
	// --primaries; their values were checked before) check how they go with the rest.
	probe, asked := o.ownRequest(), false
	for _, sf := range o.scaleFlags() {
		sf.FillScale(&probe)
	}
	for _, sf := range o.scaleFlags() {
		if err := sf.CheckScale(probe); err != nil {
			return err
		}
		asked = asked || len(sf.ScaleFlagsGiven()) > 0
	}
	if !o.mastersGiven && len(o.Data) == 0 && !o.replicasGiven && !asked {
		return ops.Usagef("nothing to scale: give --replicas N, or --master N and/or --data GROUP=N")
	}
	if err := o.fleet.validate(o.g); err != nil {
		return err
	}
	if err := o.sel.validate(o.g, &o.fleet.fleetFlags, o.Cluster); err != nil {
		return err
	}
	if o.mastersGiven && (o.Masters < 3 || o.Masters%2 == 0) {
		return ops.Usagef("--master %d: masters must be an odd number of at least 3 (allowed: 3, 5, 7, ...)", o.Masters)
	}
	o.data = map[string]int32{}
	var entries []string
	for _, d := range o.Data {
		entries = append(entries, strings.Split(d, ",")...)
	}
	for _, d := range entries {
		name, val, ok := strings.Cut(d, "=")
		name = strings.TrimSpace(name)
		switch {
		case !ok:
			return ops.Usagef("--data %q: want GROUP=N", d)
		case name == "":
			return ops.Usagef("--data %q: missing group name before '='", d)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 32)
		switch {
		case err != nil:
			return ops.Usagef("--data %q: N must be a whole number", d)
		case n < 0:
			return ops.Usagef("--data %q: N must not be negative", d)
		}
		if _, dup := o.data[name]; dup {
			return ops.Usagef("--data %s given twice", name)
		}
		o.data[name] = int32(n)
	}
	return nil
}

// scaleFlags are the engines' own scale flags (ops.ScaleFlags), in registry order.
func (o *ScaleOptions) scaleFlags() []ops.ScaleFlags {
	var out []ops.ScaleFlags
	for _, k := range o.g.Engines {
		if sf, ok := o.g.engineFlagsOf(k.Name).(ops.ScaleFlags); ok {
			out = append(out, sf)
		}
	}
	return out
}

// ownRequest is the request of the command's own flags, before --data is parsed (its
// entries stand for the groups given, for the engines' CheckScale).
func (o *ScaleOptions) ownRequest() ops.ScaleRequest {
	var req ops.ScaleRequest
	if o.mastersGiven {
		m := o.Masters
		req.Masters = &m
	}
	if o.replicasGiven {
		r := o.Replicas
		req.Replicas = &r
	}
	for _, d := range o.Data {
		if req.Data == nil {
			req.Data = map[string]int32{}
		}
		req.Data[d] = 0
	}
	return req
}

// Run discovers, plans and executes the scaling.
func (o *ScaleOptions) Run(cmd *cobra.Command) error {
	if o.fleet.active(o.g) {
		return o.runFleet(cmd)
	}
	req := o.targetRequest
	if req == nil {
		req = o.g.request(cmd, o.Cluster)
	}
	return o.runOperation(commandContext(cmd), operation{req: req,
		timeoutEnv: "SCALING_TIMEOUT", defaultTimeout: defaultScalingTimeout,
		plan: func(ctx context.Context, cl *Clients, c *ops.Cluster, eng ops.Engine, _ *ops.Request) (*ops.Plan, error) {
			s, ok := eng.(ops.Scaler)
			if !ok {
				return nil, ops.Usagef("engine %s (cluster %s) cannot scale", eng.Name(), c.Name)
			}
			req := o.ownRequest()
			req.Data, req.Journal = o.data, o.unfinishedJournal(ctx, cl, c)
			if sf, ok := o.g.engineFlagsOf(c.Engine).(ops.ScaleFlags); ok {
				sf.FillScale(&req)
			}
			return s.PlanScale(ctx, c, req)
		}})
}
