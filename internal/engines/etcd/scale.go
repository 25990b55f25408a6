package etcd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// PlanScale plans `scale --replicas N`: one member at a time, down from
// the highest ordinal or up through learners, after removing leftovers of
// an interrupted scale (learners without a pod or with a wrong peer URL,
// members whose pod is beyond the new size).
func (e *Engine) PlanScale(ctx context.Context, c *ops.Cluster, req ops.ScaleRequest) (*ops.Plan, error) {
	if req.Masters != nil || len(req.Data) > 0 || req.Primaries != nil {
		return nil, ops.Usagef("etcd clusters scale with --replicas N only")
	}
	if req.Replicas == nil {
		return nil, ops.Usagef("etcd scale needs --replicas N")
	}
	target := int(*req.Replicas)
	if target < 1 {
		return nil, ops.Usagef("--replicas must be at least 1 for etcd, got %d", target)
	}
	// The layout comes from the pod template alone: refuse before talking to etcd.
	if s, err := e.newSite(c); err != nil {
		return nil, err
	} else if err := s.state.checkDrivable(s.ns, s.sts, fmt.Sprintf("scale to %d members", target)); err != nil {
		return nil, err
	}
	s, st, err := e.prepare(ctx, c)
	if err != nil {
		if s == nil {
			return nil, err
		}
		return nil, &ops.CodedError{Kind: ops.ErrPrecondition, Msg: fmt.Sprintf("cannot read etcd membership of %s/%s: %v", c.Namespace, c.Name, err), Err: err}
	}
	current := int(c.Groups[0].Desired)
	p := ops.NewPlan("scale", c, ops.EngineEtcd, fmt.Sprintf("--replicas %d", target))
	p.Destructive = target < current
	p.Notes = append(p.Notes, fmt.Sprintf("etcd: %s; peer URLs from %s: %s", st.Summary(), s.tmplSource, s.tmplText),
		"new members learn the initial cluster from "+s.state.Why)

	existingPods := map[string]bool{}
	for _, pod := range c.Groups[0].Pods {
		existingPods[pod.Name] = true
	}
	stale := staleMembers(s, st, target, current, existingPods)
	if err := checkScale(s, st, target, current, stale); err != nil {
		return nil, err
	}
	if len(stale) > 0 {
		p.Steps = append(p.Steps, e.cleanupStep(s, target, current, stale))
	}

	// Down: highest ordinal first, from whichever is higher of the
	// StatefulSet's size and the highest member.
	top := current
	for _, m := range st.Members {
		top = max(top, m.Ordinal+1)
	}
	for o := top - 1; o >= target; o-- {
		pod := s.podName(o)
		url, err := s.peerURL(o)
		if err != nil {
			return nil, err
		}
		hasMember := memberFor(st, pod, url) != nil && !slices.ContainsFunc(stale, func(m Member) bool { return m.Ordinal == o })
		if !hasMember && o >= current {
			continue // nothing left of it
		}
		p.Steps = append(p.Steps, e.removeStep(s, "remove/"+pod, o, url, "scale down"), e.shrinkStep(s, o), e.pvcStep(s, o))
		cfg, err := e.configStep(s, "config/"+pod, "without "+pod, o)
		if err != nil {
			return nil, err
		}
		p.Steps = append(p.Steps, cfg)
	}
	// Claims of ordinals beyond the new or current size whose pod and member are
	// gone: a run killed between a member's removal and its PVC deletion
	// leaves them, and the journal alone does not know it (the next run
	// plans from live state), so they are re-derived here from the claims
	// that exist. A later scale-up must never reuse such old data.
	leftovers, err := e.leftoverClaimOrdinals(ctx, s, min(current, target), existingPods)
	if err != nil {
		return nil, err
	}
	planned := map[string]bool{}
	for _, st := range p.Steps {
		planned[st.ID] = true
	}
	for _, o := range leftovers {
		pod := s.podName(o)
		if planned["pvc/"+pod] || o < current {
			continue
		}
		if memberFor(st, pod, mustURL(s, o)) != nil {
			continue // a member still runs from it: removed above first
		}
		p.Steps = append(p.Steps, e.pvcStep(s, o))
	}
	// Up, and members missing below the target.
	dnsChecked := false
	for o := range target {
		pod := s.podName(o)
		url, err := s.peerURL(o)
		if err != nil {
			return nil, err
		}
		m := memberFor(st, pod, url)
		if m != nil && !m.Learner {
			continue
		}
		// Every learner this plan adds must be reachable by its DNS name.
		if !dnsChecked {
			if err := e.checkPeerDNS(ctx, s, ops.StatefulSetOf(c.Groups[0]), o); err != nil {
				return nil, err
			}
			dnsChecked = true
		}
		if m == nil && o < current && existingPods[pod] {
			// The pod runs but is no member: its data is stale; replace it.
			steps, err := e.repairSteps(s, o, url, current)
			if err != nil {
				return nil, err
			}
			p.Steps = append(p.Steps, steps...)
			continue
		}
		cfg, err := e.configStep(s, "config/"+pod, "with "+pod, max(o+1, min(current, target)))
		if err != nil {
			return nil, err
		}
		p.Steps = append(p.Steps, e.addStep(s, "add/"+pod, o, url, ""), cfg, e.growStep(s, o),
			e.promoteStep(s, "promote/"+pod, o, url))
	}
	if len(p.Steps) == 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("already %d voting member(s) with %d pod(s)", target, current))
	}
	return s.declareNeeds(p), nil
}

