//go:build e2e

package e2e

// End-to-end test of `replace --failed` against failures the testbed can
// cause: a crash-looping pod (kwok's pod-container-crash stage) and a pod
// on a tainted node. Healthy pods must never be chosen.

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// crashPod makes kwok crash the pod's containers and watches until it is
// not Ready; it returns when the pod turned not Ready (the Ready
// condition's lastTransitionTime).
func crashPod(t *testing.T, ns, pod string) time.Time {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{testbed.CrashLabel: "true"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bed.Client.CoreV1().Pods(ns).Patch(t.Context(), pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("label pod %s to crash: %v", pod, err)
	}
	sel := labels.SelectorFromSet(labels.Set{testbed.CrashLabel: "true"})
	got := waitPods(t, ns, sel, 1, func(p *corev1.Pod) bool {
		return p.Name == pod && p.DeletionTimestamp == nil && !testbed.PodReady(p)
	})
	for _, c := range got[0].Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	t.Fatalf("pod %s has no Ready condition: %+v", pod, got[0].Status)
	return time.Time{}
}

func TestReplaceFailedCrashedAndTainted(t *testing.T) {
	ns := newNamespace(t)
	created := createDBCluster(t, ns, webCluster, 3)
	old := uidsByName(created)
	oldPVCs := pvcUIDs(t, ns)

	// The tainted node must host only one pod of this cluster, or the
	// healthy pods sharing it would (rightly) be chosen too.
	crashed := created[0]
	onNode := map[string]int{}
	for _, p := range created {
		onNode[p.Spec.NodeName]++
	}
	i := slices.IndexFunc(created[1:], func(p *corev1.Pod) bool { return onNode[p.Spec.NodeName] == 1 })
	if i < 0 {
		t.Fatalf("no pod besides %s alone on its node: %v", crashed.Name, onNode)
	}
	tainted := created[1+i]
	var healthy []string
	for _, p := range created {
		if p.Name != crashed.Name && p.Name != tainted.Name {
			healthy = append(healthy, p.Name)
		}
	}
	key := "dbops-e2e.example.com/failed-" + ns
	taintNode(t, tainted.Spec.NodeName, corev1.Taint{Key: key, Effect: corev1.TaintEffectPreferNoSchedule,
		TimeAdded: &metav1.Time{Time: time.Now().Add(-time.Hour)}})

	// --failure-threshold 1s is met once the pod has been not Ready for
	// longer; waiting for 2s leaves a second for the Ready condition's
	// whole-second timestamp and the clocks.
	since := crashPod(t, ns, crashed.Name)
	if wait := 2*time.Second - time.Since(since); wait > 0 {
		time.Sleep(wait)
	}
	env := cliEnv(t)
	args := []string{"replace", webCluster, "-n", ns, "--failed", "--failure-threshold", "1s", "--taint", key + "=30m", "--no-tui"}

	res := runCLI(t, env, append(args, "--dry-run")...)
	if res.Code != 0 {
		t.Fatalf("dry-run: want exit 0: %s", res)
	}
	for _, want := range []string{
		crashed.Name + ": not Ready for ",
		tainted.Name + ": node " + tainted.Spec.NodeName + " has taint " + key,
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("dry-run lacks %q:\n%s", want, res.Stdout)
		}
	}
	for _, p := range healthy {
		if strings.Contains(res.Stdout, p) {
			t.Errorf("dry-run names healthy pod %s:\n%s", p, res.Stdout)
		}
	}
	if now := uidsByName(listPods(t, ns)); !maps.Equal(now, old) {
		t.Errorf("dry-run changed pods: %v -> %v", old, now)
	}

	pods := recordPodWatch(t, ns)
	res = runCLI(t, env, append(args, "--yes")...)
	if res.Code != 0 {
		t.Fatalf("replace --failed: want exit 0: %s", res)
	}
	waitReplacementsReady(t, pods, []string{crashed.Name, tainted.Name}, old)
	now := pvcUIDs(t, ns)
	for _, p := range []string{crashed.Name, tainted.Name} {
		if c := "data-" + p; now[c] == "" || now[c] == oldPVCs[c] {
			t.Errorf("PVC %s: uid %q before, %q after; want a new one", c, oldPVCs[c], now[c])
		}
	}
	for _, p := range healthy {
		if c := "data-" + p; now[c] != oldPVCs[c] {
			t.Errorf("PVC %s of healthy pod %s changed", c, p)
		}
	}
	for _, c := range podTransitions(pods.snapshot()) {
		if slices.Contains(healthy, c.Name) && c.Terminating {
			t.Errorf("healthy pod %s was touched: %s", c.Name, c)
		}
	}
	checkReplaceEvents(t, ns, "DbopsReplacePod", map[string]types.UID{crashed.Name: old[crashed.Name], tainted.Name: old[tainted.Name]})
	// Every pod is Ready again, the crashed one as a fresh pod without the
	// crash label.
	back := waitPods(t, ns, labels.SelectorFromSet(labels.Set{"app": webCluster}), 3, func(p *corev1.Pod) bool {
		return testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
	for _, p := range back {
		if p.Labels[testbed.CrashLabel] != "" {
			t.Errorf("pod %s still carries the crash label", p.Name)
		}
	}
}

func listPods(t *testing.T, ns string) []*corev1.Pod {
	t.Helper()
	list, err := bed.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	out := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out
}
