package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
)

// pvcWorld adds a "data-<pod>" PVC to every pod, and makes pod creations
// create a missing PVC with a new UID, like the StatefulSet controller. It
// also records how many pods are deleted but not yet recreated at most.
type pvcWorld struct {
	mu          sync.Mutex
	gen         int
	inFlight    int
	maxInFlight int
}

func withPVCs(t *testing.T, c *Cluster, client *fake.Clientset) *pvcWorld {
	t.Helper()
	w := &pvcWorld{}
	for _, g := range c.Groups {
		for i := range g.Pods {
			name := "data-" + g.Pods[i].Name
			g.Pods[i].PVCs = []string{name}
			if _, err := client.CoreV1().PersistentVolumeClaims("prod").Create(context.Background(),
				&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", UID: types.UID(name + "-uid0")}},
				metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.inFlight++
		w.maxInFlight = max(w.maxInFlight, w.inFlight)
		return false, nil, nil
	})
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		name := "data-" + p.Name
		gvr := corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
		if _, err := client.Tracker().Get(gvr, "prod", name); err != nil {
			w.mu.Lock()
			w.gen++
			uid := types.UID(fmt.Sprintf("%s-new%d", name, w.gen))
			w.mu.Unlock()
			if err := client.Tracker().Create(gvr, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", UID: uid}}, "prod"); err != nil {
				return true, nil, err
			}
		}
		w.mu.Lock()
		w.inFlight--
		w.mu.Unlock()
		return false, nil, nil
	})
	client.ClearActions()
	return w
}

func (w *pvcWorld) max() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxInFlight
}

