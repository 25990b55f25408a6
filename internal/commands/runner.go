package commands

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/tui"
)

// Runner runs one mutating command's operation: plan from live state, print the plan or
// dry-run, confirm, lock, execute with a view (runOperation, execute, runWithView). It holds
// the state of that one run, so GlobalOptions holds none; each mutating command's options
// hold their own Runner (NewRunner), built from the shared options.
type Runner struct {
	*GlobalOptions

	// Pacing is --pause-between and --pause-after (restart binds them; zero for the others).
	Pacing ops.Pacing

	// streamEnded: the run's NDJSON stream got its done event (the run's, or dry-run's);
	// otherwise runE ends the stream with one for a refusal or failure before the run.
	streamEnded bool
}

// NewRunner returns a runner over the shared options g (flags, Factory, streams).
func NewRunner(g *GlobalOptions) *Runner { return &Runner{GlobalOptions: g} }

// runE is a mutating command's RunE: Complete, then every check that needs
// no API in one place (the shared flags, the command's own; the engines' flags
// were checked before, with checkFlagDependencies), then Run.
func (r *Runner) runE(o commandOptions) func(*cobra.Command, []string) error {
	run := func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := r.Validate(); err != nil {
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
	if err == nil || r.Output != "json" || r.streamEnded {
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
	g := *r.GlobalOptions
	g.Factory = f
	return NewRunner(&g)
}

// pacing is the executor's pacing: the runner's, stopped by the fleet target's stop when the
// run is one target of a fleet that did not set it (resume --fleet).
func (r *Runner) pacing() ops.Pacing {
	p := r.Pacing
	if p.Stop == nil {
		p.Stop = r.fleetStop
	}
	return p
}
