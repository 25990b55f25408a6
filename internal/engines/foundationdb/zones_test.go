package foundationdb

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// TestStatefulSetRestartZoneModeBatchesByZoneID: on FoundationDB's Kubernetes sample each
// process's locality_zoneid is its pod name, so --mode zone restarts one pod per batch, whatever
// the nodes' Kubernetes zone labels say (none: one "none" batch of every pod; all one label:
// one batch of every pod). A pod whose process does not report has no fault domain to batch by:
// refused, with nothing run but status.
func TestStatefulSetRestartZoneModeBatchesByZoneID(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nodeZones []string
		stop      string
		refused   string
	}{
		{name: "nodes without zone labels", nodeZones: []string{"", "", "", ""}},
		{name: "every node in one Kubernetes zone", nodeZones: []string{"zone-a", "zone-a", "zone-a", "zone-a"}},
		{name: "two Kubernetes zones", nodeZones: []string{"zone-a", "zone-b", "zone-a", "zone-b"}},
		{name: "a pod whose process does not report", nodeZones: []string{"", "", "", ""}, stop: "fdb-3", refused: "pod(s) fdb-3 report none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, model, ex := stsSimCluster(t, 4, 0, 1, 2)
			for i := range c.Groups[0].Pods {
				c.Groups[0].Pods[i].Zone = tc.nodeZones[i]
			}
			if tc.stop != "" {
				if err := model.Stop(tc.stop); err != nil {
					t.Fatal(err)
				}
			}
			p, err := newEngine(t, ex).PlanRestart(t.Context(), c, ops.RestartOptions{Mode: ops.ModeZone})
			for _, l := range model.Log() {
				if strings.Fields(l.Command)[0] != "status" {
					t.Errorf("planning ran %q", l.Command)
				}
			}
			if tc.refused != "" {
				if !errors.Is(err, ops.ErrPrecondition) || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("err %v, want a refusal naming %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var targets []string
			for _, s := range p.Steps {
				targets = append(targets, s.Target)
			}
			slices.Sort(targets) // the master's and cluster controller's batches go last
			if got, want := strings.Join(targets, " "), "zone/fdb-0 zone/fdb-1 zone/fdb-2 zone/fdb-3"; got != want {
				t.Fatalf("batches %q, want %q", got, want)
			}
			// The discovered cluster is left as discovery made it.
			if c.Groups[0].Pods[1].Zone != tc.nodeZones[1] {
				t.Fatalf("the caller's cluster was changed: zone %q", c.Groups[0].Pods[1].Zone)
			}
		})
	}
}

// TestDeletionBatchFaultDomains: replace --strategy deletion --max-concurrent N plans a pod
// restart in batches of N (internal/commands/replace.go planReplace); a batch may take down no
// more fault domains than the redundancy mode tolerates losing (triple: 2), as the replacement
// refuses. Storage pods of liveCluster are in zone-a, zone-b and zone-c.
func TestDeletionBatchFaultDomains(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pods    []string
		batch   int
		refused string
	}{
		{name: "three fault domains at once", pods: []string{"myfdb-storage-10", "myfdb-storage-11", "myfdb-storage-12"}, batch: 3,
			refused: "3 fault domains at once (zoneids zone-a, zone-b, zone-c), beyond the fault tolerance of redundancy mode triple, which tolerates losing 2"},
		{name: "two fault domains at once", pods: []string{"myfdb-storage-10", "myfdb-storage-11"}, batch: 2},
		{name: "one at a time", pods: []string{"myfdb-storage-10", "myfdb-storage-11", "myfdb-storage-12"}, batch: 1},
		{name: "three classes, three zones", pods: []string{"myfdb-storage-10", "myfdb-log-11", "myfdb-stateless-12"}, batch: 3,
			refused: "3 fault domains at once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, model, e := liveCluster(t, 3, 3)
			p, err := e.PlanRestart(t.Context(), c, ops.RestartOptions{Pods: tc.pods, BatchSize: tc.batch, Method: ops.MethodPod})
			if len(mutations(model)) != 0 {
				t.Errorf("planning ran %q", mutations(model))
			}
			if tc.refused != "" {
				if !errors.Is(err, ops.ErrPrecondition) || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("err %v, want a refusal naming %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := (len(tc.pods) + tc.batch - 1) / tc.batch; len(p.Steps) != want {
				t.Fatalf("%d steps, want %d", len(p.Steps), want)
			}
		})
	}
}

