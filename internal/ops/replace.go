package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// Replace strategies (docs/procedures.md).
const (
	// StrategyReplacement moves the data away, deletes the pod and its
	// PVCs and lets the StatefulSet create both fresh.
	StrategyReplacement = "replacement"
	// StrategyDeletion deletes the pod only; it comes back on its PVC.
	StrategyDeletion = "deletion"
)

// ReplaceStrategies lists the accepted --strategy values, in help order.
var ReplaceStrategies = []string{StrategyReplacement, StrategyDeletion}

// ReplaceRequest is what the user asked of `replace`.
type ReplaceRequest struct {
	// Pods to replace, in the order given or chosen.
	Pods     []string
	Strategy string
	// MaxConcurrent is how many pods are replaced at once (>= 1).
	MaxConcurrent int
	// Reasons says why each pod was chosen (--failed); shown in the plan.
	Reasons map[string]string
	// Args is the canonical rendering of the request for the journal.
	Args string
	// NoExclusion removes without moving the data away first (FoundationDB
	// processGroupsToRemoveWithoutExclusion); Force is --force, which it needs.
	NoExclusion, Force bool
	// Journal is the unfinished journal of this same request (nil when there is none): an
	// engine that tracks what it replaces by identities the pods lose (FoundationDB process
	// groups) reads them back from it.
	Journal *Journal
}

// ReplaceHooks add an engine's steps around the recreation of one batch:
// Before moves the data away, After waits until the new members have
// joined and hold data again. Both may return no steps.
type ReplaceHooks interface {
	Before(c *Cluster, batch []Pod) []*Step
	After(c *Cluster, batch []Pod) []*Step
}

// Replacement builds replacement plans: per batch of at most MaxConcurrent
// pods, the hooks' Before steps, one step deleting the batch's pods and
// PVCs together and waiting for all of them to come back with new PVCs,
// then the hooks' After steps.
type Replacement struct {
	Client kubernetes.Interface
	Hooks  ReplaceHooks // optional
}

func pvcUIDKey(pvc string) string   { return "replace.pvc/" + pvc }
func replacedKey(pod string) string { return "replace.done/" + pod }

// Plan computes the plan; it makes no API calls.
func (r *Replacement) Plan(c *Cluster, engine string, req ReplaceRequest) (*Plan, error) {
	if req.MaxConcurrent < 1 {
		return nil, Usagef("--max-concurrent must be 1 or more, got %d", req.MaxConcurrent)
	}
	var pods []Pod
	for _, name := range req.Pods {
		_, p := c.Pod(name)
		if p == nil {
			return nil, Usagef("pod %q is not part of cluster %s/%s; %s", name, c.Namespace, c.Name, Allowed(name, podNames(c.AllPods())))
		}
		if !slices.ContainsFunc(pods, func(q Pod) bool { return q.Name == name }) {
			pods = append(pods, *p)
		}
	}
	p := NewPlan("replace", c, engine, req.Args)
	p.Destructive = true
	for _, pod := range pods {
		if why := req.Reasons[pod.Name]; why != "" {
			p.Notes = append(p.Notes, fmt.Sprintf("%s: %s", pod.Name, why))
		}
		if len(pod.PVCs) == 0 {
			p.Notes = append(p.Notes, fmt.Sprintf("%s has no PVC: replacement only recreates the pod", pod.Name))
		}
	}
	for chunk := range slices.Chunk(pods, req.MaxConcurrent) {
		if r.Hooks != nil {
			p.Steps = append(p.Steps, r.Hooks.Before(c, chunk)...)
		}
		p.Steps = append(p.Steps, r.recreateStep(c, chunk, pods))
		if r.Hooks != nil {
			p.Steps = append(p.Steps, r.Hooks.After(c, chunk)...)
		}
	}
	if len(p.Steps) == 0 {
		p.Notes = append(p.Notes, "nothing to replace")
	}
	return p, nil
}

// BatchID names a batch of pods in step IDs: stable for the same request.
func BatchID(batch []Pod) string { return strings.Join(podNames(batch), ",") }

// BatchTarget is the plan target of a batch.
func BatchTarget(batch []Pod) string {
	if len(batch) == 1 {
		return "pod/" + batch[0].Name
	}
	return "pods/" + BatchID(batch)
}

