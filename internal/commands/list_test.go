package commands

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// `list` shows every cluster of the namespace (or all with -A) with its engine, groups,
// readiness, lock holder and unfinished operation; it never writes.
func TestList(t *testing.T) {
	objs := append(fakecluster.Objects("prod", "db", "", webObjects()...), fakecluster.Objects("prod", "other", "", webObjects()...)...)
	objs = append(objs, fakecluster.Objects("staging", "db", "", webObjects()...)...)
	objs = append(objs, heldLease("prod", "other", "bob@elsewhere", "s1", "restart --rolling", "INC-1"))
	h := newHarness(t, uniqueObjects(objs)...)
	h.client.ClearActions()

	r := h.run("list", "-n", "prod")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "db ") || !strings.HasPrefix(lines[2], "other ") {
		t.Fatalf("list -n prod:\n%s", r.out)
	}
	if !strings.Contains(lines[2], "bob@elsewhere") || !strings.Contains(lines[1], "web 3/3") || !strings.Contains(lines[1], "3/3") {
		t.Errorf("rows lack the lock holder or the groups:\n%s", r.out)
	}

	r = h.run("list", "-A", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var doc struct {
		Kind  string           `json:"kind"`
		Items []ClusterSummary `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("list -A -o json: %v\n%s", err, r.out)
	}
	var got []string
	for _, it := range doc.Items {
		got = append(got, it.Namespace+"/"+it.Name+" "+it.Engine+" "+it.LockHolder)
	}
	want := "prod/db generic ,prod/other generic bob@elsewhere,staging/db generic "
	if doc.Kind != "ClusterList" || strings.Join(got, ",") != want {
		t.Errorf("items %q (kind %s), want %q", strings.Join(got, ","), doc.Kind, want)
	}
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("list wrote %v", w)
	}
}

// uniqueObjects drops repeated objects (the nodes every fakecluster.Objects call adds).
func uniqueObjects(objs []runtime.Object) []runtime.Object {
	seen := map[string]bool{}
	var out []runtime.Object
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			out = append(out, o)
			continue
		}
		key := fmt.Sprintf("%T/%s/%s", o, m.GetNamespace(), m.GetName())
		if !seen[key] {
			seen[key] = true
			out = append(out, o)
		}
	}
	return out
}

// A mistyped cluster name is refused (exit 2) with the closest name that exists.
func TestDidYouMean(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "mycrate", "", webObjects()...)...)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "mycrte"}, `no database cluster "mycrte" in namespace "prod"`},
		{[]string{"restart", "mycarte", "--rolling", "--yes"}, `; did you mean "mycrate"?`},
	} {
		r := h.run(append(tc.args, "-n", "prod")...)
		if r.code != ops.ExitUsage || !strings.Contains(r.err, tc.want) || !strings.Contains(r.err, `did you mean "mycrate"?`) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 suggesting mycrate", tc.args, r.code, r.err)
		}
	}
	if r := h.run("status", "zzz", "-n", "prod"); strings.Contains(r.err, "did you mean") {
		t.Errorf("a name far from every cluster got a suggestion: %q", r.err)
	}
}

// `list` also finds the clusters an operator runs without StatefulSets (FoundationDBClusters),
// and a cluster where that resource is not installed lists the rest.
func TestListFindsFoundationDBClusters(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	fdb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.foundationdb.org/v1beta2", "kind": "FoundationDBCluster",
		"metadata": map[string]any{"name": "myfdb", "namespace": "prod"}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ops.ResourceRecognizers(builtinRecognizers())[0].Resource(): "FoundationDBClusterList"}, fdb)
	r := h.runWith(func(g *GlobalOptions) {
		g.NewClients = func() (*Clients, error) { return &Clients{Kube: h.client, Dynamic: dyn, Clock: h.clock}, nil }
	}, "list", "-n", "prod", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var doc struct {
		Items []ClusterSummary `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range doc.Items {
		names = append(names, it.Name)
	}
	if strings.Join(names, ",") != "db,myfdb" {
		t.Errorf("listed %v, want db and myfdb", names)
	}
}

// list shows a running run's ETA and what it is blocked on, from the journal on the Lease.
func TestListShowsETAAndBlocked(t *testing.T) {
	l := heldLease("prod", "db", "bob@elsewhere", "s1", "restart --rolling", "")
	l.Annotations[lock.AnnotationJournal] = `{"operation":"restart","args":"--rolling","holder":"bob@elsewhere","state":"running",` +
		`"started":"2026-11-22T06:50:00Z","updated":"2026-11-22T06:59:00Z","steps":3,"done":["restart/db-web-0"],"current":"restart/db-web-1",` +
		`"blocked":{"kind":"pod","on":"pod prod/db-web-1","since":"2026-11-22T06:57:00Z"},` +
		`"eta":{"at":"2026-11-22T06:56:00Z","lowNs":60000000000,"highNs":120000000000}}`
	h := newHarness(t, append(fakecluster.Objects("prod", "db", "", webObjects()...), l)...)
	r := h.run("list", "-n", "prod")
	if want := "restart --rolling (running, 1/3 done, ETA 1m0s–2m0s, blocked on pod prod/db-web-1)"; r.code != 0 || !strings.Contains(r.out, want) {
		t.Errorf("exit %d, list:\n%s\nwant %q", r.code, r.out, want)
	}
}
