package commands

import (
	"crypto/rand"
	"encoding/hex"
	"slices"

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

// notStartedByRun finds, from the targets' journals (nil: none recorded), the targets the
// latest fleet run named but never started: their journal is of another operation (an older
// one, finished or not), so resuming it, or calling it done, would misreport that run. The
// result is each target's refusal (exit 5), nil where the journal is the run's, absent, or no
// fleet run names the target.
func notStartedByRun(ts []fleet.Target, journals []*ops.Journal) []error {
	var run *ops.FleetRun
	var started *ops.Journal
	for _, j := range journals {
		if f := fleetOf(j); f != nil && (started == nil || j.Started.After(started.Started)) {
			run, started = f, j
		}
	}
	out := make([]error, len(ts))
	if run == nil {
		return out
	}
	for i, j := range journals {
		if j == nil || !slices.Contains(run.Targets, ts[i].String()) {
			continue
		}
		if f := fleetOf(j); f == nil || f.ID != run.ID {
			out[i] = ops.Preconditionf("the fleet run %s (started on %s at %s) never started it: its last operation (%s, %s, started %s) is not that run's; run the fleet's command for it",
				ops.PrintableArgs(run.ID, fleetOfTarget(started), started.Started.UTC().Format("2006-01-02T15:04:05Z"), j.Operation, j.State,
					j.Started.UTC().Format("2006-01-02T15:04:05Z"))...)
		}
	}
	return out
}

func fleetOf(j *ops.Journal) *ops.FleetRun {
	if j == nil || j.Request == nil {
		return nil
	}
	return j.Request.Fleet
}

// fleetOfTarget names the target whose journal is j, from its request.
func fleetOfTarget(j *ops.Journal) string {
	r := j.Request
	t := fleet.Target{Context: r.Context, Namespace: r.Namespace, Cluster: r.Cluster}
	return t.String()
}
