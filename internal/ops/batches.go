package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Restart modes: how many pods a rolling restart takes down at once.
const (
	ModePod  = "pod"
	ModeZone = "zone"
	ModeAll  = "all"
)

// RestartModes lists the accepted --mode values, in help order.
var RestartModes = []string{ModePod, ModeZone, ModeAll}

// noZone names the batch of pods whose node has no zone label.
const noZone = "none"

func checkRestartMode(opts RestartOptions) (string, error) {
	mode := opts.Mode
	if mode == "" {
		mode = ModePod
	}
	if !slices.Contains(RestartModes, mode) {
		return "", Usagef("unknown --mode %q; allowed: %s", opts.Mode, strings.Join(RestartModes, ", "))
	}
	if k := opts.MaxUnavailableZones; k != nil {
		if *k < 0 {
			return "", Usagef("--max-unavailable-zones must be 0 or more, got %d", *k)
		}
		if mode == ModeAll {
			return "", Usagef("--max-unavailable-zones does not apply to --mode all (every pod goes at once)")
		}
	}
	if opts.BatchSize < 0 {
		return "", Usagef("batch size must be 1 or more, got %d", opts.BatchSize)
	}
	return mode, nil
}

// restartArgs renders the request canonically; the default pod mode keeps
// the historical "--rolling" so older journals still resume.
func restartArgs(mode string, opts RestartOptions) string {
	args := "--rolling"
	if mode != ModePod {
		args += " --mode " + mode
	}
	if len(opts.Groups) > 0 {
		gs := slices.Clone(opts.Groups)
		slices.Sort(gs)
		args += " --group " + strings.Join(gs, ",")
	}
	if k := opts.MaxUnavailableZones; k != nil {
		args += fmt.Sprintf(" --max-unavailable-zones %d", *k)
	}
	if len(opts.Pods) > 0 {
		ps := slices.Clone(opts.Pods)
		slices.Sort(ps)
		args += " --pods " + strings.Join(ps, ",")
	}
	if opts.BatchSize > 1 {
		args += fmt.Sprintf(" --batch %d", opts.BatchSize)
	}
	return args
}

// BatchChecker may be implemented by a RestartGate whose safety depends on
// how many pods are down at once (etcd quorum): per-pod Before checks each
// see the others still up. It runs once per batch of more than one pod,
// before the first deletion.
type BatchChecker interface {
	BeforeBatch(ctx context.Context, sc *StepContext, pods []Pod) error
}

// batch is a set of pods restarted together by one step.
type batch struct {
	id, target, group string
	zone              string // "" unless the batch is a zone
	pods              []Pod
}

// restartBatches splits pods (in procedure order) into batches: one per
// zone (zones by name, pods in procedure order within), one for all, or
// chunks of size n in pod mode.
func restartBatches(mode string, pods []Pod, n int) []batch {
	switch mode {
	case ModeAll:
		if len(pods) == 0 {
			return nil
		}
		return []batch{{id: "restart/all", target: "all", pods: pods}}
	case ModeZone:
		byZone := map[string][]Pod{}
		var zones []string
		for _, p := range pods {
			z := zoneOf(p)
			if _, ok := byZone[z]; !ok {
				zones = append(zones, z)
			}
			byZone[z] = append(byZone[z], p)
		}
		slices.Sort(zones)
		out := make([]batch, 0, len(zones))
		for _, z := range zones {
			out = append(out, batch{id: "restart/zone/" + z, target: "zone/" + z, zone: z, pods: byZone[z]})
		}
		return out
	default:
		var out []batch
		for chunk := range slices.Chunk(pods, max(n, 1)) {
			names := strings.Join(podNames(chunk), ",")
			out = append(out, batch{id: "restart/" + names, target: "pods/" + names, group: chunk[0].Group, pods: chunk})
		}
		return out
	}
}

func zoneOf(p Pod) string {
	if p.Zone == "" {
		return noZone
	}
	return p.Zone
}

