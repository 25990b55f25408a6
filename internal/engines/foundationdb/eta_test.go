package foundationdb

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// TestExclusionWaitETAFromDrainRate: the exclude step of a replace or scale feeds the bytes
// left on the excluded process (stored_bytes in status json, as the simulator drains them at a
// steady rate) to the step's rate estimate, so its waiting events say what it is blocked on
// and carry the ETA as left over rate: unknown at the first reading, then the time the drain
// has left. The simulator and the run share one manual clock that each poll advances by 1s.
func TestExclusionWaitETAFromDrainRate(t *testing.T) {
	c, model, clock, ex := simCluster(t)
	e := newEngine(t, ex)
	e.deps.Clock = clock
	e.afterFunc = func(time.Duration) <-chan time.Time {
		clock.Advance(time.Second)
		ch := make(chan time.Time, 1)
		ch <- clock.Now()
		return ch
	}
	// storage-13 in storage-10's zone: with storage-10 excluded, teams of three zones can still
	// be built, so its data moves (the simulator drains 1 GiB in its DataMove, 5s).
	if err := model.AddProcess(fdbsim.ProcessSpec{ID: "storage-13", Address: "10.0.0.9:4501", Class: fdbsim.ClassStorage, Zone: "zone-a"}); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := model.Run(t.Context(), []string{"--exec", "exclude no_wait locality_instance_id:storage-10"}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	var groups []any
	for _, p := range c.AllPods() {
		if p.Member != "storage-10" {
			groups = append(groups, map[string]any{"processGroupID": p.Member, "processClass": p.Group, "faultDomain": p.Zone})
		}
	}
	groups = append(groups, map[string]any{"processGroupID": "storage-13", "processClass": "storage", "faultDomain": "zone-a"})
	obj := ops.ControllerOf(c.Groups[0]).Object
	obj["apiVersion"], obj["kind"] = "apps.foundationdb.org/v1beta2", "FoundationDBCluster"
	obj["metadata"].(map[string]any)["name"] = "myfdb"
	obj["metadata"].(map[string]any)["namespace"] = "demo"
	obj["status"].(map[string]any)["processGroups"] = groups
	u := &unstructured.Unstructured{Object: obj}
	e.deps.Dynamic = fakeCRClient(u.DeepCopy())
	r := &removal{e: e, c: c, name: "myfdb", planned: u, field: "processGroupsToRemove"}

	var ranges, steps, blocked []string
	sink := ops.SinkFunc(func(ev ops.Event) {
		if ev.Type != ops.EventStepWaiting {
			return
		}
		if ev.ETA == nil || ev.ETA.Step == nil || ev.Blocked == nil {
			t.Errorf("a waiting event of the exclusion without the step's ETA or blocker: %+v", ev)
			return
		}
		ranges = append(ranges, ev.ETA.Range())
		steps = append(steps, ev.ETA.Step.String())
		blocked = append(blocked, ev.Blocked.Kind+": "+ev.Blocked.On)
	})
	plan := &ops.Plan{Operation: "replace", Cluster: "myfdb", Namespace: "demo", Engine: ops.EngineFoundationDB,
		Steps: []*ops.Step{{ID: "exclude/storage-10", Target: "FoundationDBCluster/myfdb", Description: "exclude",
			Verify: func(ctx context.Context, sc *ops.StepContext) error {
				return r.waitExcluded(ctx, sc, []string{"storage-10"})
			}}}}
	if err := (&ops.Executor{LockID: "test", Sink: sink, Clock: clock}).Run(t.Context(), plan); err != nil {
		t.Fatal(err)
	}
	t.Logf("ranges %q steps %q blocked %q", ranges, steps, blocked)
	// 1 GiB at the exclusion, 0.2 GiB less each second; read every second, so the reading
	// that sees it done comes up to 1s after.
	if want := []string{"unknown", "4s–5s", "3s–4s", "2s–3s", "1s–2s"}; !slices.Equal(ranges, want) {
		t.Errorf("the run's ETA on the exclusion's waits: %q, want %q", ranges, want)
	}
	if len(steps) < 2 || steps[0] != "unknown (1.0 GiB left, one reading so far: a rate needs two)" ||
		!strings.HasPrefix(steps[1], "4s–5s (819.2 MiB left at 204.8 MiB/s over 2 readings since ") {
		t.Errorf("the step's ETA: %q", steps)
	}
	if len(blocked) == 0 || blocked[0] != "process: the data on excluded process group(s) storage-10" {
		t.Errorf("blocked on %q", blocked)
	}
}
