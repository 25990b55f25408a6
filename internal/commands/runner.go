package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/tui"
)

// Runner runs one mutating command's operation: plan from live state, print the plan or
// dry-run, confirm, lock, execute with a view (runOperation, execute, runWithView). It holds
// the state of that one run and what it is built from: the Factory (clients, streams,
// environment), the shared run flags and how the command line finds a cluster. Each mutating
// command's options hold their own Runner (NewRunner).
type Runner struct {
	*Factory
	// RunFlags are the shared run flags (--dry-run, --yes, --timeout, the lock's), bound once
	// on the root command; read-only by the time a command runs.
	*RunFlags
	// Clusters finds the cluster a run is on and builds its engine (the command line's
	// GlobalOptions: --engine, --selector, the engines' flags).
	Clusters Clusters

	// Pacing is --pause-between and --pause-after (restart binds them; zero for the others).
	Pacing ops.Pacing

	// streamEnded: the run's NDJSON stream got its done event (the run's, or dry-run's);
	// otherwise runE ends the stream with one for a refusal or failure before the run.
	streamEnded bool
}

// Clusters is what a Runner needs of the command line besides its run flags: finding the
// cluster named, building its engine, what planning it reads, the output format and -v.
// GlobalOptions is the command line's.
type Clusters interface {
	discover(ctx context.Context, name string, mutating bool) (*Clients, *ops.Cluster, error)
	engine(ctx context.Context, cl *Clients, c *ops.Cluster) (ops.Engine, error)
	// planNeeds are the permissions planning for a cluster of engine reads ("": any engine).
	planNeeds(engine string) []ops.Permission
	// outputFormat is -o; verbosity is -v.
	outputFormat() string
	verbosity() int
	// onFactory is the same command line over another Factory (ForTarget).
	onFactory(f *Factory) Clusters
	// Validate checks the command line's shared flags without the API.
	Validate() error
}

// NewRunner returns a runner over f with the run flags rf, finding clusters with cs.
func NewRunner(f *Factory, rf *RunFlags, cs Clusters) *Runner {
	return &Runner{Factory: f, RunFlags: rf, Clusters: cs}
}

// runE is a mutating command's RunE: Complete, then every check that needs
// no API in one place (the shared flags, the command's own; the engines' flags
// were checked before, with checkFlagDependencies), then Run.
func (r *Runner) runE(o commandOptions) func(*cobra.Command, []string) error {
	run := func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := r.Clusters.Validate(); err != nil {
			return err
		}
		if err := r.RunFlags.Validate(); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd)
	}
	return func(cmd *cobra.Command, args []string) error {
		cluster := ""
		if len(args) > 0 {
			cluster = args[0]
		}
		return r.endStream(cmd.Name(), cluster, run(cmd, args))
	}
}

// endStream ends the NDJSON stream with one done event for an error that came before the
// run's own done (bad input, preflight, the lock, RBAC): its outcome refused and reason
// code beside the text. Other outputs, and a stream that already ended, get nothing.
func (r *Runner) endStream(operation, cluster string, err error) error {
	if err == nil || r.Clusters.outputFormat() != "json" || r.streamEnded {
		return err
	}
	r.streamEnded = true
	js := tui.NewJSON(r.Out)
	js.Emit(ops.Event{Type: ops.EventDone, Time: time.Now(), Operation: operation, Cluster: cluster, Outcome: ops.OutcomeRefused,
		Error: err.Error(), ReasonCode: ops.ReasonOf(err)})
	if werr := js.Err(); werr != nil {
		return fmt.Errorf("%w (writing output: %v)", err, werr)
	}
	return err
}

// ForTarget returns a runner with r's flags over another Factory: another kube context's
// clients and its own streams. A run over several targets gives each its own runner, so no
// run state or client is shared between them (the flags' values are read-only by then).
func (r *Runner) ForTarget(f *Factory) *Runner {
	return NewRunner(f, r.RunFlags, r.Clusters.onFactory(f))
}

// resolveLockID is --lock-id, or the ID from the runner's kubeconfig.
func (r *Runner) resolveLockID() (string, error) { return r.RunFlags.ResolveLockID(r.ConfigFlags) }

// pacing is the executor's pacing: the runner's, stopped by the fleet target's stop when the
// run is one target of a fleet that did not set it (resume --fleet).
func (r *Runner) pacing() ops.Pacing {
	p := r.Pacing
	if p.Stop == nil {
		p.Stop = r.fleetStop
	}
	return p
}
