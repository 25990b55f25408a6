package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
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

// Pods is one run's view of a cluster's pods: a single label-selected informer (one LIST and
// one WATCH for the whole run) that every wait, every precondition, every UID read and the
// pods table use, instead of a list, a get or a watch of their own per pod. It is a plain
// informer, not client-go's generated factory, which would link an informer for every API
// type into the binary.
type Pods struct {
	namespace string
	inf       cache.SharedIndexInformer

	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// NewPods builds the informer for the pods of namespace matching selector (a label selector
// string; "" for every pod of the namespace). Start it with Run.
//
// notOlderThan, when not empty, is the resourceVersion of a pod list the caller has just
// read (discovery's): the informer's first list or watch-list then asks for a state not
// older than it instead of making a consistent read of its own. The API server answers
// that from its watch cache at once, where a second consistent pod read within 100 ms of
// the first waits for etcd's next progress notification (65-90 ms in -v 6 traces, before
// the first step could start). It is only a floor: the informer still starts from the
// cache's newest state.
func NewPods(client kubernetes.Interface, namespace, selector, notOlderThan string) *Pods {
	lw := podsListWatch(client.CoreV1().Pods(namespace), selector, notOlderThan)
	// The wrapper tells the reflector when a client (the fake clientset in tests) cannot do
	// streaming watch-lists.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.Pod{}, 0, cache.Indexers{})
	p := &Pods{namespace: namespace, inf: inf, subs: map[chan struct{}]struct{}{}}
	notify := func(any) { p.notify() }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, n any) { notify(n) },
		DeleteFunc: notify,
	})
	return p
}

// podsListWatch lists and watches the pods of api matching selector; its first list or
// watch-list asks for a state not older than notOlderThan (see NewPods).
func podsListWatch(api corev1client.PodInterface, selector, notOlderThan string) *cache.ListWatch {
	// Only the first request: after an expired or too new resourceVersion the reflector asks
	// for a consistent read ("" again), which must not be turned back into this floor.
	var floorUsed atomic.Bool
	floor := func() (string, bool) {
		if notOlderThan == "" || floorUsed.Swap(true) {
			return "", false
		}
		return notOlderThan, true
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			// The reflector's first list asks for "0", any state the cache has.
			if o.ResourceVersion == "0" && o.Continue == "" {
				if rv, ok := floor(); ok {
					o.ResourceVersion, o.ResourceVersionMatch = rv, metav1.ResourceVersionMatchNotOlderThan
				}
			}
			return api.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			// The reflector's first watch-list asks for "" (a consistent read), not older than.
			if o.SendInitialEvents != nil && *o.SendInitialEvents && o.ResourceVersion == "" {
				if rv, ok := floor(); ok {
					o.ResourceVersion, o.ResourceVersionMatch = rv, metav1.ResourceVersionMatchNotOlderThan
				}
			}
			return api.Watch(ctx, o)
		},
	}
}

// StartPods builds (see NewPods) and runs the informer until ctx ends.
func StartPods(ctx context.Context, client kubernetes.Interface, namespace, selector, notOlderThan string) *Pods {
	p := NewPods(client, namespace, selector, notOlderThan)
	go p.inf.RunWithContext(ctx)
	return p
}

// Run runs the informer until ctx ends.
func (p *Pods) Run(ctx context.Context) { p.inf.RunWithContext(ctx) }

// Namespace is the namespace the informer follows.
func (p *Pods) Namespace() string { return p.namespace }

// Synced waits until the informer holds the initial list.
//
// It checks on every informer event and at least every 5 ms, not at client-go's
// WaitForCacheSync period of 100 ms: the first step waits for this.
func (p *Pods) Synced(ctx context.Context) error {
	if p.inf.HasSynced() {
		return nil
	}
	changed, cancel := p.Subscribe()
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !p.inf.HasSynced() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("listing pods in %s: %w", p.namespace, context.Cause(ctx))
		case <-changed:
		case <-tick.C:
		}
	}
	return nil
}

// HasSynced reports whether the informer holds the initial list.
func (p *Pods) HasSynced() bool { return p.inf.HasSynced() }

// Get returns the named pod as last seen (nil when it does not exist). Treat it as read-only.
func (p *Pods) Get(name string) *corev1.Pod {
	o, ok, err := p.inf.GetStore().GetByKey(p.namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	pod, _ := o.(*corev1.Pod)
	return pod
}

// List returns every pod as last seen, by name. Treat them as read-only.
func (p *Pods) List() map[string]*corev1.Pod {
	objs := p.inf.GetStore().List()
	out := make(map[string]*corev1.Pod, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok {
			out[pod.Name] = pod
		}
	}
	return out
}

// Subscribe returns a channel that receives (coalesced) a value whenever a pod changes, and
// the function that ends the subscription.
func (p *Pods) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	p.subs[ch] = struct{}{}
	p.mu.Unlock()
	return ch, func() {
		p.mu.Lock()
		delete(p.subs, ch)
		p.mu.Unlock()
	}
}

func (p *Pods) notify() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch := range p.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Until evaluates cond on the cached pods now and after every change until it returns true,
// an error, or ctx ends. No polling: it wakes only on informer events.
func (p *Pods) Until(ctx context.Context, cond func(pods map[string]*corev1.Pod) (bool, error)) error {
	changed, cancel := p.Subscribe()
	defer cancel()
	if err := p.Synced(ctx); err != nil {
		return err
	}
	for {
		ok, err := cond(p.List())
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("watching pods in %s: %w", p.namespace, context.Cause(ctx))
		case <-changed:
		}
	}
}

