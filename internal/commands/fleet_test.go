package commands

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

const fleetKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.invalid:6443"}
- name: b
  cluster: {server: "https://b.invalid:6443"}
- name: down
  cluster: {server: "https://down.invalid:6443"}
contexts:
- name: ctx-a
  context: {cluster: a, user: u, namespace: db}
- name: ctx-b
  context: {cluster: b, user: u, namespace: db}
- name: ctx-down
  context: {cluster: down, user: u, namespace: db}
current-context: ctx-a
users:
- name: u
  user: {token: not-a-real-token}
`

// fleetHarness is a harness whose kubeconfig has three contexts, each with its own fake
// clientset: ctx-a and ctx-b hold clusters, ctx-down refuses every StatefulSet list (RBAC).
type fleetHarness struct {
	*harness
	clients map[string]*fake.Clientset
	// built counts the clients built per context.
	mu    sync.Mutex
	built map[string]int
}

func newFleetHarness(t *testing.T) *fleetHarness {
	t.Helper()
	h := newHarness(t, uniqueObjects(fakecluster.Objects("db", "orders", "", webObjects()...))...)
	kc := filepath.Join(t.TempDir(), "fleet-kubeconfig")
	if err := os.WriteFile(kc, []byte(fleetKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	h.env["KUBECONFIG"] = kc
	b := fake.NewClientset(uniqueObjects(append(fakecluster.Objects("db", "orders", "", webObjects()...),
		fakecluster.Objects("db", "users", "", webObjects()...)...))...)
	down := fake.NewClientset()
	down.PrependReactor("list", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "", errors.New("RBAC: no"))
	})
	down.PrependReactor("get", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "", errors.New("RBAC: no"))
	})
	return &fleetHarness{harness: h, clients: map[string]*fake.Clientset{"ctx-a": h.client, "ctx-b": b, "ctx-down": down}, built: map[string]int{}}
}

func (fh *fleetHarness) run(args ...string) result {
	fh.t.Helper()
	return fh.runWith(func(g *GlobalOptions) {
		g.ContextClients = func(c string) (*Clients, error) {
			fh.mu.Lock()
			fh.built[c]++
			fh.mu.Unlock()
			return &Clients{Kube: fh.clients[c], Clock: fh.clock}, nil
		}
	}, args...)
}

func (fh *fleetHarness) noWrites(t *testing.T) {
	t.Helper()
	for c, cl := range fh.clients {
		if w := fakecluster.Writes(cl); len(w) > 0 {
			t.Errorf("%s: writes %v", c, w)
		}
	}
}

// `list` over a fleet: rows of every context with a CONTEXT column; a context that refuses the
// list is reported on one line naming it, the others still answer, and the exit code is the
// refusal's (6); one set of clients per context.
func TestFleetList(t *testing.T) {
	fh := newFleetHarness(t)
	r := fh.run("list", "--contexts", "ctx-*")
	if r.code != ops.ExitForbidden {
		t.Fatalf("exit %d, want %d: %s\n%s", r.code, ops.ExitForbidden, r.err, r.out)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	want := []string{"CONTEXT NAME", "ctx-a orders", "ctx-b orders", "ctx-b users"}
	if len(lines) != len(want) {
		t.Fatalf("list --contexts:\n%s", r.out)
	}
	for i, w := range want {
		if got := strings.Join(strings.Fields(lines[i])[:2], " "); got != w {
			t.Errorf("line %d %q, want %q...\n%s", i, lines[i], w, r.out)
		}
	}
	var errLines []string
	for _, l := range strings.Split(strings.TrimSpace(r.err), "\n") {
		if strings.HasPrefix(l, "ERROR: context ") {
			errLines = append(errLines, l)
		}
	}
	if len(errLines) != 1 || !strings.HasPrefix(errLines[0], "ERROR: context ctx-down: ") || !strings.Contains(r.err, "forbidden") {
		t.Errorf("stderr should name ctx-down once:\n%s", r.err)
	}
	for c, n := range fh.built {
		if n != 1 {
			t.Errorf("%s: clients built %d times", c, n)
		}
	}
	fh.noWrites(t)

	// --context A,B: JSON items carry their context; no error, exit 0.
	r = fh.run("list", "--context", "ctx-a,ctx-b", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var doc struct {
		Items []ClusterSummary `json:"items"`
		Errs  []any            `json:"errors"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	var got []string
	for _, it := range doc.Items {
		got = append(got, it.Context+"/"+it.Namespace+"/"+it.Name)
	}
	if strings.Join(got, ",") != "ctx-a/db/orders,ctx-b/db/orders,ctx-b/db/users" || doc.Errs != nil {
		t.Errorf("items %v, errors %v", got, doc.Errs)
	}

	// Not a fleet: no CONTEXT column, no context in JSON.
	r = fh.run("list", "--context", "ctx-b")
	if r.code != 0 || !strings.HasPrefix(r.out, "NAME") {
		t.Errorf("single context list (exit %d):\n%s%s", r.code, r.out, r.err)
	}
	r = fh.run("list", "--context", "ctx-b", "-o", "json")
	if strings.Contains(r.out, `"context"`) {
		t.Errorf("single context JSON carries a context:\n%s", r.out)
	}
}

