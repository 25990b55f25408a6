//go:build e2e

package testbed

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// apiServerOutage is how long TestPodsReadyAfterAPIOutage freezes the API server: longer than
// the node lifecycle controller's --node-monitor-grace-period (50 s by default), after which
// it judges every node lost and marks their pods not Ready, as it does after a real outage.
const apiServerOutage = 60 * time.Second

// TestPodsReadyAfterAPIOutage freezes the API server (SIGSTOP: to everything else an outage of
// the control plane) and follows the pods with a watch begun before it: the node lifecycle
// controller marks them not Ready once the API server answers again, and every one of them is
// Ready again within the nodes' lease duration after that, as a kubelet re-reports the status
// of its pods (assets/stages/pod-ready-resync.yaml). Before that stage the pods stayed unready
// (the wait for them ran out). When the controller does not act (on a loaded machine the
// heartbeats may not lapse long enough), the test marks one pod not Ready as it would.
func TestPodsReadyAfterAPIOutage(t *testing.T) {
	tb := StartT(t, Options{Nodes: 2, Zones: []string{"zone-x"}})
	ctx := t.Context()
	pods := tb.Client.CoreV1().Pods(metav1.NamespaceDefault)
	const n = 4
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("outage-%d", i)},
			Spec: corev1.PodSpec{
				NodeName:   tb.Nodes[i%len(tb.Nodes)],
				Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c:1"}},
			},
		}
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	err := tb.WaitPodsReady(waitCtx, metav1.NamespaceDefault, "", n)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Every change from here on, across the outage (the watch resumes from its last version).
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Stop()

	var apiserver *process
	for _, p := range tb.procs {
		if p.name == "kube-apiserver" {
			apiserver = p
		}
	}
	if apiserver == nil {
		t.Fatal("no kube-apiserver process")
	}
	pid := apiserver.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	time.Sleep(apiServerOutage) // the outage itself, not a wait for something
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()

	ready := map[string]bool{}
	for _, p := range list.Items {
		ready[p.Name] = PodReady(&p)
	}
	var changes []string
	allReady := func() bool {
		for _, r := range ready {
			if !r {
				return false
			}
		}
		return true
	}
	next := func(ctx context.Context) error {
		select {
		case ev, ok := <-rw.ResultChan():
			if !ok {
				return fmt.Errorf("pod watch ended")
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				return fmt.Errorf("pod watch: %v", ev.Object)
			}
			if r := PodReady(p); r != ready[p.Name] {
				ready[p.Name] = r
				changes = append(changes, fmt.Sprintf("+%s %s Ready=%v", time.Since(resumed).Round(time.Second), p.Name, r))
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The node lifecycle controller acts within its monitor period of the API server's return.
	lostCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for allReady() {
		if err := next(lostCtx); err != nil {
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			// On a loaded machine the nodes' heartbeats may not lapse long enough for the
			// controller to judge them lost. Do what it does then (MarkPodsNotReady: the pod's
			// Ready condition set to False, the pod left Running), so that the part under test —
			// the pod reported Ready again — always runs.
			t.Logf("the node lifecycle controller marked no pod unready within a minute of the outage; marking outage-0 not Ready as it does")
			p, err := pods.Get(ctx, "outage-0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					p.Status.Conditions[i].Status = corev1.ConditionFalse
					p.Status.Conditions[i].Reason = "NodeNotReady"
					p.Status.Conditions[i].LastTransitionTime = metav1.Now()
				}
			}
			if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			for allReady() {
				if err := next(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// From the first pod marked unready, all are Ready again within the lease duration.
	backCtx, cancel := context.WithTimeout(ctx, nodeLeaseDuration)
	defer cancel()
	for !allReady() {
		if err := next(backCtx); err != nil {
			t.Fatalf("pods not Ready again within %s of the first one marked unready: %v\nchanges after the outage:\n  %s", nodeLeaseDuration, err, strings.Join(changes, "\n  "))
		}
	}
	t.Logf("changes after the outage:\n  %s", strings.Join(changes, "\n  "))
}
