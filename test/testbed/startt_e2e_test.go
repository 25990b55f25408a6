//go:build e2e

package testbed

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// TestStartT starts a small second testbed through StartT and checks that Stop removes every
// trace. Needs the binaries: go test -tags e2e ./test/testbed/
func TestStartT(t *testing.T) {
	var tb *Testbed
	t.Run("start", func(t *testing.T) {
		tb = StartT(t, Options{Nodes: 2, Zones: []string{"zone-x"}})
		nodes, err := tb.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != 2 {
			t.Fatalf("got %d nodes, want 2", len(nodes.Items))
		}
		for _, n := range nodes.Items {
			if n.Labels[ZoneLabel] != "zone-x" || !NodeReady(&n) {
				t.Errorf("node %s: zone %q ready %v", n.Name, n.Labels[ZoneLabel], NodeReady(&n))
			}
		}
		if _, err := os.Stat(tb.KubeconfigPath); err != nil {
			t.Fatal(err)
		}
		t.Logf("started in %s", tb.StartupDuration)
		checkAuditLog(t, tb)
		checkPodStartDelay(t, tb)
	})
	// The subtest's cleanup has run: processes and folder must be gone.
	if tb == nil {
		t.Fatal("no testbed")
	}
	for _, p := range tb.procs {
		if p.running() {
			t.Errorf("%s still running after cleanup", p.name)
		}
	}
	if _, err := os.Stat(tb.Dir); !os.IsNotExist(err) {
		t.Errorf("testbed dir %s not removed: %v", tb.Dir, err)
	}
}

// checkAuditLog makes an exec request whose argv holds a marker and checks that the audit log
// records it in the request URI, as a real cluster's audit log would.
func checkAuditLog(t *testing.T, tb *Testbed) {
	t.Helper()
	const marker = "audit-marker-4f1c9"
	// The pod does not exist: the request is still authenticated, authorised and audited.
	err := tb.Client.CoreV1().RESTClient().Post().
		Namespace("default").Resource("pods").Name("no-such-pod").SubResource("exec").
		Param("command", "echo").Param("command", marker).Param("stdout", "true").
		Do(t.Context()).Error()
	if err == nil {
		t.Fatal("exec into a missing pod succeeded")
	}
	events, err := tb.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range events {
		if ev.ObjectRef != nil && ev.ObjectRef.Subresource == "exec" && ev.ObjectRef.Name == "no-such-pod" {
			if !strings.Contains(ev.RequestURI, "command="+marker) || !bytes.Contains(ev.Raw, []byte(marker)) {
				t.Errorf("exec audit event without the argv in its URI: %s", ev.Raw)
			}
			if ev.Verb != "create" || ev.User.Username == "" {
				t.Errorf("exec audit event: verb %q user %q", ev.Verb, ev.User.Username)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("no exec audit event among %d events in %s", len(events), tb.AuditLogPath())
	}
}

// checkPodStartDelay creates a pod with PodStartDelayAnnotation and one without, together, and
// checks, from a watch, that only the annotated one waits that long before it is Ready.
func checkPodStartDelay(t *testing.T, tb *Testbed) {
	t.Helper()
	const delay = 3 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	pod := func(name string, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c:1"}}},
		}
	}
	created := map[string]time.Time{}
	for _, p := range []*corev1.Pod{
		pod("slow-start", map[string]string{PodStartDelayAnnotation: delay.String()}),
		pod("fast-start", nil),
	} {
		created[p.Name] = time.Now()
		if _, err := tb.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ready := map[string]time.Duration{}
	api := tb.Client.CoreV1().Pods("default")
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = fields.Everything().String()
			return api.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return api.Watch(ctx, o)
		},
	}
	seen := func(p *corev1.Pod) bool {
		if _, ok := ready[p.Name]; !ok && PodReady(p) {
			ready[p.Name] = time.Since(created[p.Name])
		}
		return len(ready) == len(created)
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, func(store cache.Store) (bool, error) {
		for _, o := range store.List() {
			if p, ok := o.(*corev1.Pod); ok && seen(p) {
				return true, nil
			}
		}
		return false, nil
	}, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		return ok && seen(p), nil
	})
	if err != nil {
		t.Fatalf("waiting for both pods to be Ready (so far %v): %v", ready, err)
	}
	t.Logf("Ready after creation: %v", ready)
	if ready["slow-start"] < delay {
		t.Errorf("pod annotated %s=%s was Ready after %s", PodStartDelayAnnotation, delay, ready["slow-start"])
	}
	// Both were created together: the one without the annotation must not have waited for it.
	if ready["fast-start"] >= delay {
		t.Errorf("pod without %s was Ready only after %s", PodStartDelayAnnotation, ready["fast-start"])
	}
}
