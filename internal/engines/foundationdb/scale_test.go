package foundationdb

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/golden"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestPlanScaleRemove: scale --processes storage=N --remove GROUP names the process groups that
// go (kubectl-fdb's processGroupsToRemove with the lower processCounts): planned with a step
// waiting for them to be gone (golden); an unknown group, a group of a class --processes does
// not lower, or a number named that differs from the reduction is refused with exit 2, and
// planning writes nothing.
func TestPlanScaleRemove(t *testing.T) {
	for _, tc := range []struct {
		name    string
		counts  map[string]int32
		remove  []string
		message string
		steps   string
		golden  string
	}{
		{name: "one storage group by pod", counts: map[string]int32{"storage": 2}, remove: []string{"myfdb-storage-11"},
			steps: "processCounts removed converge/storage healthy", golden: "scale_remove.txt"},
		{name: "two by group ID", counts: map[string]int32{"storage": 1, "log": 3}, remove: []string{"storage-10", "storage-12"},
			steps: "processCounts removed converge/log converge/storage healthy"},
		{name: "unknown", counts: map[string]int32{"storage": 2}, remove: []string{"nope"}, message: `"nope" is neither a pod nor a process group`},
		{name: "class not scaled", counts: map[string]int32{"storage": 2}, remove: []string{"log-10"}, message: "--remove log-10: it is a log process group, and --processes does not scale log"},
		{name: "too few named", counts: map[string]int32{"storage": 1}, remove: []string{"storage-10"}, message: "removes 2 of the 3 there are"},
		{name: "count unchanged", counts: map[string]int32{"storage": 3}, remove: []string{"storage-10"}, message: "removes 0 of the 3 there are"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, m, e := liveCluster(t, 3, 3)
			withProcessGroups(c)
			// single: the redundancy minimum (one process) leaves room to remove two of three.
			ops.ControllerOf(c.Groups[0]).Object["spec"] = map[string]any{"processCounts": map[string]any{"storage": int64(3), "log": int64(3)},
				"databaseConfiguration": map[string]any{"redundancy_mode": "single"}}
			p, err := e.PlanScale(t.Context(), c, ops.ScaleRequest{Processes: tc.counts, Remove: tc.remove})
			if len(mutations(m)) > 0 {
				t.Fatalf("planning ran %q", mutations(m))
			}
			if tc.message != "" {
				if err == nil || ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), tc.message) {
					t.Fatalf("err %v, want exit 2 naming %q", err, tc.message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertPlan(t, p, tc.steps, tc.golden)
		})
	}
}

// TestPatchCountsWithRemovals: the lower count and the named groups go in one merge patch with
// the resourceVersion read, the groups added to the list already there (a merge patch replaces
// lists); a resumed run that finds both done writes nothing.
func TestPatchCountsWithRemovals(t *testing.T) {
	c, _, e := liveCluster(t, 3, 3)
	withProcessGroups(c)
	obj := liveCR(c).Object
	obj["spec"] = map[string]any{"processCounts": map[string]any{"storage": int64(3)}, "processGroupsToRemove": []any{"log-12"}}
	u := &unstructured.Unstructured{Object: obj}
	dyn := fakeCRClient(u.DeepCopy())
	e.deps.Dynamic = dyn
	r := &removal{e: e, c: c, name: "myfdb", planned: u, field: "processGroupsToRemove"}
	if err := r.patchCounts(t.Context(), nil, map[string]int32{"storage": 2}, map[string]int{"storage": 3}, []string{"storage-11"}); err != nil {
		t.Fatal(err)
	}
	var patches []string
	for _, a := range dyn.Actions() {
		if pa, ok := a.(k8stesting.PatchAction); ok {
			patches = append(patches, string(pa.GetPatch()))
		}
	}
	want := `{"metadata":{"resourceVersion":"42"},"spec":{"processCounts":{"storage":2},"processGroupsToRemove":["log-12","storage-11"]}}`
	if len(patches) != 1 || patches[0] != want {
		t.Fatalf("patches %q, want one: %s", patches, want)
	}
	// Resumed: the CR as patched.
	done, err := dyn.Resource(ClusterGVR).Namespace("demo").Get(t.Context(), "myfdb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dyn.ClearActions()
	r.planned = done
	if err := r.patchCounts(t.Context(), nil, map[string]int32{"storage": 2}, map[string]int{"storage": 3}, []string{"storage-11"}); err != nil {
		t.Fatal(err)
	}
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "patch" {
			t.Fatalf("a resumed run patched again: %v", a)
		}
	}
}

