package foundationdb

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// recordAfter makes e's waits record the durations asked for and end at once.
func recordAfter(e *Engine) func() []time.Duration {
	var mu sync.Mutex
	var got []time.Duration
	e.afterFunc = func(d time.Duration) <-chan time.Time {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
		ch := make(chan time.Time, 1)
		ch <- time.Time{}
		return ch
	}
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// reasons is a wait's f that waits for each reason in turn, then is done.
func reasons(rs ...string) func() (bool, string, error) {
	i := 0
	return func() (bool, string, error) {
		if i == len(rs) {
			return true, "", nil
		}
		i++
		return false, rs[i-1], nil
	}
}

// TestWaitsBackOff: a wait reads status json again after the poll interval, doubling while it
// waits for the same thing, up to 8 intervals, and from the interval again when that changes;
// the restart gate's wait and the StatefulSet layout's do.
func TestWaitsBackOff(t *testing.T) {
	const b = 20 * time.Millisecond
	want := []time.Duration{b, 2 * b, 4 * b, 8 * b, 8 * b, b, 2 * b}
	seq := []string{"a", "a", "a", "a", "a", "b", "b"}
	for _, tc := range []struct {
		name string
		wait func(e *Engine) error
	}{
		{"restart gate", func(e *Engine) error {
			return (&gate{e: e}).poll(context.Background(), nil, reasons(seq...))
		}},
		{"StatefulSet layout", func(e *Engine) error {
			return pollUntil(context.Background(), e, nil, reasons(seq...))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, e := liveCluster(t, 3, 3)
			got := recordAfter(e)
			if err := tc.wait(e); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got(), want) {
				t.Fatalf("waits %v, want %v", got(), want)
			}
		})
	}
}

// TestRemovalWaitWakesOnTheResource: a wait on the FoundationDBCluster (replace, scale) wakes
// when the resource changes, through a watch, not on its next timed read; its timed reads back
// off as the others do.
func TestRemovalWaitWakesOnTheResource(t *testing.T) {
	c, _, e := liveCluster(t, 3, 3)
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.foundationdb.org/v1beta2", "kind": "FoundationDBCluster",
		"metadata": map[string]any{"name": "myfdb", "namespace": "demo", "generation": int64(3)},
	}}
	dyn := fakeCRClient(cr)
	e.deps.Dynamic = dyn
	e.afterFunc = func(time.Duration) <-chan time.Time { return nil } // timed reads never come
	r := &removal{e: e, c: c, name: "myfdb"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	calls := 0
	err := r.poll(ctx, nil, func(u *unstructured.Unstructured) (bool, string, error) {
		calls++
		if u.GetLabels()["changed"] == "yes" {
			return true, "", nil
		}
		if calls == 1 {
			// The resource changes once the wait has read it: only the watch can tell.
			go func() {
				u := u.DeepCopy()
				u.SetLabels(map[string]string{"changed": "yes"})
				_, _ = dyn.Resource(ClusterGVR).Namespace("demo").Update(context.Background(), u, metav1.UpdateOptions{})
			}()
		}
		return false, "the resource to change", nil
	})
	if err != nil {
		t.Fatalf("the wait did not wake on the resource's change: %v (%d reads)", err, calls)
	}
}

// TestBackoffNext: the sequence itself, reset by a new reason.
func TestBackoffNext(t *testing.T) {
	bo := backoff{base: time.Second}
	var got []time.Duration
	for _, r := range []string{"x", "x", "x", "x", "x", "x", "y", "x"} {
		got = append(got, bo.next(r))
	}
	want := []time.Duration{1, 2, 4, 8, 8, 8, 1, 1}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(got, want) {
		t.Fatalf("backoff %v, want %v", got, want)
	}
}
