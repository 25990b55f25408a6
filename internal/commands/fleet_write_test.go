package commands

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// addObjects adds objs to a fake clientset (a cluster laid out after the harness was made).
func addObjects(t *testing.T, c *fake.Clientset, objs []runtime.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Tracker().Add(o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// allowReviews answers every access review of c: allowed (the fake echoes one back unanswered).
func allowReviews(c *fake.Clientset) {
	c.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		r.Status.Allowed = true
		return true, r, nil
	})
}

// replicatedApp is replicated cluster "app" (StatefulSet app-db, three pods) in namespace db.
func replicatedApp() []runtime.Object {
	objs := fakecluster.Objects("db", "app", "replicated", fakecluster.Group{Name: "db", Role: "data", Replicas: 3})
	for _, o := range objs {
		if s, ok := o.(*appsv1.StatefulSet); ok {
			s.Annotations["dbops.io/replicated-config"] = replConfig
		}
	}
	return objs
}

// newScaleFleet is the fleet harness with replicated cluster app in ctx-a and ctx-b and a
// fake exec answering every pod's sequence number.
func newScaleFleet(t *testing.T) (*fleetHarness, *fakeReplExec) {
	fh := newFleetHarness(t)
	addObjects(t, fh.clients["ctx-a"], replicatedApp())
	addObjects(t, fh.clients["ctx-b"], replicatedApp())
	return fh, &fakeReplExec{seq: map[string]string{"app-db-0": "3", "app-db-1": "8", "app-db-2": "5"}}
}

func (fh *fleetHarness) runExec(exec *fakeReplExec, args ...string) result {
	fh.t.Helper()
	return fh.runWith(func(g *GlobalOptions) {
		g.Exec = exec
		g.ContextClients = func(c string) (*Clients, error) {
			fh.mu.Lock()
			fh.built[c]++
			fh.mu.Unlock()
			return &Clients{Kube: fh.clients[c], Clock: fh.clock}, nil
		}
	}, args...)
}

// summaryRows are the rows of a fleet summary table as "context outcome".
func summaryRows(t *testing.T, out string) []string {
	t.Helper()
	i := strings.Index(out, "CONTEXT ")
	if i < 0 {
		t.Fatalf("no summary table:\n%s", out)
	}
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(out[i:]), "\n")[1:] {
		f := strings.Fields(l)
		rows = append(rows, f[0]+" "+f[3])
	}
	return rows
}

// scale over a fleet, --dry-run: every target's plan from its own live state, grouped under
// its context, a summary of dry-runs, and no write in any context.
func TestFleetScaleDryRun(t *testing.T) {
	fh, exec := newScaleFleet(t)
	r := fh.runExec(exec, "scale", "app", "--replicas", "4", "--contexts", "ctx-a,ctx-b", "--dry-run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	ia, ib := strings.Index(r.out, "=== context ctx-a: db/app\n"), strings.Index(r.out, "=== context ctx-b: db/app\n")
	if ia < 0 || ib < ia || !strings.Contains(r.out[ia:ib], "app-db-3") || !strings.Contains(r.out[ib:], "app-db-3") {
		t.Errorf("plans not grouped by context:\n%s", r.out)
	}
	if got := strings.Join(summaryRows(t, r.out[ib:]), ","); got != "ctx-a dry-run,ctx-b dry-run" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	fh.noWrites(t)

	// On a terminal: every plan, then one question naming the contexts and clusters; no: nothing.
	fh.terminal, fh.stdin = true, "n\n"
	r = fh.runExec(exec, "scale", "app", "--replicas", "4", "--contexts", "ctx-a,ctx-b")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, "=== context ctx-b: db/app\nPlan: scale db/app") ||
		!strings.Contains(r.err, "Scale 2 clusters in contexts ctx-a and ctx-b (ctx-a/db/app, ctx-b/db/app)?") {
		t.Errorf("exit %d: %s", r.code, r.err)
	}
	fh.noWrites(t)
}

// Without a terminal and without --yes a fleet scale is refused (exit 2) naming the contexts
// and clusters, before any API call; bad input common to every target (--data hot=abc) is
// exit 2 before any API call too.
func TestFleetScaleRefusedBeforeTheAPI(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"scale", "app", "--replicas", "4", "--contexts", "ctx-a,ctx-b"},
			"refusing to scale 2 clusters in contexts ctx-a and ctx-b (ctx-a/db/app, ctx-b/db/app) without confirmation"},
		{[]string{"scale", "app", "--data", "hot=abc", "--contexts", "ctx-a,ctx-b", "--yes"}, `--data "hot=abc": N must be a whole number`},
		{[]string{"scale", "app", "--replicas", "4", "--canary", "1", "--yes"}, "--canary applies to a fleet"},
		{[]string{"scale", "app", "--replicas", "4", "--contexts", "ctx-a,ctx-b", "--canary", "3", "--yes"}, "--canary 3 is more than the fleet's 2 target(s)"},
	} {
		fh, exec := newScaleFleet(t)
		r := fh.runExec(exec, tc.args...)
		if r.code != ops.ExitUsage || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d: %s; want 2 and %q", tc.args, r.code, r.err, tc.want)
		}
		for c, n := range fh.built {
			if n > 0 {
				t.Errorf("%v: %s clients built", tc.args, c)
			}
		}
		fh.noWrites(t)
		if len(exec.get()) > 0 {
			t.Errorf("%v: exec %v", tc.args, exec.get())
		}
	}
}

// A target whose shape makes the change invalid (its app is a generic cluster, which cannot
// scale) fails with its reason in the summary; one that refuses the reads (RBAC) is named with
// its context; with --fail-fast (the default) the target after a failure never starts.
func TestFleetScaleTargetFails(t *testing.T) {
	fh, exec := newScaleFleet(t)
	fh.clients["ctx-b"] = fake.NewClientset(uniqueObjects(fakecluster.Objects("db", "app", "", webObjects()...))...)
	allowReviews(fh.clients["ctx-b"])
	r := fh.runExec(exec, "scale", "app", "--replicas", "4", "--contexts", "ctx-b,ctx-down,ctx-a", "--fail-fast=false", "--dry-run")
	if got := strings.Join(summaryRows(t, r.out), ","); got != "ctx-b failed,ctx-down failed,ctx-a dry-run" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	if r.code != ops.ExitUsage || !strings.Contains(r.out, "=== context ctx-b: db/app\nERROR: engine generic (cluster app) cannot scale") ||
		!strings.Contains(r.out, "=== context ctx-down: db/app\nERROR: ") {
		t.Errorf("exit %d:\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)

	r = fh.runExec(exec, "scale", "app", "--replicas", "4", "--contexts", "ctx-b,ctx-a", "--yes")
	if got := strings.Join(summaryRows(t, r.out), ","); got != "ctx-b failed,ctx-a not-started" || r.code != ops.ExitUsage {
		t.Errorf("exit %d, summary %s:\n%s%s", r.code, got, r.out, r.err)
	}
	if !strings.Contains(r.err, "ERROR: context ctx-b, cluster db/app: failed: engine generic (cluster app) cannot scale") {
		t.Errorf("stderr:\n%s", r.err)
	}
	if w := fakecluster.Writes(fh.clients["ctx-a"]); len(w) > 0 {
		t.Errorf("ctx-a (not started): writes %v", w)
	}

	r = fh.runExec(exec, "scale", "app", "--replicas", "4", "--contexts", "ctx-down,ctx-a", "--yes")
	if r.code != ops.ExitForbidden || !strings.Contains(r.err, "ERROR: context ctx-down, cluster db/app: failed: ") {
		t.Errorf("exit %d:\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)
}
