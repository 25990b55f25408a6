//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// podSh runs a shell command in a pod's container.
func podSh(ctx context.Context, ns, pod, script string) (string, error) {
	out, _, err := kube.Exec(ctx, bed.RESTConfig, bed.Client, ns, pod, "", []string{"sh", "-c", script}, nil)
	return string(out), err
}

// primaryHolders samples which pods hold the primary role: the role file says primary, or a
// primary command still runs in the pod (a promotion in flight that may complete any time).
func primaryHolders(ctx context.Context, ns string, pods []string) []string {
	var mu sync.Mutex
	var holders []string
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			out, err := podSh(cctx, ns, p, `cat /data/role 2>/dev/null; ps -o args | grep -c '[/]app/bin/primary' || true`)
			if err != nil {
				return // the pod is gone or being replaced: nothing runs in it
			}
			f := strings.Fields(out)
			if len(f) == 2 && (f[0] == "primary" || f[1] != "0") {
				mu.Lock()
				holders = append(holders, fmt.Sprintf("%s(role=%s,running=%s)", p, f[0], f[1]))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return holders
}

// TestRealNodeReplicatedPrimaryHang: the best candidate's primary command hangs (it would
// complete after 25 s); its 4 s timeout must end it in the pod before another candidate is
// promoted. A sampler checks, all through the bootstrap and for longer than the hang, that no
// two pods ever hold the primary role.
func TestRealNodeReplicatedPrimaryHang(t *testing.T) {
	needRealNodes(t)
	ns := newNamespace(t)
	const name = "app"
	objs := testbed.RealReplicatedObjects(ns, name, 3, testbed.RealReplicatedConfig(1, "4s", false))
	ctx := t.Context()
	if _, err := bed.Client.CoreV1().Services(ns).Create(ctx, objs.Service, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(ctx, objs.StatefulSet, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := labels.SelectorFromSet(labels.Set{"app": name})
	waitPods(t, ns, sel, 3, func(p *corev1.Pod) bool { return testbed.PodReady(p) && p.DeletionTimestamp == nil })
	waitStatefulSetSettled(t, ns, name, 3)
	pods := []string{name + "-0", name + "-1", name + "-2"}
	// app-0 has the highest sequence number, so it is the first candidate; its promotion hangs.
	for i, seq := range []string{"9", "5", "3"} {
		script := "echo " + seq + " > /data/seq"
		if i == 0 {
			script += "; echo 25 > /data/hang-primary"
		}
		if _, err := podSh(ctx, ns, pods[i], script); err != nil {
			t.Fatalf("prepare %s: %v", pods[i], err)
		}
	}

	stop := make(chan struct{})
	var samples, violations []string
	var sampled int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			h := primaryHolders(context.Background(), ns, pods)
			sampled++
			if len(h) > 1 {
				violations = append(violations, time.Now().Format("15:04:05.000")+" "+strings.Join(h, " "))
			}
			if len(samples) < 200 {
				samples = append(samples, strings.Join(h, " "))
			}
		}
	}()

	began := time.Now()
	res := runCLI(t, cliEnv(t), "bootstrap", name, "-n", ns, "--yes", "--no-tui", "--timeout", "170s")
	t.Logf("bootstrap: %s", res)
	// Sample past the moment the hung promotion would have completed.
	if rest := 30*time.Second - time.Since(began); rest > 0 {
		time.Sleep(rest) // observation window of the sampler, not a wait for a state
	}
	close(stop)
	wg.Wait()
	if res.Code != 0 {
		t.Fatalf("bootstrap: %s", res)
	}
	if !strings.Contains(res.Stdout+res.Stderr, "primary command in pod app-0 did not finish within 4s; the pod was deleted to end it") {
		t.Errorf("the output should say that app-0's primary timed out and its pod was deleted: %s", res)
	}
	if len(violations) > 0 {
		t.Fatalf("two primaries at once (%d of %d samples):\n%s", len(violations), sampled, strings.Join(violations, "\n"))
	}
	if sampled < 5 {
		t.Fatalf("only %d samples taken", sampled)
	}
	final := primaryHolders(ctx, ns, pods)
	if len(final) != 1 || !strings.HasPrefix(final[0], name+"-1(") {
		t.Errorf("primary holders at the end = %v, want app-1 only", final)
	}
	t.Logf("%d samples, no two primaries; final holder %v", sampled, final)
}

// TestRealNodeReplicatedPrimaryRestartedInPlace: the primary's process dies and the kubelet
// restarts its container in place (same pod UID, the role label kept); the new process serves
// no role. A bootstrap afterwards must not trust the label: it promotes a primary again, and
// exactly one pod runs as primary at the end.
func TestRealNodeReplicatedPrimaryRestartedInPlace(t *testing.T) {
	needRealNodes(t)
	ns := newNamespace(t)
	const name = "app"
	objs := testbed.RealReplicatedObjects(ns, name, 3, testbed.RealReplicatedConfig(1, "20s", false))
	ctx := t.Context()
	if _, err := bed.Client.CoreV1().Services(ns).Create(ctx, objs.Service, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(ctx, objs.StatefulSet, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := labels.SelectorFromSet(labels.Set{"app": name})
	waitPods(t, ns, sel, 3, func(p *corev1.Pod) bool { return testbed.PodReady(p) && p.DeletionTimestamp == nil })
	waitStatefulSetSettled(t, ns, name, 3)
	pods := []string{name + "-0", name + "-1", name + "-2"}
	for i, seq := range []string{"9", "5", "3"} {
		if _, err := podSh(ctx, ns, pods[i], "echo "+seq+" > /data/seq"); err != nil {
			t.Fatalf("prepare %s: %v", pods[i], err)
		}
	}
	env := cliEnv(t)
	if res := runCLI(t, env, "bootstrap", name, "-n", ns, "--yes", "--no-tui", "--timeout", "120s"); res.Code != 0 {
		t.Fatalf("first bootstrap: %s", res)
	}
	if h := primaryHolders(ctx, ns, pods); len(h) != 1 || !strings.HasPrefix(h[0], name+"-0(") {
		t.Fatalf("primary holders after the first bootstrap = %v, want app-0", h)
	}
	before, err := bed.Client.CoreV1().Pods(ns).Get(ctx, name+"-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// End the main process; the kubelet restarts the container in place.
	if _, err := podSh(ctx, ns, name+"-0", "kill -TERM 1"); err != nil {
		t.Logf("kill: %v (the exec may end with the container)", err)
	}
	waitPods(t, ns, labels.SelectorFromSet(labels.Set{"statefulset.kubernetes.io/pod-name": name + "-0"}), 1, func(p *corev1.Pod) bool {
		if p.UID != before.UID || !testbed.PodReady(p) || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		return p.Status.ContainerStatuses[0].RestartCount > before.Status.ContainerStatuses[0].RestartCount
	})
	if h := primaryHolders(ctx, ns, pods); len(h) != 0 {
		t.Fatalf("primary holders right after the restart = %v, want none (the new process is idle)", h)
	}
	res := runCLI(t, env, "bootstrap", name, "-n", ns, "--yes", "--no-tui", "--timeout", "120s")
	if res.Code != 0 {
		t.Fatalf("second bootstrap: %s", res)
	}
	if !strings.Contains(res.Stdout+res.Stderr, "not trusted: "+name+"-0") {
		t.Errorf("the plan should say app-0's label is not trusted: %s", res)
	}
	if h := primaryHolders(ctx, ns, pods); len(h) != 1 {
		t.Fatalf("primary holders after the second bootstrap = %v, want exactly one", h)
	}
}