// recreateStep deletes the batch's PVCs and pods, then waits for every pod
// to come back Ready on new PVCs. all is every pod of the request: those
// may be down (that is why they are replaced); any other must be Ready.
func (r *Replacement) recreateStep(c *Cluster, b []Pod, all []Pod) *Step {
	ns := c.Namespace
	var pvcs []string
	for _, p := range b {
		pvcs = append(pvcs, p.PVCs...)
	}
	s := &Step{ID: "replace/recreate/" + BatchID(b), Target: BatchTarget(b), Mutating: true,
		Description:   fmt.Sprintf("delete %d pod(s) and their PVCs, wait for them to come back Ready on new PVCs", len(b)),
		Preconditions: []string{"every pod of the cluster not being replaced is Ready"},
		Details:       []string{"pods: " + strings.Join(podNames(b), ", ")},
		Needs: slices.Concat(Need("", "pods", "", "delete"), PodWaitNeeds,
			Need("", "persistentvolumeclaims", "", "get", "list", "delete")),
	}
	if len(pvcs) > 0 {
		s.Details = append(s.Details, "PVCs: "+strings.Join(pvcs, ", ")+" (deleted first; they go once the pod is gone)")
	}
	replacing := map[string]bool{}
	for _, p := range all {
		replacing[p.Name] = true
	}
	s.Precheck = func(ctx context.Context, sc *StepContext) (bool, error) {
		pods := sc.PodCache(r.Client, ns)
		if err := pods.Synced(ctx); err != nil {
			return false, err
		}
		for _, lp := range pods.List() {
			if !replacing[lp.Name] && inCluster(c, lp.Name) && !PodReady(lp) {
				return false, Refusef(ReasonPodNotReady, "pod %s is not Ready; replacing %s now would leave more pods unavailable (wait for it, or replace it too)", lp.Name, BatchID(b))
			}
		}
		return false, nil
	}
	// deleted names the pods this run's action deleted; verify records their events on the
	// new incarnations (see replaceEvents).
	var deleted map[string]bool
	s.Action = func(ctx context.Context, sc *StepContext) error {
		deleted = map[string]bool{}
		for _, pod := range b {
			if sc.Get(replacedKey(pod.Name)) != "" {
				continue
			}
			did, err := r.deleteOne(ctx, sc, ns, pod)
			if err != nil {
				return err
			}
			deleted[pod.Name] = did
		}
		return nil
	}
	s.Verify = func(ctx context.Context, sc *StepContext) error {
		// One waiter per pod: the batch is in flight together, and a slow
		// pod must not hide that another has failed.
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
			back int
		)
		ev := &replaceEvents{sc: sc, pods: sc.PodCache(r.Client, ns), deleted: deleted, recorded: map[string]bool{}}
		for _, pod := range b {
			wg.Go(func() {
				cur, newPVCs, err := r.waitOne(ctx, sc, ns, pod)
				if err == nil {
					ev.back(ctx, pod, cur, newPVCs)
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				back++
				sc.Progress(int64(back), int64(len(b)), "pods", pod.Name+" is back on a new PVC")
			})
		}
		wg.Wait()
		if err := JoinOneLine(errs...); err != nil {
			ev.stopped(ctx, b)
			return err
		}
		for _, pod := range b {
			if err := sc.Set(ctx, replacedKey(pod.Name), "1"); err != nil {
				return err
			}
		}
		return nil
	}
	return s
}

// deleteOne journals the pod's and PVCs' UIDs, then deletes the PVCs and
// the pod. The PVCs first: their protection finalizer keeps them until
// the pod is gone, and the StatefulSet controller does not recreate the
// pod on a PVC being deleted, so the new pod always gets a fresh one.
// It reports whether it deleted a live incarnation: false when an earlier,
// interrupted run of the request had deleted it already.
func (r *Replacement) deleteOne(ctx context.Context, sc *StepContext, ns string, pod Pod) (bool, error) {
	pods := sc.PodCache(r.Client, ns)
	old, restarted := recordUID(sc, pods, pod)
	if restarted {
		// Recreated by an earlier run; its PVCs were deleted before it.
		return false, nil
	}
	fresh := !oldGone(pods, pod.Name, old)
	// Persist before deleting: after a crash the re-run must know which UID was the old one.
	if err := sc.exec.flushJournal(ctx, sc.journal); err != nil {
		return false, err
	}
	for _, name := range pod.PVCs {
		uid := types.UID(sc.Get(pvcUIDKey(name)))
		// Journaled by an interrupted run of this request: it may have deleted the PVC and
		// recorded that already.
		earlier := uid != ""
		if uid == "" {
			pvc, err := r.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return false, fmt.Errorf("reading PVC %s: %w", name, err)
			}
			uid = pvc.UID
			if err := sc.Set(ctx, pvcUIDKey(name), string(uid)); err != nil {
				return false, err
			}
		}
		if err := kube.DeletePVC(ctx, r.Client, ns, name, uid); err != nil {
			return false, err
		}
		ref := ObjectRef{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name, UID: string(uid)}
		msg := fmt.Sprintf("deleted PVC %s to replace pod %s with a fresh volume", name, pod.Name)
		if earlier {
			sc.AuditOnce(ctx, ref, "DbopsReplacePVC", msg)
		} else {
			sc.Audit(ctx, ref, "DbopsReplacePVC", msg)
		}
	}
	if err := DeletePod(ctx, r.Client, ns, pod.Name, old); err != nil {
		return false, err
	}
	// Its DbopsReplacePod event is recorded once it is back, on the new incarnation (replaceEvents).
	return fresh, nil
}

