package commands

import (
	"sync"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
)

// runFleet runs the same scale over every target of the fleet (#39), as a fleet restart
// (runOperationFleet): each target is the normal single-cluster scale in its own cluster (its
// own lock, a plan from its live state, its engine's gates, journal and Events). The change was
// checked once, without the API (Validate: bad input is exit 2 before any target is read); a
// target whose shape makes it invalid (a group it does not have, masters of an engine without
// them) fails with its engine's reason, named in the summary. With -l and no CLUSTER (or -A),
// each target's matching clusters are targets of their own, found before anything starts
// (selectFleetClusters, as restart's).
func (o *ScaleOptions) runFleet(cmd *cobra.Command) error {
	ts, err := o.sel.targets(o.g, &o.fleet.fleetFlags, o.Cluster)
	if err != nil {
		return err
	}
	if o.sel.selecting() {
		if ts, err = selectFleetClusters(commandContext(cmd), o.g, &o.fleet.fleetFlags, ts, o.sel.sel); err != nil {
			return err
		}
	}
	var reqMu sync.Mutex
	return o.Runner.runOperationFleet(cmd, o.g, &o.fleet, ts, fleetMutation{verb: "scale", question: "Scale", title: "scale",
		bySelector: o.Cluster == "",
		run: func(r *Runner, g *GlobalOptions, t fleet.Target) error {
			so := *o
			// The target's scale is the single-cluster one: no fleet of its own.
			so.Runner, so.g, so.Cluster, so.fleet = r, g, t.Cluster, fleetMutationFlags{}
			so.targetRequest = fleetTargetRequest(&reqMu, cmd, g, t, &o.sel, o.Cluster)
			return so.endStream(cmd.Name(), t.Cluster, so.Run(cmd))
		}})
}
