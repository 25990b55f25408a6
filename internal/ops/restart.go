package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// RestartGate lets an engine wrap each pod restart with its health gates
// (CrateDB: allocation and green checks; etcd: quorum). The generic engine
// has none.
type RestartGate interface {
	// Describe returns the extra preconditions and details shown in the plan.
	Describe(p Pod) (preconditions, details []string)
	// Before runs just before the pod is deleted.
	Before(ctx context.Context, sc *StepContext, p Pod) error
	// After runs once the new pod is Ready.
	After(ctx context.Context, sc *StepContext, p Pod) error
}

// RollingRestart builds rolling restart plans: node groups in procedure
// order (masters first), pods by ordinal; each step deletes one pod and
// waits for the same name with a new UID to be Ready.
type RollingRestart struct {
	Client kubernetes.Interface
	Gate   RestartGate // optional
}

// uidKey is the journal key remembering the UID a pod had before this run
// deleted it; a re-run that sees a different UID knows the pod was already
// restarted.
func uidKey(pod string) string { return "restart.uid/" + pod }

// Plan computes the plan from the discovered cluster.
func (r *RollingRestart) Plan(c *Cluster, engine string, opts RestartOptions) (*Plan, error) {
	for _, g := range opts.Groups {
		if c.Group(g) == nil {
			return nil, Usagef("unknown node group %q for cluster %s; allowed: %s", g, c.Name, strings.Join(c.GroupNames(), ", "))
		}
	}
	mode, err := checkRestartMode(opts)
	if err != nil {
		return nil, err
	}
	for _, name := range opts.Pods {
		if !inCluster(c, name) {
			return nil, Usagef("pod %q is not part of cluster %s/%s; allowed: %s", name, c.Namespace, c.Name, strings.Join(podNames(c.AllPods()), ", "))
		}
	}
	p := NewPlan("restart", c, engine, restartArgs(mode, opts))
	p.Destructive = true
	var pods []Pod
	for _, g := range c.Groups {
		if len(opts.Groups) > 0 && !slices.Contains(opts.Groups, g.Name) {
			continue
		}
		for _, pod := range groupPods(g) {
			if len(opts.Pods) == 0 || slices.Contains(opts.Pods, pod.Name) {
				pods = append(pods, pod)
			}
		}
	}
	stepPods := map[string][]string{}
	switch {
	case mode == ModePod && opts.BatchSize <= 1:
		for _, pod := range pods {
			s := r.step(c, c.Group(pod.Group), pod, opts.MaxUnavailableZones, opts.Pods)
			s.Pods = []string{pod.Name}
			stepPods[s.ID] = s.Pods
			p.Steps = append(p.Steps, s)
		}
	default:
		for _, b := range restartBatches(mode, pods, opts.BatchSize) {
			s := r.batchStep(c, b, opts.MaxUnavailableZones, opts.Pods)
			s.Pods = podNames(b.pods)
			stepPods[s.ID] = s.Pods
			p.Steps = append(p.Steps, s)
		}
	}
	p.Preflight = func(ctx context.Context, st PreflightState) error {
		return r.preflight(ctx, c, p, st, stepPods, opts)
	}
	if mode == ModeAll && len(pods) > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("all %d pods are deleted at once: the cluster is unavailable until they are back", len(pods)))
	}
	if len(p.Steps) == 0 {
		p.Notes = append(p.Notes, "no pods to restart")
	}
	return p, nil
}

// RestartPreflighter is a RestartGate that also checks, before the lock is
// taken, that the database is fit for a rolling restart (e.g. CrateDB
// green, etcd every member healthy). st.Resuming tells that an interrupted
// run of the same request may have left it degraded on purpose.
type RestartPreflighter interface {
	Preflight(ctx context.Context, c *Cluster, st PreflightState) error
}