// replaceEvents records each replaced pod's DbopsReplacePod event on its new incarnation:
// `kubectl describe pod` looks events up by the live pod's UID, so an event on the deleted
// incarnation never shows once the pod is recreated. One event per replaced pod, written
// before the step is reported done: a pod this run deleted gets it when it is back Ready; a
// pod an earlier, interrupted run deleted gets it only if that run did not record it
// (AuditOnce: one list, on the resume path only). When the wait ends first (Ctrl-C, timeout,
// another pod failed), the pods this run deleted get theirs on the incarnation that replaced
// them if it exists by then, as a Warning (a resumed run records it otherwise).
type replaceEvents struct {
	sc      *StepContext
	pods    *kube.Pods
	deleted map[string]bool // read-only here

	mu       sync.Mutex
	recorded map[string]bool
}

// replaceMessage is the text of pod's replace event: the old incarnation's UID, that its PVCs
// were replaced (with their old and, when known, new UIDs), and tail.
func replaceMessage(sc *StepContext, pod Pod, newPVCs map[string]types.UID, tail string) string {
	msg := fmt.Sprintf("replaced pod %s (old uid %s)", pod.Name, sc.Get(uidKey(pod.Name)))
	if len(pod.PVCs) == 0 {
		msg += "; it has no PVC, only the pod was recreated"
	} else {
		var vols []string
		for _, name := range pod.PVCs {
			v := "PVC " + name
			if o := sc.Get(pvcUIDKey(name)); o != "" {
				v += " (old uid " + o
				if n := newPVCs[name]; n != "" {
					v += ", new uid " + string(n)
				}
				v += ")"
			}
			vols = append(vols, v)
		}
		msg += " with a fresh volume: " + strings.Join(vols, ", ") + " replaced by a new one"
	}
	return msg + "; " + tail
}

// back records pod's event once it is back Ready as cur.
func (e *replaceEvents) back(ctx context.Context, pod Pod, cur *corev1.Pod, newPVCs map[string]types.UID) {
	sc := e.sc
	if e.deleted[pod.Name] {
		sc.Audit(ctx, incarnationRef(cur), "DbopsReplacePod", replaceMessage(sc, pod, newPVCs, fmt.Sprintf("back and Ready as uid %s", cur.UID)))
	} else {
		sc.AuditOnce(ctx, incarnationRef(cur), "DbopsReplacePod",
			replaceMessage(sc, pod, newPVCs, fmt.Sprintf("deleted by an interrupted run of this request, back and Ready as uid %s", cur.UID)))
	}
	e.mu.Lock()
	e.recorded[pod.Name] = true
	e.mu.Unlock()
}

// stopped records, as Warnings, the events of the pods of b this run deleted that are not
// recorded yet, on their new incarnations if those exist.
func (e *replaceEvents) stopped(ctx context.Context, b []Pod) {
	if e.pods == nil {
		return
	}
	sc := e.sc
	for _, pod := range b {
		e.mu.Lock()
		done := e.recorded[pod.Name]
		e.mu.Unlock()
		old := types.UID(sc.Get(uidKey(pod.Name)))
		cur := e.pods.Get(pod.Name)
		if done || !e.deleted[pod.Name] || cur == nil || cur.UID == old {
			continue
		}
		ref := incarnationRef(cur)
		ref.Warning = true
		sc.Audit(ctx, ref, "DbopsReplacePod", replaceMessage(sc, pod, nil,
			fmt.Sprintf("the run stopped before its new incarnation %s was confirmed Ready on a new PVC", cur.UID)))
	}
}

// waitOne waits for pod to be back Ready with a new UID, then checks that
// each of its PVCs is a new one. It returns the new incarnation and the
// PVCs' new UIDs.
func (r *Replacement) waitOne(ctx context.Context, sc *StepContext, ns string, pod Pod) (*corev1.Pod, map[string]types.UID, error) {
	cur, err := WaitReplaced(ctx, sc, r.Client, ns, pod.Name, types.UID(sc.Get(uidKey(pod.Name))), kube.PodReady, "not Ready yet", pod.Name+": ")
	if err != nil {
		return nil, nil, err
	}
	newPVCs := map[string]types.UID{}
	for _, name := range pod.PVCs {
		old := types.UID(sc.Get(pvcUIDKey(name)))
		pvc, err := r.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil, Preconditionf("pod %s is Ready but its PVC %s does not exist", pod.Name, name)
		case err != nil:
			return nil, nil, fmt.Errorf("reading PVC %s: %w", name, err)
		case old != "" && pvc.UID == old:
			return nil, nil, Preconditionf("pod %s came back on its old PVC %s (UID %s): the volume was not replaced", pod.Name, name, shortUID(old))
		}
		newPVCs[name] = pvc.UID
	}
	return cur, newPVCs, nil
}
