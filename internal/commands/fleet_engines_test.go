package commands

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// writeFleetFile writes a fleet file and returns its path.
func writeFleetFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// targetOfWrite names the cluster a write to a fake clientset was for (its pods, its lock's
// Lease, the Events about them), "" when the request cannot be tied to exactly one cluster
// (a collection delete, an object of no cluster): clusters are the cluster names of the
// fleet's targets in that context.
func targetOfWrite(a k8stesting.Action, clusters []string) string {
	name := ""
	switch a := a.(type) {
	case k8stesting.DeleteAction:
		name = a.GetName()
	case k8stesting.CreateAction:
		obj := a.GetObject()
		if ev, ok := obj.(*corev1.Event); ok {
			name = ev.InvolvedObject.Name
		} else if m, ok := obj.(interface{ GetName() string }); ok {
			name = m.GetName()
		}
	case k8stesting.UpdateAction:
		if m, ok := a.GetObject().(interface{ GetName() string }); ok {
			name = m.GetName()
		}
	case k8stesting.PatchAction:
		name = a.GetName()
	}
	var owners []string
	for _, c := range clusters {
		if name == c || name == lock.LeaseName(c) || strings.HasPrefix(name, c+"-") {
			owners = append(owners, c)
		}
	}
	if len(owners) != 1 {
		return ""
	}
	return owners[0]
}

// TestFleetRestartFileClusters: `restart --rolling --fleet FILE` without a CLUSTER argument
// restarts the clusters the file names per context (ctx-a: orders; ctx-b: orders and users),
// each as its own target. It also proves that a fleet run never holds two targets' steps in
// one API call: every write each context's API server received is in the target's namespace
// and names exactly one cluster of a target of that context (a collection call, or a write
// for another context's cluster, fails it), and each target's pods were deleted once each in
// its own context.
func TestFleetRestartFileClusters(t *testing.T) {
	fh := newFleetHarness(t)
	ca := fakecluster.Start(t, fh.clients["ctx-a"], "db")
	cb := fakecluster.Start(t, fh.clients["ctx-b"], "db")
	fh.clients["ctx-a"].ClearActions()
	fh.clients["ctx-b"].ClearActions()
	file := writeFleetFile(t, "targets:\n- context: ctx-a\n  clusters: [orders]\n- context: ctx-b\n  clusters: [orders, users]\n")
	r := fh.run("restart", "--rolling", "--fleet", file, "--canary", "1", "--max-parallel", "2", "--yes", "-o", "json", "--lock-id", "ci@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	evs := fleetLines(t, r.out)
	var got []string
	for _, tg := range evs[len(evs)-1]["targets"].([]any) {
		m := tg.(map[string]any)
		got = append(got, m["context"].(string)+"/"+m["cluster"].(string)+" "+m["outcome"].(string))
	}
	if want := "ctx-a/orders succeeded,ctx-b/orders succeeded,ctx-b/users succeeded"; strings.Join(got, ",") != want {
		t.Errorf("summary %v, want %s", got, want)
	}
	byCluster := func(deleted []string) map[string][]string {
		m := map[string][]string{}
		for _, d := range deleted {
			c, _, _ := strings.Cut(d, "-")
			m[c] = append(m[c], d)
		}
		return m
	}
	da, db := byCluster(ca.Deleted()), byCluster(cb.Deleted())
	if len(da) != 1 || len(da["orders"]) != 3 || len(db) != 2 || len(db["orders"]) != 3 || len(db["users"]) != 3 {
		t.Errorf("deleted: ctx-a %v, ctx-b %v", ca.Deleted(), cb.Deleted())
	}
	for _, d := range [][]string{da["orders"], db["orders"], db["users"]} {
		if len(slices.Compact(slices.Sorted(slices.Values(d)))) != len(d) {
			t.Errorf("a pod deleted twice: %v", d)
		}
	}
	for c, clusters := range map[string][]string{"ctx-a": {"orders"}, "ctx-b": {"orders", "users"}, "ctx-down": nil} {
		writes := 0
		for _, a := range fh.clients[c].Actions() {
			switch a.GetVerb() {
			case "get", "list", "watch":
				continue
			}
			if r := a.GetResource().Resource; r == "selfsubjectaccessreviews" || r == "selfsubjectrulesreviews" {
				continue
			}
			writes++
			if a.GetNamespace() != "db" || targetOfWrite(a, clusters) == "" {
				t.Errorf("%s: %s %s in %q is not one target's (targets here: %v)", c, a.GetVerb(), a.GetResource().Resource, a.GetNamespace(), clusters)
			}
		}
		if len(clusters) > 0 && writes == 0 {
			t.Errorf("%s: no write seen", c)
		}
	}
}

// Without a CLUSTER argument a fleet file must name every target's cluster: exit 2 naming
// the context, before any API call; without --fleet the argument stays required.
func TestFleetRestartFileClustersUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"restart", "--rolling", "--yes", "--fleet", "FILE:contexts: [ctx-a]\ntargets:\n- context: ctx-b\n  clusters: [users]\n"},
			"names no cluster for context ctx-a (namespace db): give the CLUSTER argument"},
		{[]string{"resume", "--yes", "--fleet", "FILE:contexts: [ctx-a, ctx-b]\n"}, "names no cluster for context ctx-a"},
		{[]string{"restart", "--rolling", "--yes", "--contexts", "ctx-a,ctx-b"}, "missing CLUSTER argument"},
		{[]string{"resume", "--yes", "--context", "ctx-a,ctx-b"}, "missing CLUSTER argument"},
	} {
		fh := newFleetHarness(t)
		for i, a := range tc.args {
			if content, ok := strings.CutPrefix(a, "FILE:"); ok {
				tc.args[i] = writeFleetFile(t, content)
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
		fh.noWrites(t)
	}
}

// denyPodDeletes makes a context's RBAC refuse pod deletes (its access reviews answer no),
// everything else allowed.
func denyPodDeletes(c *fake.Clientset) {
	c.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		ra := r.Spec.ResourceAttributes
		r.Status.Allowed = ra == nil || ra.Resource != "pods" || ra.Verb != "delete"
		return true, r, nil
	})
}

