package foundationdb

import (
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// offsetClock is an API server whose clock is off the workstation's by a fixed amount.
type offsetClock time.Duration

func (o offsetClock) Now() time.Time { return time.Now().Add(time.Duration(o)) }

// TestNotMembersAsTheOperatorJudges: replace --failed picks the process groups the operator's
// ReplaceFailedProcessGroups would (internal/replacements/replace_failed_process_groups.go,
// api/v1beta2 NeedsReplacementWithConditions): all eleven failure conditions, the cluster's
// failureDetectionTimeSeconds, NodeTaintReplacing after taintReplacementTimeSeconds (1800 s)
// only with taint replacement configured, crash-looped groups never, and condition ages by the
// API server's clock (here an hour ahead of the workstation's).
func TestNotMembersAsTheOperatorJudges(t *testing.T) {
	skew := time.Hour
	taintOpts := map[string]any{"taintReplacementOptions": []any{map[string]any{"key": "*", "durationInSeconds": int64(60)}}}
	for _, tc := range []struct {
		name         string
		replacements map[string]any
		buggify      map[string]any
		conds        map[string][]any // process group ID -> conditions (type, age by the server's clock)
		want         map[string]string
	}{
		{name: "conditions missed before", conds: map[string][]any{
			"storage-10": {"MissingService", 3 * time.Hour}, "storage-11": {"ProcessHasIOError", 3 * time.Hour},
			"storage-12": {"SidecarUnreachable", 3 * time.Hour}, "log-10": {"ProcessHasHighRunLoopBusy", 3 * time.Hour},
			"log-11": {"IncorrectPodSpec", 3 * time.Hour}},
			want: map[string]string{"myfdb-storage-10": "MissingService for 3h", "myfdb-storage-11": "ProcessHasIOError for 3h",
				"myfdb-storage-12": "SidecarUnreachable for 3h", "myfdb-log-10": "ProcessHasHighRunLoopBusy for 3h"}},
		{name: "ages by the server's clock", conds: map[string][]any{
			// 2h30m old for the operator, 1h30m for the workstation.
			"storage-10": {"MissingProcesses", 150 * time.Minute},
			// 1h50m old for the operator, 2h50m for the workstation.
			"storage-11": {"PodFailing", 110 * time.Minute}},
			want: map[string]string{"myfdb-storage-10": "MissingProcesses for 2h30m"}},
		{name: "the earliest condition counts", conds: map[string][]any{
			"storage-10": {"PodFailing", 10 * time.Minute, "MissingProcesses", 3 * time.Hour}},
			want: map[string]string{"myfdb-storage-10": "MissingProcesses for 3h"}},
		{name: "the cluster's failure detection time", replacements: map[string]any{"failureDetectionTimeSeconds": int64(300)},
			conds: map[string][]any{"storage-10": {"PodPending", 10 * time.Minute}, "storage-11": {"PodPending", 2 * time.Minute}},
			want:  map[string]string{"myfdb-storage-10": "PodPending for 10m|(failure detection time 5m0s)"}},
		{name: "failure detection time 0", replacements: map[string]any{"failureDetectionTimeSeconds": int64(0)},
			conds: map[string][]any{"storage-10": {"MissingPod", 10 * time.Second}},
			want:  map[string]string{"myfdb-storage-10": "MissingPod for 1|(failure detection time 0s)"}},
		{name: "node taint after 1800 s", replacements: taintOpts,
			conds: map[string][]any{"storage-10": {condNodeTaintReplacing, 31 * time.Minute}, "log-10": {condNodeTaintReplacing, 29 * time.Minute}},
			want:  map[string]string{"myfdb-storage-10": "NodeTaintReplacing for 31m|(taint replacement time 30m0s)"}},
		{name: "node taint without taint replacement options", conds: map[string][]any{"storage-10": {condNodeTaintReplacing, 5 * time.Hour}},
			want: map[string]string{}},
		{name: "node taints in more fault domains than allowed", replacements: taintOpts,
			conds: map[string][]any{"storage-10": {condNodeTaintReplacing, 5 * time.Hour}, "log-11": {condNodeTaintReplacing, 5 * time.Hour}},
			want:  map[string]string{}},
		{name: "crash looped on purpose", buggify: map[string]any{"crashLoopContainers": []any{map[string]any{"containerName": "foundationdb", "targets": []any{"storage-10"}}}},
			conds: map[string][]any{"storage-10": {"MissingProcesses", 3 * time.Hour}, "storage-11": {"MissingProcesses", 3 * time.Hour}},
			want:  map[string]string{"myfdb-storage-11": "MissingProcesses for 3h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, sim := liveCluster(t, 3, 3)
			withProcessGroups(c)
			obj := ops.ControllerOf(c.Groups[0]).Object
			obj["spec"] = map[string]any{"automationOptions": map[string]any{"replacements": tc.replacements}, "buggify": tc.buggify}
			server := time.Now().Add(skew)
			st := obj["status"].(map[string]any)
			var groups []any
			for _, g := range st["processGroups"].([]any) {
				m := map[string]any{}
				for k, v := range g.(map[string]any) {
					m[k] = v
				}
				var conds []any
				spec := tc.conds[m["processGroupID"].(string)]
				for i := 0; i < len(spec); i += 2 {
					conds = append(conds, map[string]any{"type": spec[i], "timestamp": server.Add(-spec[i+1].(time.Duration)).Unix()})
				}
				if conds != nil {
					m["processGroupConditions"] = conds
				}
				groups = append(groups, m)
			}
			st["processGroups"] = groups
			e, err := New(ops.EngineDeps{Client: fake.NewClientset(), Clock: offsetClock(skew), Exec: sim.deps.Exec}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.NotMembers(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("candidates %q, want %q", got, tc.want)
			}
			for pod, why := range tc.want {
				for _, part := range strings.Split(why, "|") {
					if !strings.Contains(got[pod], part) {
						t.Fatalf("candidates %q, want %s for %q", got, pod, why)
					}
				}
			}
		})
	}
}

func TestNotMembersByProcessGroupConditions(t *testing.T) {
	c, _, e := liveCluster(t, 3, 3)
	withProcessGroups(c)
	st := ops.ControllerOf(c.Groups[0]).Object["status"].(map[string]any)
	old := time.Now().Add(-3 * time.Hour).Unix()
	recent := time.Now().Add(-time.Minute).Unix()
	for _, g := range st["processGroups"].([]any) {
		m := g.(map[string]any)
		switch m["processGroupID"] {
		case "storage-10":
			m["processGroupConditions"] = []any{map[string]any{"type": "MissingProcesses", "timestamp": old}}
		case "storage-11":
			m["processGroupConditions"] = []any{map[string]any{"type": "MissingProcesses", "timestamp": recent}}
		case "log-10":
			m["processGroupConditions"] = []any{map[string]any{"type": "MissingProcesses", "timestamp": old}}
			m["removalTimestamp"] = "2026-01-01T00:00:00Z"
		}
	}
	got, err := e.NotMembers(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.Contains(got["myfdb-storage-10"], "MissingProcesses for 3h") {
		t.Fatalf("candidates %v, want only myfdb-storage-10 (older than 7200 s, not marked)", got)
	}
}

// TestHealthShowsExclusionProgress: an excluded storage process reports its stored bytes until
// its data has moved (status's answer to kubectl-fdb's `get exclusion-status`).
func TestHealthShowsExclusionProgress(t *testing.T) {
	c, model, clock, ex := simCluster(t)
	e := newEngine(t, ex)
	// Triple needs three storage zoneids besides the excluded one for its data to move.
	if err := model.AddProcess(fdbsim.ProcessSpec{ID: "storage-13", Address: "10.0.0.4:4501", Class: fdbsim.ClassStorage, Zone: "zone-d"}); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := model.Run(t.Context(), []string{"--exec", "exclude no_wait locality_instance_id:storage-11"}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	h, err := e.Health(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if p := h.Details["exclusionProgress"]; !strings.HasPrefix(p, "storage-11 ") || !strings.Contains(p, "1.0 GiB stored, roles storage") {
		t.Fatalf("exclusionProgress %q", p)
	}
	clock.Advance(time.Minute)
	if h, _ = e.Health(t.Context(), c); h.Details["exclusionProgress"] != "" {
		t.Fatalf("exclusionProgress after the data moved: %q", h.Details["exclusionProgress"])
	}
}

// TestStatefulSetNotMembers: on the foundationdb-statefulset layout, replace --failed counts a
// pod whose process does not report in status json (its locality_instance_id) as failed; the
// others are not.
func TestStatefulSetNotMembers(t *testing.T) {
	c, model, ex := stsSimCluster(t, 5, 0, 1, 2)
	e := newEngine(t, ex)
	got, err := e.NotMembers(t.Context(), c)
	if err != nil || len(got) != 0 {
		t.Fatalf("all running: %v %v", got, err)
	}
	if err := model.Stop("fdb-3"); err != nil {
		t.Fatal(err)
	}
	got, err = e.NotMembers(t.Context(), c)
	if err != nil || len(got) != 1 || !strings.Contains(got["fdb-3"], "does not report in status json") {
		t.Fatalf("fdb-3 stopped: %v %v", got, err)
	}
}

// TestNotMembersSkipsTheMaintenanceZone: as the operator's ReplaceFailedProcessGroups skips a
// process group IsUnderMaintenance (a storage group whose fault domain is status json's
// maintenance_zone), replace --failed does not pick a storage group in the active zone; a log
// group in that zone and a storage group in another zone still count.
func TestNotMembersSkipsTheMaintenanceZone(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	withProcessGroups(c)
	st := ops.ControllerOf(c.Groups[0]).Object["status"].(map[string]any)
	old := time.Now().Add(-3 * time.Hour).Unix()
	for _, g := range st["processGroups"].([]any) {
		m := g.(map[string]any)
		switch m["processGroupID"] {
		case "storage-10", "storage-11", "log-10":
			m["processGroupConditions"] = []any{map[string]any{"type": "MissingProcesses", "timestamp": old}}
		}
	}
	var out, errb strings.Builder
	if code := model.Run(t.Context(), []string{"--exec", "maintenance on zone-a 600"}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	got, err := e.NotMembers(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["myfdb-storage-10"]; ok || len(got) != 2 || got["myfdb-storage-11"] == "" || got["myfdb-log-10"] == "" {
		t.Fatalf("candidates %v, want myfdb-storage-11 and myfdb-log-10 (storage-10 is in maintenance zone-a)", got)
	}
}