// assertPlan checks a plan's step IDs (space-separated) and, when golden is set, its text
// against the golden file.
func assertPlan(t *testing.T, p *ops.Plan, steps, goldenFile string) {
	t.Helper()
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	if got := strings.Join(ids, " "); got != steps {
		t.Fatalf("steps %q, want %q", got, steps)
	}
	if goldenFile != "" {
		var b bytes.Buffer
		if err := ops.WritePlanText(&b, p.View()); err != nil {
			t.Fatal(err)
		}
		golden.Assert(t, goldenFile, b.Bytes())
	}
}

// TestPlanScaleOperatorDefaults: counts as the operator reads spec.processCounts (0 or unset:
// its default for the redundancy mode; -1: none). On the operator's sample cluster (double,
// stateless -1, storage and log unset), stateless=-1 is valid and waits for no stateless group;
// a class left unset is shown with its default; storage=-1 is refused (none is below the
// mode's replicas) with nothing written.
func TestPlanScaleOperatorDefaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    map[string]any
		counts  map[string]int32
		message string
		details []string
	}{
		{name: "stateless none", spec: map[string]any{}, counts: map[string]int32{"stateless": -1},
			details: []string{"set spec.processCounts: stateless 9 (unset: the operator's default) -> -1 (none)", "class stateless has 0 process groups"}},
		{name: "sample: storage from default", spec: map[string]any{"processCounts": map[string]any{"cluster_controller": int64(1), "stateless": int64(-1)}},
			counts:  map[string]int32{"storage": 4},
			details: []string{"storage 3 (unset: the operator's default) -> 4", "class storage has 4 process groups"}},
		{name: "back to the default", spec: map[string]any{"processCounts": map[string]any{"log": int64(6)}}, counts: map[string]int32{"log": 0},
			details: []string{"log 6 -> 4 (unset: the operator's default)", "class log has 4 process groups"}},
		{name: "no storage", spec: map[string]any{"processCounts": map[string]any{"stateless": int64(-1)}}, counts: map[string]int32{"storage": -1},
			message: "storage=-1 leaves 0 storage processes, below the 2 redundancy mode double needs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, m, e := liveCluster(t, 3, 3)
			withProcessGroups(c)
			ops.ControllerOf(c.Groups[0]).Object["spec"] = tc.spec
			p, err := e.PlanScale(t.Context(), c, ops.ScaleRequest{Processes: tc.counts})
			if len(mutations(m)) > 0 {
				t.Fatalf("planning ran %q", mutations(m))
			}
			if tc.message != "" {
				if err == nil || ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tc.message) {
					t.Fatalf("err %v, want exit 5 naming %q", err, tc.message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var text []string
			for _, s := range p.Steps {
				text = append(text, s.Description)
			}
			all := strings.Join(text, "\n")
			for _, d := range tc.details {
				if !strings.Contains(all, d) {
					t.Fatalf("plan does not say %q:\n%s", d, all)
				}
			}
		})
	}
}

// TestPatchCountsRefusesOthersChanges: the count patch carries the resourceVersion it was
// computed from. When the API server refuses it (someone changed the CR), the run reads the
// CR again: a count someone else changed since the plan is refused (precondition, nothing
// written over it); a CR that keeps changing is refused after a bounded number of attempts.
func TestPatchCountsRefusesOthersChanges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		other   int64 // the count someone else wrote after the plan (0: nobody)
		message string
		patches int
	}{
		{name: "count changed by someone else", other: 5, message: "was changed by someone else since the plan (3, now 5)", patches: 1},
		{name: "keeps changing", message: "keeps changing (6 resourceVersion conflicts)", patches: maxPatchConflicts + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, e := liveCluster(t, 3, 3)
			withProcessGroups(c)
			obj := liveCR(c).Object
			obj["spec"] = map[string]any{"processCounts": map[string]any{"storage": int64(3)}}
			planned := &unstructured.Unstructured{Object: obj}
			now := planned.DeepCopy()
			if tc.other != 0 {
				_ = unstructured.SetNestedField(now.Object, tc.other, "spec", "processCounts", "storage")
			}
			dyn := fakeCRClient(now)
			// Every patch meets a CR that changed since it was read.
			dyn.PrependReactor("patch", "foundationdbclusters", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewConflict(ClusterGVR.GroupResource(), "myfdb", errors.New("the object has been modified"))
			})
			e.deps.Dynamic = dyn
			r := &removal{e: e, c: c, name: "myfdb", planned: planned, field: "processGroupsToRemove"}
			err := r.patchCounts(t.Context(), nil, map[string]int32{"storage": 2}, map[string]int{"storage": 3}, nil)
			if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err %v, want the precondition refusal %q", err, tc.message)
			}
			patches := 0
			for _, a := range dyn.Actions() {
				if a.GetVerb() == "patch" {
					patches++
				}
			}
			if patches != tc.patches {
				t.Fatalf("%d patches sent, want %d", patches, tc.patches)
			}
		})
	}
}