// TestStorageSpreadShortAfterReplacementInUsedZone: a storage replacement placed in zone-b
// beside storage-11, zone-a's storage-10 excluded: the storage keeping data spans zone-b and
// zone-c only, fewer than triple's 3, so the replacement's exclusion step and its final health
// step wait on that, named, instead of reporting success.
func TestStorageSpreadShortAfterReplacementInUsedZone(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	st0, _, err := e.StatusFrom(t.Context(), e.cli(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if short := storageSpreadShort(st0, redundancyOf(st0)); short != "" {
		t.Fatalf("three zoneids reported short: %s", short)
	}
	if err := model.AddProcess(fdbsim.ProcessSpec{ID: "storage-13", Address: "10.0.0.9:4501", Class: fdbsim.ClassStorage, Zone: "zone-b"}); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := model.Run(t.Context(), []string{"--exec", "exclude no_wait locality_instance_id:storage-10"}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	st, _, err := e.StatusFrom(t.Context(), e.cli(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	short := storageSpreadShort(st, redundancyOf(st))
	if want := "spans 2 zoneid(s), zone-b (storage-11, storage-13); zone-c (storage-12), and redundancy mode triple needs 3"; !strings.Contains(short, want) {
		t.Fatalf("short %q, want %q", short, want)
	}
	if healthy(st) {
		t.Fatal("status reports the data healthy with teams short of zoneids")
	}
}

// TestRemovalWaitsOnStorageSpread: the sandbox run. Triple, storage-10 (zone-a)
// excluded, its replacement storage-13 placed in zone-b beside storage-11: the storage keeping
// data spans zone-b and zone-c only, so FoundationDB builds no team and the data stays short.
// The exclude step says its exclusion is stalled and why; the storage step of a scale and the
// final health step of a replace wait on the spread, named, instead of reporting done (the scale
// step has no health check of its own: without the spread check it reported done here).
func TestRemovalWaitsOnStorageSpread(t *testing.T) {
	const spread = "a storage process in another zoneid: the storage that keeps data spans 2 zoneid(s), zone-b (storage-11, storage-13); zone-c (storage-12), and redundancy mode triple needs 3"
	c, model, e := liveCluster(t, 3, 3)
	if err := model.AddProcess(fdbsim.ProcessSpec{ID: "storage-13", Address: "10.0.0.9:4501", Class: fdbsim.ClassStorage, Zone: "zone-b"}); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := model.Run(t.Context(), []string{"--exec", "exclude no_wait locality_instance_id:storage-10"}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	// The CR as the operator has it then: storage-10 gone from the groups, storage-13 placed
	// in zone-b, every count met, the cluster healthy as far as the operator's status says.
	var groups []any
	for _, p := range c.AllPods() {
		if p.Member != "storage-10" {
			groups = append(groups, map[string]any{"processGroupID": p.Member, "processClass": p.Group, "faultDomain": p.Zone})
		}
	}
	groups = append(groups, map[string]any{"processGroupID": "storage-13", "processClass": "storage", "faultDomain": "zone-b"})
	obj := ops.ControllerOf(c.Groups[0]).Object
	obj["apiVersion"], obj["kind"] = "apps.foundationdb.org/v1beta2", "FoundationDBCluster"
	obj["metadata"].(map[string]any)["namespace"] = "demo"
	obj["spec"] = map[string]any{"processCounts": map[string]any{"storage": int64(3), "log": int64(3), "stateless": int64(3)}}
	obj["status"].(map[string]any)["health"] = map[string]any{"available": true, "healthy": true}
	obj["status"].(map[string]any)["processGroups"] = groups
	u := &unstructured.Unstructured{Object: obj}
	e.deps.Dynamic = fakeCRClient(u.DeepCopy())
	r := &removal{e: e, c: c, name: "myfdb", planned: u, field: "processGroupsToRemove"}

	for _, tc := range []struct {
		name string
		wait func(context.Context, *ops.StepContext) error
		want string
	}{
		{"exclude", func(ctx context.Context, sc *ops.StepContext) error {
			return r.waitExcluded(ctx, sc, []string{"storage-10"})
		}, " left to move) is stalled; waiting for " + spread},
		{"scale storage", func(ctx context.Context, sc *ops.StepContext) error { return r.waitClass(ctx, sc, "storage", 3) }, spread},
		{"healthy", r.waitHealthy, spread},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The first reason the step waits on is the answer: the run is cancelled there.
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var reason string
			sink := ops.SinkFunc(func(ev ops.Event) {
				if ev.Type == ops.EventStepWaiting && reason == "" {
					reason = ev.Reason
					cancel()
				}
			})
			plan := &ops.Plan{Operation: "test", Cluster: "myfdb", Namespace: "demo", Engine: "foundationdb",
				Steps: []*ops.Step{{ID: "wait", Target: "FoundationDBCluster/myfdb", Description: tc.name, Verify: tc.wait}}}
			err := (&ops.Executor{LockID: "test", Sink: sink}).Run(ctx, plan)
			if err == nil {
				t.Fatalf("the step reported done with storage in two zoneids under triple")
			}
			if !strings.Contains(reason, tc.want) {
				t.Fatalf("waiting on %q, want %q", reason, tc.want)
			}
		})
	}
}
