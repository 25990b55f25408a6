package tui

import (
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/golden"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// golden compares got with testdata/name, or rewrites it with -update.
func assertGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Assert(t, name, got)
}

// t0 is when the fixture run starts.
var t0 = time.Date(2026, 11, 22, 7, 1, 0, 0, time.UTC)

// at returns t0 plus d; fixture events carry their own times like the
// executor's do.
func at(d time.Duration) time.Time { return t0.Add(d) }

func fixturePlan() *ops.PlanView {
	return &ops.PlanView{
		Operation: "rolling-restart", Cluster: "crate-main", Namespace: "prod", Engine: ops.EngineCrateDB,
		Args:  "--rolling --group data",
		Notes: []string{"1 step already done by an earlier run"},
		Steps: []ops.StepView{
			{Index: 1, ID: "pause-allocation", Group: "data", Target: "sts/crate-data", Description: "pause shard allocation",
				Details: []string{`SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = 'primaries'`}, Mutating: true, Done: true},
			{Index: 2, ID: "restart/crate-data-0", Group: "data", Target: "pod/crate-data-0", Description: "restart pod",
				Preconditions: []string{"cluster health GREEN"}, Mutating: true},
			{Index: 3, ID: "restart/crate-data-1", Group: "data", Target: "pod/crate-data-1", Description: "restart pod",
				Preconditions: []string{"cluster health GREEN"}, Mutating: true},
			{Index: 4, ID: "resume-allocation", Group: "data", Target: "sts/crate-data", Description: "resume shard allocation",
				Details: []string{`SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = 'all'`}, Mutating: true},
		},
	}
}

func fixtureRef(i int) *ops.StepRef {
	s := fixturePlan().Steps[i-1]
	return &ops.StepRef{Index: s.Index, Total: 4, ID: s.ID, Target: s.Target, Description: s.Description}
}

func fixturePods(notReady ...string) []ops.PodSummary {
	pods := []ops.PodSummary{
		{Name: "crate-master-0", Group: "master", Ready: true, Phase: "Running", Node: "node-a1", Zone: "eu-west-1a", UID: "u-m0", Restarts: 0},
		{Name: "crate-data-0", Group: "data", Ready: true, Phase: "Running", Node: "node-b1", Zone: "eu-west-1a", UID: "u-d0", Restarts: 1},
		{Name: "crate-data-1", Group: "data", Ready: true, Phase: "Running", Node: "node-b2", Zone: "eu-west-1b", UID: "u-d1", Restarts: 0},
		{Name: "crate-data-2", Group: "data", Ready: true, Phase: "Running", Node: "node-b3", Zone: "eu-west-1c", UID: "u-d2", Restarts: 0},
	}
	for i := range pods {
		for _, n := range notReady {
			if pods[i].Name == n {
				pods[i].Ready, pods[i].Phase, pods[i].Node, pods[i].UID = false, "Pending", "", pods[i].UID+"-new"
			}
		}
	}
	return pods
}

// fixtureEvents is a realistic interrupted rolling restart: a step done by
// an earlier run, one restarted with repeated waits and progress, a
// warning, a failure when the operator pressed ctrl+c, and the resume hint.
func fixtureEvents() []ops.Event {
	const op, cl = "rolling-restart", "crate-main"
	ev := func(d time.Duration, e ops.Event) ops.Event {
		// Like the executor: every event carries time, operation,
		// cluster and the elapsed time since the run started.
		e.Time, e.Operation, e.Cluster, e.Elapsed = at(d), op, cl, d
		return e
	}
	s := time.Second
	return []ops.Event{
		ev(0, ops.Event{Type: ops.EventLock, Lock: &ops.LockInfo{Action: ops.LockAcquired, Holder: "alice@laptop", Operation: op + " --rolling --group data", Expires: at(5 * time.Minute)}}),
		ev(1*s, ops.Event{Type: ops.EventWarning, Message: "resuming rolling-restart started 2026-11-22T06:40:12Z by alice@laptop: 1 step(s) already done"}),
		ev(1*s, ops.Event{Type: ops.EventPlan, Plan: fixturePlan(), Timeout: 30 * time.Minute}),
		ev(1*s, ops.Event{Type: ops.EventPods, Pods: fixturePods()}),
		ev(2*s, ops.Event{Type: ops.EventStepSkipped, Step: fixtureRef(1), Reason: "done in an earlier run"}),
		ev(2*s, ops.Event{Type: ops.EventStepStarted, Step: fixtureRef(2)}),
		ev(2*s, ops.Event{Type: ops.EventStepWaiting, Step: fixtureRef(2), Reason: "cluster health GREEN"}),
		ev(7*s, ops.Event{Type: ops.EventStepWaiting, Step: fixtureRef(2), Reason: "cluster health GREEN"}),
		ev(9*s, ops.Event{Type: ops.EventStepWaiting, Step: fixtureRef(2), Reason: "new pod Ready (UID changed)"}),
		ev(10*s, ops.Event{Type: ops.EventPods, Pods: fixturePods("crate-data-0")}),
		ev(14*s, ops.Event{Type: ops.EventStepWaiting, Step: fixtureRef(2), Reason: "new pod Ready (UID changed)"}),
		ev(15*s, ops.Event{Type: ops.EventPods, Pods: fixturePods("crate-data-0")}),
		ev(60*s, ops.Event{Type: ops.EventLock, Lock: &ops.LockInfo{Action: ops.LockRenewed, Holder: "alice@laptop", Operation: op, Expires: at(6 * time.Minute)}}),
		ev(71*s, ops.Event{Type: ops.EventPods, Pods: fixturePods()}),
		ev(72*s, ops.Event{Type: ops.EventStepProgress, Step: fixtureRef(2), Progress: &ops.Progress{Done: 12, Total: 40, Unit: "shards"}, Message: "replicas recovering"}),
		ev(77*s, ops.Event{Type: ops.EventStepProgress, Step: fixtureRef(2), Progress: &ops.Progress{Done: 12, Total: 40, Unit: "shards"}, Message: "replicas recovering"}),
		ev(95*s, ops.Event{Type: ops.EventStepProgress, Step: fixtureRef(2), Progress: &ops.Progress{Done: 40, Total: 40, Unit: "shards"}}),
		ev(95*s, ops.Event{Type: ops.EventStepDone, Step: fixtureRef(2)}),
		ev(96*s, ops.Event{Type: ops.EventStepStarted, Step: fixtureRef(3)}),
		ev(97*s, ops.Event{Type: ops.EventWarning, Step: fixtureRef(3), Message: `could not record audit event on Pod/crate-data-1: events is forbidden: User "alice" cannot create resource "events"`}),
		ev(98*s, ops.Event{Type: ops.EventStepWaiting, Step: fixtureRef(3), Reason: "new pod Ready (UID changed)"}),
		ev(191*s, ops.Event{Type: ops.EventStepFailed, Step: fixtureRef(3), Error: "verify: interrupted while waiting for new pod Ready"}),
		ev(192*s, ops.Event{Type: ops.EventLock, Lock: &ops.LockInfo{Action: ops.LockReleased, Holder: "alice@laptop"}}),
		ev(192*s, ops.Event{Type: ops.EventDone, Outcome: ops.OutcomeInterrupted, Timeout: 30 * time.Minute,
			Error:  "interrupted in step 3/4 (pod/crate-data-1: restart pod)",
			Resume: "re-run the same command to resume: kubectl dbops rolling-restart prod/crate-main --rolling --group data"}),
	}
}
