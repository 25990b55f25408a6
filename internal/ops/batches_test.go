package ops

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
)

// zonedCluster is testCluster with pods spread over zone-a..c by ordinal,
// like fakecluster's nodes.
func zonedCluster() (*Cluster, *fake.Clientset) {
	c, client := testCluster(threeGroups, groupOrder, "master")
	for _, g := range c.Groups {
		for i := range g.Pods {
			g.Pods[i].Zone = fmt.Sprintf("zone-%c", 'a'+g.Pods[i].Ordinal%3)
			g.Pods[i].Node = fmt.Sprintf("node-%d", g.Pods[i].Ordinal%3)
		}
	}
	return c, client
}

func intp(i int) *int { return &i }

func TestRestartModesPlanGolden(t *testing.T) {
	tests := []struct {
		opts   RestartOptions
		golden string
	}{
		{RestartOptions{Mode: ModePod, MaxUnavailableZones: intp(1)}, "plan-restart-mode-pod.txt"},
		{RestartOptions{Mode: ModeZone, MaxUnavailableZones: intp(0)}, "plan-restart-mode-zone.txt"},
		{RestartOptions{Mode: ModeAll}, "plan-restart-mode-all.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.opts.Mode, func(t *testing.T) {
			c, client := zonedCluster()
			p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WritePlanText(&buf, p.View()); err != nil {
				t.Fatal(err)
			}
			assertGolden(t, tt.golden, buf.Bytes())
			if n := len(client.Actions()); n != 0 {
				t.Errorf("planning made %d API calls, want 0", n)
			}
		})
	}
}

func TestRestartModesBadInput(t *testing.T) {
	c, client := zonedCluster()
	for _, opts := range []RestartOptions{
		{Mode: "bogus"},
		{Mode: ModeZone, MaxUnavailableZones: intp(-1)},
		{Mode: ModeAll, MaxUnavailableZones: intp(0)},
		{Pods: []string{"db-hot-9"}},
	} {
		_, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, opts)
		if ExitCode(err) != ExitUsage {
			t.Errorf("%+v: err = %v, want a usage error", opts, err)
		}
	}
}

// recGate records the order of gate calls.
type recGate struct {
	calls []string
}

func (g *recGate) Describe(Pod) ([]string, []string) { return []string{"gate ok"}, nil }
func (g *recGate) Before(_ context.Context, _ *StepContext, p Pod) error {
	g.calls = append(g.calls, "before "+p.Name)
	return nil
}
func (g *recGate) After(_ context.Context, _ *StepContext, p Pod) error {
	g.calls = append(g.calls, "after "+p.Name)
	return nil
}

// TestZoneModeRestartsAZoneTogether: every pod of zone-a is deleted before
// any of them is back, nothing of zone-b is touched until zone-a is back,
// and the gate runs Before for the whole zone, then After for it.
func TestZoneModeRestartsAZoneTogether(t *testing.T) {
	c, client := zonedCluster()
	ctrl := fakecluster.Start(t, client, "prod")
	ctrl.SetHold(true)
	gate := &recGate{}
	p, err := (&RollingRestart{Client: client, Gate: gate}).Plan(c, EngineGeneric, RestartOptions{Mode: ModeZone})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(p.Steps))
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	if want := []string{"restart/zone/zone-a", "restart/zone/zone-b", "restart/zone/zone-c"}; !slices.Equal(ids, want) {
		t.Fatalf("steps = %v, want %v", ids, want)
	}
	locker := &memLocker{id: "alice@api:6443"}
	done := make(chan error, 1)
	go func() {
		done <- (&Executor{Locker: locker, Timeout: time.Minute}).Run(context.Background(), p)
	}()
	zoneA := []string{"db-master-0", "db-hot-0", "db-cold-0"}
	ctrl.WaitDeleted(t, len(zoneA))
	if got := ctrl.Deleted(); !slices.Equal(got, zoneA) {
		t.Fatalf("while zone-a is down, deleted = %v, want exactly %v", got, zoneA)
	}
	ctrl.SetHold(false)
	ctrl.Flush()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	want := append(slices.Clone(zoneA), "db-master-1", "db-hot-1", "db-master-2")
	if got := ctrl.Deleted(); !slices.Equal(got, want) {
		t.Errorf("deleted = %v, want %v", got, want)
	}
	wantCalls := []string{"before db-master-0", "before db-hot-0", "before db-cold-0", "after db-master-0", "after db-hot-0", "after db-cold-0",
		"before db-master-1", "before db-hot-1", "after db-master-1", "after db-hot-1", "before db-master-2", "after db-master-2"}
	if !slices.Equal(gate.calls, wantCalls) {
		t.Errorf("gate calls = %v\nwant %v", gate.calls, wantCalls)
	}
	if j := locker.stored(t); !slices.Equal(j.Done, ids) {
		t.Errorf("journal done = %v, want %v", j.Done, ids)
	}
}

