package commands

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
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
	// Access reviews in ctx-b: everything allowed (the fake echoes a review back unanswered).
	b.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		r.Status.Allowed = true
		return true, r, nil
	})
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
		{[]string{"status", "orders", "--fleet", "FILE:contexts: [ctx-a]\nclusters: [users]\n"}, `names cluster "users"; this command acts on the cluster "orders"`},
		{[]string{"restart", "orders", "--rolling", "--yes", "--fleet", "FILE:contexts: [ctx-a]\ntargets:\n- context: ctx-b\n  clusters: [users]\n"}, `names cluster "users"`},
		{[]string{"list", "--fleet", "FILE:contexts: [ctx-a]\ncluster: [users]\n"}, "allowed keys: contexts"},
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

// fleetLines are the NDJSON lines of a fleet run.
func fleetLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not NDJSON: %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// restart over a fleet: each target restarts in its own cluster (its own lock and journal),
// NDJSON events carry their context, a fleet-summary event ends the stream with each target's
// outcome.
func TestFleetRestart(t *testing.T) {
	fh := newFleetHarness(t)
	ca := fakecluster.Start(t, fh.clients["ctx-a"], "db")
	cb := fakecluster.Start(t, fh.clients["ctx-b"], "db")
	r := fh.run("restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b", "--max-parallel", "2", "--yes", "-o", "json", "--lock-id", "ci@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	evs := fleetLines(t, r.out)
	done := map[string]string{}
	for _, ev := range evs[:len(evs)-1] {
		c, _ := ev["context"].(string)
		if c != "ctx-a" && c != "ctx-b" {
			t.Fatalf("event without its context: %v", ev)
		}
		if ev["type"] == "done" {
			done[c], _ = ev["outcome"].(string)
		}
	}
	if done["ctx-a"] != ops.OutcomeSucceeded || done["ctx-b"] != ops.OutcomeSucceeded {
		t.Errorf("done events %v", done)
	}
	var summary struct {
		Type    string               `json:"type"`
		Targets []fleetSummaryTarget `json:"targets"`
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &summary); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range summary.Targets {
		got = append(got, st.Context+"/"+st.Namespace+"/"+st.Cluster+" "+st.Outcome)
	}
	if summary.Type != "fleet-summary" || strings.Join(got, ",") != "ctx-a/db/orders succeeded,ctx-b/db/orders succeeded" {
		t.Errorf("last event %s %v", summary.Type, got)
	}
	if len(ca.Deleted()) != 3 || len(cb.Deleted()) != 3 {
		t.Errorf("deleted: ctx-a %v, ctx-b %v", ca.Deleted(), cb.Deleted())
	}
	for _, c := range []string{"ctx-a", "ctx-b"} {
		l, err := fh.clients[c].CoordinationV1().Leases("db").Get(t.Context(), lock.LeaseName("orders"), metav1.GetOptions{})
		if err != nil || !strings.Contains(l.Annotations["dbops.io/journal"], `"state":"succeeded"`) {
			t.Fatalf("%s: journal %v, %v", c, l, err)
		}
		// Each target's journal records its own request: its one context, no fleet flag, so
		// that its resume resumes that target alone.
		if j := l.Annotations["dbops.io/journal"]; !strings.Contains(j, `"context":"`+c+`"`) || strings.Contains(j, "max-parallel") {
			t.Errorf("%s: journal request %s", c, j)
		}
	}
	// The other cluster of ctx-b was not touched.
	for _, d := range cb.Deleted() {
		if !strings.HasPrefix(d, "orders-") {
			t.Errorf("ctx-b: %s deleted", d)
		}
	}
}

// A canary that fails stops the fleet: the targets after it never start (no write in their
// clusters); the summary says which failed and which did not start, the error line names the
// context, and the exit code is the failure's.
func TestFleetRestartCanaryFails(t *testing.T) {
	fh := newFleetHarness(t)
	fakecluster.Start(t, fh.clients["ctx-a"], "db")
	r := fh.run("restart", "orders", "--rolling", "--context", "ctx-down,ctx-a,ctx-b", "--canary", "1", "--fail-fast=false", "--max-parallel", "2", "--yes")
	if r.code != ops.ExitForbidden {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	want := []string{"ctx-down db orders failed", "ctx-a db orders not-started", "ctx-b db orders not-started"}
	i := strings.Index(r.out, "CONTEXT ")
	if i < 0 {
		t.Fatalf("no summary:\n%s", r.out)
	}
	rows := strings.Split(strings.TrimSpace(r.out[i:]), "\n")[1:]
	for k, row := range rows {
		if k >= len(want) || strings.Join(strings.Fields(row)[:4], " ") != want[k] {
			t.Errorf("summary row %d %q, want %q", k, row, want)
		}
	}
	if !strings.Contains(r.err, "ERROR: context ctx-down, cluster db/orders: failed: ") {
		t.Errorf("stderr:\n%s", r.err)
	}
	fh.noWrites(t)
}

// --dry-run prints every target's plan under its context and writes nothing; without a
// terminal and without --yes the fleet is refused (exit 2) naming its contexts and clusters,
// before any API call.
func TestFleetRestartDryRunAndConfirm(t *testing.T) {
	fh := newFleetHarness(t)
	r := fh.run("restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b", "--dry-run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	ia, ib := strings.Index(r.out, "=== context ctx-a: db/orders\n"), strings.Index(r.out, "=== context ctx-b: db/orders\n")
	if ia < 0 || ib < ia || strings.Count(r.out[ia:ib], "orders-web-0") == 0 || strings.Count(r.out[ib:], "orders-web-0") == 0 ||
		!strings.Contains(r.out, "dry-run") {
		t.Errorf("dry-run plans not grouped by context:\n%s", r.out)
	}
	fh.noWrites(t)

	fh = newFleetHarness(t)
	r = fh.run("restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, "refusing to restart 2 clusters in contexts ctx-a and ctx-b (ctx-a/db/orders, ctx-b/db/orders) without confirmation") {
		t.Errorf("exit %d: %s", r.code, r.err)
	}
	for c, n := range fh.built {
		if n > 0 {
			t.Errorf("%s: clients built", c)
		}
	}
	fh.noWrites(t)

	// On a terminal: every plan, then one question naming the contexts and clusters; no: nothing.
	fh = newFleetHarness(t)
	fh.terminal, fh.stdin = true, "n\n"
	r = fh.run("restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, "=== context ctx-b: db/orders") ||
		!strings.Contains(r.err, "Restart 2 clusters in contexts ctx-a and ctx-b (ctx-a/db/orders, ctx-b/db/orders)?") {
		t.Errorf("exit %d: %s", r.code, r.err)
	}
	fh.noWrites(t)

	for _, args := range [][]string{{"--canary", "1"}, {"--fail-fast=false"}} {
		r = fh.run(append([]string{"restart", "orders", "--rolling", "--yes"}, args...)...)
		if r.code != ops.ExitUsage || !strings.Contains(r.err, "applies to a fleet") {
			t.Errorf("%v without a fleet: exit %d: %s", args, r.code, r.err)
		}
	}
	r = fh.run("restart", "orders", "--rolling", "--yes", "--contexts", "ctx-a,ctx-b", "--canary", "3")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, "--canary 3 is more than the fleet's 2 target(s)") {
		t.Errorf("--canary 3: exit %d: %s", r.code, r.err)
	}
	fh.noWrites(t)
}

// --fleet FILE: the file's contexts, namespaces and per-context targets; list shows only the
// clusters it names.
func TestFleetListFile(t *testing.T) {
	fh := newFleetHarness(t)
	p := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(p, []byte("contexts: [ctx-a]\ntargets:\n- context: ctx-b\n  clusters: [users]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := fh.run("list", "--fleet", p)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(r.out), "\n")[1:] {
		got = append(got, strings.Join(strings.Fields(l)[:2], " "))
	}
	if strings.Join(got, ",") != "ctx-a orders,ctx-b users" {
		t.Errorf("rows %v:\n%s", got, r.out)
	}
}

// pacingRecorder is a fake per-target runner (Factory.WrapFleetTarget): it never calls the
// real run; it records starts and ends, and how many targets ran at once.
type pacingRecorder struct {
	mu      sync.Mutex
	log     []string
	running int
	peak    int
	started map[string]chan struct{}
}

func (p *pacingRecorder) begin(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, "start "+name)
	p.running++
	p.peak = max(p.peak, p.running)
	close(p.startedCh(name))
}

func (p *pacingRecorder) end(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, "end "+name)
	p.running--
}

func (p *pacingRecorder) startedCh(name string) chan struct{} {
	if p.started == nil {
		p.started = map[string]chan struct{}{}
	}
	if p.started[name] == nil {
		p.started[name] = make(chan struct{})
	}
	return p.started[name]
}

// waitStarted waits for target name to start; false when it does not within the guard (the
// test then fails: a guard against a hang, not a timing assertion).
func (p *pacingRecorder) waitStarted(name string) bool {
	p.mu.Lock()
	ch := p.startedCh(name)
	p.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-time.After(20 * time.Second):
		return false
	}
}

// TestFleetRestartPacing: the restart's fleet pacing with a fake per-target runner over four
// targets (two contexts x two namespaces of a fleet file): the canary runs alone and ends
// before anything else starts, then two at once; with fail-fast (the default) a failure starts
// nothing more and the running target is told to stop (its stop channel closes), the summary
// says failed, stopped, not-started, not-started and the exit code is the worst (5, not 7);
// with --fail-fast=false every target runs.
func TestFleetRestartPacing(t *testing.T) {
	fleetFile := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(fleetFile, []byte("contexts: [ctx-a, ctx-b]\nnamespaces: [n1, n2]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := []string{"ctx-a/n1/orders", "ctx-a/n2/orders", "ctx-b/n1/orders", "ctx-b/n2/orders"}
	summary := func(t *testing.T, r result) []string {
		t.Helper()
		i := strings.Index(r.out, "CONTEXT ")
		if i < 0 {
			t.Fatalf("no summary: %s%s", r.out, r.err)
		}
		var rows []string
		for _, l := range strings.Split(strings.TrimSpace(r.out[i:]), "\n")[1:] {
			f := strings.Fields(l)
			rows = append(rows, f[0]+"/"+f[1]+"/"+f[2]+" "+f[3])
		}
		return rows
	}
	run := func(rec *pacingRecorder, body func(ctx context.Context, name string, stop <-chan struct{}) error, args ...string) result {
		fh := newFleetHarness(t)
		return fh.runWith(func(g *GlobalOptions) {
			g.WrapFleetTarget = func(ctx context.Context, tg fleet.Target, stop <-chan struct{}, _ func() error) error {
				rec.begin(tg.String())
				defer rec.end(tg.String())
				return body(ctx, tg.String(), stop)
			}
		}, append([]string{"restart", "orders", "--rolling", "--yes", "--fleet", fleetFile}, args...)...)
	}

	t.Run("canary then two at once", func(t *testing.T) {
		rec := &pacingRecorder{}
		r := run(rec, func(_ context.Context, name string, _ <-chan struct{}) error {
			// The two targets after the canary wait for each other: both run at once.
			switch name {
			case ts[1]:
				if !rec.waitStarted(ts[2]) {
					t.Errorf("%s never ran beside %s", ts[2], ts[1])
				}
			case ts[2]:
				if !rec.waitStarted(ts[1]) {
					t.Errorf("%s never ran beside %s", ts[1], ts[2])
				}
			}
			return nil
		}, "--canary", "1", "--max-parallel", "2")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		if rec.log[0] != "start "+ts[0] || rec.log[1] != "end "+ts[0] || rec.peak != 2 {
			t.Errorf("log %v, peak %d", rec.log, rec.peak)
		}
		if got := summary(t, r); strings.Join(got, ",") != strings.Join([]string{ts[0] + " succeeded", ts[1] + " succeeded", ts[2] + " succeeded", ts[3] + " succeeded"}, ",") {
			t.Errorf("summary %v", got)
		}
	})

	t.Run("fail-fast stops the running target and starts no other", func(t *testing.T) {
		rec := &pacingRecorder{}
		r := run(rec, func(_ context.Context, name string, stop <-chan struct{}) error {
			switch name {
			case ts[0]:
				rec.waitStarted(ts[1])
				return ops.Preconditionf("cluster unhealthy")
			case ts[1]:
				select {
				case <-stop:
					return &ops.CodedError{Kind: ops.ErrPaused, Msg: "stopped at a batch boundary"}
				case <-time.After(20 * time.Second):
					t.Errorf("%s was never told to stop", name)
					return nil
				}
			}
			t.Errorf("%s started after a failure with --fail-fast", name)
			return nil
		}, "--max-parallel", "2")
		if r.code != ops.ExitPrecondition {
			t.Fatalf("exit %d, want 5: %s", r.code, r.err)
		}
		want := []string{ts[0] + " failed", ts[1] + " stopped", ts[2] + " not-started", ts[3] + " not-started"}
		if got := summary(t, r); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("summary %v, want %v", got, want)
		}
		if !strings.Contains(r.err, "ERROR: context ctx-a, cluster n1/orders: failed: cluster unhealthy") ||
			!strings.Contains(r.err, "ERROR: context ctx-a, cluster n2/orders: stopped at a batch boundary") {
			t.Errorf("stderr:\n%s", r.err)
		}
	})

	t.Run("without fail-fast every target runs", func(t *testing.T) {
		rec := &pacingRecorder{}
		r := run(rec, func(_ context.Context, name string, _ <-chan struct{}) error {
			if name == ts[0] {
				return ops.Preconditionf("cluster unhealthy")
			}
			return nil
		}, "--fail-fast=false")
		if r.code != ops.ExitPrecondition || rec.peak != 1 || len(rec.log) != 8 {
			t.Fatalf("exit %d, peak %d, log %v: %s", r.code, rec.peak, rec.log, r.err)
		}
		want := []string{ts[0] + " failed", ts[1] + " succeeded", ts[2] + " succeeded", ts[3] + " succeeded"}
		if got := summary(t, r); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("summary %v, want %v", got, want)
		}
	})
}

// Plain output of a fleet restart: every line of a target's run is prefixed with its target;
// the summary table follows.
func TestFleetRestartPlainLines(t *testing.T) {
	fh := newFleetHarness(t)
	fakecluster.Start(t, fh.clients["ctx-a"], "db")
	fakecluster.Start(t, fh.clients["ctx-b"], "db")
	r := fh.run("restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b", "--max-parallel", "2", "--yes")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	i := strings.Index(r.out, "\nCONTEXT ")
	if i < 0 {
		t.Fatalf("no summary:\n%s", r.out)
	}
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(r.out[:i]), "\n") {
		p, _, ok := strings.Cut(l, "] ")
		if !ok || (p != "[ctx-a/db/orders" && p != "[ctx-b/db/orders") {
			t.Errorf("line without its target: %q", l)
		}
		seen[p]++
	}
	if seen["[ctx-a/db/orders"] == 0 || seen["[ctx-b/db/orders"] == 0 {
		t.Errorf("lines per target %v:\n%s", seen, r.out)
	}
}

