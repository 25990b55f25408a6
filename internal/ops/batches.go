package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
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
	// single is the default one-pod step of pod mode (its own plan wording, skipped when
	// an earlier run already restarted the pod).
	single bool
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

// groupBatches moves the pods gr keys alike into one batch per key, in the place of the first
// batch that held one of them; batches left empty go.
func groupBatches(batches []batch, gr RestartGrouper) []batch {
	byKey := map[string][]Pod{}
	for _, b := range batches {
		for _, p := range b.pods {
			if k := gr.GroupKey(p); k != "" {
				byKey[k] = append(byKey[k], p)
			}
		}
	}
	var out []batch
	placed := map[string]bool{}
	for _, b := range batches {
		var rest []Pod
		for _, p := range b.pods {
			k := gr.GroupKey(p)
			if k == "" || len(byKey[k]) < 2 {
				rest = append(rest, p)
				continue
			}
			if !placed[k] {
				placed[k] = true
				names := strings.Join(podNames(byKey[k]), ",")
				out = append(out, batch{id: "restart/" + names, target: "pods/" + names, group: byKey[k][0].Group, pods: byKey[k]})
			}
		}
		switch {
		case len(rest) == len(b.pods):
			out = append(out, b)
		case len(rest) > 0:
			b.pods = rest
			out = append(out, b)
		}
	}
	return out
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

// restartStep deletes the pods of b (one, or a batch together) and waits for all of them to
// come back with new UIDs and be Ready. The engine's gate runs Before for each pod before the
// first deletion, and After for each once all are back. Every read comes from the run's pod
// informer; the UIDs about to be deleted are journaled with the step's start, in one write
// before the first deletion, so a re-run after a crash knows which incarnations were the old
// ones.
// needs are the steps' RBAC permissions, shared by every step of the plan (read-only).
func (r *RollingRestart) restartStep(c *Cluster, b batch, maxZones *int, tolerate []string, needs []Permission) *Step {
	var pre, details []string
	switch {
	case maxZones != nil:
		pre = append(pre, zonesPrecondition(*maxZones))
	case b.single && len(tolerate) > 1:
		pre = append(pre, "every other pod of the cluster not in this request is Ready")
	case b.single:
		pre = append(pre, "every other pod of the cluster is Ready")
	case len(b.pods) < len(c.AllPods()):
		pre = append(pre, "every pod outside this batch is Ready")
	}
	if !b.single {
		details = append(details, "pods: "+strings.Join(podNames(b.pods), ", "))
	}
	if r.Gate != nil {
		for _, pod := range b.pods {
			gp, gd := r.Gate.Describe(pod)
			for _, x := range gp {
				if !slices.Contains(pre, x) {
					pre = append(pre, x)
				}
			}
			for _, x := range gd {
				if !b.single {
					x = pod.Name + ": " + x
				}
				details = append(details, x)
			}
		}
	}
	desc := "delete the pod, wait for it to come back with a new UID and be Ready"
	if !b.single {
		desc = fmt.Sprintf("delete %d pod(s) together, wait for all to come back with new UIDs and be Ready", len(b.pods))
	}
	s := &Step{ID: b.id, Group: b.group, Target: b.target, Description: desc, Preconditions: pre, Details: details, Mutating: true,
		Pods: podNames(b.pods), Needs: needs}
	rp := &restartProc{r: r, c: c, b: b, maxZones: maxZones, tolerate: tolerate}
	s.Precheck, s.Prepare, s.Action, s.Verify = rp.precheck, rp.prepare, rp.action, rp.verify
	if b.single {
		s.Resumed = rp.resumed
	}
	return s
}

// resumed is precheck's "restarted by an earlier run" from the discovered pod: the journal
// names an old UID the pod no longer has, and the pod is Ready (Step.Resumed).
func (rp *restartProc) resumed(j *Journal) bool {
	pod := rp.b.pods[0]
	old := j.Data[uidKey(pod.Name)]
	return old != "" && pod.UID != "" && string(pod.UID) != old && pod.Ready
}

// restartProc is one restart step's procedure (one struct per step rather than four closures:
// plans have thousands of steps).
type restartProc struct {
	r        *RollingRestart
	c        *Cluster
	b        batch
	maxZones *int
	tolerate []string
	// deleted names the pods this run's action deleted (their restart events are recorded
	// by verify).
	deleted map[string]bool
	// ahead are the UIDs this run's prepare staged, by pod name, before this step began
	// (while an earlier step ran).
	ahead map[string]types.UID
}

func (rp *restartProc) precheck(ctx context.Context, sc *StepContext) (bool, error) {
	r, c, b, ns := rp.r, rp.c, rp.b, rp.c.Namespace
	pods := sc.PodCache(r.Client, ns)
	if err := pods.Synced(ctx); err != nil {
		return false, err
	}
	for _, pod := range b.pods {
		// This run staged the pod's UID ahead, while an earlier step ran, and has not deleted
		// it: if that incarnation is gone, someone else replaced the pod meanwhile. The step
		// still restarts it: the incarnation that replaced it, once Ready.
		old := types.UID(sc.Get(uidKey(pod.Name)))
		if old == "" || rp.ahead[pod.Name] != old || !oldGone(pods, pod.Name, old) {
			continue
		}
		cur, err := WaitReplaced(ctx, sc, r.Client, ns, pod.Name, old, kube.PodReady, "not Ready yet", "replaced by someone else meanwhile: ")
		if err != nil {
			return false, err
		}
		sc.Stage(uidKey(pod.Name), string(cur.UID))
		delete(rp.ahead, pod.Name)
	}
	// An interrupted run of this request deleted every pod of the step already (it may have
	// deleted the next step's pod too before it could journal this one done): the step
	// deletes nothing and only waits for them, so other pods being down is no reason to
	// refuse or wait here; the next step that deletes checks again.
	earlier := true
	for _, pod := range b.pods {
		earlier = earlier && oldGone(pods, pod.Name, types.UID(sc.Get(uidKey(pod.Name))))
	}
	switch {
	case earlier:
	case rp.maxZones != nil:
		if err := waitZones(ctx, sc, pods, c, b.pods, *rp.maxZones); err != nil {
			return false, err
		}
	default:
		in := make(map[string]bool, len(b.pods)+len(rp.tolerate))
		for _, p := range b.pods {
			in[p.Name] = true
		}
		for _, name := range rp.tolerate {
			in[name] = true
		}
		// The refusal's wording, as each mode has always said it.
		subject, refuse, hint := b.target, "more pods", "wait for it, or use --max-unavailable-zones"
		if b.single {
			subject, refuse, hint = b.pods[0].Name, "two pods", "wait for it, or restart only other groups with --group"
		}
		if err := othersReady(c, pods.List(), in, subject, refuse, hint); err != nil {
			return false, err
		}
	}
	restarted := 0
	for _, pod := range b.pods {
		if _, done := recordUID(sc, pods, pod); done {
			restarted++
		}
	}
	// A single pod restarted by an earlier run that crashed before it could record the
	// step as done is done. In a batch, pods restarted by an interrupted run are not
	// deleted again (action skips them), but the step still runs so the gate's After is
	// sure to have run for them.
	if b.single && restarted == len(b.pods) {
		rp.auditEarlier(ctx, sc, pods.Get(b.pods[0].Name))
		return true, nil
	}
	return false, nil
}

// incarnationRef is the audit reference of pod's incarnation cur.
func incarnationRef(cur *corev1.Pod) ObjectRef {
	return ObjectRef{Kind: "Pod", APIVersion: "v1", Namespace: cur.Namespace, Name: cur.Name, UID: string(cur.UID)}
}

// restartMessage is the text of a pod's restart event.
func (rp *restartProc) restartMessage(name string, old types.UID, tail string) string {
	msg := fmt.Sprintf("deleted pod %s (uid %s) for a rolling restart", name, old)
	if !rp.b.single {
		msg += " (" + rp.b.target + ")"
	}
	return msg + "; " + tail
}

// auditEarlier records the restart event of a pod an earlier, interrupted run of this request
// deleted, on its new incarnation cur, unless that run recorded it already.
func (rp *restartProc) auditEarlier(ctx context.Context, sc *StepContext, cur *corev1.Pod) {
	if cur == nil {
		return
	}
	old := types.UID(sc.Get(uidKey(cur.Name)))
	by := "deleted by an interrupted run of this request"
	if sc.exec != nil && sc.exec.resumedAt != "" && sc.exec.resumedAt != sc.Step.ID {
		// That run had not journaled this step as started: it deleted the pod as the step
		// before it finished (its UID was staged ahead), or someone else did meanwhile.
		by = "deleted by an interrupted run of this request as the step before it finished, or by someone else after that run staged it"
	}
	sc.AuditOnce(ctx, incarnationRef(cur), "DbopsRestartPod",
		rp.restartMessage(cur.Name, old, fmt.Sprintf("%s, back as uid %s", by, cur.UID)))
}

// prepare runs before this step, while the step before it runs (Step.Prepare): a journal
// write already on its way carries these pods' UIDs, so this step writes nothing before its
// delete and may delete as soon as the step before it is done. Only a live, Ready pod's UID is
// staged here; the precheck still decides, and stages what is missing.
func (rp *restartProc) prepare(sc *StepContext) {
	pods := sc.PodCache(rp.r.Client, rp.c.Namespace)
	if pods == nil || !pods.HasSynced() {
		return
	}
	for _, pod := range rp.b.pods {
		if sc.Get(uidKey(pod.Name)) != "" {
			continue // staged already (by this run, or by the run it resumes)
		}
		cur := pods.Get(pod.Name)
		if cur == nil || cur.DeletionTimestamp != nil || !PodReady(cur) {
			continue
		}
		sc.Stage(uidKey(pod.Name), string(cur.UID))
		if rp.ahead == nil {
			rp.ahead = map[string]types.UID{}
		}
		rp.ahead[pod.Name] = cur.UID
	}
}

func (rp *restartProc) action(ctx context.Context, sc *StepContext) error {
	r, b, ns := rp.r, rp.b, rp.c.Namespace
	pods := sc.PodCache(r.Client, ns)
	var todo []Pod
	gone := map[string]bool{}
	rp.deleted = map[string]bool{}
	for _, pod := range b.pods {
		old, restarted := recordUID(sc, pods, pod)
		if !restarted {
			pod.UID = old
			todo = append(todo, pod)
			// An incarnation this request already deleted (an interrupted run: the old UID
			// is journaled and no longer live) is not deleted, or reported, again; the
			// gate still runs for it.
			gone[pod.Name] = oldGone(pods, pod.Name, old)
		}
	}
	// Normally written with the step's start already; this covers a UID first seen now.
	if err := sc.exec.flushJournal(ctx, sc.journal); err != nil {
		return err
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
		if gone[pod.Name] {
			continue
		}
		if err := DeletePod(ctx, r.Client, ns, pod.Name, pod.UID); err != nil {
			return err
		}
		// Its event is recorded by verify, on the new incarnation (see there).
		rp.deleted[pod.Name] = true
	}
	return nil
}

// verify waits for each pod's new incarnation to be Ready, then records the pod's restart
// event on it: `kubectl describe pod` looks events up by the pod's UID, so an event on the
// deleted incarnation would never show once the pod is recreated. One event per restarted
// pod, written before the step is reported done. A pod an earlier, interrupted run deleted
// gets it only if that run did not record it. When the wait ends without the pod Ready
// (Ctrl-C, timeout), the pods this run deleted get theirs on the incarnation that replaced
// them if it exists by then, as a Warning (a resumed run records it otherwise).
func (rp *restartProc) verify(ctx context.Context, sc *StepContext) (err error) {
	r, b, ns := rp.r, rp.b, rp.c.Namespace
	recorded := map[string]bool{}
	defer func() {
		if err == nil {
			return
		}
		pods := sc.PodCache(r.Client, ns)
		for _, pod := range b.pods {
			old := types.UID(sc.Get(uidKey(pod.Name)))
			cur := pods.Get(pod.Name)
			if recorded[pod.Name] || !rp.deleted[pod.Name] || cur == nil || cur.UID == old {
				continue
			}
			ref := incarnationRef(cur)
			ref.Warning = true
			sc.Audit(ctx, ref, "DbopsRestartPod", rp.restartMessage(pod.Name, old,
				fmt.Sprintf("the run stopped before its new incarnation %s was Ready", cur.UID)))
		}
	}()
	for i, pod := range b.pods {
		prefix := ""
		if !b.single {
			prefix = pod.Name + ": "
			sc.Progress(int64(i), int64(len(b.pods)), "pods", "waiting for "+pod.Name)
		}
		old := types.UID(sc.Get(uidKey(pod.Name)))
		cur, err := WaitReplaced(ctx, sc, r.Client, ns, pod.Name, old, kube.PodReady, "not Ready yet", prefix)
		if err != nil {
			return err
		}
		if rp.deleted[pod.Name] {
			sc.AuditAsync(ctx, incarnationRef(cur), "DbopsRestartPod", rp.restartMessage(pod.Name, old, fmt.Sprintf("back and Ready as uid %s", cur.UID)))
		} else {
			rp.auditEarlier(ctx, sc, cur)
		}
		recorded[pod.Name] = true
	}
	if !b.single {
		sc.Progress(int64(len(b.pods)), int64(len(b.pods)), "pods", "all back")
	}
	sc.MarkReady()
	if r.Gate != nil {
		for _, pod := range b.pods {
			if err := r.Gate.After(ctx, sc, pod); err != nil {
				return err
			}
		}
	}
	return nil
}

// othersReady refuses when a pod of the cluster outside in is not Ready or does not exist
// (being recreated): taking target down now would leave more than it unavailable.
func othersReady(c *Cluster, live map[string]*corev1.Pod, in map[string]bool, target, what, hint string) error {
	names := make([]string, 0, len(live))
	for name := range live {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !in[name] && inCluster(c, name) && !PodReady(live[name]) {
			return Refusef(ReasonPodNotReady, "pod %s is not Ready; restarting %s now would leave %s unavailable (%s)", name, target, what, hint)
		}
	}
	for _, m := range missingPods(c, live) {
		if !in[m] {
			return Preconditionf("pod %s does not exist (being recreated?); restarting %s now would leave %s unavailable (%s)", m, target, what, hint)
		}
	}
	return nil
}

// oldGone reports whether pod's journaled old incarnation is no longer live: deleted already
// (by an interrupted run of this request) or terminating, so there is nothing to delete or
// report.
func oldGone(pods *kube.Pods, name string, old types.UID) bool {
	if old == "" {
		return false
	}
	cur := pods.Get(name)
	// A terminating old incarnation was deleted already too (a real kubelet keeps it for its
	// grace period): deleting it again would only repeat the request and its audit event.
	return cur == nil || cur.UID != old || cur.DeletionTimestamp != nil
}

// recordUID stages in the journal the UID pod has before this run deletes it (written with
// the step's start, before any deletion), and reports whether an earlier run already
// restarted it: the journal names an old UID and the live pod has another and is Ready.
func recordUID(sc *StepContext, pods *kube.Pods, pod Pod) (old types.UID, restarted bool) {
	cur := pods.Get(pod.Name)
	if old = types.UID(sc.Get(uidKey(pod.Name))); old != "" {
		return old, cur != nil && cur.UID != old && PodReady(cur)
	}
	old = pod.UID // gone already: the discovered UID is the old one
	if cur != nil {
		old = cur.UID
	}
	sc.Stage(uidKey(pod.Name), string(old))
	return old, false
}

// waitZones waits, on the run's pod informer, until at most k zones, not counting the zones
// of the pods about to be restarted, have pods that are not Ready (or are missing).
func waitZones(ctx context.Context, sc *StepContext, pods *kube.Pods, c *Cluster, batch []Pod, k int) error {
	own := map[string]bool{}
	for _, p := range batch {
		own[zoneOf(p)] = true
	}
	zone := map[string]string{}
	for _, p := range c.AllPods() {
		zone[p.Name] = zoneOf(p)
	}
	last := ""
	err := pods.Until(ctx, func(live map[string]*corev1.Pod) (bool, error) {
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
