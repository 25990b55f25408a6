package replicated

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// setRole sets (or, with role "", removes) the role label of pod. A JSON
// merge patch touching only that label cannot overwrite anyone else's
// change, so it needs no resourceVersion.
//
// Inside a run, pods are read from the run's informer (members, getPod): the
// patch returns only once the informer has seen it, so the next read (the
// next slot's candidates, the demote loop) never acts on the old role.
func (e *Engine) setRole(ctx context.Context, sc *ops.StepContext, s *site, pod, role string) error {
	var v, inc any
	if role != "" {
		v = role
		// Record the container run the role was given to (incarnation.go): a restart in
		// place later makes the label stale.
		p, err := e.getPod(ctx, sc, s, pod)
		if err != nil {
			return err
		}
		if p != nil {
			if i := incarnation(p, s.container); i != "" {
				inc = i
			}
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{LabelRole: v},
		"annotations": map[string]any{AnnotationRoleIncarnation: inc}}})
	if err != nil {
		return fmt.Errorf("encoding label patch: %w", err)
	}
	patched, err := e.Client.CoreV1().Pods(s.ns).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("setting label %s=%s on pod %s/%s: %w", LabelRole, role, s.ns, pod, err)
	}
	pods := ops.RunPods(ctx, sc, e.Client, s.ns)
	if pods == nil {
		return nil
	}
	if _, err := pods.WaitPod(ctx, pod, func(p *corev1.Pod) (bool, error) {
		return p == nil || p.UID != patched.UID || p.Labels[LabelRole] == role, nil
	}); err != nil {
		return fmt.Errorf("waiting to see label %s=%s on pod %s/%s: %w", LabelRole, role, s.ns, pod, err)
	}
	return nil
}

// setReplicas changes only spec.replicas (one patch of that field).
func (e *Engine) setReplicas(ctx context.Context, s *site, n int32) error {
	_, err := kube.SetReplicas(ctx, e.Client, s.ns, s.sts, n)
	return err
}

func (e *Engine) replicas(ctx context.Context, s *site) (int, error) {
	sts, err := e.Client.AppsV1().StatefulSets(s.ns).Get(ctx, s.sts, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("reading StatefulSet %s/%s: %w", s.ns, s.sts, err)
	}
	if sts.Spec.Replicas == nil {
		return 1, nil
	}
	return int(*sts.Spec.Replicas), nil
}

// waitSize watches the StatefulSet's pods until ordinals 0..n-1 are all
// Ready and no pod beyond n is left.
func (e *Engine) waitSize(ctx context.Context, sc *ops.StepContext, s *site, n int) error {
	last := ""
	err := ops.WaitPods(ctx, sc, e.Client, s.ns, func(live map[string]*corev1.Pod) (bool, error) {
		ready, extra := 0, []string{}
		for _, p := range live {
			ord := s.ordinal(p.Name)
			switch {
			case ord < 0:
			case ord >= n:
				extra = append(extra, p.Name)
			case ops.PodReady(p):
				ready++
			}
		}
		if ready == n && len(extra) == 0 {
			return true, nil
		}
		reason := fmt.Sprintf("%d/%d pods Ready", ready, n)
		if len(extra) > 0 {
			reason += "; waiting for " + strings.Join(extra, ", ") + " to be removed"
		}
		if reason != last && sc != nil {
			last = reason
			sc.Progress(int64(ready), int64(n), "pods", reason)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for StatefulSet %s/%s to have %d Ready pods (%s): %w", s.ns, s.sts, n, last, err)
	}
	return nil
}

// recreate deletes pod (only the incarnation uid) and watches until the
// StatefulSet has made a new one that is Ready.
func (e *Engine) recreate(ctx context.Context, sc *ops.StepContext, s *site, pod string, uid types.UID) error {
	if err := ops.DeletePod(ctx, e.Client, s.ns, pod, uid); err != nil {
		return err
	}
	return e.waitRecreated(ctx, sc, s, pod, uid)
}

// waitRecreated waits, on the run's pod informer, until the StatefulSet has replaced
// incarnation uid of pod with a new one that is Ready.
func (e *Engine) waitRecreated(ctx context.Context, sc *ops.StepContext, s *site, pod string, uid types.UID) error {
	return ops.WaitNewPodReady(ctx, sc, e.Client, s.ns, pod, uid, "pod "+pod+": ")
}

// getPod reads one pod (nil when it does not exist): inside a run (sc, or the
// informer ctx carries) from the run's pod informer, else with one get.
func (e *Engine) getPod(ctx context.Context, sc *ops.StepContext, s *site, name string) (*corev1.Pod, error) {
	return ops.GetPod(ctx, sc, e.Client, s.ns, name)
}
