//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// TestCompareRolloutRestart measures a generic `kubectl dbops restart --rolling` against
// `kubectl rollout restart` + `kubectl rollout status` (the real kubectl binaries, as #15
// measured it) and against the StatefulSet controller alone (the same patch of the pod
// template's restartedAt annotation and the same status watch, made in the test process) on
// one 30-pod StatefulSet whose pods take 1 s to start, in turn, and logs the wall times and
// their ratios. A measurement, not
// an assertion; it takes a few minutes, so it runs only with DBOPS_E2E_COMPARE=1.
// DBOPS_E2E_COMPARE_RUNS sets the runs per side (3 by default) and DBOPS_E2E_COMPARE_START the
// pods' start time (a Go duration, 1s by default; 0s for kwok's immediate Ready).
//
// Without DBOPS_E2E_COMPARE (as in `make test`) it runs once per side with pods that are Ready
// at once, logs the same measurements, and checks the plugin's API requests per pod (a
// count, not a time): at most 4, as counted in its done event.
func TestCompareRolloutRestart(t *testing.T) {
	full := os.Getenv("DBOPS_E2E_COMPARE") == "1"
	runs := 3
	if n, err := fmt.Sscan(os.Getenv("DBOPS_E2E_COMPARE_RUNS"), &runs); n != 1 || err != nil {
		runs = 3
	}
	start := time.Second
	if !full {
		runs, start = 1, 0
	}
	if v := os.Getenv("DBOPS_E2E_COMPARE_START"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			t.Fatalf("DBOPS_E2E_COMPARE_START=%q: want a Go duration such as 1s or 0s", v)
		}
		start = d
	}
	const replicas = 30
	ns := newNamespace(t)
	createDBCluster(t, ns, webCluster, replicas, func(s *appsv1.StatefulSet) {
		if start > 0 {
			s.Spec.Template.Annotations = map[string]string{testbed.PodStartDelayAnnotation: start.String()}
		}
	})
	t.Logf("pods take %s to start (%s)", start, testbed.PodStartDelayAnnotation)
	env := kubectlEnv(t)
	kubectl := bed.Kubectl()
	// kubectl's discovery cache warm, as on a user's machine.
	if res := runKubectl(t, kubectl, env, "get", "statefulset", webCluster, "-n", ns); res.Code != 0 {
		t.Fatalf("kubectl get: %s", res)
	}
	pods := recordPodWatch(t, ns)
	// Three sides, in turn: the plugin as users type it, the two kubectl commands #15 measured
	// it against, and the controller alone (the patch and the status watch in this process:
	// no process starts, so the stricter reference).
	sides := []struct {
		name string
		// run returns the side's wall time and its client processes' CPU time (0: in this process).
		run func() (time.Duration, time.Duration)
	}{
		{"kubectl dbops restart --rolling", func() (time.Duration, time.Duration) {
			res := runKubectl(t, kubectl, env, "dbops", "restart", webCluster, "-n", ns, "--rolling", "--yes", "--no-tui", "-o", "json", "--timeout", "10m")
			if res.Code != 0 {
				t.Fatalf("restart: %s", res)
			}
			evs := parseNDJSON(t, res)
			done := evs[len(evs)-1]
			total := done.APIRequests["total"]
			perPod := float64(total) / replicas
			t.Logf("kubectl dbops restart --rolling: %d API requests for %d pods (%.2f per pod): %v", total, replicas, perPod, done.APIRequests)
			if done.Type != "done" || perPod > 4 {
				t.Fatalf("%.2f API requests per pod (at most 4): %v", perPod, done.APIRequests)
			}
			return res.Elapsed, res.CPU
		}},
		{"kubectl rollout restart + rollout status", func() (time.Duration, time.Duration) {
			res := runKubectl(t, kubectl, env, "rollout", "restart", "statefulset/"+webCluster, "-n", ns)
			if res.Code != 0 {
				t.Fatalf("rollout restart: %s", res)
			}
			st := runKubectl(t, kubectl, env, "rollout", "status", "statefulset/"+webCluster, "-n", ns, "--timeout", "10m")
			if st.Code != 0 {
				t.Fatalf("rollout status: %s", st)
			}
			return res.Elapsed + st.Elapsed, res.CPU + st.CPU
		}},
		{"controller alone (patch + status watch in the test)", func() (time.Duration, time.Duration) {
			return rolloutRestart(t, ns, webCluster), 0
		}},
	}
	whole, cpu := make([][]time.Duration, len(sides)), make([][]time.Duration, len(sides))
	waits := make([][]restartWaits, len(sides))
	for i := range len(sides) * runs {
		// Each round shifts the order by one, so no side always follows the same other side
		// (the previous side's trailing controller work, such as its status writes and
		// revision history, lands at the next side's start).
		k := (i + i/len(sides)) % len(sides)
		from := len(pods.snapshot())
		began := time.Now()
		d, c := sides[k].run()
		cpu[k] = append(cpu[k], c)
		// The controller's last Ready may reach the test's watch after its status did.
		wctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		err := pods.waitUntil(wctx, func(evs []recordedEvent) bool {
			return countReplaced(podTransitions(evs[from:])) == replicas
		})
		cancel()
		if err != nil {
			t.Fatalf("waiting for the test's watch to see every pod replaced: %v", err)
		}
		w := unavoidableWaits(t, podTransitions(pods.snapshot()[from:]), replicas)
		w.lead = w.first.Sub(began)
		w.tail = d - w.lead - w.span
		whole[k], waits[k] = append(whole[k], d), append(waits[k], w)
		t.Logf("run %d: %s %s; %s", i/len(sides)+1, sides[k].name, d.Round(time.Millisecond), w.describe(d))
	}
	m := make([]time.Duration, len(sides))
	for k := range sides {
		m[k] = median(whole[k])
	}
	for k := 1; k < len(sides); k++ {
		t.Logf("%d-pod StatefulSet, %d runs each, in turn: %s median %s, %s median %s, ratio %.3f; %s",
			replicas, runs, sides[0].name, m[0].Round(time.Millisecond), sides[k].name, m[k].Round(time.Millisecond), float64(m[0])/float64(m[k]),
			pairedDifference(whole[0], whole[k]))
	}
	for k := range sides {
		if c := median(cpu[k]); c > 0 {
			t.Logf("%s: client CPU (user + system) median %s per run", sides[k].name, c.Round(time.Millisecond))
		}
	}
	for k := range sides {
		ws := waits[k]
		ratios := make([]time.Duration, len(ws)) // ratio x 1e6, to reuse median
		spanRatios := make([]time.Duration, len(ws))
		leads, tails := make([]time.Duration, len(ws)), make([]time.Duration, len(ws))
		var all restartWaits // every run's pods together
		for i := range ws {
			ratios[i] = time.Duration(1e6 * float64(whole[k][i]) / float64(ws[i].sum))
			spanRatios[i] = time.Duration(1e6 * float64(ws[i].span) / float64(ws[i].sum))
			leads[i], tails[i] = ws[i].lead, ws[i].tail
			all.gaps = append(all.gaps, ws[i].gaps...)
			for p := range phaseNames {
				all.phases[p] = append(all.phases[p], ws[i].phases[p]...)
			}
		}
		t.Logf("%s against the sum of its unavoidable waits (each pod's delete -> new incarnation Ready): median ratio %.3f for the whole run, %.3f from the first delete to the last Ready; start -> first delete %s, last Ready -> end %s (medians); pod Ready -> next pod deleted: median %s; per pod (medians): %s",
			sides[k].name, float64(median(ratios))/1e6, float64(median(spanRatios))/1e6,
			median(leads).Round(100*time.Microsecond), median(tails).Round(100*time.Microsecond), median(all.gaps).Round(100*time.Microsecond), all.phaseMedians())
	}
}

