package commands

import (
	"context"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedappsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// memoizeLists returns k with its StatefulSet and Node lists memoized: each cluster's
// discovery lists the namespace's StatefulSets and every node, the same request for every
// cluster, so all but the first are answered from the first answer (a namespace of 20
// clusters sent 41 such lists, most of them held back by the client's rate limit).
//
// A kubernetes.Interface wrapper rather than a snapshot passed through discovery.Options:
// discovery stays as every other command uses it. Only ListOptions.rows builds one, for one
// read of one context's namespace (a fleet target), so a memo never outlives it, keeps no
// list once a target is done (a fleet's memory stays per target, not per node), and never
// reaches a command that writes or waits (those must read live state). Only discovery's reads
// and clusterNames go through it; health, lock and journal reads stay live.
func memoizeLists(k kubernetes.Interface) kubernetes.Interface {
	return memoKube{Interface: k, m: &listMemo{entries: map[listKey]*listEntry{}}}
}

// listKey is what makes two list requests the same: the resource, the namespace and the
// selectors. The page size is not in it: only a complete answer (no continue token: the
// whole collection) is kept, and it answers a request of any page size as the API server
// may (a client pages until no continue token is left).
type listKey struct {
	resource, namespace, labels, fields string
}

type listEntry struct {
	done chan struct{}
	obj  runtime.Object // set before done closes; nil: the first request failed or was not complete
}

// listMemo answers repeated list requests from the first answer. Requests sent together wait
// for the first one's answer; a failed or paged answer is not kept (the next request asks the
// API server itself).
type listMemo struct {
	mu      sync.Mutex
	entries map[listKey]*listEntry
}

// list returns the answer to key, asking fetch only when none is kept. Each caller gets its
// own copy: callers may change what they are given.
func (m *listMemo) list(ctx context.Context, key listKey, opts metav1.ListOptions, fetch func() (runtime.Object, error)) (runtime.Object, error) {
	// A continued page, or a list at a given resourceVersion, is not "the same request".
	if opts.Continue != "" || opts.ResourceVersion != "" || opts.ResourceVersionMatch != "" || opts.Watch {
		return fetch()
	}
	for {
		m.mu.Lock()
		e, ok := m.entries[key]
		if !ok {
			e = &listEntry{done: make(chan struct{})}
			m.entries[key] = e
			m.mu.Unlock()
			obj, err := fetch()
			m.mu.Lock()
			if err == nil && complete(obj) {
				e.obj = obj.DeepCopyObject()
			} else {
				delete(m.entries, key)
			}
			m.mu.Unlock()
			close(e.done)
			return obj, err
		}
		m.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.obj != nil {
			return e.obj.DeepCopyObject(), nil
		}
		// The first request failed or was paged: ask again (its entry is gone).
	}
}

// complete says the answer holds the whole collection (no further page).
func complete(obj runtime.Object) bool {
	l, ok := obj.(metav1.ListInterface)
	return ok && l.GetContinue() == ""
}

// memoKube is a clientset whose StatefulSet and Node lists go through m.
type memoKube struct {
	kubernetes.Interface
	m *listMemo
}

func (k memoKube) AppsV1() typedappsv1.AppsV1Interface {
	return memoApps{AppsV1Interface: k.Interface.AppsV1(), m: k.m}
}

func (k memoKube) CoreV1() typedcorev1.CoreV1Interface {
	return memoCore{CoreV1Interface: k.Interface.CoreV1(), m: k.m}
}

type memoApps struct {
	typedappsv1.AppsV1Interface
	m *listMemo
}

func (a memoApps) StatefulSets(ns string) typedappsv1.StatefulSetInterface {
	return memoStatefulSets{StatefulSetInterface: a.AppsV1Interface.StatefulSets(ns), m: a.m, ns: ns}
}

type memoStatefulSets struct {
	typedappsv1.StatefulSetInterface
	m  *listMemo
	ns string
}

func (s memoStatefulSets) List(ctx context.Context, opts metav1.ListOptions) (*appsv1.StatefulSetList, error) {
	obj, err := s.m.list(ctx, listKey{"statefulsets", s.ns, opts.LabelSelector, opts.FieldSelector}, opts, func() (runtime.Object, error) {
		return s.StatefulSetInterface.List(ctx, opts)
	})
	if err != nil {
		return nil, err
	}
	return obj.(*appsv1.StatefulSetList), nil
}

type memoCore struct {
	typedcorev1.CoreV1Interface
	m *listMemo
}

func (c memoCore) Nodes() typedcorev1.NodeInterface {
	return memoNodes{NodeInterface: c.CoreV1Interface.Nodes(), m: c.m}
}

type memoNodes struct {
	typedcorev1.NodeInterface
	m *listMemo
}

func (n memoNodes) List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	obj, err := n.m.list(ctx, listKey{"nodes", "", opts.LabelSelector, opts.FieldSelector}, opts, func() (runtime.Object, error) {
		return n.NodeInterface.List(ctx, opts)
	})
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.NodeList), nil
}
