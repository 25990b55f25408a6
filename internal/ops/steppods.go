package ops

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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

// RunPods is the run's pod informer for namespace ns: the step's (sc), else the one ctx
// carries (kube.WithPods, for code deep in a step that has no StepContext); nil outside a run
// (plan time, status).
func RunPods(ctx context.Context, sc *StepContext, client kubernetes.Interface, ns string) *kube.Pods {
	if p := sc.PodCache(client, ns); p != nil {
		return p
	}
	return kube.PodsFrom(ctx, ns)
}

// ListPods returns the pods of namespace ns that selector (a label selector string; "" for
// all) matches, by name: inside a run from its pod informer, with no request of its own;
// outside a run (plan time, status) with one LIST. Treat them as read-only.
func ListPods(ctx context.Context, sc *StepContext, client kubernetes.Interface, ns, selector string) (map[string]*corev1.Pod, error) {
	if p := RunPods(ctx, sc, client, ns); p != nil {
		sel, err := labels.Parse(selector)
		if err != nil {
			return nil, fmt.Errorf("pod selector %q: %w", selector, err)
		}
		if err := p.Synced(ctx); err != nil {
			return nil, err
		}
		out := map[string]*corev1.Pod{}
		for name, pod := range p.List() {
			if sel.Matches(labels.Set(pod.Labels)) {
				out[name] = pod
			}
		}
		return out, nil
	}
	l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing pods in %s (selector %q): %w", ns, selector, err)
	}
	out := make(map[string]*corev1.Pod, len(l.Items))
	for i := range l.Items {
		out[l.Items[i].Name] = &l.Items[i]
	}
	return out, nil
}

// GetPod returns the named pod (nil when it does not exist): inside a run from its pod
// informer, outside a run with one GET. Treat it as read-only.
func GetPod(ctx context.Context, sc *StepContext, client kubernetes.Interface, ns, name string) (*corev1.Pod, error) {
	if p := RunPods(ctx, sc, client, ns); p != nil {
		if err := p.Synced(ctx); err != nil {
			return nil, err
		}
		return p.Get(name), nil
	}
	pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading pod %s/%s: %w", ns, name, err)
	}
	return pod, nil
}

// GetPods returns the named pods that exist, by name: inside a run from its pod informer,
// outside a run (plan time) with one GET each, sent all at once (a plan reading a large
// cluster's pods one after another waited a round trip per pod). Treat them as read-only.
func GetPods(ctx context.Context, sc *StepContext, client kubernetes.Interface, ns string, names []string) (map[string]*corev1.Pod, error) {
	got := make([]*corev1.Pod, len(names))
	if RunPods(ctx, sc, client, ns) != nil {
		for i, name := range names { // no request: the informer answers
			p, err := GetPod(ctx, sc, client, ns, name)
			if err != nil {
				return nil, err
			}
			got[i] = p
		}
	} else {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(getPodsInFlight)
		for i, name := range names {
			g.Go(func() error {
				p, err := GetPod(gctx, sc, client, ns, name)
				got[i] = p
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
	}
	out := make(map[string]*corev1.Pod, len(names))
	for i, p := range got {
		if p != nil {
			out[names[i]] = p
		}
	}
	return out, nil
}

// getPodsInFlight bounds GetPods' requests in flight: below the client's burst (40), so they
// go out at once without starving the rest of the command.
const getPodsInFlight = 16

// podsFor returns the run's pod informer, or (outside a run) one started for this call
// alone and stopped by the returned function.
func podsFor(ctx context.Context, sc *StepContext, client kubernetes.Interface, ns string) (*kube.Pods, func()) {
	if p := RunPods(ctx, sc, client, ns); p != nil {
		return p, func() {}
	}
	pctx, cancel := context.WithCancel(ctx)
	return kube.StartPods(pctx, client, ns, "", ""), cancel
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
			sc.Block(ctx, BlockedPod, "pod "+namespace+"/"+name,
				fmt.Sprintf("see why it is not there or not Ready: kubectl describe pod -n %s %s", namespace, name), prefix+reason)
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
