//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// waitTimeout bounds every wait; the fake nodes make pods Ready within seconds.
const waitTimeout = 90 * time.Second

// newNamespace creates a namespace unique to the test and deletes it afterwards.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.TrimRight(name, "-") + "-"}}
	created, err := bed.Client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = bed.Client.CoreV1().Namespaces().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
	})
	return created.Name
}

// statefulSet returns a StatefulSet with a volumeClaimTemplate whose pods spread over zones.
func statefulSet(name string, replicas int32) *appsv1.StatefulSet {
	lbls := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:         "db",
						Image:        "example.invalid/db:1",
						Ports:        []corev1.ContainerPort{{Name: "db", ContainerPort: 5432}},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					}},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew:           1,
						TopologyKey:       testbed.ZoneLabel,
						WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector:     &metav1.LabelSelector{MatchLabels: lbls},
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					},
				},
			}},
		},
	}
}

// createStatefulSet creates a StatefulSet and waits until all its pods are Ready.
func createStatefulSet(t *testing.T, ns, name string, replicas int32) []*corev1.Pod {
	t.Helper()
	if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(t.Context(), statefulSet(name, replicas), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create statefulset: %v", err)
	}
	return waitPods(t, ns, labels.SelectorFromSet(labels.Set{"app": name}), int(replicas), func(p *corev1.Pod) bool {
		return testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
}

// waitPods watches pods matching sel until want of them satisfy ok, and returns those.
func waitPods(t *testing.T, ns string, sel labels.Selector, want int, ok func(*corev1.Pod) bool) []*corev1.Pod {
	t.Helper()
	return waitPodsIn(t, bed.Client, ns, sel, want, ok)
}

// waitPodsIn is waitPods in the control plane of client (fleet tests: the second bed).
func waitPodsIn(t *testing.T, client kubernetes.Interface, ns string, sel labels.Selector, want int, ok func(*corev1.Pod) bool) []*corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	pods := client.CoreV1().Pods(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel.String()
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel.String()
			return pods.Watch(ctx, o)
		},
	}
	var store cache.Store
	var matched []*corev1.Pod
	check := func() (bool, error) {
		matched = matched[:0]
		for _, o := range store.List() {
			if p, isPod := o.(*corev1.Pod); isPod && ok(p) {
				matched = append(matched, p)
			}
		}
		return len(matched) >= want, nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{},
		func(s cache.Store) (bool, error) { store = s; return check() },
		func(watch.Event) (bool, error) { return check() })
	if err != nil {
		t.Fatalf("wait for %d pods matching %q in %s: %v (have %s)", want, sel, ns, err, describePods(store))
	}
	return matched
}

func describePods(store cache.Store) string {
	if store == nil {
		return "none"
	}
	var parts []string
	for _, o := range store.List() {
		if p, ok := o.(*corev1.Pod); ok {
			parts = append(parts, fmt.Sprintf("%s phase=%s ready=%v node=%q", p.Name, p.Status.Phase, testbed.PodReady(p), p.Spec.NodeName))
		}
	}
	return strings.Join(parts, "; ")
}

// waitPVCsBound watches the claims in ns until want of them are Bound.
func waitPVCsBound(t *testing.T, ns string, want int) []*corev1.PersistentVolumeClaim {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	pvcs := bed.Client.CoreV1().PersistentVolumeClaims(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return pvcs.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pvcs.Watch(ctx, o)
		},
	}
	var store cache.Store
	var bound []*corev1.PersistentVolumeClaim
	check := func() (bool, error) {
		bound = bound[:0]
		for _, o := range store.List() {
			if c, ok := o.(*corev1.PersistentVolumeClaim); ok && c.Status.Phase == corev1.ClaimBound {
				bound = append(bound, c)
			}
		}
		return len(bound) >= want, nil
	}
	if _, err := watchtools.UntilWithSync(ctx, lw, &corev1.PersistentVolumeClaim{},
		func(s cache.Store) (bool, error) { store = s; return check() },
		func(watch.Event) (bool, error) { return check() }); err != nil {
		t.Fatalf("wait for %d bound claims in %s: %v", want, ns, err)
	}
	return bound
}

// updateStatefulSet changes StatefulSet name with mutate, read and written again on a conflict:
// its controller writes the same object (status) all the time.
func updateStatefulSet(ctx context.Context, t *testing.T, ns, name string, mutate func(*appsv1.StatefulSet)) {
	t.Helper()
	api := bed.Client.AppsV1().StatefulSets(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(s)
		_, err = api.Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("updating StatefulSet %s/%s: %v", ns, name, err)
	}
}
