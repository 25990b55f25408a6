package etcd

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// writeClusterState stores the initial-cluster string and state in the
// cluster-state ConfigMap, creating it if missing; other keys are kept.
// It reports whether anything changed.
func (e *Engine) writeClusterState(ctx context.Context, s *site, initial string) (bool, error) {
	cms := e.Client.CoreV1().ConfigMaps(s.ns)
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, s.configMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.configMap, Namespace: s.ns,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "kubectl-dbops"}},
				Data: map[string]string{}}
			s.state.set(cm.Data, initial)
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				// Created meanwhile: retry as an update.
				return apierrors.NewConflict(corev1.Resource("configmaps"), s.configMap, err)
			}
			changed = err == nil
			return err
		}
		if err != nil {
			return err
		}
		if s.state.holds(cm.Data, initial) {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		s.state.set(cm.Data, initial)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		changed = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("updating ConfigMap %s/%s: %w", s.ns, s.configMap, err)
	}
	return changed, nil
}

// clusterStateIs reports whether the ConfigMap already holds initial.
func (e *Engine) clusterStateIs(ctx context.Context, s *site, initial string) (bool, error) {
	cm, err := e.Client.CoreV1().ConfigMaps(s.ns).Get(ctx, s.configMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading ConfigMap %s/%s: %w", s.ns, s.configMap, err)
	}
	return s.state.holds(cm.Data, initial), nil
}

// replicas reads spec.replicas of the StatefulSet.
func (e *Engine) replicas(ctx context.Context, s *site) (int32, error) {
	sts, err := e.Client.AppsV1().StatefulSets(s.ns).Get(ctx, s.sts, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("reading StatefulSet %s/%s: %w", s.ns, s.sts, err)
	}
	if sts.Spec.Replicas == nil {
		return 1, nil
	}
	return *sts.Spec.Replicas, nil
}

// setReplicas changes only spec.replicas (one patch of that field). It reports the
// StatefulSet's UID for audit events.
func (e *Engine) setReplicas(ctx context.Context, s *site, n int32) (string, error) {
	uid, err := kube.SetReplicas(ctx, e.Client, s.ns, s.sts, n)
	return string(uid), err
}

// deletePVCs deletes the claims of pod; missing ones count as deleted.
func (e *Engine) deletePVCs(ctx context.Context, s *site, pod string) error {
	for _, name := range s.pvcNames(pod) {
		err := e.Client.CoreV1().PersistentVolumeClaims(s.ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting PVC %s/%s: %w", s.ns, name, err)
		}
	}
	return nil
}

// waitPVCsGone watches until none of names exists, or any that exists has
// a UID not in old (a new claim made by the StatefulSet controller).
func (e *Engine) waitPVCsGone(ctx context.Context, s *site, names []string, old map[string]string) error {
	for _, name := range names {
		sel := fields.OneTermEqualSelector("metadata.name", name).String()
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.FieldSelector = sel
				return e.Client.CoreV1().PersistentVolumeClaims(s.ns).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.FieldSelector = sel
				return e.Client.CoreV1().PersistentVolumeClaims(s.ns).Watch(ctx, o)
			},
		}
		gone := func(p *corev1.PersistentVolumeClaim) bool {
			return p == nil || (old != nil && old[name] != "" && string(p.UID) != old[name])
		}
		pre := func(store cache.Store) (bool, error) {
			for _, o := range store.List() {
				if p, ok := o.(*corev1.PersistentVolumeClaim); ok && p.Name == name {
					return gone(p), nil
				}
			}
			return true, nil
		}
		_, err := watchtools.UntilWithSync(ctx, cache.ToListWatcherWithWatchListSemantics(lw, e.Client), &corev1.PersistentVolumeClaim{}, pre,
			func(ev watch.Event) (bool, error) {
				p, ok := ev.Object.(*corev1.PersistentVolumeClaim)
				if !ok || p.Name != name {
					return false, nil
				}
				if ev.Type == watch.Deleted {
					return true, nil
				}
				return gone(p), nil
			})
		if err != nil {
			return fmt.Errorf("waiting for PVC %s/%s to be deleted: %w", s.ns, name, err)
		}
	}
	return nil
}

// pvcUIDs reads the UIDs of the existing claims of pod.
func (e *Engine) pvcUIDs(ctx context.Context, s *site, pod string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range s.pvcNames(pod) {
		p, err := e.Client.CoreV1().PersistentVolumeClaims(s.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading PVC %s/%s: %w", s.ns, name, err)
		}
		out[name] = string(p.UID)
	}
	return out, nil
}

// waitPodReady watches pod until it is Ready (and, when oldUID is set, a
// different incarnation than oldUID).
func waitPodReady(ctx context.Context, sc *ops.StepContext, e *Engine, s *site, pod, oldUID string) (*corev1.Pod, error) {
	return waitPodState(ctx, sc, e, s, pod, oldUID, ops.PodReady, "not Ready yet")
}

// podRunning reports whether the pod runs with every container started (not
// necessarily Ready).
func podRunning(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	if len(p.Status.ContainerStatuses) < len(p.Spec.Containers) {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}

// waitPodRunning watches pod until its containers run (and, when oldUID is
// set, in a different incarnation than oldUID): a learner's pod is never
// Ready, since etcd's /readyz fails for learners.
func waitPodRunning(ctx context.Context, sc *ops.StepContext, e *Engine, s *site, pod, oldUID string) (*corev1.Pod, error) {
	return waitPodState(ctx, sc, e, s, pod, oldUID, podRunning, "containers not running yet")
}

// waitPodState waits, on the run's pod informer, until ok holds for an incarnation of pod
// other than oldUID, reporting what it waits for.
func waitPodState(ctx context.Context, sc *ops.StepContext, e *Engine, s *site, pod, oldUID string, ok func(*corev1.Pod) bool, notYet string) (*corev1.Pod, error) {
	return ops.WaitReplaced(ctx, sc, e.Client, s.ns, pod, types.UID(oldUID), ok, notYet, "pod "+pod+": ")
}

// waitPodGone watches until pod no longer exists.
func waitPodGone(ctx context.Context, sc *ops.StepContext, e *Engine, s *site, pod string) error {
	waiting := false
	_, err := ops.WaitPod(ctx, sc, e.Client, s.ns, pod, func(p *corev1.Pod) (bool, error) {
		if p == nil {
			return true, nil
		}
		if !waiting && sc != nil {
			waiting = true
			sc.Waiting("waiting for pod " + pod + " to be deleted by the StatefulSet")
		}
		return false, nil
	})
	return err
}

func stsRef(s *site, uid string) ops.ObjectRef {
	return ops.ObjectRef{Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: s.ns, Name: s.sts, UID: uid}
}