// staleMembers are leftovers an interrupted scale may leave: learners with
// no pod to come or a peer URL no pod has, and members beyond both the
// target and the StatefulSet's size.
func staleMembers(s *site, st *Status, target, current int, pods map[string]bool) []Member {
	var out []Member
	for _, m := range st.Members {
		switch {
		case m.Learner && m.Ordinal < 0:
			out = append(out, m)
		case m.Learner && !m.HasPeerURL(mustURL(s, m.Ordinal)):
			out = append(out, m)
		case m.Ordinal >= target && m.Ordinal >= current && !pods[m.Pod]:
			out = append(out, m)
		}
	}
	return out
}

// leftoverClaimOrdinals lists, in order, the ordinals at or above from
// whose claims (named <template>-<sts>-<ordinal>, as the StatefulSet
// controller names them) exist while the pod does not.
func (e *Engine) leftoverClaimOrdinals(ctx context.Context, s *site, from int, pods map[string]bool) ([]int, error) {
	if len(s.claims) == 0 {
		return nil, nil
	}
	list, err := e.Client.CoreV1().PersistentVolumeClaims(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing PVCs in %s: %w", s.ns, err)
	}
	seen := map[int]bool{}
	for _, pvc := range list.Items {
		for _, claim := range s.claims {
			rest, ok := strings.CutPrefix(pvc.Name, claim+"-")
			if !ok {
				continue
			}
			if o := s.ordinalOf(rest); o >= from && !pods[rest] {
				seen[o] = true
			}
		}
	}
	out := make([]int, 0, len(seen))
	for o := range seen {
		out = append(out, o)
	}
	slices.Sort(out)
	return out, nil
}

func mustURL(s *site, ordinal int) string {
	u, err := s.peerURL(ordinal)
	if err != nil {
		return ""
	}
	return u
}

// checkScale refuses at plan time what a step would refuse anyway, so a
// refused request changes nothing at all.
func checkScale(s *site, st *Status, target, current int, stale []Member) error {
	isStale := func(m *Member) bool {
		return slices.ContainsFunc(stale, func(x Member) bool { return x.ID == m.ID })
	}
	if !st.HasQuorum {
		return ops.Refusef(ops.ReasonQuorumAtRisk, "etcd has no quorum (%s); refusing to scale", st.Summary())
	}
	if target >= current {
		// A learner this plan will start and promote (left by an
		// interrupted run of the same request) is not up yet by design.
		ours := func(m *Member) bool { return isStale(m) || (m.Learner && m.Ordinal >= 0 && m.Ordinal < target) }
		return checkAllHealthy(st, ours, fmt.Sprintf("scale to %d", target))
	}
	// Simulate the removals, highest ordinal first: after each, quorum must
	// hold and every remaining member must be healthy.
	members := slices.DeleteFunc(slices.Clone(st.Members), func(m Member) bool { return isStale(&m) })
	slices.SortFunc(members, func(a, b Member) int { return b.Ordinal - a.Ordinal })
	for len(members) > 0 && members[0].Ordinal >= target {
		gone := members[0]
		members = members[1:]
		voters, healthy := 0, 0
		for _, m := range members {
			if !m.Healthy {
				return ops.Refusef(ops.ReasonMemberUnhealthy, "etcd member %s is not healthy%s; refusing to remove %s (every remaining member must be healthy)",
					m.label(), errSuffix(m.Error), gone.label())
			}
			if !m.Learner {
				voters++
				healthy++
			}
		}
		if voters < 1 || healthy < Quorum(voters) {
			return ops.Refusef(ops.ReasonQuorumAtRisk, "removing etcd member %s would lose quorum", gone.label())
		}
	}
	return nil
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return " (" + e + ")"
}

// cleanupStep removes stale members, each only if quorum holds after it.
func (e *Engine) cleanupStep(s *site, target, current int, planned []Member) *ops.Step {
	names := make([]string, 0, len(planned))
	for _, m := range planned {
		names = append(names, fmt.Sprintf("%s (ID %s, %s)", m.label(), m.ID, strings.Join(m.PeerURLs, ",")))
	}
	return &ops.Step{
		ID: "cleanup", Group: s.group, Target: "members", Mutating: true,
		Description:   "remove members left by an interrupted scale: " + strings.Join(names, "; "),
		Preconditions: []string{"quorum holds after each removal"},
		Precheck: func(ctx context.Context, sc *ops.StepContext) (bool, error) {
			st, err := e.status(ctx, sc, s, "")
			if err != nil {
				return false, err
			}
			pods, _, err := e.livePods(ctx, sc, s)
			if err != nil {
				return false, err
			}
			exist := map[string]bool{}
			for _, p := range pods {
				exist[p] = true
			}
			return len(staleMembers(s, st, target, current, exist)) == 0, nil
		},
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			st, err := e.status(ctx, sc, s, "")
			if err != nil {
				return err
			}
			pods, _, err := e.livePods(ctx, sc, s)
			if err != nil {
				return err
			}
			exist := map[string]bool{}
			for _, p := range pods {
				exist[p] = true
			}
			for _, m := range staleMembers(s, st, target, current, exist) {
				if !m.Learner && !QuorumAfterRemoval(st.Voters, st.HealthyVoters, true, m.Healthy) {
					return ops.Refusef(ops.ReasonQuorumAtRisk, "removing stale etcd member %s would lose quorum", m.label())
				}
				if _, err := s.ctl.reconfig(ctx, st.Via, "member remove", e.pollInterval(), "member", "remove", m.ID); err != nil && !isCtlError(err, errTextMemberNotFound) {
					return fmt.Errorf("removing stale etcd member %s: %w", m.label(), err)
				}
				sc.Audit(ctx, stsRef(s, ""), "DbopsEtcdMemberRemove", fmt.Sprintf("removed stale etcd member %s (ID %s)", m.label(), m.ID))
				if !m.Learner {
					st.Voters--
					if m.Healthy {
						st.HealthyVoters--
					}
				}
			}
			return nil
		},
	}
}
