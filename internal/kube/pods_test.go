package kube

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// requests records the options of every pod list and watch a fake client makes, as
// "list|watch rv=… match=…".
type requests struct {
	mu  sync.Mutex
	got []string
}

func (r *requests) add(verb string, o metav1.ListOptions) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf("%s rv=%s match=%s", verb, o.ResourceVersion, o.ResourceVersionMatch))
}

func (r *requests) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// recordRequests records client's pod lists and watches; reactors added before it answer after
// it has recorded.
func recordRequests(client *fake.Clientset) *requests {
	r := &requests{}
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r.add("list", a.(k8stesting.ListActionImpl).ListOptions)
		return false, nil, nil
	})
	client.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		r.add("watch", a.(k8stesting.WatchActionImpl).ListOptions)
		return false, nil, nil
	})
	return r
}

// TestPodsListWatchFloor: the first list ("0") or watch-list ("") asks for a state not older
// than the floor; nothing else is changed, so a consistent re-read after an expired
// resourceVersion stays consistent and a continued page carries only its token.
func TestPodsListWatchFloor(t *testing.T) {
	watchList := metav1.ListOptions{SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true}
	list0 := metav1.ListOptions{ResourceVersion: "0"}
	consistent := metav1.ListOptions{}
	page := metav1.ListOptions{Continue: "page-2"}
	for _, tc := range []struct {
		name  string
		floor string
		calls []string // list0, watchList, consistent, page (in that order of calling)
		want  []string
	}{
		{"no floor", "", []string{"watchList", "list0"}, []string{"watch rv= match=NotOlderThan", "list rv=0 match="}},
		{"watch-list first", "42", []string{"watchList", "watchList", "list0"},
			[]string{"watch rv=42 match=NotOlderThan", "watch rv= match=NotOlderThan", "list rv=0 match="}},
		{"list first (a client without watch-lists)", "42", []string{"list0", "consistent", "list0"},
			[]string{"list rv=42 match=NotOlderThan", "list rv= match=", "list rv=0 match="}},
		{"continued page", "42", []string{"page", "list0"}, []string{"list rv= match=", "list rv=42 match=NotOlderThan"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			got := recordRequests(client)
			lw := podsListWatch(client.CoreV1().Pods("prod"), "app=db", tc.floor)
			for _, c := range tc.calls {
				var err error
				switch c {
				case "watchList":
					var w watch.Interface
					w, err = lw.WatchFuncWithContext(t.Context(), watchList)
					if w != nil {
						w.Stop()
					}
				case "list0":
					_, err = lw.ListWithContextFunc(t.Context(), list0)
				case "consistent":
					_, err = lw.ListWithContextFunc(t.Context(), consistent)
				case "page":
					_, err = lw.ListWithContextFunc(t.Context(), page)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := got.list(); !slices.Equal(got, tc.want) {
				t.Errorf("requests:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestPodsInformerStartsNotOlderThan runs the informer as the CLI does against a client
// without watch-lists: its first list carries the floor, and after the API server answers
// that it expired the reflector's consistent re-list is left alone.
func TestPodsInformerStartsNotOlderThan(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "prod", Labels: map[string]string{"app": "db"}}}
	client := fake.NewClientset(pod)
	var expired atomic.Bool
	expired.Store(true)
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if expired.Swap(false) {
			return true, nil, apierrors.NewResourceExpired("too old resource version: 42")
		}
		return false, nil, nil
	})
	got := recordRequests(client)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p := StartPods(ctx, client, "prod", "app=db", "42")
	if err := p.Synced(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Get("db-0") == nil {
		t.Fatal("informer does not hold db-0")
	}
	cancel()
	want := []string{"list rv=42 match=NotOlderThan", "list rv= match="}
	if got := got.list(); len(got) < 2 || !slices.Equal(got[:2], want) {
		t.Errorf("requests %q, want them to start with %q", got, want)
	}
}

// TestWaitReplacedReports: what a restart waits for, as the pod goes through deletion,
// recreation, scheduling and start, and when the new incarnation counts as handed to its node
// (the executor's journal writes wait for that: internal/ops/executor.go armGate).
func TestWaitReplacedReports(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", UID: "uid0"},
		Spec: corev1.PodSpec{NodeName: "node-a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	client := fake.NewClientset(old)
	// The fake clientset loses what happens between the informer's list and its watch (a
	// real API server replays it): change nothing until the watch exists.
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		wa := a.(k8stesting.WatchActionImpl)
		w, err := client.Tracker().Watch(a.GetResource(), wa.GetNamespace(), wa.ListOptions)
		if err == nil {
			once.Do(func() { close(watching) })
		}
		return true, w, err
	})
	pods := StartPods(ctx, client, "ns", "", "")
	if err := pods.Synced(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-watching:
	case <-ctx.Done():
		t.Fatal("the informer opened no watch")
	}
	type report struct{ reason string }
	reports := make(chan report, 10)
	errc := make(chan error, 1)
	go func() {
		_, err := pods.WaitReplaced(ctx, "web-0", "uid0", PodReady, "not Ready yet", func(r string) { reports <- report{r} })
		errc <- err
	}()
	fresh := old.DeepCopy()
	fresh.UID, fresh.Spec.NodeName = "uid1", ""
	fresh.Status = corev1.PodStatus{Phase: corev1.PodPending}
	steps := []struct {
		change func() error
		want   report
	}{
		{func() error { return nil }, report{"old pod terminating"}},
		{func() error { return client.CoreV1().Pods("ns").Delete(ctx, "web-0", metav1.DeleteOptions{}) },
			report{"old pod gone; waiting for its controller (StatefulSet or operator) to recreate it"}},
		{func() error {
			_, err := client.CoreV1().Pods("ns").Create(ctx, fresh, metav1.CreateOptions{})
			return err
		},
			report{"new pod pending (UID uid1) not scheduled yet"}},
		{func() error {
			fresh.Spec.NodeName = "node-b"
			_, err := client.CoreV1().Pods("ns").Update(ctx, fresh, metav1.UpdateOptions{})
			return err
		}, report{"new pod pending (UID uid1) not Ready yet"}},
	}
	for _, s := range steps {
		if err := s.change(); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-reports:
			if got != s.want {
				t.Fatalf("report %+v, want %+v", got, s.want)
			}
		case err := <-errc:
			t.Fatalf("WaitReplaced returned early (%v), want report %+v", err, s.want)
		case <-ctx.Done():
			t.Fatalf("no report %+v", s.want)
		}
	}
	fresh.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("WaitReplaced: %v", err)
	}
	select {
	case r := <-reports:
		t.Errorf("report %+v after the new pod was Ready", r)
	default:
	}
}
