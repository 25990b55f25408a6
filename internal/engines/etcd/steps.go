package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Journal keys. Values written before a change let a re-run tell its own
// earlier work apart from someone else's.
func memberKey(pod string) string  { return "etcd.member/" + pod }
func removedKey(pod string) string { return "etcd.removed/" + pod }
func podUIDKey(pod string) string  { return "etcd.pod-uid/" + pod }
func pvcUIDKey(pvc string) string  { return "etcd.pvc-uid/" + pvc }

// checkAllHealthy refuses when quorum is lost or a member other than skip
// is unhealthy.
func checkAllHealthy(st *Status, skip func(*Member) bool, doing string) error {
	if !st.HasQuorum {
		return ops.Refusef(ops.ReasonQuorumAtRisk, "etcd has no quorum (%s); refusing to %s", st.Summary(), doing)
	}
	if bad := st.Unhealthy(skip); len(bad) > 0 {
		names := make([]string, 0, len(bad))
		for _, m := range bad {
			n := m.label()
			if m.Error != "" {
				n += " (" + m.Error + ")"
			}
			names = append(names, n)
		}
		return ops.Refusef(ops.ReasonMemberUnhealthy, "etcd member %s is not healthy; every member must be healthy to %s", strings.Join(names, ", "), doing)
	}
	return nil
}

// checkRemoval refuses a removal that would lose quorum or leave an
// unhealthy member behind.
func checkRemoval(st *Status, m *Member) error {
	doing := "remove " + m.label()
	if err := checkAllHealthy(st, func(o *Member) bool { return o.ID == m.ID }, doing); err != nil {
		return err
	}
	if !QuorumAfterRemoval(st.Voters, st.HealthyVoters, !m.Learner, m.Healthy) {
		return ops.Refusef(ops.ReasonQuorumAtRisk, "removing etcd member %s would lose quorum (%d voters, %d healthy)", m.label(), st.Voters, st.HealthyVoters)
	}
	return nil
}

// memberFor finds the member of ordinal: by its pod name, else its peer URL.
func memberFor(st *Status, pod, url string) *Member {
	if m := st.ByPod(pod); m != nil {
		return m
	}
	return st.ByPeerURL(url)
}

// addStep adds the pod as a learner. skipHealth names a pod whose member
// may be unhealthy (the one being repaired).
func (e *Engine) addStep(s *site, id string, ordinal int, url string, skipHealth string) *ops.Step {
	pod := s.podName(ordinal)
	var via string
	return &ops.Step{
		ID: id, Group: s.group, Target: "member/" + pod, Mutating: true,
		Description:   fmt.Sprintf("add %s as a learner with peer URL %s", pod, url),
		Preconditions: []string{"quorum holds and every member is healthy", "no member has peer URL " + url},
		Details:       []string{s.ctl.describe("member", "add", pod, "--peer-urls="+url, "--learner")},
		Precheck: func(ctx context.Context, sc *ops.StepContext) (bool, error) {
			st, err := e.status(ctx, sc, s, "")
			if err != nil {
				return false, err
			}
			if m := st.ByPeerURL(url); m != nil {
				// Added by an earlier run, or already there.
				return true, sc.Set(ctx, memberKey(pod), m.ID)
			}
			via = st.Via
			return false, checkAllHealthy(st, func(m *Member) bool { return skipHealth != "" && m.Pod == skipHealth }, "add "+pod)
		},
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			out, err := s.ctl.reconfig(ctx, via, "member add", e.pollInterval(), "member", "add", pod, "--peer-urls="+url, "--learner", "-w", "json")
			if err != nil {
				return fmt.Errorf("adding %s as a learner: %w", pod, err)
			}
			m, err := ParseMemberAdd(out)
			if err != nil {
				return err
			}
			sc.Audit(ctx, stsRef(s, ""), "DbopsEtcdMemberAdd", fmt.Sprintf("added etcd learner %s (ID %s, peer URL %s)", pod, m.ID, url))
			return sc.Set(ctx, memberKey(pod), m.ID)
		},
	}
}

