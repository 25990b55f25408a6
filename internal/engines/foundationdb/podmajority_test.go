package foundationdb

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// TestRestartByPodCoordinatorMajority: with 3 coordinators in 2 zones (two in zone-a), the
// --method pod batch of zone-a would delete a majority of the coordinators at once: it is
// refused before anything of it is written (no maintenance zone, no pod deleted).
// Coordinators: storage-10 and log-10 in zone-a, storage-11 in zone-b.
func TestRestartByPodCoordinatorMajority(t *testing.T) {
	c, model, e, client := podCluster(t, "10.0.0.1:4501", "10.0.1.1:4501", "10.0.0.2:4501")
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone, Method: MethodPod})
	if err != nil {
		t.Fatal(err)
	}
	// Only zone-a's batch: the other batches are fine to delete, and are not what this tests.
	p.Steps = slices.DeleteFunc(p.Steps, func(s *ops.Step) bool { return !slices.Contains(s.Pods, "myfdb-storage-10") })
	if len(p.Steps) != 1 || !slices.Contains(p.Steps[0].Pods, "myfdb-log-10") {
		t.Fatalf("zone-a's batch: %d step(s)", len(p.Steps))
	}
	// A delete that goes out stops the run (nothing would bring the pod back).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var deleted []string
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		deleted = append(deleted, a.(k8stesting.DeleteAction).GetName())
		cancel()
		return false, nil, nil
	})
	err = (&ops.Executor{LockID: "test", Timeout: time.Minute}).Run(ctx, p)
	if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), "the batch holds 2 of 3 coordinators") {
		t.Fatalf("run = %v (exit %d), want the coordinator majority refusal", err, ops.ExitCode(err))
	}
	if len(deleted) != 0 {
		t.Fatalf("deleted %q", deleted)
	}
	if muts := mutations(model); len(muts) != 0 {
		t.Fatalf("the refused batch ran %q", muts)
	}
}

// podCluster is a triple cluster of 3 storage, 3 log and 3 stateless pods in zones a, b and c,
// its pods in a fake clientset (for --method pod), with the given coordinators (default: the
// storage pods').
func podCluster(t *testing.T, coords ...string) (*ops.Cluster, *fdbsim.Cluster, *Engine, *fake.Clientset) {
	t.Helper()
	if len(coords) == 0 {
		coords = []string{"10.0.0.1:4501", "10.0.0.2:4501", "10.0.0.3:4501"}
	}
	host := fdbsim.NewHost(fdbsim.RealClock{})
	c := &ops.Cluster{Name: "myfdb", Namespace: "demo", Engine: ops.EngineFoundationDB}
	ref := &ops.ControllerRef{Kind: "FoundationDBCluster", Name: "myfdb", Object: map[string]any{
		"metadata": map[string]any{"name": "myfdb", "generation": int64(3)},
		"status":   map[string]any{"generations": map[string]any{"reconciled": int64(3)}},
	}}
	var specs []fdbsim.ProcessSpec
	var objs []runtime.Object
	for gi, class := range []string{"storage", "log", "stateless"} {
		g := &ops.NodeGroup{Name: class, Owner: NewOwner(ref, class)}
		for i, z := range []string{"zone-a", "zone-b", "zone-c"} {
			id := fmt.Sprintf("%s-%d", class, 10+i)
			pod := "myfdb-" + id
			uid := types.UID("uid-" + pod)
			g.Pods = append(g.Pods, ops.Pod{Name: pod, UID: uid, Member: id, Group: class, Ready: true, Zone: z})
			specs = append(specs, fdbsim.ProcessSpec{ID: id, Address: fmt.Sprintf("10.0.%d.%d:4501", gi, i+1), Class: class, Zone: z})
			host.BindPod("demo/"+pod, "demo/myfdb")
			objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "demo", UID: uid},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
		}
		c.Groups = append(c.Groups, g)
	}
	model, err := fdbsim.New(fdbsim.RealClock{}, fdbsim.Config{RedundancyMode: "triple", RestartDelay: 150 * time.Millisecond,
		RecoveryStep: 10 * time.Millisecond, KillFlush: 50 * time.Millisecond}, specs, coords)
	if err != nil {
		t.Fatal(err)
	}
	host.SetCluster("demo/myfdb", model)
	client := fake.NewClientset(objs...)
	e, err := New(ops.EngineDeps{Client: client, Exec: &simExec{host: host}}, Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c, model, e, client
}
