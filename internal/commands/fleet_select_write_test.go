package commands

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
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

// notSelected are the writes in c that touch cluster users or multi (not tier=db in the
// select harness).
func notSelected(c *fake.Clientset) []string {
	var out []string
	for _, n := range writtenNames(c) {
		if strings.Contains(n, "users") || strings.Contains(n, "multi") {
			out = append(out, n)
		}
	}
	return out
}

// lock acquire and lock status over a fleet with -l and no CLUSTER: only the matching
// clusters' Leases are written (orders in ctx-a and ctx-b; ctx-b's users and multi are not
// tier=db), the dry-run writes nothing, a target with no match stops the run before any write,
// and lock status reads only the matching clusters. Before the selection, lock refused a
// missing CLUSTER (exit 2).
func TestFleetSelectLock(t *testing.T) {
	fh := newSelectHarness(t)
	r := fh.run("lock", "acquire", "--contexts", "ctx-a,ctx-b", "-l", "tier=db", "--dry-run", "--lock-id", "ci@test")
	if r.code != 0 || !strings.Contains(r.out, "=== context ctx-a: db/orders\nwould acquire the lock on db/orders as ci@test") ||
		!strings.Contains(r.out, "=== context ctx-b: db/orders\nwould acquire the lock on db/orders as ci@test") ||
		strings.Contains(r.out, "users") || strings.Contains(r.out, "multi") {
		t.Errorf("dry-run: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	if got := strings.Join(summaryRows(t, r.out), ","); got != "ctx-a dry-run,ctx-b dry-run" {
		t.Errorf("summary %s", got)
	}
	fh.noWrites(t)

	// tier=web: ctx-b's users matches, ctx-a has none: nothing is written anywhere.
	r = fh.run("lock", "acquire", "--contexts", "ctx-a,ctx-b", "-l", "tier=web", "--yes", "--lock-id", "ci@test")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, `ERROR: context ctx-a: no database cluster in namespace "db" whose labels match -l "tier=web"`) ||
		!strings.Contains(r.err, "nothing was started") {
		t.Errorf("no match: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)

	r = fh.run("lock", "acquire", "--contexts", "ctx-a,ctx-b", "-A", "-l", "tier=db", "--yes", "--lock-id", "ci@test", "--reason", "INC-9")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s%s", r.code, r.out, r.err)
	}
	if got := strings.Join(summaryRows(t, r.out), ","); got != "ctx-a succeeded,ctx-b succeeded" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	if fh.holder("ctx-a") != "ci@test" || fh.holder("ctx-b") != "ci@test" {
		t.Errorf("holders: ctx-a %q, ctx-b %q", fh.holder("ctx-a"), fh.holder("ctx-b"))
	}
	for _, c := range []string{"ctx-a", "ctx-b"} {
		if w := notSelected(fh.clients[c]); len(w) > 0 {
			t.Errorf("%s: clusters not selected written: %v", c, w)
		}
		fh.clients[c].ClearActions()
	}
	for _, n := range []string{"users", "multi"} {
		if _, err := fh.clients["ctx-b"].CoordinationV1().Leases("db").Get(t.Context(), lock.LeaseName(n), metav1.GetOptions{}); err == nil {
			t.Errorf("ctx-b: %s's Lease exists", n)
		}
	}

	// lock status -l: the matching clusters' locks, read only; a target with no match is
	// named, the others still read.
	r = fh.run("lock", "status", "--contexts", "ctx-a,ctx-b", "-l", "tier=db")
	if r.code != 0 || strings.Count(r.out, "ci@test") < 2 || !strings.Contains(r.out, "Context:  ctx-a\nLease:    db/dbops-orders") ||
		!strings.Contains(r.out, "Context:  ctx-b\nLease:    db/dbops-orders") || strings.Contains(r.out, "users") || strings.Contains(r.out, "multi") {
		t.Errorf("lock status -l: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	r = fh.run("lock", "status", "--contexts", "ctx-a,ctx-b", "-l", "tier=web")
	if r.code != ops.ExitUsage || !strings.Contains(r.out, "Context:  ctx-b\nLease:    db/dbops-users") ||
		!strings.Contains(r.err, `ERROR: context ctx-a: no database cluster in namespace "db" whose labels match -l "tier=web"`) {
		t.Errorf("lock status -l tier=web: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)
}

// deny add and deny list over a fleet with -l and no CLUSTER (the ID the one argument): only
// the matching clusters' deny lists are written; the dry-run writes nothing; a target with no
// match stops the run before any write; deny list -l reads the matching clusters only. Before
// the selection, deny add took the ID for the CLUSTER and asked for an ID (exit 2).
func TestFleetSelectDeny(t *testing.T) {
	fh := newSelectHarness(t)
	r := fh.run("deny", "add", "bad@x", "--contexts", "ctx-a,ctx-b", "-l", "tier=db", "--dry-run")
	if r.code != 0 || !strings.Contains(r.out, "=== context ctx-a: db/orders\nwould deny bad@x on db/orders") ||
		!strings.Contains(r.out, "=== context ctx-b: db/orders\nwould deny bad@x on db/orders") || strings.Contains(r.out, "users") {
		t.Errorf("dry-run: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)

	r = fh.run("deny", "add", "bad@x", "--contexts", "ctx-a,ctx-b", "-l", "tier=web", "--yes")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, `ERROR: context ctx-a: no database cluster in namespace "db" whose labels match -l "tier=web"`) ||
		!strings.Contains(r.err, "nothing was started") {
		t.Errorf("no match: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)

	r = fh.run("deny", "add", "bad@x", "--contexts", "ctx-a,ctx-b", "-l", "tier=db", "--yes", "--reason", "runaway")
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s%s", r.code, r.out, r.err)
	}
	if got := strings.Join(summaryRows(t, r.out), ","); got != "ctx-a succeeded,ctx-b succeeded" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	for _, c := range []string{"ctx-a", "ctx-b"} {
		if w := notSelected(fh.clients[c]); len(w) > 0 {
			t.Errorf("%s: clusters not selected written: %v", c, w)
		}
		fh.clients[c].ClearActions()
	}

	r = fh.run("deny", "list", "--contexts", "ctx-a,ctx-b", "-A", "-l", "tier=db", "-o", "json")
	var doc struct {
		Items []struct {
			Kind, Context, Cluster string
			Items                  []struct{ Metadata struct{ Name string } }
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil || r.code != 0 || len(doc.Items) != 2 {
		t.Fatalf("deny list -l: exit %d, %v:\n%s%s", r.code, err, r.out, r.err)
	}
	for i, c := range []string{"ctx-a", "ctx-b"} {
		it := doc.Items[i]
		if it.Context != c || it.Kind != "DenyList" || it.Cluster != "orders" || len(it.Items) != 1 || it.Items[0].Metadata.Name != "bad@x" {
			t.Errorf("item %d: %+v\n%s", i, it, r.out)
		}
	}
	r = fh.run("deny", "list", "--contexts", "ctx-b", "-l", "tier in (db,web)")
	if r.code != 0 || !strings.Contains(r.out, "Context:  ctx-b\nID") || !strings.Contains(r.out, "no denied IDs on db/users") {
		t.Errorf("deny list -l: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)
}

// Bad selection input for scale, lock and deny: exit 2 with one line, before any API call;
// with a CLUSTER argument -l keeps its meaning (no selection), and deny's one argument is the
// ID only over a fleet with -l.
func TestFleetSelectWriteUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"scale", "--replicas", "4", "--yes", "--contexts", "ctx-*", "-l", "a b"}, "bad selector"},
		{[]string{"lock", "acquire", "--contexts", "ctx-*", "-l", "tier in (db", "--yes"}, `bad selector -l "tier in (db"`},
		{[]string{"lock", "status", "--contexts", "ctx-*", "-l", "tier==="}, "bad selector"},
		{[]string{"deny", "add", "bad@x", "--contexts", "ctx-*", "-l", "tier===", "--yes"}, "bad selector"},
		{[]string{"deny", "list", "--contexts", "ctx-*", "-l", "a b"}, "bad selector"},
		{[]string{"scale", "--replicas", "4", "--yes", "-l", "tier=db"}, "missing CLUSTER argument"},
		{[]string{"lock", "release", "-l", "tier=db", "--yes"}, "missing CLUSTER argument"},
		{[]string{"lock", "acquire", "--contexts", "ctx-*", "--yes"}, "missing CLUSTER argument"},
		{[]string{"deny", "add", "bad@x", "-l", "tier=db", "--yes"}, "expects CLUSTER and ID"},
		{[]string{"deny", "add", "bad@x", "--contexts", "ctx-*", "--yes"}, "expects CLUSTER and ID"},
		{[]string{"deny", "add", "--operator-instance", "dc2", "-l", "tier=db", "--yes"}, "expects CLUSTER and ID"},
		{[]string{"deny", "allow", "--operator-instance", "dc2", "--contexts", "ctx-*", "-l", "a b", "--yes"}, "bad selector"},
		{[]string{"deny", "allow", "bad@x", "--contexts", "ctx-*", "-A", "--yes"}, "expects CLUSTER and ID"},
		{[]string{"scale", "orders", "--replicas", "4", "-A", "--yes"}, "-A applies to a fleet"},
		{[]string{"lock", "status", "orders", "-A"}, "-A applies to a fleet"},
		{[]string{"deny", "add", "orders", "bad@x", "-A", "--yes"}, "-A applies to a fleet"},
		{[]string{"lock", "acquire", "--contexts", "ctx-*", "-A", "-n", "db", "-l", "tier=db", "--yes"}, "give -n or -A, not both"},
		{[]string{"deny", "list", "--contexts", "ctx-*", "-A", "-n", "db", "-l", "tier=db"}, "give -n or -A, not both"},
	} {
		fh := newFleetHarness(t)
		r := fh.run(tc.args...)
		if r.code != ops.ExitUsage || !strings.Contains(r.err, tc.want) || strings.Count(strings.TrimSpace(r.err), "\n") > 0 {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, r.code, r.err, tc.want)
		}
		for c, n := range fh.built {
			if n > 0 {
				t.Errorf("%v: %s clients built", tc.args, c)
			}
		}
		fh.noWrites(t)
	}
}

// A cluster an operator runs without StatefulSets (a FoundationDBCluster), selected by its
// resource's labels, is found by name when its lock is taken: -l picks no StatefulSet of it, so
// a target that kept -l for its discovery would find nothing and fail.
func TestFleetSelectLockOperatorResource(t *testing.T) {
	fh := newSelectHarness(t)
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.foundationdb.org/v1beta2", "kind": "FoundationDBCluster",
		"metadata": map[string]any{"name": "myfdb", "namespace": "db", "labels": map[string]any{"tier": "fdb"}},
	}}
	gvr := schema.GroupVersionResource{Group: "apps.foundationdb.org", Version: "v1beta2", Resource: "foundationdbclusters"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "FoundationDBClusterList"}, cr)
	r := fh.runWith(func(g *GlobalOptions) {
		g.ContextClients = func(c string) (*Clients, error) {
			return &Clients{Kube: fh.clients[c], Dynamic: dyn, Clock: fh.clock}, nil
		}
	}, "lock", "acquire", "--contexts", "ctx-b", "-l", "tier=fdb", "--yes", "--lock-id", "ci@test")
	if r.code != 0 || !strings.Contains(r.out, "[ctx-b/db/myfdb] lock on db/myfdb acquired by ci@test") {
		t.Fatalf("exit %d:\n%s%s", r.code, r.out, r.err)
	}
	if _, err := fh.clients["ctx-b"].CoordinationV1().Leases("db").Get(t.Context(), lock.LeaseName("myfdb"), metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
}
