// Package fakecluster builds StatefulSet-based database clusters in a
// client-go fake clientset and simulates the StatefulSet controller, so
// procedures and commands can be tested without an API server. Test
// support only.
package fakecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// T0 is the creation time of every object, so outputs with ages are stable.
var T0 = time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)

// Group describes one StatefulSet of a labelled (dbops.io/*) cluster.
type Group struct {
	Name     string
	Role     string // master|data
	Order    int
	Replicas int
}

// Objects returns the StatefulSets, pods and nodes of a cluster laid out
// with dbops.io labels; pods are Running and Ready on nodes in zones a-c.
func Objects(ns, cluster, engine string, groups ...Group) []runtime.Object {
	var objs []runtime.Object
	for i := 0; i < 3; i++ {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i),
			Labels: map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("zone-%c", 'a'+i)}}})
	}
	for _, g := range groups {
		sts := StatefulSet(ns, cluster+"-"+g.Name, int32(g.Replicas))
		sts.Labels["dbops.io/cluster"] = cluster
		sts.Labels["dbops.io/node-group"] = g.Name
		sts.Labels["dbops.io/role"] = g.Role
		if engine != "" {
			sts.Labels["dbops.io/engine"] = engine
		}
		sts.Annotations["dbops.io/order"] = fmt.Sprint(g.Order)
		objs = append(objs, sts)
		for o := 0; o < g.Replicas; o++ {
			objs = append(objs, Pod(sts, o, types.UID(fmt.Sprintf("%s-%d-uid0", sts.Name, o))))
		}
	}
	return objs
}

// StatefulSet returns a StatefulSet with a selector and a "data" claim
// template; status counts equal replicas.
func StatefulSet(ns, name string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name),
			Labels: map[string]string{}, Annotations: map[string]string{}, CreationTimestamp: metav1.NewTime(T0)},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"sts": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"sts": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "example/db:1"}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
		},
		Status: appsv1.StatefulSetStatus{Replicas: replicas, ReadyReplicas: replicas},
	}
}

// Pod returns ordinal o of sts, Running and Ready, owned by sts.
func Pod(sts *appsv1.StatefulSet, o int, uid types.UID) *corev1.Pod {
	ctrl := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", sts.Name, o), Namespace: sts.Namespace, UID: uid,
			Labels:            map[string]string{"sts": sts.Name},
			CreationTimestamp: metav1.NewTime(T0),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name,
				UID: sts.UID, Controller: &ctrl}},
		},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", o%3)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// PodReads counts the pod lists and gets a fake clientset saw, as "list N, get M": inside a
// run, one list (the run's pod informer's) and no get.
func PodReads(c *fake.Clientset) string {
	n := map[string]int{}
	for _, a := range c.Actions() {
		if a.GetResource().Resource == "pods" && a.GetSubresource() == "" {
			n[a.GetVerb()]++
		}
	}
	return fmt.Sprintf("list %d, get %d", n["list"], n["get"])
}

// Writes returns the non-read actions a fake clientset saw.
func Writes(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		// An access review asks a question; it changes nothing.
		if r := a.GetResource().Resource; r == "selfsubjectaccessreviews" || r == "selfsubjectrulesreviews" {
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
	}
	return out
}

// Controller stands in for the StatefulSet controller: when a pod is
// deleted it creates the same name again with a new UID, Running and Ready,
// and records the order of deletions.
//
// The fake clientset drops events that happen between an informer's list
// and its watch (a real API server replays them from the resourceVersion),
// so recreations are held back until the next watch is opened or Flush is
// called; that keeps tests deterministic without sleeps.
type Controller struct {
	mu sync.Mutex
	// flushMu makes Flush wait for a Flush in progress (one started by a deletion), so a
	// test's Flush returns only once every pod deleted so far exists again.
	flushMu sync.Mutex
	client  *fake.Clientset
	ns      string
	deleted []string
	pending []*corev1.Pod
	gen     int
	// Hold, when set, keeps recreated pods back until Flush (a pod that
	// never comes back, for timeout and interrupt tests).
	Hold bool
	// watched is set once a pod watch was opened: a run's pod informer keeps one watch
	// open for the whole run, so recreations then happen at once.
	watched bool
}

