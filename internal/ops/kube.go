package ops

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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// PodReady reports whether a pod is running, not being deleted and has the
// Ready condition.
func PodReady(p *corev1.Pod) bool {
	if p == nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitPod watches one pod by name until cond returns true, an error, or ctx
// ends. cond sees nil when the pod does not exist (or was just deleted). It
// uses an informer-backed watch, never polling sleeps.
func WaitPod(ctx context.Context, client kubernetes.Interface, namespace, name string,
	cond func(*corev1.Pod) (bool, error)) (*corev1.Pod, error) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return client.CoreV1().Pods(namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return client.CoreV1().Pods(namespace).Watch(ctx, o)
		},
	}
	var last *corev1.Pod
	// The precondition runs on the initial list, so a pod that already
	// satisfies cond (or is already gone) returns at once.
	pre := func(store cache.Store) (bool, error) {
		for _, o := range store.List() {
			if p, ok := o.(*corev1.Pod); ok && p.Name == name {
				last = p
				return cond(p)
			}
		}
		last = nil
		return cond(nil)
	}
	// The wrapper tells the reflector when a client (the fake clientset in
	// tests) cannot do streaming watch-lists.
	_, err := watchtools.UntilWithSync(ctx, cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.Pod{}, pre, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		// Fake clientsets ignore field selectors; filter by name here too.
		if !ok || p.Name != name {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			last = nil
			return cond(nil)
		}
		last = p
		return cond(p)
	})
	if err != nil {
		return last, fmt.Errorf("waiting for pod %s/%s: %w", namespace, name, err)
	}
	return last, nil
}

// DeletePod deletes a pod only if it still has the given UID; a pod already
// gone or already replaced counts as deleted, which makes the call
// idempotent across re-runs.
func DeletePod(ctx context.Context, client kubernetes.Interface, namespace, name string, uid types.UID) error {
	opts := metav1.DeleteOptions{}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := client.CoreV1().Pods(namespace).Delete(ctx, name, opts)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err) && uid != "":
		// Precondition failed: the pod with that UID is already gone.
		return nil
	default:
		return fmt.Errorf("deleting pod %s/%s: %w", namespace, name, err)
	}
}
