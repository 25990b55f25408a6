package ops

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// Stage stores a journal value without writing it yet: the executor writes it with the
// step's start, just before the step's action (one write instead of two). Use it in a
// precheck for what must be durable before the action changes anything.
func (sc *StepContext) Stage(key, value string) {
	if sc.journal.Data == nil {
		sc.journal.Data = map[string]string{}
	}
	sc.journal.Data[key] = value
	sc.exec.mu.Lock()
	sc.exec.dirty = true
	sc.exec.mu.Unlock()
}

// PodCache is the run's pod informer for namespace ns (nil without a running executor).
func (sc *StepContext) PodCache(client kubernetes.Interface, ns string) *kube.Pods {
	if sc == nil || sc.exec == nil {
		return nil
	}
	return sc.exec.podCache(client, ns)
}

// podsFor returns the run's pod informer, or (outside a run) one started for this call
// alone and stopped by the returned function.
func podsFor(ctx context.Context, sc *StepContext, client kubernetes.Interface, ns string) (*kube.Pods, func()) {
	if p := sc.PodCache(client, ns); p != nil {
		return p, func() {}
	}
	pctx, cancel := context.WithCancel(ctx)
	return kube.StartPods(pctx, client, ns, ""), cancel
}

// WaitPod waits, on the run's pod informer, until cond holds for the named pod (nil while it
// does not exist). sc may be nil (outside a run).
func WaitPod(ctx context.Context, sc *StepContext, client kubernetes.Interface, namespace, name string,
	cond func(*corev1.Pod) (bool, error)) (*corev1.Pod, error) {
	pods, stop := podsFor(ctx, sc, client, namespace)
	defer stop()
	return pods.WaitPod(ctx, name, cond)
}

// WaitReplaced waits until pod name exists in an incarnation other than old for which ok
// holds, reporting what it waits for as the step's waiting reason (prefixed with prefix).
func WaitReplaced(ctx context.Context, sc *StepContext, client kubernetes.Interface, namespace, name string, old types.UID,
	ok func(*corev1.Pod) bool, notYet, prefix string) (*corev1.Pod, error) {
	pods, stop := podsFor(ctx, sc, client, namespace)
	defer stop()
	return pods.WaitReplaced(ctx, name, old, ok, notYet, func(reason string) {
		if sc != nil && sc.exec != nil {
			sc.Waiting(prefix + reason)
		}
	})
}

// WaitNewPodReady waits until pod name exists with a UID other than old and is Ready.
func WaitNewPodReady(ctx context.Context, sc *StepContext, client kubernetes.Interface, namespace, name string, old types.UID, prefix string) error {
	_, err := WaitReplaced(ctx, sc, client, namespace, name, old, kube.PodReady, "not Ready yet", prefix)
	return err
}

// WaitPods waits, on the run's pod informer, until cond holds for the namespace's pods (by
// name). sc may be nil (outside a run).
func WaitPods(ctx context.Context, sc *StepContext, client kubernetes.Interface, namespace string,
	cond func(map[string]*corev1.Pod) (bool, error)) error {
	pods, stop := podsFor(ctx, sc, client, namespace)
	defer stop()
	return pods.Until(ctx, cond)
}