// pairedDifference compares two sides round by round (the runs of one round are minutes
// apart, not hours): in how many rounds a was faster, and the median of a - b.
func pairedDifference(a, b []time.Duration) string {
	n := min(len(a), len(b))
	if n == 0 {
		return "no rounds"
	}
	diffs, faster := make([]time.Duration, n), 0
	for i := range n {
		diffs[i] = a[i] - b[i]
		if diffs[i] < 0 {
			faster++
		}
	}
	return fmt.Sprintf("faster in %d of %d rounds, paired median difference %s", faster, n, median(diffs).Round(time.Millisecond))
}

// restartWaits is what the test's own watch saw of a one-pod-at-a-time rolling restart.
type restartWaits struct {
	// sum is, over the pods replaced, the time from the old incarnation's deletion (first
	// seen terminating or deleted) to its successor's first Ready: what no restart procedure
	// can save.
	sum time.Duration
	// span is the time from the first deletion to the last Ready: the procedure without the
	// run's fixed costs (process start, discovery, RBAC checks, the lock).
	span time.Duration
	// first and last are the first deletion and the last Ready; lead is the time from the
	// side's start to the first deletion, tail the rest of the run after the last Ready: the
	// fixed costs at either end.
	first, last time.Time
	lead, tail  time.Duration
	// gaps are the times from a successor's Ready to the next deletion: the procedure's own
	// time per pod.
	gaps []time.Duration
	// phases are, per stage of a pod's replacement (phaseNames), the times the pods spent in
	// it: where the unavoidable wait goes.
	phases [len(phaseNames)][]time.Duration
}

// phaseNames are the stages of one pod's replacement as a watch sees them: the old incarnation
// terminating until it is gone, the successor created, scheduled, running, and Ready.
var phaseNames = [...]string{"terminating->gone", "gone->created", "created->scheduled", "scheduled->running", "running->Ready"}

// phaseMedians renders the median time per stage.
func (w restartWaits) phaseMedians() string {
	parts := make([]string, 0, len(phaseNames))
	for i, n := range phaseNames {
		if len(w.phases[i]) > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", n, median(w.phases[i]).Round(100*time.Microsecond)))
		}
	}
	return strings.Join(parts, ", ")
}