// Start installs the controller on client until the test ends.
//
// Deletions are handled in a reactor, synchronously: the replacement is
// queued before Delete returns, so no event can slip between a deletion
// and the waiter's watch.
func Start(t testing.TB, client *fake.Clientset, ns string) *Controller {
	t.Helper()
	c := &Controller{client: client, ns: ns}
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		da := a.(k8stesting.DeleteActionImpl)
		if da.GetNamespace() != ns {
			return false, nil, nil
		}
		gvr := a.GetResource()
		obj, err := client.Tracker().Get(gvr, ns, da.Name)
		if err != nil {
			return true, nil, err
		}
		old := obj.(*corev1.Pod)
		if pre := da.DeleteOptions.Preconditions; pre != nil && pre.UID != nil && *pre.UID != old.UID {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), da.Name,
				fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *pre.UID, old.UID))
		}
		if err := client.Tracker().Delete(gvr, ns, da.Name); err != nil {
			return true, nil, err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.deleted = append(c.deleted, old.Name)
		c.gen++
		p := old.DeepCopy()
		p.ResourceVersion = ""
		p.DeletionTimestamp = nil
		p.UID = types.UID(fmt.Sprintf("%s-gen%d", old.Name, c.gen))
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		c.pending = append(c.pending, p)
		if c.watched && !c.Hold {
			// A run's pod informer watches already: recreate right after this call returns.
			go c.Flush()
		}
		return true, nil, nil
	})
	client.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		wa := a.(k8stesting.WatchActionImpl)
		pw, err := client.Tracker().Watch(a.GetResource(), wa.GetNamespace(), wa.ListOptions)
		if err != nil {
			return true, nil, err
		}
		c.mu.Lock()
		hold := c.Hold
		c.watched = true
		c.mu.Unlock()
		if !hold {
			// After the watch exists, so the waiter sees the creation.
			go c.Flush()
		}
		return true, pw, nil
	})
	return c
}

// SetHold switches holding back recreations on or off.
func (c *Controller) SetHold(h bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Hold = h
}

// Flush creates the pods deleted so far.
func (c *Controller) Flush() {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, p := range pending {
		_, _ = c.client.CoreV1().Pods(c.ns).Create(context.Background(), p, metav1.CreateOptions{})
	}
}

// Deleted returns pod names in deletion order.
func (c *Controller) Deleted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.deleted...)
}

// WaitDeleted blocks until n deletions were seen (bounded).
func (c *Controller) WaitDeleted(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(c.Deleted()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("controller saw %d deletions, want %d", len(c.Deleted()), n)
		}
		time.Sleep(2 * time.Millisecond) // test-side poll of an in-memory fake
	}
}

// PatchReplicasAsUpdate makes a merge patch of spec.replicas on a StatefulSet (kube.SetReplicas)
// reach the test's "update statefulsets" reactors as the equivalent update, so a stand-in
// controller written for updates sees replica changes made either way.
func PatchReplicasAsUpdate(client *fake.Clientset) {
	client.PrependReactor("patch", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchActionImpl)
		var patch struct {
			Spec struct {
				Replicas *int32 `json:"replicas"`
			} `json:"spec"`
		}
		if pa.GetPatchType() != types.MergePatchType || json.Unmarshal(pa.GetPatch(), &patch) != nil || patch.Spec.Replicas == nil {
			return false, nil, nil
		}
		obj, err := client.Tracker().Get(a.GetResource(), pa.GetNamespace(), pa.GetName())
		if err != nil {
			return true, nil, err
		}
		sts := obj.(*appsv1.StatefulSet).DeepCopy()
		sts.Spec.Replicas = patch.Spec.Replicas
		upd := k8stesting.NewUpdateAction(a.GetResource(), pa.GetNamespace(), sts)
		// The chain is walked by hand: the fake holds its lock while a reactor runs.
		for _, r := range client.ReactionChain {
			if !r.Handles(upd) {
				continue
			}
			if handled, ret, err := r.React(upd); handled {
				return true, ret, err
			}
		}
		return true, nil, fmt.Errorf("no reactor handled the update of %s", sts.Name)
	})
}
