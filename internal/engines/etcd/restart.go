package etcd

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// PlanRestart plans a rolling restart: one member at a time by ordinal,
// the leader (found now, through endpoint status) last so the cluster
// elects a new leader once only. Before each pod: quorum without it and
// every other member healthy; after: the member healthy and caught up.
func (e *Engine) PlanRestart(ctx context.Context, c *ops.Cluster, opts ops.RestartOptions) (*ops.Plan, error) {
	s, st, err := e.prepare(ctx, c)
	if err != nil {
		if s == nil {
			return nil, err
		}
		return nil, &ops.CodedError{Kind: ops.ErrPrecondition, Msg: fmt.Sprintf("cannot read etcd membership of %s/%s: %v", c.Namespace, c.Name, err), Err: err}
	}
	gate := &restartGate{e: e, s: s, batch: map[string][]string{}}
	if l := st.Leader(); l != nil {
		gate.leader = l.Pod
	}
	rr := &ops.RollingRestart{Client: e.Client, Gate: gate}
	p, err := rr.Plan(c, ops.EngineEtcd, opts)
	if err != nil {
		return nil, err
	}
	p.Notes = append(p.Notes, "etcd: "+st.Summary())
	for _, step := range p.Steps {
		for _, pod := range step.Pods {
			gate.batch[pod] = step.Pods
		}
		// The step holding the leader (alone, or in its zone or batch) went last
		// (StepRank), so the cluster changes leader once; before its pod goes, leadership
		// is handed to a caught-up member outside that step (move-leader) and the new
		// leader confirmed.
		if gate.leader != "" && slices.Contains(step.Pods, gate.leader) {
			p.Notes = append(p.Notes, fmt.Sprintf("leader %s restarts last, after handing leadership to another member (move-leader)", gate.leader))
			step.Details = append(step.Details, "before "+gate.leader+" goes, if it still leads: etcdctl move-leader <caught-up healthy member outside this step>, and wait for the new leader")
		}
	}
	return s.declareNeeds(p), nil
}

// restartGate holds etcd's checks around each pod restart.
type restartGate struct {
	e *Engine
	s *site
	// batch maps each pod to the pods of its step (itself, its zone or batch).
	batch map[string][]string
	// leader is the pod of the leader when the plan was made.
	leader string
}

// StepRank implements ops.RestartOrderer: the step holding the leader goes last.
func (g *restartGate) StepRank(pods []ops.Pod) int {
	if g.leader != "" && slices.ContainsFunc(pods, func(p ops.Pod) bool { return p.Name == g.leader }) {
		return 1
	}
	return 0
}

// Describe implements ops.RestartGate.
func (g *restartGate) Describe(p ops.Pod) ([]string, []string) {
	return []string{"etcd keeps quorum without " + p.Name + " and every other member is healthy"},
		[]string{"after: member " + p.Name + " healthy and within " + fmt.Sprint(g.e.maxLag()) + " raft entries of the leader"}
}

// Before implements ops.RestartGate.
func (g *restartGate) Before(ctx context.Context, sc *ops.StepContext, p ops.Pod) error {
	st, err := g.e.status(ctx, sc, g.s, p.Name)
	if err != nil && ctx.Err() == nil {
		// No other member answered (a one-member cluster): ask the pod
		// itself, so the refusal below names the real reason.
		st, err = g.e.status(ctx, sc, g.s, "")
	}
	if err != nil {
		return fmt.Errorf("checking etcd before restarting %s: %w", p.Name, err)
	}
	m := st.ByPod(p.Name)
	if m == nil {
		return checkAllHealthy(st, nil, "restart "+p.Name)
	}
	if err := checkAllHealthy(st, func(o *Member) bool { return o.ID == m.ID }, "restart "+p.Name); err != nil {
		return err
	}
	if !QuorumAfterRemoval(st.Voters, st.HealthyVoters, !m.Learner, m.Healthy) {
		return ops.Refusef(ops.ReasonQuorumAtRisk, "restarting %s would leave etcd without quorum (%d voters, %d healthy)", p.Name, st.Voters, st.HealthyVoters)
	}
	if m.Leader {
		return g.handOff(ctx, sc, st, m)
	}
	return nil
}