// configStep records the initial-cluster string for pods 0..n-1.
func (e *Engine) configStep(s *site, id, target string, n int) (*ops.Step, error) {
	initial, err := s.initialCluster(n)
	if err != nil {
		return nil, err
	}
	return &ops.Step{
		ID: id, Group: s.group, Target: "configmap/" + s.configMap, Mutating: true,
		Description: fmt.Sprintf("set %s (state existing) to the %d member(s) %s", s.state.ClusterKey, n, target),
		Details:     s.state.details(initial),
		Precheck: func(ctx context.Context, _ *ops.StepContext) (bool, error) {
			return e.clusterStateIs(ctx, s, initial)
		},
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			changed, err := e.writeClusterState(ctx, s, initial)
			if err == nil && changed {
				sc.Audit(ctx, ops.ObjectRef{Kind: "ConfigMap", APIVersion: "v1", Namespace: s.ns, Name: s.configMap},
					"DbopsEtcdClusterState", fmt.Sprintf("%s set to %d member(s)", KeyInitialCluster, n))
			}
			return err
		},
	}, nil
}

// growStep raises replicas to ordinal+1 and waits for the pod's containers to run. It does
// not wait for Ready: etcd's /readyz fails for a learner ("non_learner failed"), so a pod with
// that readiness probe becomes Ready only after promoteStep.
func (e *Engine) growStep(s *site, ordinal int) *ops.Step {
	pod := s.podName(ordinal)
	want := int32(ordinal + 1)
	return &ops.Step{
		ID: "grow/" + pod, Group: s.group, Target: "statefulset/" + s.sts, Mutating: true,
		Description: fmt.Sprintf("raise replicas to %d and wait for %s to run (Ready comes after promotion)", want, pod),
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			cur, err := e.replicas(ctx, s)
			if err != nil || cur >= want {
				return err
			}
			uid, err := e.setReplicas(ctx, s, want)
			if err == nil {
				sc.Audit(ctx, stsRef(s, uid), "DbopsScale", fmt.Sprintf("replicas %d -> %d to start etcd member %s", cur, want, pod))
			}
			return err
		},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			_, err := waitPodRunning(ctx, sc, e, s, pod, "")
			return err
		},
	}
}

// promoteStep promotes the learner of ordinal once it has caught up with the
// leader, waits for it to answer as a healthy voter, then for its pod to be
// Ready (a readiness probe on /readyz passes only for voters).
func (e *Engine) promoteStep(s *site, id string, ordinal int, url string) *ops.Step {
	pod := s.podName(ordinal)
	return &ops.Step{
		ID: id, Group: s.group, Target: "member/" + pod, Mutating: true,
		Description:   fmt.Sprintf("promote learner %s to a voting member once it has caught up with the leader, then wait for %s to be Ready", pod, pod),
		Preconditions: []string{"learner " + pod + " exists"},
		Details:       []string{s.ctl.describe("member", "promote", "<id of "+pod+">")},
		Precheck: func(ctx context.Context, sc *ops.StepContext) (bool, error) {
			st, err := e.status(ctx, sc, s, "")
			if err != nil {
				return false, err
			}
			m := memberFor(st, pod, url)
			if m == nil {
				return false, ops.Preconditionf("etcd has no member for %s (peer URL %s); run the scale again to add it", pod, url)
			}
			if m.Learner || !m.Healthy {
				return false, nil
			}
			p, err := ops.GetPod(ctx, sc, e.Client, s.ns, pod)
			if err != nil || p == nil {
				return false, nil //nolint:nilerr // Verify waits for the pod
			}
			return ops.PodReady(p), nil
		},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			if err := e.promoteWhenReady(ctx, sc, s, pod, url); err != nil {
				return err
			}
			_, err := waitPodReady(ctx, sc, e, s, pod, "")
			return err
		},
	}
}