// `status CLUSTER` over a fleet: one status per context, JSON items carry their context, a
// failing context is named on its own line.
func TestFleetStatus(t *testing.T) {
	fh := newFleetHarness(t)
	r := fh.run("status", "orders", "--contexts", "ctx-b,ctx-a,ctx-down", "-o", "json")
	if r.code != ops.ExitForbidden {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	var doc struct {
		Kind  string          `json:"kind"`
		Items []ClusterStatus `json:"items"`
		Errs  []struct {
			Context string `json:"context"`
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	var got []string
	for _, it := range doc.Items {
		got = append(got, it.Context+"/"+it.Cluster.Name)
	}
	if doc.Kind != "ClusterStatusList" || strings.Join(got, ",") != "ctx-b/orders,ctx-a/orders" || len(doc.Errs) != 1 || doc.Errs[0].Context != "ctx-down" {
		t.Errorf("kind %s items %v errors %+v", doc.Kind, got, doc.Errs)
	}
	if !strings.Contains(r.err, "ERROR: context ctx-down: ") {
		t.Errorf("stderr does not name ctx-down:\n%s", r.err)
	}
	r = fh.run("status", "orders", "--context", "ctx-a,ctx-b")
	if r.code != 0 || strings.Count(r.out, "Context:  ") != 2 || !strings.Contains(r.out, "Context:  ctx-b\nCluster:  db/orders") {
		t.Errorf("status text (exit %d):\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)
}

// Fleet flags refused before any API call, exit 2, with one line.
func TestFleetFlagsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "--context", "ctx-a", "--contexts", "ctx-b"}, "not both"},
		{[]string{"list", "--max-parallel", "2"}, "--max-parallel applies to a fleet"},
		{[]string{"list", "--contexts", "ctx-*", "--max-parallel", "0"}, "at least 1"},
		{[]string{"list", "--contexts", "prod-*"}, "matches no kubeconfig context; allowed: ctx-a, ctx-b, ctx-down"},
		{[]string{"list", "--context", "ctx-a,nope"}, `no context "nope"`},
		{[]string{"status", "orders", "--watch", "--contexts", "ctx-*"}, "--watch follows one cluster"},
		{[]string{"list", "--fleet", "f.yaml", "--contexts", "ctx-a"}, "--fleet names its contexts"},
	} {
		fh := newFleetHarness(t)
		r := fh.run(tc.args...)
		if r.code != ops.ExitUsage || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, r.code, r.err, tc.want)
		}
		for c, n := range fh.built {
			if n > 0 {
				t.Errorf("%v: %s clients built", tc.args, c)
			}
		}
	}
}

// --max-parallel bounds how many contexts are read at once: with 1 (the default) never two,
// with 2 both contexts' lists are in flight together (each waits for the other).
func TestFleetListMaxParallel(t *testing.T) {
	for _, n := range []int{1, 2} {
		fh := newFleetHarness(t)
		var mu sync.Mutex
		inFlight, most := 0, 0
		both := make(chan struct{})
		var once sync.Once
		for _, c := range []string{"ctx-a", "ctx-b"} {
			fh.clients[c].PrependReactor("list", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				inFlight++
				most = max(most, inFlight)
				if inFlight == 2 {
					once.Do(func() { close(both) })
				}
				mu.Unlock()
				if n == 2 {
					select {
					case <-both:
					case <-time.After(20 * time.Second):
					}
				}
				mu.Lock()
				inFlight--
				mu.Unlock()
				return false, nil, nil
			})
		}
		args := []string{"list", "--context", "ctx-a,ctx-b"}
		if n > 1 {
			args = append(args, "--max-parallel", "2")
		}
		if r := fh.run(args...); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		if most != n {
			t.Errorf("--max-parallel %d: %d lists at once", n, most)
		}
	}
}