// TestFleetRestartRBACRefusal: one context's user may not delete pods. Its target is refused
// by the RBAC preflight before its lock is taken (no write there), the refusal is reported on
// a line naming its context, and the exit code is 6 (forbidden). With --fail-fast=false the
// other target is restarted; with --fail-fast (the default) it is not started.
func TestFleetRestartRBACRefusal(t *testing.T) {
	for _, failFast := range []bool{false, true} {
		fh := newFleetHarness(t)
		denyPodDeletes(fh.clients["ctx-b"])
		ca := fakecluster.Start(t, fh.clients["ctx-a"], "db")
		fh.clients["ctx-a"].ClearActions()
		args := []string{"restart", "orders", "--rolling", "--context", "ctx-b,ctx-a", "--yes", "--lock-id", "ci@test"}
		if !failFast {
			args = append(args, "--fail-fast=false")
		}
		r := fh.run(args...)
		if r.code != ops.ExitForbidden {
			t.Fatalf("fail-fast %v: exit %d, want 6: %s\n%s", failFast, r.code, r.err, r.out)
		}
		line := ""
		for _, l := range strings.Split(r.err, "\n") {
			if strings.HasPrefix(l, "ERROR: context ctx-b, cluster db/orders: failed: ") {
				line = l
			}
		}
		if line == "" || !strings.Contains(line, "delete") || !strings.Contains(line, "pods") {
			t.Errorf("fail-fast %v: no refusal line naming ctx-b and the missing permission:\n%s", failFast, r.err)
		}
		if strings.Contains(r.err, "ERROR: context ctx-a") {
			t.Errorf("fail-fast %v: ctx-a reported as failed:\n%s", failFast, r.err)
		}
		if w := fakecluster.Writes(fh.clients["ctx-b"]); len(w) > 0 {
			t.Errorf("fail-fast %v: ctx-b written despite the refusal: %v", failFast, w)
		}
		i := strings.Index(r.out, "\nCONTEXT ")
		if i < 0 {
			t.Fatalf("no summary:\n%s", r.out)
		}
		var rows []string
		for _, l := range strings.Split(strings.TrimSpace(r.out[i+1:]), "\n")[1:] {
			f := strings.Fields(l)
			rows = append(rows, f[0]+" "+f[3]+" "+f[len(f)-1])
		}
		want, deleted := "ctx-b failed Forbidden,ctx-a succeeded -", 3
		if failFast {
			want, deleted = "ctx-b failed Forbidden,ctx-a not-started -", 0
		}
		if strings.Join(rows, ",") != want {
			t.Errorf("fail-fast %v: summary %v, want %s\n%s", failFast, rows, want, r.out)
		}
		if len(ca.Deleted()) != deleted {
			t.Errorf("fail-fast %v: ctx-a deleted %v, want %d pods", failFast, ca.Deleted(), deleted)
		}
		// The last line names the target the stop left not started (it read as if only ctx-b
		// had been at issue).
		lastWant := "error: fleet: 1 of 2 targets failed (ctx-b/db/orders): "
		if failFast {
			lastWant = "error: fleet: 1 of 2 targets failed (ctx-b/db/orders); 1 of 2 targets not-started (ctx-a/db/orders): "
		}
		if lines := strings.Split(strings.TrimSpace(r.err), "\n"); !strings.HasPrefix(lines[len(lines)-1], lastWant) {
			t.Errorf("fail-fast %v: last line %q, want it to start %q", failFast, lines[len(lines)-1], lastWant)
		}
	}
}