// promoteWhenReady retries member promote while etcd says the learner is
// not in sync: that is the database's own condition, polled at a bounded
// interval until the step's context ends.
func (e *Engine) promoteWhenReady(ctx context.Context, sc *ops.StepContext, s *site, pod, url string) error {
	last, id := "", ""
	report := func(r string) {
		if r != last {
			last = r
			// The member ID as etcd reports it (what etcdctl member promote/remove take), once
			// a member list named the learner.
			on := fmt.Sprintf("etcd learner %s (peer URL %s)", pod, url)
			if id != "" {
				on = fmt.Sprintf("etcd learner %s (peer URL %s, member ID %s)", pod, url, id)
			}
			sc.Block(ctx, ops.BlockedMember, on,
				fmt.Sprintf("it is promoted once its raft index is within %d of the leader's; if it does not move, see kubectl logs -n %s %s", e.maxLag(), s.ns, pod), r)
		}
	}
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, e.pollInterval(), true, func(ctx context.Context) (bool, error) {
		st, err := e.status(ctx, sc, s, "")
		if err != nil {
			lastErr = err
			report("reading etcd status: " + err.Error())
			return false, nil
		}
		m := memberFor(st, pod, url)
		if m == nil {
			return false, ops.Preconditionf("etcd member for %s (peer URL %s) disappeared while waiting to promote it", pod, url)
		}
		id = m.ID
		if !m.Learner {
			if m.Healthy {
				return true, nil
			}
			report(fmt.Sprintf("member %s promoted; waiting for it to be healthy", pod))
			return false, nil
		}
		if !m.Started() || (!m.Healthy && !m.StatusHidden) {
			report(fmt.Sprintf("learner %s has not started yet", pod))
			return false, nil
		}
		if ok, why := CaughtUp(m, st.Leader(), e.maxLag()); !m.StatusHidden && !ok {
			if l := st.Leader(); l != nil && m.RaftIndex != 0 && l.RaftIndex > m.RaftIndex+e.maxLag() {
				// The step's ETA: the entries the learner is behind beyond the lag allowed,
				// over the rate that shrinks at.
				sc.Remaining(int64(l.RaftIndex-m.RaftIndex-e.maxLag()), ops.UnitEntries)
			}
			report(fmt.Sprintf("learner %s is catching up with the leader (%s)", pod, why))
			return false, nil
		}
		_, err = s.ctl.run(ctx, st.Via, "member promote", "member", "promote", m.ID)
		switch {
		case err == nil:
			sc.Audit(ctx, stsRef(s, ""), "DbopsEtcdMemberPromote", fmt.Sprintf("promoted etcd learner %s (ID %s)", pod, m.ID))
			return false, nil // confirm through the next status
		case isCtlError(err, errTextNotInSync), isCtlError(err, errTextNotStarted):
			report(fmt.Sprintf("learner %s not yet in sync with the leader", pod))
			return false, nil
		case isCtlError(err, errTextNotLearner):
			return false, nil // promoted meanwhile
		default:
			lastErr = err
			report("member promote failed, retrying: " + err.Error())
			return false, nil
		}
	})
	if err != nil {
		if lastErr != nil && ctx.Err() != nil {
			return fmt.Errorf("promoting %s: %w (last error: %w)", pod, err, lastErr)
		}
		return fmt.Errorf("promoting %s: %w", pod, err)
	}
	return nil
}

// removeStep removes the member of ordinal.
func (e *Engine) removeStep(s *site, id string, ordinal int, url, why string) *ops.Step {
	pod := s.podName(ordinal)
	var via, memberID string
	return &ops.Step{
		ID: id, Group: s.group, Target: "member/" + pod, Mutating: true,
		Description:   fmt.Sprintf("remove etcd member %s (%s)", pod, why),
		Preconditions: []string{"quorum holds after the removal", "every remaining member is healthy"},
		Details:       []string{s.ctl.describe("member", "remove", "<id of "+pod+">")},
		Precheck: func(ctx context.Context, sc *ops.StepContext) (bool, error) {
			st, err := e.status(ctx, sc, s, pod)
			if err != nil {
				if ctx.Err() == nil {
					if refusal := e.quorumLostBeforeRemoval(ctx, sc, s, pod, err); refusal != nil {
						return false, refusal
					}
				}
				return false, err
			}
			m := memberFor(st, pod, url)
			if m == nil {
				return true, nil
			}
			if old := sc.Get(removedKey(pod)); old != "" && old != m.ID {
				// An earlier run removed the old member; this one is its
				// replacement (member repair).
				return true, nil
			}
			if err := checkRemoval(st, m); err != nil {
				return false, err
			}
			via, memberID = st.Via, m.ID
			return false, nil
		},
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			if err := sc.Set(ctx, removedKey(pod), memberID); err != nil {
				return err
			}
			_, err := s.ctl.reconfig(ctx, via, "member remove", e.pollInterval(), "member", "remove", memberID)
			if err != nil && !isCtlError(err, errTextMemberNotFound) {
				return fmt.Errorf("removing etcd member %s: %w", pod, err)
			}
			sc.Audit(ctx, stsRef(s, ""), "DbopsEtcdMemberRemove", fmt.Sprintf("removed etcd member %s (ID %s)", pod, memberID))
			return nil
		},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			return e.waitSettled(ctx, sc, s, pod, url)
		},
	}
}

