package commands

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// labelSTS sets labels on a StatefulSet through the fake's tracker (no recorded write).
func labelSTS(t *testing.T, cl *fake.Clientset, ns, name string, ls map[string]string) {
	t.Helper()
	s, err := cl.AppsV1().StatefulSets(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range ls {
		s.Labels[k] = v
	}
	if err := cl.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("statefulsets"), s, ns); err != nil {
		t.Fatal(err)
	}
}

// selectHarness is the fleet harness with labels: ctx-a's orders and ctx-b's orders are
// tier=db; ctx-b's users is tier=web; ctx-b's cluster multi has three StatefulSets of which
// only the master one is tier=db (so multi is not: a cluster's labels are those on all its
// StatefulSets).
func newSelectHarness(t *testing.T) *fleetHarness {
	t.Helper()
	fh := newFleetHarness(t)
	b := fh.clients["ctx-b"]
	for _, o := range fakecluster.Objects("db", "multi", "", dbGroups()...) {
		if _, node := o.(*corev1.Node); node {
			continue
		}
		if err := b.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	labelSTS(t, fh.clients["ctx-a"], "db", "orders-web", map[string]string{"tier": "db"})
	labelSTS(t, b, "db", "orders-web", map[string]string{"tier": "db"})
	labelSTS(t, b, "db", "users-web", map[string]string{"tier": "web"})
	labelSTS(t, b, "db", "multi-master", map[string]string{"tier": "db"})
	labelSTS(t, b, "db", "multi-hot", map[string]string{"tier": "hot"})
	for _, cl := range fh.clients {
		cl.ClearActions()
	}
	return fh
}

// listNames are the context/namespace/name of a -o json list's items, and its errors' contexts.
func listNames(t *testing.T, out string) (items, errs []string) {
	t.Helper()
	var doc struct {
		Items []struct {
			Context   string `json:"context"`
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
			Cluster   any    `json:"cluster"`
		} `json:"items"`
		Errors []struct {
			Context string `json:"context"`
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, it := range doc.Items {
		name := it.Name
		switch c := it.Cluster.(type) {
		case string:
			name = c
		case map[string]any:
			name, _ = c["name"].(string)
			it.Namespace, _ = c["namespace"].(string)
		}
		if it.Namespace == "" {
			// History and Explanation carry namespace beside cluster.
			var raw map[string]any
			_ = json.Unmarshal([]byte(out), &raw)
		}
		items = append(items, it.Context+"/"+name)
	}
	for _, e := range doc.Errors {
		errs = append(errs, e.Context)
	}
	return items, errs
}

// `list -l`: only the clusters whose labels (those on all their StatefulSets) match, in one
// context and over a fleet; a target where none matches is reported on its own line (exit 2),
// not an empty success. Without the selection list ignored -l and listed every cluster.
func TestFleetSelectList(t *testing.T) {
	fh := newSelectHarness(t)
	r := fh.run("list", "--contexts", "ctx-a,ctx-b", "-l", "tier=db", "-o", "json")
	items, errs := listNames(t, r.out)
	if r.code != 0 || strings.Join(items, ",") != "ctx-a/orders,ctx-b/orders" || errs != nil {
		t.Errorf("list -l tier=db: exit %d, items %v, errors %v: %s", r.code, items, errs, r.err)
	}
	// One context (the harness's is ctx-a's clientset), -A: the same rule.
	r = fh.run("list", "-A", "-l", "tier in (db,web)")
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(r.out), "\n")[1:] {
		rows = append(rows, strings.Join(strings.Fields(l)[:2], "/"))
	}
	if r.code != 0 || strings.Join(rows, ",") != "db/orders" {
		t.Errorf("list -A -l: exit %d, rows %v:\n%s%s", r.code, rows, r.out, r.err)
	}
	r = fh.run("list", "-l", "tier=web")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, `no database cluster in namespace "db" whose labels match -l "tier=web"`) {
		t.Errorf("list -l tier=web in ctx-a: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	// tier=web: ctx-a has none, reported for ctx-a; ctx-b still answers.
	r = fh.run("list", "--contexts", "ctx-a,ctx-b", "-l", "tier=web")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, `ERROR: context ctx-a: no database cluster in namespace "db" whose labels match -l "tier=web"`) ||
		!strings.Contains(strings.Join(strings.Fields(r.out), " "), "ctx-b users generic") {
		t.Errorf("list -l tier=web: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)
}

// status, history, explain and wait over a fleet with -l and no CLUSTER: every matching cluster
// of every target, each item carrying its context; history names a failing context on one line.
func TestFleetSelectReads(t *testing.T) {
	fh := newSelectHarness(t)
	r := fh.run("status", "--contexts", "ctx-a,ctx-b", "-l", "tier=db", "-o", "json")
	items, _ := listNames(t, r.out)
	if r.code != 0 || strings.Join(items, ",") != "ctx-a/orders,ctx-b/orders" {
		t.Errorf("status -l: exit %d, items %v: %s", r.code, items, r.err)
	}
	// -A and a CLUSTER: the clusters of that name in any namespace.
	r = fh.run("status", "users", "--contexts", "ctx-*", "-A")
	if r.code != ops.ExitUsage || !strings.Contains(r.out, "Context:  ctx-b\nCluster:  db/users") ||
		!strings.Contains(r.err, `ERROR: context ctx-a: no database cluster in any namespace named "users"`) ||
		!strings.Contains(r.err, "ERROR: context ctx-down: ") {
		t.Errorf("status users -A: exit %d:\n%s%s", r.code, r.out, r.err)
	}

	r = fh.run("history", "orders", "--contexts", "ctx-a,ctx-b,ctx-down", "-o", "json")
	items, errs := listNames(t, r.out)
	if r.code != ops.ExitForbidden || strings.Join(items, ",") != "ctx-a/orders,ctx-b/orders" || strings.Join(errs, ",") != "ctx-down" ||
		!strings.Contains(r.err, "ERROR: context ctx-down: ") {
		t.Errorf("history: exit %d, items %v, errors %v:\n%s%s", r.code, items, errs, r.out, r.err)
	}
	r = fh.run("history", "--context", "ctx-a,ctx-b", "-l", "tier=db")
	if r.code != 0 || strings.Count(r.out, "no operations recorded on db/orders") != 2 || !strings.Contains(r.out, "Context:  ctx-b\nCluster:  db/orders") {
		t.Errorf("history -l: exit %d:\n%s%s", r.code, r.out, r.err)
	}

	// explain: someone holds orders' lock in ctx-a: ctx-a would refuse (exit 5, one line),
	// ctx-b could start.
	if _, err := fh.clients["ctx-a"].CoordinationV1().Leases("db").Create(t.Context(),
		heldLease("db", "orders", "bob@elsewhere", "s1", "restart --rolling", "INC-7"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fh.clients["ctx-a"].ClearActions()
	r = fh.run("explain", "--contexts", "ctx-a,ctx-b", "-l", "tier=db", "-o", "json")
	var ex struct {
		Kind  string        `json:"kind"`
		Items []Explanation `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.out), &ex); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	var got []string
	for _, it := range ex.Items {
		got = append(got, it.Context+"/"+it.Cluster)
	}
	if r.code != ops.ExitPrecondition || ex.Kind != "ExplanationList" || strings.Join(got, ",") != "ctx-a/orders,ctx-b/orders" ||
		!strings.Contains(r.err, "ERROR: context ctx-a: db/orders: restart cannot start on db/orders now: failed lock") ||
		strings.Contains(r.err, "context ctx-b") {
		t.Errorf("explain: exit %d, kind %s, items %v:\n%s", r.code, ex.Kind, got, r.err)
	}

	r = fh.run("wait", "--for=ready", "--contexts", "ctx-a,ctx-b", "-l", "tier=db")
	if r.code != 0 || !strings.Contains(r.out, "[ctx-a/db/orders] db/orders is ready\n") || !strings.Contains(r.out, "[ctx-b/db/orders] db/orders is ready\n") {
		t.Errorf("wait -l: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)
}

// wait over a fleet waits for every target: a target whose condition does not hold within
// --timeout is named on one ERROR line (exit 4), the others are reported done.
func TestFleetWait(t *testing.T) {
	fh := newSelectHarness(t)
	if _, err := fh.clients["ctx-b"].CoordinationV1().Leases("db").Create(t.Context(),
		heldLease("db", "orders", "bob@elsewhere", "s1", "restart --rolling", "INC-7"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fh.clients["ctx-b"].ClearActions()
	// The lease is held for 10 minutes on the harness's clock: a 2s bound cannot see it end.
	r := fh.run("wait", "orders", "--for=unlocked", "--context", "ctx-b,ctx-a", "--timeout", "2s")
	if r.code != ops.ExitTimeout || !strings.Contains(r.out, "[ctx-a/db/orders] db/orders is unlocked") ||
		!strings.Contains(r.err, "[ctx-b/db/orders] waiting for db/orders to be unlocked: locked by bob@elsewhere") ||
		!strings.Contains(r.err, "ERROR: context ctx-b: orders is not unlocked after 2s: locked by bob@elsewhere") ||
		strings.Contains(r.err, "ERROR: context ctx-a") {
		t.Errorf("wait: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)
}

// Bad selection input: exit 2 with one line, before any API call.
func TestFleetSelectUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "-l", "tier in (db"}, `bad selector -l "tier in (db"`},
		{[]string{"status", "--contexts", "ctx-*", "-l", "tier==="}, "bad selector"},
		{[]string{"restart", "--rolling", "--yes", "--contexts", "ctx-*", "-l", "a b"}, "bad selector"},
		{[]string{"status", "-l", "tier=db"}, "missing CLUSTER argument"},
		{[]string{"history", "--contexts", "ctx-*"}, "missing CLUSTER argument"},
		{[]string{"wait", "--for=ready", "--contexts", "ctx-*"}, "missing CLUSTER argument"},
		{[]string{"restart", "--rolling", "--yes", "-l", "tier=db"}, "missing CLUSTER argument"},
		{[]string{"explain", "orders", "-A"}, "-A applies to a fleet"},
		{[]string{"history", "--contexts", "ctx-*", "-A", "-n", "db", "-l", "tier=db"}, "give -n or -A, not both"},
		{[]string{"wait", "orders", "--for=ready", "--max-parallel", "2"}, "--max-parallel applies to a fleet"},
		{[]string{"explain", "--fleet", "FILE:contexts: [ctx-a]\nclusters: [orders]\n", "-l", "tier=db"}, `names cluster "orders" and -l "tier=db" selects clusters`},
	} {
		fh := newFleetHarness(t)
		for i, a := range tc.args {
			if content, ok := strings.CutPrefix(a, "FILE:"); ok {
				tc.args[i] = filepath.Join(t.TempDir(), "fleet.yaml")
				if err := os.WriteFile(tc.args[i], []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
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

// restart --rolling over a fleet with -l and no CLUSTER restarts every matching cluster of
// every target, each as the single-cluster restart of that cluster found by name: its plan has
// its own pods only (with the selector passed on to discovery, orders' plan would hold every
// tier=db StatefulSet's pods), and its journal's request has no -l (a resume would pick
// StatefulSets by it).
func TestFleetSelectRestart(t *testing.T) {
	fh := newSelectHarness(t)
	labelSTS(t, fh.clients["ctx-b"], "db", "users-web", map[string]string{"tier": "db"})
	fh.clients["ctx-b"].ClearActions()
	r := fh.run("restart", "--rolling", "--contexts", "ctx-a,ctx-b", "-l", "tier=db", "--dry-run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	ia := strings.Index(r.out, "=== context ctx-a: db/orders\n")
	ib := strings.Index(r.out, "=== context ctx-b: db/orders\n")
	iu := strings.Index(r.out, "=== context ctx-b: db/users\n")
	if ia < 0 || ib < ia || iu < ib || strings.Contains(r.out[ib:iu], "users-web-0") || !strings.Contains(r.out[ib:iu], "orders-web-0") ||
		!strings.Contains(r.out[iu:], "users-web-0") || strings.Contains(r.out, "multi-") {
		t.Errorf("dry-run plans:\n%s", r.out)
	}
	fh.noWrites(t)

	fakecluster.Start(t, fh.clients["ctx-a"], "db")
	cb := fakecluster.Start(t, fh.clients["ctx-b"], "db")
	r = fh.run("restart", "--rolling", "--contexts", "ctx-a,ctx-b", "-l", "tier=db", "--yes", "--lock-id", "ci@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	if !strings.Contains(r.out, "ctx-b    db         users    succeeded") && !strings.Contains(strings.Join(strings.Fields(r.out), " "), "ctx-b db users succeeded") {
		t.Errorf("summary:\n%s", r.out)
	}
	for _, d := range cb.Deleted() {
		if strings.HasPrefix(d, "multi-") {
			t.Errorf("ctx-b: %s of the unselected cluster multi deleted", d)
		}
	}
	l, err := fh.clients["ctx-b"].CoordinationV1().Leases("db").Get(t.Context(), lock.LeaseName("users"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j := l.Annotations["dbops.io/journal"]; !strings.Contains(j, `"state":"succeeded"`) || strings.Contains(j, "selector") || strings.Contains(j, "tier") {
		t.Errorf("users' journal: %s", j)
	}
}

// A selection that finds no cluster in one target refuses the whole fleet restart before
// anything starts: the target is named on its own line and nothing is written anywhere.
func TestFleetSelectRestartNoMatch(t *testing.T) {
	fh := newSelectHarness(t)
	r := fh.run("restart", "--rolling", "--contexts", "ctx-a,ctx-b", "-l", "tier=web", "--yes")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, `ERROR: context ctx-a: no database cluster in namespace "db" whose labels match -l "tier=web"`) ||
		!strings.Contains(r.err, "nothing was started") {
		t.Errorf("exit %d:\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)
}

// A cluster's labels: those on all its StatefulSets (a label on one of them is not the
// cluster's), or on its operator resource for a cluster without StatefulSets (a
// FoundationDBCluster).
func TestClusterLabels(t *testing.T) {
	objs := append(fakecluster.Objects("prod", "multi", "", dbGroups()...), fakecluster.Objects("prod", "orders", "", webObjects()...)...)
	kube := fake.NewClientset(uniqueObjects(objs)...)
	for _, s := range []string{"multi-master", "multi-hot", "multi-cold"} {
		labelSTS(t, kube, "prod", s, map[string]string{"tier": "db"})
	}
	labelSTS(t, kube, "prod", "multi-hot", map[string]string{"zone": "a"})
	labelSTS(t, kube, "prod", "orders-web", map[string]string{"tier": "web"})
	fdb := func(name string, ls map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps.foundationdb.org/v1beta2", "kind": "FoundationDBCluster",
			"metadata": map[string]any{"name": name, "namespace": "prod", "labels": ls}}}
	}
	rs := ops.ResourceRecognizers(builtinRecognizers())
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{rs[0].Resource(): "FoundationDBClusterList"},
		fdb("myfdb", map[string]any{"tier": "db"}), fdb("otherfdb", map[string]any{"tier": "cache"}))
	cl := &Clients{Kube: kube, Dynamic: dyn}
	for _, tc := range []struct{ sel, want string }{
		{"tier=db", "prod/multi,prod/myfdb"},
		{"tier", "prod/multi,prod/myfdb,prod/orders,prod/otherfdb"},
		{"zone=a", ""},
		{"tier notin (db)", "prod/orders,prod/otherfdb"},
	} {
		sel, err := parseClusterSelector(tc.sel)
		if err != nil {
			t.Fatal(err)
		}
		found, err := selectClusters(t.Context(), cl, cl.Kube, "prod", sel, "", rs)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range found {
			got = append(got, n.Namespace+"/"+n.Name)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("-l %s: %v, want %s", tc.sel, got, tc.want)
		}
	}
}

// restart CLUSTER -A over a fleet: the clusters of that name in every namespace of each
// context, each restarted as itself; its journal records no -A (its resume takes its own
// namespace), but keeps -l, which with a CLUSTER picks the cluster's StatefulSets.
func TestFleetRestartAllNamespaces(t *testing.T) {
	fh := newSelectHarness(t)
	fakecluster.Start(t, fh.clients["ctx-a"], "db")
	cb := fakecluster.Start(t, fh.clients["ctx-b"], "db")
	r := fh.run("restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b", "-A", "-l", "dbops.io/cluster=orders", "--yes", "--lock-id", "ci@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	for _, d := range cb.Deleted() {
		if !strings.HasPrefix(d, "orders-") {
			t.Errorf("ctx-b: %s deleted", d)
		}
	}
	for _, c := range []string{"ctx-a", "ctx-b"} {
		l, err := fh.clients[c].CoordinationV1().Leases("db").Get(t.Context(), lock.LeaseName("orders"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if j := l.Annotations["dbops.io/journal"]; !strings.Contains(j, `"state":"succeeded"`) || strings.Contains(j, "all-namespaces") ||
			!strings.Contains(j, `"selector"`) || !strings.Contains(j, `"namespace":"db"`) {
			t.Errorf("%s: journal %s", c, j)
		}
	}
}
