//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbop"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// fdbStorage counts storage process groups (not marked for removal) and storage processes up.
func fdbStorage(t *testing.T, ns string, m *fdbsim.Cluster) (groups, marked, procs int) {
	t.Helper()
	all, _ := fdbGroups(t, ns)
	for _, g := range all {
		if g["processClass"] != "storage" {
			continue
		}
		if g["removalTimestamp"] != nil {
			marked++
		} else {
			groups++
		}
	}
	for _, p := range m.Processes() {
		if p.Class == "storage" && p.Up {
			procs++
		}
	}
	return
}

// TestFoundationDBScaleProcesses: scale --processes storage=4 then storage=3 converges (groups,
// processes, nothing left excluded); storage=2 on a triple cluster is refused with exit 5 and
// the CR unchanged.
func TestFoundationDBScaleProcesses(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	env := cliEnv(t)
	for _, n := range []int{4, 3} {
		r := runCLI(t, env, "scale", "myfdb", "--processes", "storage="+string(rune('0'+n)), "-n", ns, "--yes", "-o", "json")
		if r.Code != 0 || lastOutcome(parseNDJSON(t, r)) != "succeeded" {
			t.Fatalf("scale to %d: %s", n, r)
		}
		if g, m, p := fdbStorage(t, ns, model); g != n || m != 0 || p != n {
			t.Fatalf("after scale to %d: %d groups, %d marked, %d processes", n, g, m, p)
		}
	}
	if ex := fdbExcluded(t, model); len(ex) != 0 {
		t.Fatalf("left excluded: %v", ex)
	}
	_, before := fdbGroups(t, ns)
	r := runCLI(t, env, "scale", "myfdb", "--processes", "storage=2", "-n", ns, "--yes")
	if r.Code != 5 || !strings.Contains(r.Stderr, "redundancy mode triple") {
		t.Fatalf("storage=2 on triple: want exit 5: %s", r)
	}
	if _, after := fdbGroups(t, ns); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Fatalf("refused scale wrote the CR: %s -> %s", before.GetResourceVersion(), after.GetResourceVersion())
	}
}

// TestFoundationDBScaleConcurrentEdit: the CR is edited between the plan and the patch (the run
// waits for a lock someone else holds). An edit of the same class is refused (exit 5) and kept;
// an unrelated edit makes the run read the CR again and patch on top of it, the edit kept.
func TestFoundationDBScaleConcurrentEdit(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(u *unstructured.Unstructured)
		code int
		// storage is spec.processCounts.storage at the end.
		storage int64
	}{
		{"same class", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(5), "spec", "processCounts", "storage")
		}, 5, 5},
		{"unrelated", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"example.com/edited": "yes"})
		}, 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			fdbSimFixture(t, ns, "myfdb")
			env := cliEnv(t)
			if r := runCLI(t, env, "lock", "acquire", "myfdb", "-n", ns, "--lock-id", "alice", "--reason", "test"); r.Code != 0 {
				t.Fatalf("lock acquire: %s", r)
			}
			run := startCLI(t, env, "scale", "myfdb", "--processes", "storage=4", "-n", ns, "--yes", "--lock-id", "bob", "--wait-for-lock", "-o", "json")
			run.waitEvent("waiting for the lock", func(e ndEvent) bool {
				return e.Type == "warning" && strings.Contains(e.Message, "waiting for the lock")
			})
			res := bed.Dynamic.Resource(fdbop.GVR).Namespace(ns)
			u, err := res.Get(t.Context(), "myfdb", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(u)
			if _, err := res.Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if r := runCLI(t, env, "lock", "release", "myfdb", "-n", ns, "--lock-id", "alice"); r.Code != 0 {
				t.Fatalf("lock release: %s", r)
			}
			out := run.wait()
			if out.Code != tc.code {
				t.Fatalf("exit %d, want %d: %s", out.Code, tc.code, out)
			}
			if tc.code == 5 && !strings.Contains(out.Stderr, "changed by someone else since the plan") {
				t.Fatalf("refused for another reason: %s", out)
			}
			conflict := false
			for _, e := range run.all {
				conflict = conflict || (e.Type == "step-waiting" && strings.Contains(e.Reason, "resourceVersion conflict"))
			}
			if tc.code == 0 && !conflict {
				t.Fatal("the patch met no resourceVersion conflict: it was not sent with the version read at the plan")
			}
			_, after := fdbGroups(t, ns)
			if n, _, _ := unstructured.NestedInt64(after.Object, "spec", "processCounts", "storage"); n != tc.storage {
				t.Fatalf("processCounts.storage %d, want %d", n, tc.storage)
			}
			if tc.name == "unrelated" && after.GetAnnotations()["example.com/edited"] != "yes" {
				t.Fatalf("the unrelated edit was lost: %v", after.GetAnnotations())
			}
		})
	}
}

