package commands

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// newFleetRun names a fleet run over ts: each target's journal records it (Request.Fleet), so
// that resume --fleet knows which targets the run started.
func newFleetRun(ts []fleet.Target) *ops.FleetRun {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	run := &ops.FleetRun{ID: hex.EncodeToString(b)}
	for _, t := range ts {
		run.Targets = append(run.Targets, t.String())
	}
	return run
}

// fleetRunOf is the latest fleet run recorded in the targets' journals (nil: none), with the
// command it gave its targets (the request of that run's latest journal, without what is the
// target's own: cluster, namespace, context, engine, picked pods). notStarted marks the
// targets that run names but never started: no journal, or one of another operation (an
// older one, finished or not), which must be neither resumed nor called done for that run.
func fleetRunOf(ts []fleet.Target, journals []*ops.Journal) (run *ops.FleetRun, cmd *ops.Request, notStarted []bool) {
	notStarted = make([]bool, len(ts))
	var latest *ops.Journal
	for i, j := range journals {
		// A record that does not name its own target is not a fleet run's (the journal comes
		// from the cluster, where anyone allowed to write the Lease could edit it).
		if f := fleetOf(j); f != nil && slices.Contains(f.Targets, ts[i].String()) && (latest == nil || j.Started.After(latest.Started)) {
			run, latest = f, j
		}
	}
	if run == nil {
		return nil, nil, notStarted
	}
	// Every journal of the run must record the same command: otherwise none is started.
	for _, j := range journals {
		if f := fleetOf(j); f != nil && f.ID == run.ID && !sameFleetCommand(j.Request, latest.Request) {
			return nil, nil, notStarted
		}
	}
	r := *latest.Request
	r.Cluster, r.Namespace, r.Context, r.Engine, r.Picked = "", "", "", "", nil
	for i, j := range journals {
		if slices.Contains(run.Targets, ts[i].String()) {
			if f := fleetOf(j); f == nil || f.ID != run.ID {
				notStarted[i] = true
			}
		}
	}
	return run, &r, notStarted
}

// sameFleetCommand reports whether two targets' requests are the same fleet command: the same
// command, arguments and flags (but the lock ID), whatever the target.
func sameFleetCommand(a, b *ops.Request) bool {
	x, y := *a, *b
	x.Cluster, x.Namespace, x.Context, x.Engine = "", "", "", ""
	y.Cluster, y.Namespace, y.Context, y.Engine = "", "", "", ""
	return x.Same(&y)
}

func fleetOf(j *ops.Journal) *ops.FleetRun {
	if j == nil || j.Request == nil {
		return nil
	}
	return j.Request.Fleet
}

// startForFleet runs the fleet run's command (fleetStart) on this target, which the run never
// started: as resume runs a journal's request, checked the same way, the journal it starts
// recording the run.
func (o *ResumeOptions) startForFleet(cmd *cobra.Command) error {
	ns, err := o.Namespace()
	if err != nil {
		return err
	}
	r := *o.fleetStart
	r.Cluster, r.Namespace = o.Cluster, ns
	if c := o.g.ConfigFlags.Context; c != nil {
		r.Context = *c
	}
	sub, args, err := o.resumeCommand(cmd, &r, ns)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(o.ErrOut, "starting the fleet run %s's command on %s/%s, which that run never started: %s\n",
		ops.PrintableArgs(o.fleetRun.ID, ns, o.Cluster, r.CommandLine())...); err != nil {
		return err
	}
	sub.SetContext(commandContext(cmd))
	return sub.RunE(sub, args)
}

// resumeQuestion is resume --fleet's confirmation: the targets resumed from their journals and,
// apart, those the fleet run never started with the command that will be started there (it
// comes from another target's journal, so the user sees it before saying yes).
func resumeQuestion(todo []fleet.Target, notStarted []bool, ts []fleet.Target, run *ops.FleetRun, cmd *ops.Request) string {
	var resumed, started []fleet.Target
	for _, t := range todo {
		if notStarted[indexOf(ts, t)] {
			started = append(started, t)
		} else {
			resumed = append(resumed, t)
		}
	}
	var parts []string
	if len(resumed) > 0 {
		parts = append(parts, fmt.Sprintf("resume the unfinished operations of %s (%s)", fleet.Describe(resumed), targetList(resumed)))
	}
	if len(started) > 0 {
		// Each target's own cluster, namespace and context replace CLUSTER; resume acts as
		// this invocation's lock ID.
		line := *cmd
		line.Cluster = "CLUSTER"
		parts = append(parts, fmt.Sprintf("start the fleet run %s's command %s on %s it never started (%s)",
			ops.PrintableArgs(run.ID, ops.ShellLine(line.Argv(map[string]bool{"lock-id": true})), fleet.Describe(started), targetList(started))...))
	}
	q := strings.Join(parts, ", and ")
	return strings.ToUpper(q[:1]) + q[1:] + "?"
}