// handOff moves leadership from leader m, whose pod is about to go, to the healthy voter
// outside m's step that is furthest along (highest raft index; lowest ordinal on a tie),
// then waits until the members agree on the new leader. A one-member cluster has nobody to
// hand off to.
func (g *restartGate) handOff(ctx context.Context, sc *ops.StepContext, st *Status, m *Member) error {
	var to *Member
	for i := range st.Members {
		c := &st.Members[i]
		if c.ID == m.ID || c.Learner || !c.Healthy || c.Pod == "" || slices.Contains(g.batch[m.Pod], c.Pod) {
			continue
		}
		if to == nil || c.RaftIndex > to.RaftIndex || (c.RaftIndex == to.RaftIndex && c.Ordinal < to.Ordinal) {
			to = c
		}
	}
	if to == nil {
		return nil
	}
	sc.Waiting(fmt.Sprintf("moving etcd leadership from %s to %s", m.Pod, to.Pod))
	// move-leader must reach the current leader: run it in the leader's own pod. If it
	// fails because leadership moved meanwhile, the wait below sees the new leader anyway.
	if _, err := g.s.ctl.run(ctx, m.Pod, "move-leader", "move-leader", to.ID); err != nil {
		now, serr := g.e.status(ctx, sc, g.s, "")
		if serr != nil || now.Leader() == nil || now.Leader().ID == m.ID {
			return fmt.Errorf("moving etcd leadership from %s to %s: %w", m.Pod, to.Pod, err)
		}
	} else {
		sc.Audit(ctx, stsRef(g.s, ""), "DbopsEtcdMoveLeader", fmt.Sprintf("moved etcd leadership from %s to %s before restarting %s", m.Pod, to.Pod, m.Pod))
	}
	last := ""
	err := wait.PollUntilContextCancel(ctx, g.e.pollInterval(), true, func(ctx context.Context) (bool, error) {
		now, err := g.e.status(ctx, sc, g.s, m.Pod)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if l := now.Leader(); l != nil && l.ID != m.ID {
			return true, nil
		}
		last = "leader still " + m.Pod
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for a new etcd leader after move-leader (%s): %w", last, err)
	}
	return nil
}

// After implements ops.RestartGate: the step ends once the restarted member answers healthy,
// its raft index is within MaxLag entries of the leader's (caught up: under writes the two are
// rarely equal at one instant) and its pod is still Ready, with no fixed wait: the status is
// read at once, then with a backoff from catchUpFirstPoll up to the poll interval. The time
// from the pod Ready to that moment is the step's catch-up time (done event stepTimes).
func (g *restartGate) After(ctx context.Context, sc *ops.StepContext, p ops.Pod) error {
	start := time.Now()
	last := ""
	err := pollBackoff(ctx, catchUpFirstPoll, g.e.pollInterval(), func(ctx context.Context) (bool, error) {
		st, err := g.e.status(ctx, sc, g.s, "")
		reason := ""
		switch {
		case err != nil:
			reason = "reading etcd status: " + err.Error()
		default:
			m, l := st.ByPod(p.Name), st.Leader()
			switch {
			case m == nil:
				return false, ops.Preconditionf("pod %s came back but is no etcd member; repair it", p.Name)
			case !m.Healthy:
				reason = fmt.Sprintf("member %s not healthy yet", p.Name)
			case l == nil:
				reason = "no leader elected yet"
			case l.RaftIndex > m.RaftIndex+g.e.maxLag():
				// The step's ETA: the entries it is behind beyond the lag allowed, over the rate
				// that shrinks at.
				sc.Remaining(int64(l.RaftIndex-m.RaftIndex-g.e.maxLag()), ops.UnitEntries)
				reason = fmt.Sprintf("member %s catching up (raft index %d, leader %d)", p.Name, m.RaftIndex, l.RaftIndex)
			case !g.podReady(sc, p.Name):
				reason = fmt.Sprintf("pod %s not Ready", p.Name)
			default:
				return true, nil
			}
		}
		if reason != last {
			last = reason
			sc.Block(ctx, ops.BlockedMember, "etcd member "+p.Name,
				fmt.Sprintf("see its logs: kubectl logs -n %s %s; and etcdctl endpoint status --cluster", g.s.ns, p.Name), reason)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for etcd member %s after restart (%s): %w", p.Name, last, err)
	}
	took := time.Since(start)
	sc.RecordCatchUp(took)
	sc.Progress(1, 1, "members", fmt.Sprintf("member %s healthy and caught up with the leader %s after its pod was Ready", p.Name, took.Round(time.Millisecond)))
	return nil
}

// podReady reads the pod from the run's pod informer (no request); true when there is none
// to read from (the step's verify saw it Ready just before).
func (g *restartGate) podReady(sc *ops.StepContext, pod string) bool {
	pods := sc.PodCache(g.e.Client, g.s.ns)
	if pods == nil {
		return true
	}
	return ops.PodReady(pods.Get(pod))
}

// catchUpFirstPoll is the first pause of a restarted member's catch-up wait; it doubles up to
// the poll interval. etcd's status cannot be watched.
const catchUpFirstPoll = 50 * time.Millisecond

// pollBackoff runs cond at once, then after first, doubling up to last, until it is done,
// fails or ctx ends.
func pollBackoff(ctx context.Context, first, last time.Duration, cond func(context.Context) (bool, error)) error {
	delay := min(first, last)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-timer.C:
		}
		done, err := cond(ctx)
		if err != nil || done {
			return err
		}
		timer.Reset(delay)
		delay = min(delay*2, last)
	}
}