// TestFleetResumeNotStartedByTheRun: ctx-b's last operation is an older restart that
// succeeded (an earlier fleet run's); a fleet restart over ctx-a and ctx-b stops at ctx-a
// (paused after one pod) and, with --fail-fast, never starts ctx-b. `resume --fleet
// --fail-fast=false` then resumes ctx-a from its journal and starts the fleet run's command on
// ctx-b (both pause after one pod, as the command asks): before, ctx-b counted as nothing-to-resume (its older
// operation succeeded) and the fleet looked finished without ever restarting it. Both journals
// record the fleet run; two more resumes finish both, and a last one has nothing to do.
func TestFleetResumeNotStartedByTheRun(t *testing.T) {
	fh := newFleetHarness(t)
	ca := fakecluster.Start(t, fh.clients["ctx-a"], "db")
	cb := fakecluster.Start(t, fh.clients["ctx-b"], "db")
	// The older operation: an earlier fleet run's restart of ctx-b, an hour ago.
	if r := fh.run("restart", "orders", "--rolling", "--contexts", "ctx-b", "--yes"); r.code != 0 {
		t.Fatalf("restart ctx-b alone: exit %d: %s", r.code, r.err)
	}
	leases := fh.clients["ctx-b"].CoordinationV1().Leases("db")
	l, err := leases.Get(t.Context(), lock.LeaseName("orders"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var j ops.Journal
	if err := json.Unmarshal([]byte(l.Annotations["dbops.io/journal"]), &j); err != nil || j.State != ops.JournalSucceeded {
		t.Fatalf("ctx-b journal %+v, %v", j, err)
	}
	j.Started = j.Started.Add(-time.Hour)
	b, _ := json.Marshal(j)
	l.Annotations["dbops.io/journal"] = string(b)
	if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	older := len(cb.Deleted())
	r := fh.run("restart", "orders", "--rolling", "--context", "ctx-a,ctx-b", "--pause-after", "1", "--yes", "--lock-id", "ci@test")
	if r.code != ops.ExitPaused || fleetSummaryRows(t, r.out) != "ctx-a stopped,ctx-b not-started" {
		t.Fatalf("fleet restart: exit %d: %s\n%s", r.code, r.err, r.out)
	}
	// On a terminal the question names the command started where the run never started; no:
	// nothing written.
	fh.terminal, fh.stdin = true, "n\n"
	fh.clients["ctx-a"].ClearActions()
	fh.clients["ctx-b"].ClearActions()
	r = fh.run("resume", "orders", "--context", "ctx-a,ctx-b", "--start-not-started", "--lock-id", "ci@test")
	if q := "Resume the unfinished operations of 1 cluster in context ctx-a (ctx-a/db/orders), and start the fleet run "; r.code != ops.ExitUsage ||
		!strings.Contains(r.err, q) || !strings.Contains(r.err, "'s command kubectl dbops restart CLUSTER --pause-after=1 --rolling on 1 cluster in context ctx-b it never started (ctx-b/db/orders)?") {
		t.Errorf("question: exit %d:\n%s", r.code, r.err)
	}
	fh.noWrites(t)
	fh.terminal, fh.stdin = false, ""
	// Without --start-not-started the command read from ctx-a's journal is not run on ctx-b
	// (anyone who may write Leases in ctx-a could have edited it): ctx-b is reported
	// not-started with the command to run there, exit 5, nothing written in ctx-b.
	fh.clients["ctx-b"].ClearActions()
	r = fh.run("resume", "orders", "--context", "ctx-a,ctx-b", "--fail-fast=false", "--yes", "--dry-run", "--lock-id", "ci@test")
	if len(ca.Deleted()) != 1 {
		t.Fatalf("a dry run deleted %v", ca.Deleted())
	}
	if r.code != ops.ExitPrecondition || fleetSummaryRows(t, r.out) != "ctx-a dry-run,ctx-b not-started" ||
		!strings.Contains(r.err, "start it with --start-not-started") || !strings.Contains(r.err, "or run: kubectl dbops restart orders -n db --context ctx-b") {
		t.Errorf("resume without --start-not-started: exit %d:\n%s\n%s", r.code, r.out, r.err)
	}
	if w := fakecluster.Writes(fh.clients["ctx-b"]); len(w) > 0 {
		t.Errorf("ctx-b written without --start-not-started: %v", w)
	}
	if r := fh.run("resume", "orders", "--start-not-started", "--yes"); r.code != ops.ExitUsage || !strings.Contains(r.err, "--start-not-started applies to a fleet") {
		t.Errorf("--start-not-started without a fleet: exit %d: %s", r.code, r.err)
	}
	r = fh.run("resume", "orders", "--context", "ctx-a,ctx-b", "--fail-fast=false", "--yes", "--start-not-started", "--lock-id", "ci@test")
	if r.code != ops.ExitPaused {
		t.Fatalf("resume: exit %d, want 7: %s\n%s", r.code, r.err, r.out)
	}
	if got := fleetSummaryRows(t, r.out); got != "ctx-a stopped,ctx-b stopped" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	if !strings.Contains(r.err, "[ctx-b/db/orders] starting the fleet run ") || !strings.Contains(r.err, "which that run never started: kubectl dbops restart orders -n db --context ctx-b") {
		t.Errorf("stderr:\n%s", r.err)
	}
	if len(cb.Deleted()) != older+1 || len(ca.Deleted()) != 2 {
		t.Errorf("deleted: ctx-a %v, ctx-b %v (before the fleet run: %d)", ca.Deleted(), cb.Deleted(), older)
	}
	fleetID := func(c string) string {
		t.Helper()
		l, err := fh.clients[c].CoordinationV1().Leases("db").Get(t.Context(), lock.LeaseName("orders"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var j ops.Journal
		if err := json.Unmarshal([]byte(l.Annotations["dbops.io/journal"]), &j); err != nil || j.Request == nil || j.Request.Fleet == nil {
			t.Fatalf("%s: journal without its fleet run: %s, %v", c, l.Annotations["dbops.io/journal"], err)
		}
		return j.Request.Fleet.ID
	}
	if a, b := fleetID("ctx-a"), fleetID("ctx-b"); a != b {
		t.Errorf("fleet runs: ctx-a %s, ctx-b %s", a, b)
	}
	for range 2 {
		r = fh.run("resume", "orders", "--context", "ctx-a,ctx-b", "--fail-fast=false", "--yes", "--start-not-started", "--lock-id", "ci@test")
	}
	if got := fleetSummaryRows(t, r.out); r.code != 0 || got != "ctx-a nothing-to-resume,ctx-b succeeded" {
		t.Errorf("resume to the end: exit %d, summary %s:\n%s%s", r.code, got, r.out, r.err)
	}
	r = fh.run("resume", "orders", "--context", "ctx-a,ctx-b", "--fail-fast=false", "--yes", "--lock-id", "ci@test")
	if got := fleetSummaryRows(t, r.out); r.code != 0 || got != "ctx-a nothing-to-resume,ctx-b nothing-to-resume" {
		t.Errorf("last resume: exit %d, summary %s:\n%s%s", r.code, got, r.out, r.err)
	}
	if len(cb.Deleted()) != older+3 || len(ca.Deleted()) != 3 {
		t.Errorf("deleted: ctx-a %v, ctx-b %v (before the fleet run: %d)", ca.Deleted(), cb.Deleted(), older)
	}
}

// fleetRunOf trusts a fleet record only when it names its own target and every journal of the
// run records the same command: a record edited on one cluster cannot start another command
// elsewhere.
func TestFleetRunOfConsistency(t *testing.T) {
	ts := []fleet.Target{{Context: "a", Namespace: "db", Cluster: "x"}, {Context: "b", Namespace: "db", Cluster: "y"}, {Context: "c", Namespace: "db", Cluster: "z"}}
	all := []string{"a/db/x", "b/db/y", "c/db/z"}
	req := func(cluster string, flags []ops.RequestFlag, f *ops.FleetRun) *ops.Journal {
		return &ops.Journal{Operation: "restart", Request: &ops.Request{Command: []string{"restart"}, Cluster: cluster, Namespace: "db", Flags: flags, Fleet: f}}
	}
	rolling := []ops.RequestFlag{{Name: "rolling", Values: []string{"true"}, Bool: true}}
	zone := append(slices.Clone(rolling), ops.RequestFlag{Name: "mode", Values: []string{"zone"}})
	run := &ops.FleetRun{ID: "r1", Targets: all}
	for _, tc := range []struct {
		name     string
		journals []*ops.Journal
		want     string
	}{
		{"one journal of the run", []*ops.Journal{req("x", rolling, run), nil, nil}, "[false true true] restart"},
		{"agreeing journals", []*ops.Journal{req("x", rolling, run), req("y", rolling, run), nil}, "[false false true] restart"},
		{"record not naming its own target", []*ops.Journal{req("x", rolling, &ops.FleetRun{ID: "r1", Targets: []string{"b/db/y"}}), nil, nil}, "[false false false] none"},
		{"journals of the run disagree", []*ops.Journal{req("x", rolling, run), req("y", zone, run), nil}, "[false false false] none"},
		{"no fleet record", []*ops.Journal{req("x", rolling, nil), nil, nil}, "[false false false] none"},
	} {
		_, cmd, ns := fleetRunOf(ts, tc.journals)
		got := fmt.Sprint(ns) + " none"
		if cmd != nil {
			got = fmt.Sprint(ns) + " " + strings.Join(cmd.Command, " ")
			if cmd.Cluster != "" || cmd.Namespace != "" {
				t.Errorf("%s: command keeps its target %s/%s", tc.name, cmd.Namespace, cmd.Cluster)
			}
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
