package cratedb_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/fakes/cratedbtest"
)

// crateOperatorLifecycle is the crate container's lifecycle in crate-operator's pods
// (crate/operator/create.py): postStart resets routing, preStop decommissions the node with
// dc_util (--timeout 720s, constants.py DECOMMISSION_TIMEOUT), under a 1200 s grace period
// (TERMINATION_GRACE_PERIOD_SECONDS).
func crateOperatorLifecycle() *corev1.Lifecycle {
	sh := func(cmd string) *corev1.LifecycleHandler {
		return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", cmd}}}
	}
	return &corev1.Lifecycle{
		PostStart: sh("./dc_util-linux-${ARCH} --reset-routing || true"),
		PreStop:   sh("./dc_util-linux-${ARCH} --min-availability PRIMARIES --timeout 720s || true"),
	}
}

// TestRestartInterruptWaitsForDecommission: Ctrl-C after a crate-operator pod's delete was
// sent; its preStop hook decommissions the node for up to the pod's 1200 s grace period, so
// allocation stays at primaries until the pod is gone (the end of its grace period bounds the
// wait, not a fixed 30 s), and is re-enabled once it is.
func TestRestartInterruptWaitsForDecommission(t *testing.T) {
	client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3})
	ctx0 := context.Background()
	podsGVR := corev1.SchemeGroupVersion.WithResource("pods")
	for _, p := range c.AllPods() {
		obj, err := client.Tracker().Get(podsGVR, "prod", p.Name)
		if err != nil {
			t.Fatal(err)
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1200)
		for i := range pod.Spec.Containers {
			pod.Spec.Containers[i].Lifecycle = crateOperatorLifecycle()
		}
		if err := client.Tracker().Update(podsGVR, pod, "prod"); err != nil {
			t.Fatal(err)
		}
	}
	deleted := make(chan struct{})
	var once sync.Once
	var deadline time.Time
	// The API server answers a delete by setting deletionTimestamp to now + the grace period;
	// the kubelet runs the preStop hook meanwhile. The test removes the pod later.
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		da := a.(k8stesting.DeleteActionImpl)
		obj, err := client.Tracker().Get(a.GetResource(), da.Namespace, da.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		grace := int64(1200)
		if pod.Spec.TerminationGracePeriodSeconds != nil {
			grace = *pod.Spec.TerminationGracePeriodSeconds
		}
		ts := metav1.NewTime(time.Now().Add(time.Duration(grace) * time.Second).Truncate(time.Second))
		pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &ts, &grace
		if err := client.Tracker().Update(a.GetResource(), pod, da.Namespace); err != nil {
			return true, nil, err
		}
		once.Do(func() { deadline = ts.Time; close(deleted) })
		return true, nil, nil
	})
	e := engine(client, db, nil)
	p, err := e.PlanRestart(ctx0, c, ops.RestartOptions{Groups: []string{"master"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx0)
	defer cancel()
	type wait struct{ reason, alloc string }
	waiting := make(chan wait, 1)
	sink := ops.SinkFunc(func(ev ops.Event) {
		if ev.Type == ops.EventStepWaiting && strings.Contains(ev.Reason, "to finish shutting down") {
			db.Do(func(d *cratedbtest.DB) {
				select {
				case waiting <- wait{ev.Reason, d.Allocation}:
				default:
				}
			})
		}
	})
	errc := make(chan error, 1)
	go func() {
		errc <- (&ops.Executor{Locker: &journalLock{}, Sink: sink, Timeout: time.Hour}).Run(ctx, p)
	}()
	<-deleted
	cancel() // Ctrl-C
	select {
	case w := <-waiting:
		if w.alloc != "primaries" {
			t.Errorf("allocation %q while the pod decommissions, want primaries", w.alloc)
		}
		if want := "its grace period ends " + deadline.UTC().Format(time.RFC3339); !strings.Contains(w.reason, want) {
			t.Errorf("wait %q does not last the grace period (want %q)", w.reason, want)
		}
	case err := <-errc:
		t.Fatalf("run ended (%v) without waiting for the decommissioning pod", err)
	}
	name := strings.TrimPrefix(p.Steps[0].Target, "pod/")
	if err := client.Tracker().Delete(podsGVR, "prod", name); err != nil {
		t.Fatal(err)
	}
	err = <-errc
	if ops.ExitCode(err) != ops.ExitInterrupted || !strings.Contains(err.Error(), "shard allocation was re-enabled") {
		t.Fatalf("run = %v, want interrupted with allocation re-enabled", err)
	}
	db.Do(func(d *cratedbtest.DB) {
		if d.Allocation != "" {
			t.Errorf("allocation left at %q", d.Allocation)
		}
	})
}