func TestReplacementPlanGolden(t *testing.T) {
	c, client := zonedCluster()
	withPVCs(t, c, client)
	p, err := (&Replacement{Client: client}).Plan(c, EngineGeneric, ReplaceRequest{
		Pods: []string{"db-hot-0", "db-hot-1", "db-cold-0"}, MaxConcurrent: 2,
		Reasons: map[string]string{"db-cold-0": "not Ready for 3h0m0s"}, Args: "--strategy replacement --max-concurrent 2"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WritePlanText(&buf, p.View()); err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "plan-replace-generic.txt", buf.Bytes())
	if n := len(client.Actions()); n != 0 {
		t.Errorf("planning made %d API calls, want 0", n)
	}
	if _, err := (&Replacement{Client: client}).Plan(c, EngineGeneric, ReplaceRequest{Pods: []string{"other-0"}, MaxConcurrent: 1}); ExitCode(err) != ExitUsage {
		t.Errorf("foreign pod: err = %v, want a usage error", err)
	}
}

// TestReplacementNewPVCsAndMaxConcurrent: every replaced pod comes back on
// a new PVC, and never more than --max-concurrent pods are down at once
// (but that many are: the batch really runs together).
func TestReplacementNewPVCsAndMaxConcurrent(t *testing.T) {
	c, client := zonedCluster()
	ctrl := fakecluster.Start(t, client, "prod")
	// The first batch's pods come back only once both are gone, whatever the scheduling.
	ctrl.SetHold(true)
	go func() {
		ctrl.WaitDeleted(t, 2)
		ctrl.SetHold(false)
		ctrl.Flush()
	}()
	w := withPVCs(t, c, client)
	pods := []string{"db-master-0", "db-master-1", "db-master-2", "db-hot-0", "db-hot-1"}
	p, err := (&Replacement{Client: client}).Plan(c, EngineGeneric, ReplaceRequest{Pods: pods, MaxConcurrent: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 3 {
		t.Fatalf("steps = %d, want 3 batches", len(p.Steps))
	}
	locker := &memLocker{id: "alice@api:6443"}
	ex := &Executor{Locker: locker, Auditor: &KubeAuditor{Client: client, Clock: RealClock{}, Instance: "alice"}, Timeout: time.Minute}
	if err := ex.Run(context.Background(), p); err != nil {
		t.Fatalf("run: %v", err)
	}
	if m := w.max(); m != 2 {
		t.Errorf("at most %d pods were down at once, want exactly 2", m)
	}
	ctx := context.Background()
	for _, name := range pods {
		pvc, err := client.CoreV1().PersistentVolumeClaims("prod").Get(ctx, "data-"+name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("PVC of %s: %v", name, err)
		}
		if strings.HasSuffix(string(pvc.UID), "-uid0") {
			t.Errorf("PVC of %s kept its old UID %s", name, pvc.UID)
		}
		pod, err := client.CoreV1().Pods("prod").Get(ctx, name, metav1.GetOptions{})
		if err != nil || strings.HasSuffix(string(pod.UID), "-uid0") || !PodReady(pod) {
			t.Errorf("pod %s not recreated and Ready: %v %v", name, pod, err)
		}
	}
	// `kubectl describe pod` shows each replaced pod's event: on the live incarnation, once,
	// naming the old pod UID and that the PVC was replaced, and the lock ID.
	for i, e := range assertOneEventPerLivePod(t, client, "DbopsReplacePod", pods...) {
		name := e.InvolvedObject.Name
		if name != pods[i] || e.Type != corev1.EventTypeNormal || !strings.Contains(e.Message, name+"-uid0") ||
			!strings.Contains(e.Message, "PVC data-"+name+" (old uid data-"+name+"-uid0, new uid data-"+name+"-new") ||
			!strings.Contains(e.Message, "replaced by a new one") || !strings.Contains(e.Message, "lock id alice@api:6443") {
			t.Errorf("DbopsReplacePod event of %s: %s %q; want Normal, naming the old uid, the replaced PVC and the lock ID", pods[i], e.Type, e.Message)
		}
	}
	untouched, _ := client.CoreV1().PersistentVolumeClaims("prod").Get(ctx, "data-db-cold-0", metav1.GetOptions{})
	if untouched.UID != "data-db-cold-0-uid0" {
		t.Errorf("a PVC of a pod not asked for was replaced: %s", untouched.UID)
	}
	// PVCs are deleted before their pods.
	var order []string
	for _, a := range client.Actions() {
		if a.GetVerb() == "delete" {
			order = append(order, a.GetResource().Resource+"/"+a.(k8stesting.DeleteAction).GetName())
		}
	}
	if i, j := slices.Index(order, "persistentvolumeclaims/data-db-hot-0"), slices.Index(order, "pods/db-hot-0"); i < 0 || j < 0 || i > j {
		t.Errorf("delete order %v: the PVC must go first", order)
	}
	if j := locker.stored(t); j.State != JournalSucceeded || len(j.Done) != 3 {
		t.Errorf("journal = %+v", j)
	}
	// A re-run of the finished request deletes nothing: each pod is
	// journaled as replaced.
	before := len(client.Actions())
	p2, _ := (&Replacement{Client: client}).Plan(c, EngineGeneric, ReplaceRequest{Pods: pods, MaxConcurrent: 2})
	for _, s := range p2.Steps {
		sc := &StepContext{Step: s, journal: locker.stored(t), exec: &Executor{Clock: RealClock{}, Sink: Discard{}, Grace: time.Second}}
		if err := s.Action(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range client.Actions()[before:] {
		if a.GetVerb() == "delete" {
			t.Errorf("re-run deleted again: %v", a)
		}
	}
}

func TestFindFailed(t *testing.T) {
	c, client := zonedCluster()
	withPVCs(t, c, client)
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	setPod := func(name string, f func(*corev1.Pod)) {
		p, err := client.CoreV1().Pods("prod").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f(p)
		if _, err := client.CoreV1().Pods("prod").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	notReadySince := func(d time.Duration) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse,
				LastTransitionTime: metav1.NewTime(now.Add(-d))}}
		}
	}
	setPod("db-master-0", notReadySince(3*time.Hour))    // failing long enough
	setPod("db-master-1", notReadySince(10*time.Minute)) // too recent
	setPod("db-master-2", func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = nil
		p.CreationTimestamp = metav1.NewTime(now.Add(-5 * time.Hour))
		p.Spec.NodeName = ""
	})
	if err := client.CoreV1().PersistentVolumeClaims("prod").Delete(ctx, "data-db-hot-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	setPod("db-hot-1", func(p *corev1.Pod) { p.Spec.NodeName = "node-old" })
	setPod("db-cold-0", func(p *corev1.Pod) { p.Spec.NodeName = "node-new" })
	for name, added := range map[string]time.Time{"node-old": now.Add(-time.Hour), "node-new": now.Add(-time.Minute)} {
		if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "example.com/retire", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &metav1.Time{Time: added}}}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := FindFailed(ctx, client, c, FailedOptions{Threshold: 2 * time.Hour, Now: now,
		Taints: []TaintRule{{Key: "example.com/retire", MinAge: 30 * time.Minute}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Candidate{
		{"db-master-0", "not Ready for 3h0m0s"},
		{"db-master-2", "Pending for 5h0m0s"},
		{"db-hot-0", "PVC data-db-hot-0 missing"},
		{"db-hot-1", "node node-old has taint example.com/retire for 1h0m0s"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("candidates = %v\nwant %v", got, want)
	}
}

func TestParseTaintRule(t *testing.T) {
	for in, want := range map[string]TaintRule{"k": {Key: "k"}, "a/b=90m": {Key: "a/b", MinAge: 90 * time.Minute}} {
		got, err := ParseTaintRule(in)
		if err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"", "=1h", "k=soon", "k=-1h"} {
		if _, err := ParseTaintRule(in); ExitCode(err) != ExitUsage {
			t.Errorf("%q: err = %v, want usage", in, err)
		}
	}
}

// A replacement killed after it deleted a pod's PVC (and maybe recorded its event) but before
// it deleted the pod: the resumed run deletes the pod, and the PVC's DbopsReplacePVC event is
// there once, whether the killed run recorded it or not.
func TestReplacementResumeRecordsPVCEventOnce(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("event lost %v", lost), func(t *testing.T) {
			c, client := testCluster(map[string]int{"hot": 2}, []string{"hot"}, "")
			fakecluster.Start(t, client, "prod")
			withPVCs(t, c, client)
			var killed atomic.Bool
			client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				if !killed.Swap(true) {
					return true, nil, errors.New("killed")
				}
				return false, nil, nil
			})
			req := ReplaceRequest{Pods: []string{"db-hot-0"}, MaxConcurrent: 1}
			p, err := (&Replacement{Client: client}).Plan(c, EngineGeneric, req)
			if err != nil {
				t.Fatal(err)
			}
			locker := &memLocker{id: "me"}
			auditor := &KubeAuditor{Client: client, Clock: RealClock{}, Instance: "me"}
			if err := (&Executor{Locker: locker, Auditor: auditor, Timeout: time.Minute}).Run(context.Background(), p); err == nil {
				t.Fatal("the killed run succeeded")
			}
			if j := locker.stored(t); j.Data[pvcUIDKey("data-db-hot-0")] != "data-db-hot-0-uid0" {
				t.Fatalf("journal left by the killed run: data %v; want the PVC's UID", j.Data)
			}
			if lost {
				for _, ev := range listEvents(t, client, "DbopsReplacePVC") {
					if err := client.CoreV1().Events("prod").Delete(context.Background(), ev.Name, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			p2, err := (&Replacement{Client: client}).Plan(c, EngineGeneric, req)
			if err != nil {
				t.Fatal(err)
			}
			if err := (&Executor{Locker: locker, Auditor: auditor, Timeout: time.Minute}).Run(context.Background(), p2); err != nil {
				t.Fatalf("resumed run: %v", err)
			}
			evs := listEvents(t, client, "DbopsReplacePVC")
			if len(evs) != 1 || evs[0].InvolvedObject.UID != "data-db-hot-0-uid0" {
				var got []string
				for _, e := range evs {
					got = append(got, string(e.InvolvedObject.UID)+": "+e.Message)
				}
				t.Errorf("DbopsReplacePVC events %q, want one, on the deleted PVC data-db-hot-0-uid0", got)
			}
			pod, err := client.CoreV1().Pods("prod").Get(context.Background(), "db-hot-0", metav1.GetOptions{})
			if err != nil || pod.UID == "db-hot-0-uid0" {
				t.Errorf("db-hot-0 not replaced: %v %v", pod, err)
			}
		})
	}
}