// quorumLostBeforeRemoval is the refusal when no member but pod (the one to
// remove) answered etcdctl (cause): it reads etcd through pod itself, and
// when the members that stay are down, refuses naming them (the removal
// needs their quorum). When pod cannot answer either (etcdctl's member list
// is linearizable, so a member without quorum times out), it refuses with
// cause, which names each pod that did not answer. nil when the members
// that stay read healthy, or cause is no etcdctl failure: cause stands.
func (e *Engine) quorumLostBeforeRemoval(ctx context.Context, sc *ops.StepContext, s *site, pod string, cause error) error {
	var ce *CtlError
	if !errors.As(cause, &ce) {
		return nil
	}
	st, err := e.status(ctx, sc, s, "")
	if err != nil {
		return ops.Refusef(ops.ReasonQuorumAtRisk, "no etcd member answers (%v); refusing to remove %s: the members that stay must be healthy and hold quorum", cause, pod)
	}
	if bad := st.Unhealthy(func(m *Member) bool { return m.Pod == pod }); len(bad) > 0 {
		names := make([]string, 0, len(bad))
		for _, m := range bad {
			n := m.label()
			if m.Error != "" {
				n += " (" + m.Error + ")"
			}
			names = append(names, n)
		}
		return ops.Refusef(ops.ReasonQuorumAtRisk, "etcd member %s is not healthy (%s); refusing to remove %s: the members that stay must be healthy and hold quorum",
			strings.Join(names, ", "), st.Summary(), pod)
	}
	return nil
}

// waitSettled waits, after a member left, until the remaining cluster has a
// leader and every voter is healthy: removing the leader starts an
// election, and the next step must not run into it.
func (e *Engine) waitSettled(ctx context.Context, sc *ops.StepContext, s *site, removed, url string) error {
	last := ""
	err := wait.PollUntilContextCancel(ctx, e.pollInterval(), true, func(ctx context.Context) (bool, error) {
		reason := ""
		st, err := e.status(ctx, sc, s, removed)
		switch {
		case err != nil:
			reason = "reading etcd status: " + err.Error()
		case memberFor(st, removed, url) != nil:
			reason = "member " + removed + " is still listed"
		case st.LeaderID == "":
			reason = "waiting for the remaining members to elect a leader"
		case st.HealthyVoters < st.Voters:
			reason = fmt.Sprintf("waiting for every remaining voter to be healthy (%d/%d)", st.HealthyVoters, st.Voters)
		default:
			return true, nil
		}
		if reason != last {
			last = reason
			sc.Waiting(reason)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for etcd to settle after removing %s (%s): %w", removed, last, err)
	}
	return nil
}

// shrinkStep lowers replicas to ordinal and waits for the pod to be gone.
func (e *Engine) shrinkStep(s *site, ordinal int) *ops.Step {
	pod := s.podName(ordinal)
	want := int32(ordinal)
	return &ops.Step{
		ID: "shrink/" + pod, Group: s.group, Target: "statefulset/" + s.sts, Mutating: true,
		Description: fmt.Sprintf("lower replicas to %d and wait for %s to be gone", want, pod),
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			cur, err := e.replicas(ctx, s)
			if err != nil || cur <= want {
				return err
			}
			uid, err := e.setReplicas(ctx, s, want)
			if err == nil {
				sc.Audit(ctx, stsRef(s, uid), "DbopsScale", fmt.Sprintf("replicas %d -> %d after removing etcd member %s", cur, want, pod))
			}
			return err
		},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			return waitPodGone(ctx, sc, e, s, pod)
		},
	}
}