func (w restartWaits) describe(whole time.Duration) string {
	return fmt.Sprintf("its pods' delete -> new incarnation Ready sum to %s (ratio %.3f); first delete -> last Ready %s (ratio %.3f); start -> first delete %s, last Ready -> end %s; pod Ready -> next pod deleted median %s; per pod (medians): %s",
		w.sum.Round(time.Millisecond), float64(whole)/float64(w.sum), w.span.Round(time.Millisecond), float64(w.span)/float64(w.sum),
		w.lead.Round(100*time.Microsecond), w.tail.Round(100*time.Microsecond), median(w.gaps).Round(100*time.Microsecond), w.phaseMedians())
}

// unavoidableWaits measures the n pods a rolling restart replaced, one at a time (see
// restartWaits).
func unavoidableWaits(t *testing.T, trs []podTransition, n int) restartWaits {
	t.Helper()
	var w restartWaits
	deleted := map[string]podTransition{}
	// stage[name] holds when each stage of the pod's replacement began (zero: not yet).
	stage := map[string]*[len(phaseNames) + 1]time.Time{}
	var first, last time.Time
	done := 0
	for _, tr := range trs {
		d, seen := deleted[tr.Name]
		switch {
		case tr.Terminating && !seen:
			deleted[tr.Name] = tr
			stage[tr.Name] = &[len(phaseNames) + 1]time.Time{tr.At}
			if first.IsZero() {
				first = tr.At
			}
			if !last.IsZero() && len(deleted) == 1 {
				w.gaps = append(w.gaps, tr.At.Sub(last))
			}
		case seen && tr.UID == d.UID && tr.Type == watch.Deleted:
			mark(stage[tr.Name], 1, tr.At)
		case seen && tr.UID != d.UID:
			st := stage[tr.Name]
			mark(st, 2, tr.At)
			if tr.Node != "" {
				mark(st, 3, tr.At)
			}
			if tr.Phase == corev1.PodRunning {
				mark(st, 4, tr.At)
			}
			if tr.Ready && !tr.Terminating {
				mark(st, 5, tr.At)
				for i := range phaseNames {
					if !st[i].IsZero() && !st[i+1].IsZero() {
						w.phases[i] = append(w.phases[i], st[i+1].Sub(st[i]))
					}
				}
				w.sum += tr.At.Sub(d.At)
				last = tr.At
				delete(deleted, tr.Name)
				done++
			}
		}
	}
	if done != n {
		t.Fatalf("saw %d pods replaced and Ready again, want %d", done, n)
	}
	w.span, w.first, w.last = last.Sub(first), first, last
	return w
}

// mark records when stage i began, the first time it is seen.
func mark(st *[len(phaseNames) + 1]time.Time, i int, at time.Time) {
	if st[i].IsZero() {
		st[i] = at
	}
}

// countReplaced counts the pods seen deleted and then Ready as a new incarnation.
func countReplaced(trs []podTransition) int {
	deleted := map[string]types.UID{}
	n := 0
	for _, tr := range trs {
		old, seen := deleted[tr.Name]
		switch {
		case tr.Terminating && !seen:
			deleted[tr.Name] = tr.UID
		case seen && tr.Ready && tr.UID != old && !tr.Terminating:
			delete(deleted, tr.Name)
			n++
		}
	}
	return n
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// rolloutRestart does what `kubectl rollout restart sts/NAME` and `kubectl rollout status`
// do: patch the template's restartedAt annotation, then watch the StatefulSet until the
// controller reports the new revision everywhere and every replica Ready. It returns the wall
// time from the patch to that.
func rolloutRestart(t *testing.T, ns, name string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, start.Format(time.RFC3339Nano))
	sts, err := bed.Client.AppsV1().StatefulSets(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	gen := sts.Generation
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	api := bed.Client.AppsV1().StatefulSets(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return api.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return api.Watch(ctx, o)
		},
	}
	// kubectl's rollout status for a StatefulSet with RollingUpdate: observed generation, every
	// replica updated and Ready, current revision = update revision.
	done := func(s *appsv1.StatefulSet) bool {
		st := s.Status
		return st.ObservedGeneration >= gen && s.Spec.Replicas != nil && st.UpdatedReplicas == *s.Spec.Replicas &&
			st.ReadyReplicas == *s.Spec.Replicas && st.CurrentRevision == st.UpdateRevision
	}
	_, err = watchtools.UntilWithSync(ctx, lw, &appsv1.StatefulSet{}, func(store cache.Store) (bool, error) {
		for _, o := range store.List() {
			if s, ok := o.(*appsv1.StatefulSet); ok && done(s) {
				return true, nil
			}
		}
		return false, nil
	}, func(ev watch.Event) (bool, error) {
		s, ok := ev.Object.(*appsv1.StatefulSet)
		return ok && done(s), nil
	})
	if err != nil {
		t.Fatalf("waiting for the rollout: %v", err)
	}
	return time.Since(start)
}
