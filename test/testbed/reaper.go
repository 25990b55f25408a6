package testbed

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// RunReaper finishes the deletion of terminating pods on kwok's nodes the way a kubelet
// does once a pod's containers have stopped: a delete with grace period 0 and a UID
// precondition. kwok's own pod-delete stage deletes by name only, and it may act on a stale
// copy of a pod: after a StatefulSet pod is deleted and recreated under the same name, a
// second queued job for the old pod then force-deletes the new one (seen as flaky e2e runs).
// The UID precondition makes that impossible. Pods on other nodes (real kubelets) are left
// to their kubelets. RunReaper returns once its informers have synced; it stops with ctx.
func RunReaper(ctx context.Context, client kubernetes.Interface, logf func(string, ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes().Informer()
	pods := factory.Core().V1().Pods().Informer()

	var mu sync.Mutex
	reaped := map[types.UID]bool{} // one delete per pod object is enough
	reap := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
			return
		}
		nodeObj, exists, err := nodes.GetStore().GetByKey(pod.Spec.NodeName)
		if err != nil || !exists {
			return
		}
		if node, ok := nodeObj.(*corev1.Node); !ok || node.Annotations[KwokNodeAnnotation] != "fake" {
			return
		}
		mu.Lock()
		done := reaped[pod.UID]
		reaped[pod.UID] = true
		mu.Unlock()
		if done {
			return
		}
		uid := pod.UID
		zero := int64(0)
		err = client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero,
			Preconditions:      &metav1.Preconditions{UID: &uid},
		})
		switch {
		case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Gone, or the name belongs to a newer pod now: nothing to do.
		case ctx.Err() != nil:
		default:
			mu.Lock()
			delete(reaped, uid) // try again on the next update
			mu.Unlock()
			logf("testbed: reaper: delete pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
	}
	forget := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			mu.Lock()
			delete(reaped, pod.UID)
			mu.Unlock()
		}
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    reap,
		UpdateFunc: func(_, obj any) { reap(obj) },
		DeleteFunc: forget,
	}); err != nil {
		return fmt.Errorf("reaper: %w", err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("reaper: %v informer did not sync: %w", typ, context.Cause(ctx))
		}
	}
	// A pod that started terminating before the node informer synced was skipped; look again.
	for _, obj := range pods.GetStore().List() {
		reap(obj)
	}
	return nil
}