// preflight refuses, before anything is written, what the first step still
// to do would refuse after taking the lock: another pod of the cluster not
// Ready (unless --max-unavailable-zones lets steps wait for it), or the
// engine's health.
func (r *RollingRestart) preflight(ctx context.Context, c *Cluster, p *Plan, st PreflightState, stepPods map[string][]string, opts RestartOptions) error {
	next := p.NextStep(st)
	if next == nil {
		return nil
	}
	if opts.MaxUnavailableZones == nil {
		mine := map[string]bool{}
		for _, n := range stepPods[next.ID] {
			mine[n] = true
		}
		for _, n := range opts.Pods { // replace --strategy deletion: the failed pods it recreates
			mine[n] = true
		}
		var all []Pod
		for _, g := range c.Groups {
			all = append(all, groupPods(g)...)
		}
		for _, pod := range all {
			if mine[pod.Name] || (pod.Ready && !pod.Deleting) {
				continue
			}
			return Preconditionf("pod %s of %s/%s is not Ready; refusing to start %s: it would leave two pods unavailable (wait for it, restart only other groups with --group, or let steps wait with --max-unavailable-zones)",
				pod.Name, c.Namespace, c.Name, next.Target)
		}
	}
	if g, ok := r.Gate.(RestartPreflighter); ok {
		return g.Preflight(ctx, c, st)
	}
	return nil
}

// tolerate names pods that may be down meanwhile: the other pods of the
// same request (replace --strategy deletion picks failed pods).
func (r *RollingRestart) step(c *Cluster, g *NodeGroup, pod Pod, maxZones *int, tolerate []string) *Step {
	ns := c.Namespace
	pre := []string{"every other pod of the cluster is Ready"}
	if len(tolerate) > 1 {
		pre = []string{"every other pod of the cluster not in this request is Ready"}
	}
	if maxZones != nil {
		pre = []string{zonesPrecondition(*maxZones)}
	}
	var details []string
	if r.Gate != nil {
		gp, gd := r.Gate.Describe(pod)
		pre = append(pre, gp...)
		details = append(details, gd...)
	}
	s := &Step{
		ID:            "restart/" + pod.Name,
		Group:         g.Name,
		Target:        "pod/" + pod.Name,
		Description:   "delete the pod, wait for it to come back with a new UID and be Ready",
		Needs:         append(Need("", "pods", "", "delete"), PodWaitNeeds...),
		Preconditions: pre,
		Details:       details,
		Mutating:      true,
	}
	s.Precheck = func(ctx context.Context, sc *StepContext) (bool, error) {
		live, err := r.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Errorf("listing pods: %w", err)
		}
		old := types.UID(sc.Get(uidKey(pod.Name)))
		for i := range live.Items {
			lp := &live.Items[i]
			if lp.Name == pod.Name {
				// Restarted by an earlier run that crashed before it
				// could record the step as done.
				if old != "" && lp.UID != old && PodReady(lp) {
					return true, nil
				}
				continue
			}
			if maxZones == nil && inCluster(c, lp.Name) && !PodReady(lp) && !slices.Contains(tolerate, lp.Name) {
				return false, Preconditionf("pod %s is not Ready; restarting %s now would leave two pods unavailable (wait for it, or restart only other groups with --group)", lp.Name, pod.Name)
			}
		}
		if maxZones == nil {
			for _, m := range missingPods(c, live.Items, pod.Name) {
				if !slices.Contains(tolerate, m) {
					return false, Preconditionf("pod %s does not exist (being recreated?); restarting %s now would leave two pods unavailable (wait for it, or restart only other groups with --group)", m, pod.Name)
				}
			}
		}
		if maxZones != nil {
			return false, waitZones(ctx, sc, r.Client, c, []Pod{pod}, *maxZones)
		}
		return false, nil
	}
	s.Action = func(ctx context.Context, sc *StepContext) error {
		old := types.UID(sc.Get(uidKey(pod.Name)))
		if old == "" {
			cur, err := r.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("reading pod %s: %w", pod.Name, err)
			}
			if err == nil {
				old = cur.UID
			} else {
				old = pod.UID // gone already; the discovered UID is the old one
			}
			// Persist before deleting: after a crash the re-run must know
			// which UID was the old one.
			if err := sc.Set(ctx, uidKey(pod.Name), string(old)); err != nil {
				return err
			}
		}
		if r.Gate != nil {
			if err := r.Gate.Before(ctx, sc, pod); err != nil {
				return err
			}
		}
		if err := DeletePod(ctx, r.Client, ns, pod.Name, old); err != nil {
			return err
		}
		sc.Audit(ctx, ObjectRef{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: pod.Name, UID: string(old)},
			"DbopsRestartPod", fmt.Sprintf("deleted pod %s for a rolling restart", pod.Name))
		return nil
	}
	s.Verify = func(ctx context.Context, sc *StepContext) error {
		old := types.UID(sc.Get(uidKey(pod.Name)))
		lastReason := ""
		_, err := WaitPod(ctx, r.Client, ns, pod.Name, func(p *corev1.Pod) (bool, error) {
			reason := ""
			switch {
			case p == nil:
				reason = "old pod gone; waiting for the StatefulSet to recreate it"
			case p.UID == old:
				reason = "old pod terminating"
			case !PodReady(p):
				reason = fmt.Sprintf("new pod %s (UID %s) not Ready yet", strings.ToLower(string(p.Status.Phase)), shortUID(p.UID))
			default:
				return true, nil
			}
			if reason != lastReason {
				lastReason = reason
				sc.Waiting(reason)
			}
			return false, nil
		})
		if err != nil {
			return err
		}
		if r.Gate != nil {
			return r.Gate.After(ctx, sc, pod)
		}
		return nil
	}
	return s
}