// TestFoundationDBScaleRemove: scale --processes storage=N --remove GROUP from N+1 storage
// groups, one more than the test bed's zones so that one zone holds two, removes the group
// named, not the one the operator would choose (the newest in the most crowded zone,
// controllers/choose_removals.go): the named group is the older of the two in that zone. An unknown group, or naming two where one goes, is refused with exit 2 and the CR
// unchanged.
func TestFoundationDBScaleRemove(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	env := cliEnv(t)
	nodes, err := bed.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		t.Fatal(err)
	}
	zones := map[string]bool{}
	for _, n := range nodes.Items {
		zones[n.Labels[testbed.ZoneLabel]] = true
	}
	keep := len(zones)
	if r := runCLI(t, env, "scale", "myfdb", "--processes", fmt.Sprintf("storage=%d", keep+1), "-n", ns, "--yes"); r.Code != 0 {
		t.Fatalf("scale to %d: %s", keep+1, r)
	}
	groups, before := fdbGroups(t, ns)
	byZone := map[string][]string{}
	var storage []string
	for id, g := range groups {
		if g["processClass"] == "storage" && g["removalTimestamp"] == nil {
			zone, _ := g["faultDomain"].(string)
			byZone[zone] = append(byZone[zone], id)
			storage = append(storage, id)
		}
	}
	named := ""
	for _, ids := range byZone {
		if len(ids) == 2 {
			slices.SortFunc(ids, func(a, b string) int { return fdbIDNumber(a) - fdbIDNumber(b) })
			named = ids[0] // the operator would take ids[1]
		}
	}
	if named == "" {
		t.Fatalf("no zone with two storage groups: %v", byZone)
	}
	for _, bad := range []struct{ remove, msg string }{
		{"nope", `"nope" is neither a pod nor a process group`},
		{strings.Join(storage[:2], ","), "name exactly that many"},
	} {
		r := runCLI(t, env, "scale", "myfdb", "--processes", fmt.Sprintf("storage=%d", keep), "--remove", bad.remove, "-n", ns, "--yes")
		if r.Code != 2 || !strings.Contains(r.Stderr, bad.msg) {
			t.Fatalf("--remove %s: want exit 2 naming %q: %s", bad.remove, bad.msg, r)
		}
	}
	if _, after := fdbGroups(t, ns); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Fatalf("refused scale wrote the CR: %s -> %s", before.GetResourceVersion(), after.GetResourceVersion())
	}
	r := runCLI(t, env, "scale", "myfdb", "--processes", fmt.Sprintf("storage=%d", keep), "--remove", named, "-n", ns, "--yes", "-o", "json")
	if r.Code != 0 || lastOutcome(parseNDJSON(t, r)) != "succeeded" {
		t.Fatalf("scale to %d --remove %s: %s", keep, named, r)
	}
	groups, _ = fdbGroups(t, ns)
	for _, id := range storage {
		if _, ok := groups[id]; ok == (id == named) {
			t.Fatalf("after --remove %s: group %s present %v (storage groups before %v)", named, id, ok, storage)
		}
	}
	if g, m, p := fdbStorage(t, ns, model); g != keep || m != 0 || p != keep {
		t.Fatalf("after scale to %d: %d groups, %d marked, %d processes", keep, g, m, p)
	}
	if ex := fdbExcluded(t, model); len(ex) != 0 {
		t.Fatalf("left excluded: %v", ex)
	}
}

// fdbIDNumber is the number a process group ID ends with (storage-12345 -> 12345).
func fdbIDNumber(id string) int {
	n, _ := strconv.Atoi(id[strings.LastIndex(id, "-")+1:])
	return n
}
