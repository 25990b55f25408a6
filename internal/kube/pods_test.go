package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

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
	pods := StartPods(ctx, client, "ns", "")
	if err := pods.Synced(ctx); err != nil {
		t.Fatal(err)
	}
	type report struct {
		reason     string
		handedOver bool
	}
	reports := make(chan report, 10)
	errc := make(chan error, 1)
	go func() {
		_, err := pods.WaitReplaced(ctx, "web-0", "uid0", PodReady, "not Ready yet", func(r string, h bool) { reports <- report{r, h} })
		errc <- err
	}()
	fresh := old.DeepCopy()
	fresh.UID, fresh.Spec.NodeName = "uid1", ""
	fresh.Status = corev1.PodStatus{Phase: corev1.PodPending}
	steps := []struct {
		change func() error
		want   report
	}{
		{func() error { return nil }, report{"old pod terminating", false}},
		{func() error { return client.CoreV1().Pods("ns").Delete(ctx, "web-0", metav1.DeleteOptions{}) },
			report{"old pod gone; waiting for the StatefulSet to recreate it", false}},
		{func() error {
			_, err := client.CoreV1().Pods("ns").Create(ctx, fresh, metav1.CreateOptions{})
			return err
		},
			report{"new pod pending (UID uid1) not scheduled yet", false}},
		{func() error {
			fresh.Spec.NodeName = "node-b"
			_, err := client.CoreV1().Pods("ns").Update(ctx, fresh, metav1.UpdateOptions{})
			return err
		}, report{"new pod pending (UID uid1) not Ready yet", true}},
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