// groupPods are the pods of g in ordinal order, with the ordinals below the StatefulSet's
// size that have no pod right now (being recreated: a run killed right after deleting one)
// stood in by a not-Ready placeholder. They are StatefulSet pods by name (<sts>-<ordinal>),
// so a resumed restart waits for them and no other pod goes while one is missing.
func groupPods(g *NodeGroup) []Pod {
	have := map[int]bool{}
	for _, p := range g.Pods {
		have[p.Ordinal] = true
	}
	out := slices.Clone(g.Pods)
	for o := range int(g.Desired) {
		if !have[o] && g.StatefulSet != "" {
			out = append(out, Pod{Name: fmt.Sprintf("%s-%d", g.StatefulSet, o), Group: g.Name, Ordinal: o, Phase: "Missing"})
		}
	}
	slices.SortStableFunc(out, func(a, b Pod) int { return a.Ordinal - b.Ordinal })
	return out
}

// missingPods names the cluster's pods that should exist (ordinal below the StatefulSet's
// size) but are not in live, except skip.
func missingPods(c *Cluster, live []corev1.Pod, skip string) []string {
	exists := map[string]bool{}
	for i := range live {
		exists[live[i].Name] = true
	}
	var out []string
	for _, g := range c.Groups {
		for _, p := range groupPods(g) {
			if p.Name != skip && !exists[p.Name] {
				out = append(out, p.Name)
			}
		}
	}
	return out
}

func inCluster(c *Cluster, pod string) bool {
	_, p := c.Pod(pod)
	return p != nil
}

func shortUID(u types.UID) string {
	s := string(u)
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// GenericEngine handles any StatefulSet-based cluster with no database
// specific gates.
type GenericEngine struct {
	Client kubernetes.Interface
}

// Name returns "generic".
func (GenericEngine) Name() string { return EngineGeneric }

// Health has nothing database-specific to say.
func (GenericEngine) Health(context.Context, *Cluster) (*Health, error) { return nil, nil }

// PlanRestart builds the plain rolling restart.
func (g GenericEngine) PlanRestart(_ context.Context, c *Cluster, opts RestartOptions) (*Plan, error) {
	rr := &RollingRestart{Client: g.Client}
	return rr.Plan(c, EngineGeneric, opts)
}
