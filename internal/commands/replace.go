package commands

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// ReplaceOptions holds `replace` flags.
type ReplaceOptions struct {
	*GlobalOptions
	Cluster string
	Pod     string
}

// NewReplaceOptions returns options bound to the shared flags.
func NewReplaceOptions(g *GlobalOptions) *ReplaceOptions { return &ReplaceOptions{GlobalOptions: g} }

// NewReplaceCmd builds `replace CLUSTER POD`.
func NewReplaceCmd(g *GlobalOptions) *cobra.Command {
	o := NewReplaceOptions(g)
	return &cobra.Command{
		Use:   "replace CLUSTER POD",
		Short: "Replace one member: move its data away, recreate it with a fresh volume, let it rejoin",
		Long: `Replace a member of the cluster with a fresh one. For etcd this is member
repair: the member is removed from the cluster (only when every other member
is healthy and quorum holds), its pod and PVC are deleted so it comes back
with an empty data directory, it is added again as a learner and promoted
once it has caught up. Use it for a member whose volume was lost or whose
member ID is stale.`,
		Example: `  kubectl dbops replace myetcd myetcd-2 --dry-run
  kubectl dbops replace myetcd myetcd-2 --yes`,
		Args:              rangeArgs(2, 2, "CLUSTER and POD"),
		ValidArgsFunction: completeClusters(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Cluster, o.Pod = args[0], strings.TrimSpace(args[1])
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd)
		},
	}
}

// Validate checks arguments without touching the API.
func (o *ReplaceOptions) Validate() error {
	if err := o.GlobalOptions.Validate(); err != nil {
		return err
	}
	if o.Pod == "" {
		return ops.Usagef("POD must not be empty")
	}
	return nil
}

// Run discovers, plans and executes the replacement.
func (o *ReplaceOptions) Run(cmd *cobra.Command) error {
	ctx := commandContext(cmd)
	cl, c, err := o.discover(ctx, o.Cluster, true)
	if err != nil {
		return err
	}
	if _, p := c.Pod(o.Pod); p == nil {
		var names []string
		for _, p := range c.AllPods() {
			names = append(names, p.Name)
		}
		return ops.Usagef("pod %q is not part of cluster %s/%s; allowed: %s", o.Pod, c.Namespace, c.Name, strings.Join(names, ", "))
	}
	eng, err := o.engine(cl, c)
	if err != nil {
		return err
	}
	defer closeEngine(ctx, eng)
	r, ok := eng.(ops.Replacer)
	if !ok {
		return ops.Usagef("replace is not available for engine %s yet (supported: %s)", eng.Name(), ops.EngineEtcd)
	}
	timeout, err := o.timeoutOr("", defaultRestartTimeout)
	if err != nil {
		return err
	}
	plan, err := r.PlanReplace(ctx, c, o.Pod, commandLine(cmd, o.Cluster, o.Pod))
	if err != nil {
		return err
	}
	return o.execute(ctx, cl, c, plan, timeout)
}
