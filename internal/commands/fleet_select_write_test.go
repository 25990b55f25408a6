package commands

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// Cluster selection (-l without CLUSTER, -A) for the fleet writes besides restart: scale, lock
// and deny (fleet_select.go's selection, run by scale_fleet.go and lock_fleet.go).

// writtenNames are the names of the objects c's writes touched (creates: the new object's; an
// Event's: the object it is about), for "no write to a cluster not selected".
func writtenNames(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		var name string
		switch a := a.(type) {
		case k8stesting.CreateAction:
			if a.GetResource().Resource == "selfsubjectaccessreviews" {
				continue
			}
			if m, err := meta.Accessor(a.GetObject()); err == nil {
				name = m.GetName()
			}
		case k8stesting.UpdateAction:
			if m, err := meta.Accessor(a.GetObject()); err == nil {
				name = m.GetName()
			}
		case k8stesting.PatchAction:
			name = a.GetName()
		case k8stesting.DeleteAction:
			name = a.GetName()
		default:
			continue
		}
		out = append(out, a.GetResource().Resource+"/"+name)
	}
	return out
}

// replicatedCluster is replicated cluster name (StatefulSet NAME-db, three pods) in namespace
// db, its StatefulSet labelled ls.
func replicatedCluster(name string, ls map[string]string) []runtime.Object {
	objs := fakecluster.Objects("db", name, "replicated", fakecluster.Group{Name: "db", Role: "data", Replicas: 3})
	for _, o := range objs {
		if s, ok := o.(*appsv1.StatefulSet); ok {
			s.Annotations["dbops.io/replicated-config"] = replConfig
			for k, v := range ls {
				s.Labels[k] = v
			}
		}
	}
	return objs
}

// newSelectScaleFleet is the scale fleet (replicated app in ctx-a and ctx-b) with app labelled
// tier=db in both, and in ctx-b a second replicated cluster, other, labelled tier=web.
func newSelectScaleFleet(t *testing.T) (*fleetHarness, *fakeReplExec) {
	t.Helper()
	fh, exec := newScaleFleet(t)
	labelSTS(t, fh.clients["ctx-a"], "db", "app-db", map[string]string{"tier": "db"})
	labelSTS(t, fh.clients["ctx-b"], "db", "app-db", map[string]string{"tier": "db"})
	addObjects(t, fh.clients["ctx-b"], replicatedCluster("other", map[string]string{"tier": "web"}))
	for _, cl := range fh.clients {
		cl.ClearActions()
	}
	for _, p := range []string{"other-db-0", "other-db-1", "other-db-2"} {
		exec.seq[p] = "1"
	}
	return fh, exec
}

// scale over a fleet with -l and no CLUSTER: only the matching clusters of each context are
// planned and scaled, each as the single-cluster scale of that cluster found by name; the
// dry-run writes nothing; its journal has neither -l nor -A; a cluster not selected gets no
// write and no exec. Before the selection, scale refused a missing CLUSTER (exit 2).
func TestFleetSelectScale(t *testing.T) {
	fh, exec := newSelectScaleFleet(t)
	r := fh.runExec(exec, "scale", "--replicas", "4", "--contexts", "ctx-a,ctx-b", "-l", "tier=db", "--dry-run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	ia, ib := strings.Index(r.out, "=== context ctx-a: db/app\n"), strings.Index(r.out, "=== context ctx-b: db/app\n")
	if ia < 0 || ib < ia || !strings.Contains(r.out[ib:], "app-db-3") || strings.Contains(r.out, "other") {
		t.Errorf("dry-run plans:\n%s", r.out)
	}
	if got := strings.Join(summaryRows(t, r.out[ib:]), ","); got != "ctx-a dry-run,ctx-b dry-run" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	fh.noWrites(t)

	r = fh.runExec(exec, "scale", "--primaries", "2", "--contexts", "ctx-a,ctx-b", "-A", "-l", "tier=db", "--yes", "--lock-id", "ci@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	if got := strings.Join(summaryRows(t, r.out), ","); got != "ctx-a succeeded,ctx-b succeeded" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	for _, c := range []string{"ctx-a", "ctx-b"} {
		for _, n := range writtenNames(fh.clients[c]) {
			if strings.Contains(n, "other") {
				t.Errorf("%s: %s written (cluster other is not selected)", c, n)
			}
		}
		l, err := fh.clients[c].CoordinationV1().Leases("db").Get(t.Context(), lock.LeaseName("app"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if j := l.Annotations["dbops.io/journal"]; !strings.Contains(j, `"state":"succeeded"`) || strings.Contains(j, "selector") ||
			strings.Contains(j, "tier") || strings.Contains(j, "all-namespaces") || !strings.Contains(j, `"namespace":"db"`) {
			t.Errorf("%s: app's journal %s", c, j)
		}
	}
	for _, call := range exec.get() {
		if strings.HasPrefix(call, "other-") {
			t.Errorf("exec on the unselected cluster: %s", call)
		}
	}
}

// A target where the selection finds no cluster stops the whole fleet scale before any write
// or exec: ctx-a has no tier=web cluster, so ctx-b's other is not scaled either.
func TestFleetSelectScaleNoMatch(t *testing.T) {
	fh, exec := newSelectScaleFleet(t)
	r := fh.runExec(exec, "scale", "--replicas", "4", "--contexts", "ctx-a,ctx-b", "-l", "tier=web", "--yes")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, `ERROR: context ctx-a: no database cluster in namespace "db" whose labels match -l "tier=web"`) ||
		!strings.Contains(r.err, "nothing was started") || strings.Contains(r.err, "context ctx-b") {
		t.Errorf("exit %d:\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)
	if len(exec.get()) > 0 {
		t.Errorf("exec %v", exec.get())
	}
}
