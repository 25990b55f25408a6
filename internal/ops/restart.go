package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
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

// RestartOrderer is a RestartGate that orders the restart's steps by the pods they hold
// (alone, or in their zone or batch): steps of lower rank go first, steps of equal rank keep
// procedure order. Replicated apps restart secondaries before primaries, etcd its leader
// last. Engines order by pods, never by step targets, which differ between modes.
type RestartOrderer interface {
	StepRank(pods []Pod) int
}

// RestartGrouper is a RestartGate that restarts some pods together under --mode pod (one pod
// at a time otherwise): the pods with the same non-empty key form one batch, placed where the
// first of them was. FoundationDB puts its stateless transaction-system pods in one batch: each
// bounce of such a process starts a recovery, one batch one recovery. The engine answers for
// the batch's safety (it holds no data and no coordinator there). --batch N, --mode zone (a
// zone's pods go together already) and --mode all are taken as given.
type RestartGrouper interface {
	GroupKey(p Pod) string
}

// RestartStepper is a RestartGate that adapts each planned step to the pods it restarts
// (e.g. CrateDB re-enables allocation when the step fails, and recognises the node of each
// pod), in every mode.
type RestartStepper interface {
	PlanStep(s *Step, pods []Pod) error
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
	if opts.Method != "" && opts.Method != MethodPod {
		return nil, Usagef("--method %s is not available for engine %s (allowed: %s)", opts.Method, engine, MethodPod)
	}
	for _, name := range opts.Pods {
		if !inCluster(c, name) {
			return nil, Usagef("pod %q is not part of cluster %s/%s; %s", name, c.Namespace, c.Name, Allowed(name, podNames(c.AllPods())))
		}
	}
	p := NewPlan("restart", c, engine, restartArgs(mode, opts))
	p.Destructive = true
	n := 0
	for _, g := range c.Groups {
		n += max(len(g.Pods), int(g.Desired))
	}
	pods := make([]Pod, 0, n)
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
	stepPods := make(map[string][]string, len(pods))
	needs := append(Need("", "pods", "", "delete"), PodWaitNeeds...)
	var batches []batch
	switch {
	case mode == ModePod && opts.BatchSize <= 1:
		for _, pod := range pods {
			batches = append(batches, batch{id: "restart/" + pod.Name, target: "pod/" + pod.Name, group: pod.Group, pods: []Pod{pod}, single: true})
		}
	default:
		batches = restartBatches(mode, pods, opts.BatchSize)
	}
	if gr, ok := r.Gate.(RestartGrouper); ok && mode == ModePod && opts.BatchSize <= 1 {
		batches = groupBatches(batches, gr)
	}
	if o, ok := r.Gate.(RestartOrderer); ok {
		slices.SortStableFunc(batches, func(a, b batch) int { return o.StepRank(a.pods) - o.StepRank(b.pods) })
	}
	stepper, _ := r.Gate.(RestartStepper)
	for _, b := range batches {
		s := r.restartStep(c, b, opts.MaxUnavailableZones, opts.Pods, needs)
		if stepper != nil {
			if err := stepper.PlanStep(s, b.pods); err != nil {
				return nil, err
			}
		}
		stepPods[s.ID] = s.Pods
		p.Steps = append(p.Steps, s)
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
// engine's health. A step whose pods the interrupted run already deleted
// deletes nothing and only waits for them, so it refuses no other pod down
// (see restartProc.precheck in batches.go).
func (r *RollingRestart) preflight(ctx context.Context, c *Cluster, p *Plan, st PreflightState, stepPods map[string][]string, opts RestartOptions) error {
	next := p.NextStep(st)
	if next == nil {
		return nil
	}
	if opts.MaxUnavailableZones == nil && !deletedEarlier(c, st.Data, stepPods[next.ID]) {
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
			return Refusef(ReasonPodNotReady, "pod %s of %s/%s is not Ready; refusing to start %s: it would leave two pods unavailable (wait for it, restart only other groups with --group, or let steps wait with --max-unavailable-zones)",
				pod.Name, c.Namespace, c.Name, next.Target)
		}
	}
	if g, ok := r.Gate.(RestartPreflighter); ok {
		return g.Preflight(ctx, c, st)
	}
	return nil
}

// deletedEarlier reports whether an interrupted run of this request deleted every one of
// pods already, as far as discovery saw them (c): each has a journaled UID (data) that is no
// longer live, or is terminating. Its step then deletes nothing.
func deletedEarlier(c *Cluster, data map[string]string, pods []string) bool {
	for _, name := range pods {
		old := types.UID(data[uidKey(name)])
		if old == "" {
			return false
		}
		if _, p := c.Pod(name); p != nil && p.UID == old && !p.Deleting {
			return false
		}
	}
	return len(pods) > 0
}

// groupPods are the pods of g in ordinal order, with the ordinals below the StatefulSet's
// size that have no pod right now (being recreated: a run killed right after deleting one)
// stood in by a not-Ready placeholder named as the owner names it (a StatefulSet's
// <sts>-<ordinal>; none for an owner that names its pods itself), so a resumed restart waits
// for them and no other pod goes while one is missing.
func groupPods(g *NodeGroup) []Pod {
	have := map[int]bool{}
	for _, p := range g.Pods {
		have[p.Ordinal] = true
	}
	out := slices.Clone(g.Pods)
	for o := range int(g.Desired) {
		if name := g.Owner.PodName(o); !have[o] && name != "" {
			out = append(out, Pod{Name: name, Group: g.Name, Ordinal: o, Phase: "Missing"})
		}
	}
	slices.SortStableFunc(out, func(a, b Pod) int { return a.Ordinal - b.Ordinal })
	return out
}

// missingPods names the cluster's pods that should exist (ordinal below the StatefulSet's
// size) but are not in live.
func missingPods(c *Cluster, live map[string]*corev1.Pod) []string {
	var out []string
	for _, g := range c.Groups {
		for _, p := range groupPods(g) {
			if live[p.Name] == nil {
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