// WaitPod waits until cond holds for the named pod (nil while it does not exist) and returns
// the pod cond last saw.
func (p *Pods) WaitPod(ctx context.Context, name string, cond func(*corev1.Pod) (bool, error)) (*corev1.Pod, error) {
	changed, cancel := p.Subscribe()
	defer cancel()
	if err := p.Synced(ctx); err != nil {
		return nil, err
	}
	var last *corev1.Pod
	for {
		last = p.Get(name)
		ok, err := cond(last)
		if err != nil {
			return last, fmt.Errorf("waiting for pod %s/%s: %w", p.namespace, name, err)
		}
		if ok {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for pod %s/%s: %w", p.namespace, name, context.Cause(ctx))
		case <-changed:
		}
	}
}

// WaitReplaced waits until the named pod exists with a UID other than old and ok holds for it
// (Ready, for a restart): the StatefulSet recreated a deleted pod. report hears, once per
// change, what it still waits for (prefix-free reasons such as "old pod terminating");
// notYet describes a scheduled new pod that does not satisfy ok yet.
func (p *Pods) WaitReplaced(ctx context.Context, name string, old types.UID, ok func(*corev1.Pod) bool, notYet string, report func(reason string)) (*corev1.Pod, error) {
	last := ""
	return p.WaitPod(ctx, name, func(pod *corev1.Pod) (bool, error) {
		reason := ""
		switch {
		case pod == nil:
			reason = "old pod gone; waiting for its controller (StatefulSet or operator) to recreate it"
		case old != "" && pod.UID == old:
			reason = "old pod terminating"
		case ok(pod):
			return true, nil
		case pod.Spec.NodeName == "":
			reason = fmt.Sprintf("new pod %s (UID %s) not scheduled yet", strings.ToLower(string(pod.Status.Phase)), ShortUID(pod.UID))
		default:
			reason = fmt.Sprintf("new pod %s (UID %s) %s", strings.ToLower(string(pod.Status.Phase)), ShortUID(pod.UID), notYet)
		}
		if reason != last && report != nil {
			last = reason
			report(reason)
		}
		return false, nil
	})
}

// WaitNewReady is WaitReplaced for a restart: a new incarnation that is Ready.
func (p *Pods) WaitNewReady(ctx context.Context, name string, old types.UID, report func(reason string)) error {
	_, err := p.WaitReplaced(ctx, name, old, PodReady, "not Ready yet", report)
	return err
}

// PodOrdinal is the ordinal of a pod of StatefulSet sts ("<sts>-<n>", n written as the
// StatefulSet controller writes it: no sign, no leading zero), or -1 when pod is not one.
func PodOrdinal(sts, pod string) int {
	rest, ok := strings.CutPrefix(pod, sts+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return -1
	}
	return n
}

// ShortUID is the first eight characters of a UID, for messages.
func ShortUID(u types.UID) string {
	s := string(u)
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// DeletePod deletes a pod only if it still has the given UID; a pod already gone or already
// replaced counts as deleted, which makes the call idempotent across re-runs.
func DeletePod(ctx context.Context, client kubernetes.Interface, namespace, name string, uid types.UID) error {
	return deleteUID(ctx, "pod", namespace, name, uid, client.CoreV1().Pods(namespace).Delete)
}

// SetReplicas sets spec.replicas of a StatefulSet with one merge patch of that field alone
// (no read, no whole-object update that could undo someone else's change), and returns the
// StatefulSet as patched (for its UID). Patching to the current value changes nothing.
func SetReplicas(ctx context.Context, client kubernetes.Interface, namespace, name string, n int32) (types.UID, error) {
	if err := CheckWriteGuard(ctx); err != nil {
		return "", fmt.Errorf("not setting replicas of StatefulSet %s/%s to %d: %w", namespace, name, n, err)
	}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
	sts, err := client.AppsV1().StatefulSets(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return "", fmt.Errorf("setting replicas of StatefulSet %s/%s to %d: %w", namespace, name, n, err)
	}
	return sts.UID, nil
}

// SelectorFor returns a label selector string that every one of the given selectors' pods
// matches: the matchLabels all of them share with the same value (pods of other workloads
// that match too are harmless extra cache entries). "" (the whole namespace) when they share
// none or one uses expressions only.
func SelectorFor(selectors []*metav1.LabelSelector) string {
	var common map[string]string
	for i, s := range selectors {
		if s == nil {
			return ""
		}
		if i == 0 {
			common = maps.Clone(s.MatchLabels)
			continue
		}
		for k, v := range common {
			if s.MatchLabels[k] != v {
				delete(common, k)
			}
		}
	}
	keys := make([]string, 0, len(common))
	for k := range common {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+common[k])
	}
	return strings.Join(parts, ",")
}

type podsKey struct{}

// WithPods returns ctx carrying the run's pod informer, for code deep in a step (a database
// connector choosing a Ready pod) that would otherwise read pods one by one.
func WithPods(ctx context.Context, p *Pods) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, podsKey{}, p)
}

// PodsFrom returns the pod informer ctx carries for namespace, or nil.
func PodsFrom(ctx context.Context, namespace string) *Pods {
	p, _ := ctx.Value(podsKey{}).(*Pods)
	if p == nil || p.namespace != namespace {
		return nil
	}
	return p
}
