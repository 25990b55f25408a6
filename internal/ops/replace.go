package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

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
			return nil, Usagef("pod %q is not part of cluster %s/%s; allowed: %s", name, c.Namespace, c.Name, strings.Join(podNames(c.AllPods()), ", "))
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
				return false, Preconditionf("pod %s is not Ready; replacing %s now would leave more pods unavailable (wait for it, or replace it too)", lp.Name, BatchID(b))
			}
		}
		return false, nil
	}
	s.Action = func(ctx context.Context, sc *StepContext) error {
		for _, pod := range b {
			if sc.Get(replacedKey(pod.Name)) != "" {
				continue
			}
			if err := r.deleteOne(ctx, sc, ns, pod); err != nil {
				return err
			}
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
		for _, pod := range b {
			wg.Go(func() {
				err := r.waitOne(ctx, sc, ns, pod)
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
func (r *Replacement) deleteOne(ctx context.Context, sc *StepContext, ns string, pod Pod) error {
	old, restarted := recordUID(sc, sc.PodCache(r.Client, ns), pod)
	if restarted {
		// Recreated by an earlier run; its PVCs were deleted before it.
		return nil
	}
	// Persist before deleting: after a crash the re-run must know which UID was the old one.
	if err := sc.exec.flushJournal(ctx, sc.journal); err != nil {
		return err
	}
	for _, name := range pod.PVCs {
		uid := types.UID(sc.Get(pvcUIDKey(name)))
		if uid == "" {
			pvc, err := r.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return fmt.Errorf("reading PVC %s: %w", name, err)
			}
			uid = pvc.UID
			if err := sc.Set(ctx, pvcUIDKey(name), string(uid)); err != nil {
				return err
			}
		}
		if err := kube.DeletePVC(ctx, r.Client, ns, name, uid); err != nil {
			return err
		}
		sc.Audit(ctx, ObjectRef{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name, UID: string(uid)},
			"DbopsReplacePVC", fmt.Sprintf("deleted PVC %s to replace pod %s with a fresh volume", name, pod.Name))
	}
	if err := DeletePod(ctx, r.Client, ns, pod.Name, old); err != nil {
		return err
	}
	sc.Audit(ctx, ObjectRef{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: pod.Name, UID: string(old)},
		"DbopsReplacePod", fmt.Sprintf("deleted pod %s to replace it with a fresh volume", pod.Name))
	return nil
}

// waitOne waits for pod to be back Ready with a new UID, then checks that
// each of its PVCs is a new one.
func (r *Replacement) waitOne(ctx context.Context, sc *StepContext, ns string, pod Pod) error {
	if err := WaitNewPodReady(ctx, sc, r.Client, ns, pod.Name, types.UID(sc.Get(uidKey(pod.Name))), pod.Name+": "); err != nil {
		return err
	}
	for _, name := range pod.PVCs {
		old := types.UID(sc.Get(pvcUIDKey(name)))
		pvc, err := r.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return Preconditionf("pod %s is Ready but its PVC %s does not exist", pod.Name, name)
		case err != nil:
			return fmt.Errorf("reading PVC %s: %w", name, err)
		case old != "" && pvc.UID == old:
			return Preconditionf("pod %s came back on its old PVC %s (UID %s): the volume was not replaced", pod.Name, name, shortUID(old))
		}
	}
	return nil
}
