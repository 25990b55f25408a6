package etcd

import (
	"context"
	"fmt"
	"strings"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// PlanRepair plans the repair of one member whose pod lost its data (PVC
// deleted, data dir empty, stale member ID): remove the stale member, add
// it again as a learner (cluster state "existing"), recreate the pod with
// an empty PVC, promote it once in sync.
func (e *Engine) PlanRepair(ctx context.Context, c *ops.Cluster, pod string) (*ops.Plan, error) {
	if s, err := e.newSite(c); err != nil {
		return nil, err
	} else if err := s.state.checkDrivable(s.ns, s.sts, "repair "+pod); err != nil {
		return nil, err
	}
	s, st, err := e.prepare(ctx, c)
	if err != nil {
		if s == nil {
			return nil, err
		}
		return nil, &ops.CodedError{Kind: ops.ErrPrecondition, Msg: fmt.Sprintf("cannot read etcd membership of %s/%s: %v", c.Namespace, c.Name, err), Err: err}
	}
	o := s.ordinalOf(pod)
	current := int(c.Groups[0].Desired)
	if o < 0 || o >= current {
		return nil, ops.Usagef("%s is not a pod of etcd StatefulSet %s/%s (replicas %d)", pod, s.ns, s.sts, current)
	}
	url, err := s.peerURL(o)
	if err != nil {
		return nil, err
	}
	// The member being repaired may be down; everyone else must be fine.
	if m := memberFor(st, pod, url); m != nil {
		if err := checkRemoval(st, m); err != nil {
			return nil, err
		}
	} else if err := checkAllHealthy(st, nil, "repair "+pod); err != nil {
		return nil, err
	}
	steps, err := e.repairSteps(s, o, url, current)
	if err != nil {
		return nil, err
	}
	p := ops.NewPlan("repair", c, ops.EngineEtcd, "--member "+pod)
	p.Destructive, p.Steps = true, steps
	p.Notes = []string{fmt.Sprintf("etcd: %s; peer URL of %s: %s (from %s)", st.Summary(), pod, url, s.tmplSource)}
	return s.declareNeeds(p), nil
}

// repairSteps replace the member of ordinal with a fresh learner on empty
// data; n is the cluster size recorded as the initial cluster.
func (e *Engine) repairSteps(s *site, ordinal int, url string, n int) ([]*ops.Step, error) {
	pod := s.podName(ordinal)
	cfg, err := e.configStep(s, "repair-config/"+pod, "with "+pod+" rejoining", n)
	if err != nil {
		return nil, err
	}
	return []*ops.Step{
		e.removeStep(s, "repair-remove/"+pod, ordinal, url, "its data is lost or stale"),
		e.addStep(s, "repair-add/"+pod, ordinal, url, pod),
		cfg,
		e.recreateStep(s, ordinal),
		e.promoteStep(s, "repair-promote/"+pod, ordinal, url),
	}, nil
}

// NotMembers implements ops.MemberChecker for replace --failed: pods of
// the StatefulSet with no etcd member (matched by name, else peer URL).
// A member that maps to no pod while a pod has no member means the
// mapping cannot be trusted (members named otherwise, a peer URL template
// that does not match): that pod may well run a healthy voter, and
// replacing it would wipe its data, so it is refused (docs/procedures.md,
// etcd, "replace --failed").
func (e *Engine) NotMembers(ctx context.Context, c *ops.Cluster) (map[string]string, error) {
	s, st, err := e.prepare(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("reading etcd membership of %s/%s: %w", c.Namespace, c.Name, err)
	}
	out := map[string]string{}
	var missing []string
	for _, p := range c.AllPods() {
		if st.ByPod(p.Name) == nil {
			out[p.Name] = "no etcd member for pod " + p.Name
			missing = append(missing, p.Name)
		}
	}
	var unmapped []string
	for _, m := range st.Members {
		if m.Pod == "" {
			unmapped = append(unmapped, fmt.Sprintf("%s (ID %s, %s)", m.label(), m.ID, strings.Join(m.PeerURLs, ",")))
		}
	}
	if len(missing) > 0 && len(unmapped) > 0 {
		return nil, ops.Refusef(ops.ReasonPreconditionFailed, "cannot tell which pod runs etcd member(s) %s: neither their names nor their peer URLs match the pods of statefulset/%s (peer URL template %q from %s), so pod(s) %s cannot be called failed; set the peer URL template (--etcd-peer-url-template or annotation %s) to what the members advertise",
			strings.Join(unmapped, ", "), s.sts, s.tmplText, s.tmplSource, strings.Join(missing, ", "), AnnotationPeerURLTemplate)
	}
	return out, nil
}

// BeforeBatch implements ops.BatchChecker for restarts of more than one
// member at once (restart --mode zone|all, replace --strategy deletion
// --max-concurrent N): the healthy voters left while the whole batch is
// down must still be a quorum of all voters.
func (g *restartGate) BeforeBatch(ctx context.Context, sc *ops.StepContext, pods []ops.Pod) error {
	st, err := g.e.status(ctx, sc, g.s, "")
	if err != nil {
		return fmt.Errorf("checking etcd before restarting %d members together: %w", len(pods), err)
	}
	left := st.HealthyVoters
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
		if m := st.ByPod(p.Name); m != nil && !m.Learner && m.Healthy {
			left--
		}
	}
	if left < Quorum(st.Voters) {
		return ops.Refusef(ops.ReasonQuorumAtRisk, "restarting %s together would leave %d of %d etcd voters healthy, below quorum %d; use --mode pod or a smaller batch",
			strings.Join(names, ", "), left, st.Voters, Quorum(st.Voters))
	}
	return nil
}