// TestZoneModeResumeSkipsRestartedPods: a re-run after a crash mid-zone
// does not delete again the pods the first run already restarted.
func TestZoneModeResumeSkipsRestartedPods(t *testing.T) {
	c, client := zonedCluster()
	ctrl := fakecluster.Start(t, client, "prod")
	locker := &memLocker{id: "alice@api:6443"}
	p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{Mode: ModeZone})
	if err != nil {
		t.Fatal(err)
	}
	// The first run dies in zone-b's verify, after its deletions.
	p.Steps[1].Verify = func(context.Context, *StepContext) error { return fmt.Errorf("crash") }
	if err := (&Executor{Locker: locker, Timeout: time.Minute}).Run(context.Background(), p); err == nil {
		t.Fatal("first run should fail")
	}
	ctrl.Flush()
	first := len(ctrl.Deleted())
	p2, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{Mode: ModeZone})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Executor{Locker: locker, Timeout: time.Minute}).Run(context.Background(), p2); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if got := ctrl.Deleted()[first:]; !slices.Equal(got, []string{"db-master-2"}) {
		t.Errorf("resume deleted %v, want only zone-c's pod", got)
	}
}

// TestMaxUnavailableZonesWaits: with K=0 a zone waits, watching pods, while
// a pod of another zone is not Ready, and goes on once it is.
func TestMaxUnavailableZonesWaits(t *testing.T) {
	c, client := zonedCluster()
	ctx := context.Background()
	bad, err := client.CoreV1().Pods("prod").Get(ctx, "db-hot-1", metav1.GetOptions{}) // zone-b
	if err != nil {
		t.Fatal(err)
	}
	bad.Status.Conditions[0].Status = corev1.ConditionFalse
	if _, err := client.CoreV1().Pods("prod").UpdateStatus(ctx, bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctrl := fakecluster.Start(t, client, "prod")
	p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{Mode: ModeZone, MaxUnavailableZones: intp(0)})
	if err != nil {
		t.Fatal(err)
	}
	rec := &Recorder{}
	done := make(chan error, 1)
	go func() {
		done <- (&Executor{Locker: &memLocker{id: "a@b"}, Sink: rec, Timeout: time.Minute}).Run(ctx, p)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(rec.Events(), func(e Event) bool {
		return e.Type == EventStepWaiting && strings.Contains(e.Reason, "zone-b")
	}) {
		if time.Now().After(deadline) {
			t.Fatalf("no waiting event naming zone-b; events: %+v", rec.Events())
		}
		time.Sleep(2 * time.Millisecond) // test-side poll of an in-memory recorder
	}
	if d := ctrl.Deleted(); len(d) != 0 {
		t.Fatalf("deleted %v while zone-b had an unavailable pod", d)
	}
	bad.Status.Conditions[0].Status = corev1.ConditionTrue
	if _, err := client.CoreV1().Pods("prod").UpdateStatus(ctx, bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if n := len(ctrl.Deleted()); n != 6 {
		t.Errorf("deleted %d pods, want 6", n)
	}
}
