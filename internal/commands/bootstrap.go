package commands

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// BootstrapOptions holds `bootstrap` flags.
type BootstrapOptions struct {
	// Runner runs the operation (plan, dry-run, confirm, lock, execute) with the shared
	// run flags.
	*Runner
	// g are the shared flags that pick the cluster (Runner.Clusters) and the engines' flags.
	g       *GlobalOptions
	Cluster string
}

// NewBootstrapOptions returns options bound to the shared flags.
func NewBootstrapOptions(g *GlobalOptions, rf *RunFlags) *BootstrapOptions {
	return &BootstrapOptions{Runner: NewRunner(g.Factory, rf, g), g: g}
}

// NewBootstrapCmd builds `bootstrap CLUSTER`.
func NewBootstrapCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewBootstrapOptions(g, rf)
	cmd := &cobra.Command{
		Use:   "bootstrap CLUSTER [--license-secret NAME[/KEY]] [--user NAME=SECRET[/KEY]]...",
		Short: "Prepare a new cluster: license, system user, application users",
		Long: `Bootstrap a freshly created cluster. For CrateDB: set the license (if given)
first, create the "system" user with the password from its Secret (or set the
password when it exists) and grant it all privileges, then connect as system
and create each --user that is missing, with all privileges. The version is
read from sys.nodes: from CrateDB 5.3 on there are no licenses and
--license-secret is ignored (the plan and the output say so).

Passwords and the license are read from Kubernetes Secrets only and never
printed; plans show them as '***'. Statements carrying them go to crash on
the exec's stdin, never into its command line. crash's scheme, port and user
come from the StatefulSet (-Cssl.http.enabled, the container ports, the local
trust entry of host-based auth; --crash-user overrides the user). Every step is idempotent: a second run
changes nothing. Bounded by --timeout, else BOOTSTRAP_TIMEOUT seconds, else
1800 s.

For replicated applications (engine replicated): only when the StatefulSet
has exactly its desired pods and none is Pending. The sequence command runs
in every pod; the first primary is the pod with the highest number (ties:
lowest ordinal) and runs seed (else primary); further primaries and then
secondaries start one at a time on the highest remaining numbers, given the
running primaries' DNS names as arguments. A pod whose command fails is
labelled failed, stopped (deleted when stop fails too) and the next
candidate is tried. Commands come from the config file's replicated
section, DBOPS_REPLICATED_CONFIG or the StatefulSet annotation
dbops.io/replicated-config.`,
		Example: `  # See the plan (secrets redacted) without changing anything
  kubectl dbops bootstrap mycrate --user app=app-db-password --dry-run

  # License from Secret crate-license (key "license"), two users, no prompt
  kubectl dbops bootstrap mycrate --license-secret crate-license \
    --user app=app-db-password --user grafana=grafana-db/pw --yes

  # Replicated app: elect and start two primaries, the rest secondaries
  kubectl dbops bootstrap myapp --primaries 2 --yes`,
		Args:              clusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              o.Runner.runE(o),
	}
	g.addEngineFlags("bootstrap", cmd.Flags())
	return cmd
}

// Complete fills in arguments.
func (o *BootstrapOptions) Complete(cmd *cobra.Command, args []string) error {
	o.Cluster = args[0]
	return nil
}

// Validate has nothing of its own to check: the engines check their bootstrap flags.
func (o *BootstrapOptions) Validate() error {
	return nil
}

// Run discovers, plans and executes the bootstrap.
func (o *BootstrapOptions) Run(cmd *cobra.Command) error {
	return o.runOperation(commandContext(cmd), operation{req: o.g.request(cmd, o.Cluster),
		timeoutEnv: "BOOTSTRAP_TIMEOUT", defaultTimeout: defaultBootstrapTimeout,
		plan: func(ctx context.Context, _ *Clients, c *ops.Cluster, eng ops.Engine, _ *ops.Request) (*ops.Plan, error) {
			b, ok := eng.(ops.Bootstrapper)
			if !ok {
				return nil, ops.Usagef("engine %s (cluster %s) has no bootstrap procedure", eng.Name(), c.Name)
			}
			req, err := o.bootstrapRequest(c)
			if err != nil {
				return nil, err
			}
			return b.PlanBootstrap(ctx, c, req)
		}})
}

// bootstrapRequest builds the bootstrap request from the flags (those of another engine
// were refused by checkEngineFlags).
func (o *BootstrapOptions) bootstrapRequest(c *ops.Cluster) (ops.BootstrapRequest, error) {
	// The engine's own bootstrap flags (CrateDB's --license-secret and --user, the replicated
	// engine's --primaries); a flag of another engine was refused by checkEngineFlags.
	var r ops.BootstrapRequest
	if f, ok := o.g.engineFlagsOf(c.Engine).(interface{ FillBootstrap(*ops.BootstrapRequest) }); ok {
		f.FillBootstrap(&r)
	}
	return r, nil
}