func podNames(pods []Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func zonesPrecondition(k int) string {
	return fmt.Sprintf("at most %d zone(s) other than this one have unavailable pods (waits for it)", k)
}

// batchStep deletes every pod of b together and waits for all of them to
// come back. The engine's gate runs Before for each pod before the first
// deletion, and After for each once all are back.
func (r *RollingRestart) batchStep(c *Cluster, b batch, maxZones *int, tolerate []string) *Step {
	ns := c.Namespace
	var pre []string
	switch {
	case maxZones != nil:
		pre = append(pre, zonesPrecondition(*maxZones))
	case len(b.pods) < len(c.AllPods()):
		pre = append(pre, "every pod outside this batch is Ready")
	}
	var details []string
	details = append(details, "pods: "+strings.Join(podNames(b.pods), ", "))
	if r.Gate != nil {
		for _, pod := range b.pods {
			gp, gd := r.Gate.Describe(pod)
			for _, x := range gp {
				if !slices.Contains(pre, x) {
					pre = append(pre, x)
				}
			}
			for _, x := range gd {
				details = append(details, pod.Name+": "+x)
			}
		}
	}
	desc := fmt.Sprintf("delete %d pod(s) together, wait for all to come back with new UIDs and be Ready", len(b.pods))
	s := &Step{ID: b.id, Group: b.group, Target: b.target, Description: desc, Preconditions: pre, Details: details, Mutating: true,
		Needs: append(Need("", "pods", "", "delete"), PodWaitNeeds...)}
	in := map[string]bool{}
	for _, p := range b.pods {
		in[p.Name] = true
	}
	for _, name := range tolerate {
		in[name] = true
	}
	s.Precheck = func(ctx context.Context, sc *StepContext) (bool, error) {
		if maxZones != nil {
			return false, waitZones(ctx, sc, r.Client, c, b.pods, *maxZones)
		}
		live, err := r.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Errorf("listing pods: %w", err)
		}
		for i := range live.Items {
			lp := &live.Items[i]
			if !in[lp.Name] && inCluster(c, lp.Name) && !PodReady(lp) {
				return false, Preconditionf("pod %s is not Ready; restarting %s now would leave more pods unavailable (wait for it, or use --max-unavailable-zones)", lp.Name, b.target)
			}
		}
		for _, m := range missingPods(c, live.Items, "") {
			if !in[m] {
				return false, Preconditionf("pod %s does not exist (being recreated?); restarting %s now would leave more pods unavailable (wait for it, or use --max-unavailable-zones)", m, b.target)
			}
		}
		// Pods restarted by an interrupted run are not deleted again
		// (Action skips them), but the step still runs so the gate's
		// After is sure to have run for them.
		return false, nil
	}
	s.Action = func(ctx context.Context, sc *StepContext) error {
		var todo []Pod
		for _, pod := range b.pods {
			old, restarted, err := rememberUID(ctx, sc, r.Client, ns, pod)
			if err != nil {
				return err
			}
			if !restarted {
				pod.UID = old
				todo = append(todo, pod)
			}
		}
		if bc, ok := r.Gate.(BatchChecker); ok && len(todo) > 1 {
			if err := bc.BeforeBatch(ctx, sc, todo); err != nil {
				return err
			}
		}
		if r.Gate != nil {
			for _, pod := range todo {
				if err := r.Gate.Before(ctx, sc, pod); err != nil {
					return err
				}
			}
		}
		for _, pod := range todo {
			if err := DeletePod(ctx, r.Client, ns, pod.Name, pod.UID); err != nil {
				return err
			}
			sc.Audit(ctx, ObjectRef{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: pod.Name, UID: string(pod.UID)},
				"DbopsRestartPod", fmt.Sprintf("deleted pod %s for a rolling restart (%s)", pod.Name, b.target))
		}
		return nil
	}
	s.Verify = func(ctx context.Context, sc *StepContext) error {
		for i, pod := range b.pods {
			sc.Progress(int64(i), int64(len(b.pods)), "pods", "waiting for "+pod.Name)
			if err := waitNewPodReady(ctx, sc, r.Client, ns, pod.Name, types.UID(sc.Get(uidKey(pod.Name)))); err != nil {
				return err
			}
		}
		sc.Progress(int64(len(b.pods)), int64(len(b.pods)), "pods", "all back")
		if r.Gate != nil {
			for _, pod := range b.pods {
				if err := r.Gate.After(ctx, sc, pod); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return s
}

// rememberUID journals the UID pod has before this run deletes it, and
// reports whether an earlier run already restarted it (the live pod has
// another UID and is Ready).
func rememberUID(ctx context.Context, sc *StepContext, client kubernetes.Interface, ns string, pod Pod) (types.UID, bool, error) {
	old := types.UID(sc.Get(uidKey(pod.Name)))
	cur, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return "", false, fmt.Errorf("reading pod %s: %w", pod.Name, err)
	}
	if old != "" {
		return old, err == nil && cur.UID != old && PodReady(cur), nil
	}
	old = pod.UID // gone already: the discovered UID is the old one
	if err == nil {
		old = cur.UID
	}
	// Persist before deleting: after a crash the re-run must know which
	// UID was the old one.
	if err := sc.Set(ctx, uidKey(pod.Name), string(old)); err != nil {
		return "", false, err
	}
	return old, false, nil
}

// waitNewPodReady watches until name exists with a UID other than old and
// is Ready.
func waitNewPodReady(ctx context.Context, sc *StepContext, client kubernetes.Interface, ns, name string, old types.UID) error {
	lastReason := ""
	_, err := WaitPod(ctx, client, ns, name, func(p *corev1.Pod) (bool, error) {
		reason := ""
		switch {
		case p == nil:
			reason = name + ": old pod gone; waiting for the StatefulSet to recreate it"
		case p.UID == old:
			reason = name + ": old pod terminating"
		case !PodReady(p):
			reason = fmt.Sprintf("%s: new pod %s (UID %s) not Ready yet", name, strings.ToLower(string(p.Status.Phase)), shortUID(p.UID))
		default:
			return true, nil
		}
		if reason != lastReason {
			lastReason = reason
			sc.Waiting(reason)
		}
		return false, nil
	})
	return err
}

// waitZones watches the cluster's pods until at most k zones, not counting
// the zones of the pods about to be restarted, have pods that are not
// Ready (or are missing).
func waitZones(ctx context.Context, sc *StepContext, client kubernetes.Interface, c *Cluster, batch []Pod, k int) error {
	own := map[string]bool{}
	for _, p := range batch {
		own[zoneOf(p)] = true
	}
	zone := map[string]string{}
	for _, p := range c.AllPods() {
		zone[p.Name] = zoneOf(p)
	}
	last := ""
	err := WaitPods(ctx, client, c.Namespace, func(live map[string]*corev1.Pod) (bool, error) {
		bad := map[string]bool{}
		for name, z := range zone {
			if !own[z] && !PodReady(live[name]) {
				bad[z] = true
			}
		}
		if len(bad) <= k {
			return true, nil
		}
		zs := make([]string, 0, len(bad))
		for z := range bad {
			zs = append(zs, z)
		}
		slices.Sort(zs)
		msg := fmt.Sprintf("%d zone(s) have unavailable pods (%s), at most %d allowed; waiting", len(zs), strings.Join(zs, ", "), k)
		if msg != last {
			last = msg
			sc.Waiting(msg)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for unavailable zones to drop to %d: %w", k, err)
	}
	return nil
}

// WaitPods watches every pod of a namespace until cond, given the current
// pods by name, returns true, an error, or ctx ends. Watch-based, no
// polling sleeps.
func WaitPods(ctx context.Context, client kubernetes.Interface, namespace string, cond func(map[string]*corev1.Pod) (bool, error)) error {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Pods(namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Pods(namespace).Watch(ctx, o)
		},
	}
	live := map[string]*corev1.Pod{}
	pre := func(store cache.Store) (bool, error) {
		clear(live)
		for _, o := range store.List() {
			if p, ok := o.(*corev1.Pod); ok {
				live[p.Name] = p
			}
		}
		return cond(live)
	}
	_, err := watchtools.UntilWithSync(ctx, cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.Pod{}, pre, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			delete(live, p.Name)
		} else {
			live[p.Name] = p
		}
		return cond(live)
	})
	if err != nil {
		return fmt.Errorf("watching pods in %s: %w", namespace, err)
	}
	return nil
}