// pvcStep deletes the claims of a pod that is gone, so a later scale-up
// never starts from its old data.
func (e *Engine) pvcStep(s *site, ordinal int) *ops.Step {
	pod := s.podName(ordinal)
	names := s.pvcNames(pod)
	return &ops.Step{
		ID: "pvc/" + pod, Group: s.group, Target: "pvc/" + strings.Join(names, ","), Mutating: true,
		Description: fmt.Sprintf("delete the data of removed member %s", pod),
		Precheck: func(ctx context.Context, sc *ops.StepContext) (bool, error) {
			uids, err := e.pvcUIDs(ctx, s, pod)
			if err != nil {
				return false, err
			}
			if len(uids) == 0 {
				return true, nil
			}
			if p, err := ops.GetPod(ctx, sc, e.Client, s.ns, pod); err != nil {
				return false, err
			} else if p != nil {
				return false, ops.Preconditionf("pod %s exists again (replicas raised meanwhile?); not deleting its PVC", pod)
			}
			return false, nil
		},
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			if err := e.deletePVCs(ctx, s, pod); err != nil {
				return err
			}
			for _, n := range names {
				sc.Audit(ctx, ops.ObjectRef{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: s.ns, Name: n},
					"DbopsEtcdDeleteData", "deleted the data of removed etcd member "+pod)
			}
			return nil
		},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			return e.waitPVCsGone(ctx, s, names, nil)
		},
	}
}

// recreateStep deletes a pod together with its claims so the StatefulSet
// recreates it with empty data, and waits for the new pod to run (it is a
// learner until promoteStep, so a /readyz probe keeps it un-Ready). Its
// DbopsEtcdReplace event is recorded on the new incarnation once it runs
// (recreateEvent).
func (e *Engine) recreateStep(s *site, ordinal int) *ops.Step {
	pod := s.podName(ordinal)
	names := s.pvcNames(pod)
	// deleted: this run's action deleted the pod's live incarnation.
	var deleted bool
	return &ops.Step{
		ID: "recreate/" + pod, Group: s.group, Target: "pod/" + pod, Mutating: true,
		Description: fmt.Sprintf("delete %s and its PVC so it starts with empty data, wait for it to run", pod),
		Details:     []string{"delete pvc " + strings.Join(names, ", "), "delete pod " + pod},
		Precheck: func(ctx context.Context, sc *ops.StepContext) (bool, error) {
			old := sc.Get(podUIDKey(pod))
			if old == "" {
				return false, nil
			}
			p, err := ops.GetPod(ctx, sc, e.Client, s.ns, pod)
			if err != nil {
				return false, err
			}
			if p == nil {
				return false, nil // being recreated; Verify waits for it
			}
			if string(p.UID) == old || !podRunning(p) {
				return false, nil
			}
			uids, err := e.pvcUIDs(ctx, s, pod)
			if err != nil {
				return false, err
			}
			for n, u := range uids {
				if sc.Get(pvcUIDKey(n)) == u {
					return false, nil
				}
			}
			// Recreated by an earlier run that stopped before the step was done: its event
			// is recorded unless that run did.
			recreateEvent(ctx, sc, s, pod, names, p, false, false)
			return true, nil
		},
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			deleted = false
			if sc.Get(podUIDKey(pod)) == "" {
				p, err := ops.GetPod(ctx, sc, e.Client, s.ns, pod)
				if err != nil {
					return err
				}
				uid := "gone"
				if p != nil {
					uid = string(p.UID)
				}
				uids, err := e.pvcUIDs(ctx, s, pod)
				if err != nil {
					return err
				}
				// Persist before deleting: a re-run must know what was old.
				for n, u := range uids {
					if err := sc.Set(ctx, pvcUIDKey(n), u); err != nil {
						return err
					}
				}
				if err := sc.Set(ctx, podUIDKey(pod), uid); err != nil {
					return err
				}
			}
			old := sc.Get(podUIDKey(pod))
			for _, n := range names {
				p, err := e.Client.CoreV1().PersistentVolumeClaims(s.ns).Get(ctx, n, metav1.GetOptions{})
				if apierrors.IsNotFound(err) || (err == nil && string(p.UID) != sc.Get(pvcUIDKey(n))) {
					continue // already replaced
				}
				if err != nil {
					return fmt.Errorf("reading PVC %s: %w", n, err)
				}
				if err := kube.DeletePVC(ctx, e.Client, s.ns, n, p.UID); err != nil {
					return err
				}
			}
			if old != "gone" {
				// An incarnation an interrupted run deleted already (gone, or terminating)
				// is not this run's deletion: its event may be recorded already.
				cur, err := ops.GetPod(ctx, sc, e.Client, s.ns, pod)
				if err != nil {
					return err
				}
				live := cur != nil && string(cur.UID) == old && cur.DeletionTimestamp == nil
				if err := ops.DeletePod(ctx, e.Client, s.ns, pod, types.UID(old)); err != nil {
					return err
				}
				deleted = live
			}
			return nil
		},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			old := map[string]string{}
			for _, n := range names {
				old[n] = sc.Get(pvcUIDKey(n))
			}
			if err := e.waitPVCsGone(ctx, s, names, old); err != nil {
				return err
			}
			cur, err := waitPodRunning(ctx, sc, e, s, pod, sc.Get(podUIDKey(pod)))
			if err != nil {
				if deleted {
					// Stopped first (Ctrl-C, timeout): on the new incarnation if it exists.
					if p, gerr := ops.GetPod(ctx, sc, e.Client, s.ns, pod); gerr == nil && p != nil && string(p.UID) != sc.Get(podUIDKey(pod)) {
						recreateEvent(ctx, sc, s, pod, names, p, true, true)
					}
				}
				return err
			}
			recreateEvent(ctx, sc, s, pod, names, cur, deleted, false)
			return nil
		},
	}
}