// A target whose lock someone else holds is reported as skipped (exit 3) at once, not waited
// on, and does not stop the others, even with fail-fast: the next target is restarted.
func TestFleetRestartLockedTargetSkipped(t *testing.T) {
	fh := newFleetHarness(t)
	if _, err := fh.clients["ctx-a"].CoordinationV1().Leases("db").Create(t.Context(),
		heldLease("db", "orders", "bob@elsewhere", "s1", "restart --rolling", "INC-7"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fh.clients["ctx-a"].ClearActions()
	cb := fakecluster.Start(t, fh.clients["ctx-b"], "db")
	r := fh.run("restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b", "--yes", "--lock-id", "ci@test")
	if r.code != ops.ExitLocked {
		t.Fatalf("exit %d, want 3: %s\n%s", r.code, r.err, r.out)
	}
	i := strings.Index(r.out, "\nCONTEXT ")
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(r.out[i+1:]), "\n")[1:] {
		f := strings.Fields(l)
		rows = append(rows, f[0]+" "+f[3])
	}
	if strings.Join(rows, ",") != "ctx-a skipped,ctx-b succeeded" {
		t.Errorf("summary %v:\n%s", rows, r.out)
	}
	if !strings.Contains(r.err, "ERROR: context ctx-a, cluster db/orders: skipped: ") || !strings.Contains(r.err, "bob@elsewhere") {
		t.Errorf("stderr:\n%s", r.err)
	}
	if w := fakecluster.Writes(fh.clients["ctx-a"]); len(w) > 0 {
		t.Errorf("ctx-a: wrote %v", w)
	}
	if len(cb.Deleted()) != 3 {
		t.Errorf("ctx-b: deleted %v", cb.Deleted())
	}
}