// recreateEvent records pod's DbopsEtcdReplace event on its new incarnation cur: `kubectl
// describe pod` looks events up by the live pod's UID, so an event on the deleted incarnation
// never shows once the pod is recreated. One per recreated pod: when an earlier, interrupted
// run deleted it (deleted false), only if that run did not record it (ops.StepContext.AuditOnce,
// one list on that path only). stopped: the run ends before cur runs (a Warning).
func recreateEvent(ctx context.Context, sc *ops.StepContext, s *site, pod string, pvcs []string, cur *corev1.Pod, deleted, stopped bool) {
	var vols []string
	for _, n := range pvcs {
		v := "PVC " + n
		if u := sc.Get(pvcUIDKey(n)); u != "" {
			v += " (old uid " + u + ")"
		}
		vols = append(vols, v)
	}
	old := sc.Get(podUIDKey(pod))
	msg := fmt.Sprintf("replaced pod %s (old uid %s) and its %s with fresh ones so it rejoins etcd with empty data", pod, old, strings.Join(vols, ", "))
	if old == "gone" {
		msg = fmt.Sprintf("pod %s was gone; replaced its %s with a fresh one so it rejoins etcd with empty data", pod, strings.Join(vols, ", "))
	}
	ref := ops.ObjectRef{Kind: "Pod", APIVersion: "v1", Namespace: s.ns, Name: pod, UID: string(cur.UID)}
	switch {
	case stopped:
		ref.Warning = true
		sc.Audit(ctx, ref, "DbopsEtcdReplace", msg+fmt.Sprintf("; the run stopped before its new incarnation %s was running", cur.UID))
	case deleted:
		sc.Audit(ctx, ref, "DbopsEtcdReplace", msg+fmt.Sprintf("; back as uid %s, running as a learner", cur.UID))
	default:
		sc.AuditOnce(ctx, ref, "DbopsEtcdReplace", msg+fmt.Sprintf("; recreated by an interrupted run of this request, back as uid %s", cur.UID))
	}
}

// CaughtUp reports whether learner trails the leader's raft index by at most
// maxLag entries (the bound a restarted member must meet too, Options.MaxLag),
// and if not, why (for progress messages). Promoting a learner far behind
// would make it a voter that stalls commits while it catches up; etcd's own
// promote check is laxer (90% of the leader's index).
func CaughtUp(learner, leader *Member, maxLag uint64) (bool, string) {
	switch {
	case leader == nil:
		return false, "no leader known"
	case leader.RaftIndex == 0:
		return false, "leader's raft index unknown"
	case learner.RaftIndex == 0:
		return false, "learner's raft index unknown"
	case leader.RaftIndex > learner.RaftIndex+maxLag:
		return false, fmt.Sprintf("raft index %d, leader %d", learner.RaftIndex, leader.RaftIndex)
	}
	return true, ""
}
