package commands

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// holder is the holder of cluster orders' Lease in context c ("" when there is none).
func (fh *fleetHarness) holder(c string) string {
	fh.t.Helper()
	l, err := fh.clients[c].CoordinationV1().Leases("db").Get(fh.t.Context(), lock.LeaseName("orders"), metav1.GetOptions{})
	if apierrors.IsNotFound(err) || l.Spec.HolderIdentity == nil {
		return ""
	}
	if err != nil {
		fh.t.Fatal(err)
	}
	return *l.Spec.HolderIdentity
}

// lock acquire over a fleet writes nothing under --dry-run (each target's "would acquire"
// grouped under its context) and nothing without a terminal and --yes (exit 2 before any API
// call, naming the contexts and clusters).
func TestFleetLockDryRunAndConfirm(t *testing.T) {
	fh := newFleetHarness(t)
	r := fh.run("lock", "acquire", "orders", "--contexts", "ctx-a,ctx-b", "--dry-run", "--lock-id", "ci@test")
	if r.code != 0 || !strings.Contains(r.out, "=== context ctx-a: db/orders\nwould acquire the lock on db/orders as ci@test") ||
		!strings.Contains(r.out, "=== context ctx-b: db/orders\nwould acquire the lock on db/orders as ci@test") {
		t.Errorf("exit %d:\n%s%s", r.code, r.out, r.err)
	}
	if got := strings.Join(summaryRows(t, r.out), ","); got != "ctx-a dry-run,ctx-b dry-run" {
		t.Errorf("summary %s", got)
	}
	fh.noWrites(t)

	for _, args := range [][]string{
		{"lock", "acquire", "orders", "--contexts", "ctx-a,ctx-b"},
		{"lock", "release", "orders", "--context", "ctx-a,ctx-b", "-o", "json"},
		{"deny", "add", "orders", "bad@x", "--contexts", "ctx-a,ctx-b"},
	} {
		fh := newFleetHarness(t)
		r := fh.run(args...)
		if r.code != ops.ExitUsage || !strings.Contains(r.err, "2 clusters in contexts ctx-a and ctx-b (ctx-a/db/orders, ctx-b/db/orders) without confirmation") {
			t.Errorf("%v: exit %d: %s", args, r.code, r.err)
		}
		for c, n := range fh.built {
			if n > 0 {
				t.Errorf("%v: %s clients built", args, c)
			}
		}
		fh.noWrites(t)
	}

	// On a terminal: what each target would do, then one question; no: nothing written.
	fh = newFleetHarness(t)
	fh.terminal, fh.stdin = true, "n\n"
	r = fh.run("lock", "acquire", "orders", "--contexts", "ctx-a,ctx-b", "-o", "json", "--lock-id", "ci@test")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, "=== context ctx-b: db/orders\nwould acquire the lock") ||
		!strings.Contains(r.err, "Acquire the lock of 2 clusters in contexts ctx-a and ctx-b (ctx-a/db/orders, ctx-b/db/orders)?") {
		t.Errorf("exit %d: %s", r.code, r.err)
	}
	fh.noWrites(t)
}

// lock acquire and release over a fleet: each target's Lease is written in its own context;
// a target whose lock someone else holds is skipped (exit 3) and one that refuses the write
// (RBAC) is named with its context, and neither stops the others (--fail-fast is off for lock).
func TestFleetLockAcquireRelease(t *testing.T) {
	fh := newFleetHarness(t)
	if _, err := fh.clients["ctx-b"].CoordinationV1().Leases("db").Create(t.Context(),
		heldLease("db", "orders", "bob@elsewhere", "s1", lock.ManualOperation, "INC-7"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fh.clients["ctx-b"].ClearActions()
	// A third context whose user may read the cluster but not write Leases.
	fh.clients["ctx-down"] = fh.clients["ctx-a"]
	fh.clients["ctx-a"] = newFleetHarness(t).clients["ctx-b"]
	fh.clients["ctx-a"].PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "", errors.New("RBAC: no"))
	})
	r := fh.run("lock", "acquire", "orders", "--contexts", "ctx-a,ctx-b,ctx-down", "--yes", "--lock-id", "ci@test", "--reason", "INC-8")
	if r.code != ops.ExitForbidden {
		t.Fatalf("exit %d, want 6:\n%s%s", r.code, r.out, r.err)
	}
	if got := strings.Join(summaryRows(t, r.out), ","); got != "ctx-a failed,ctx-b skipped,ctx-down succeeded" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	if !strings.Contains(r.err, "ERROR: context ctx-a, cluster db/orders: failed: ") || !strings.Contains(r.err, "forbidden") ||
		!strings.Contains(r.err, "ERROR: context ctx-b, cluster db/orders: skipped: ") || !strings.Contains(r.err, "bob@elsewhere") {
		t.Errorf("stderr:\n%s", r.err)
	}
	if !strings.Contains(r.out, "[ctx-down/db/orders] lock on db/orders acquired by ci@test") {
		t.Errorf("stdout:\n%s", r.out)
	}
	if fh.holder("ctx-down") != "ci@test" || fh.holder("ctx-b") != "bob@elsewhere" || fh.holder("ctx-a") != "" {
		t.Errorf("holders: ctx-a %q, ctx-b %q, ctx-down %q", fh.holder("ctx-a"), fh.holder("ctx-b"), fh.holder("ctx-down"))
	}
	if w := fakecluster.Writes(fh.clients["ctx-b"]); len(w) > 0 {
		t.Errorf("ctx-b (held by bob): writes %v", w)
	}

	// --fail-fast: after the first failure no other target starts.
	r = fh.run("lock", "acquire", "orders", "--contexts", "ctx-a,ctx-down", "--yes", "--lock-id", "other@test", "--fail-fast")
	if got := strings.Join(summaryRows(t, r.out), ","); got != "ctx-a failed,ctx-down not-started" {
		t.Errorf("--fail-fast: summary %s:\n%s%s", got, r.out, r.err)
	}

	// release, -o json: one List, each item the target's LockAction with its context; the
	// targets' outcomes; bob's lock in ctx-b is refused, not released.
	r = fh.run("lock", "release", "orders", "--contexts", "ctx-down,ctx-b", "--yes", "--lock-id", "ci@test", "-o", "json")
	var doc struct {
		Kind  string `json:"kind"`
		Items []struct {
			Kind, Context, Action string
		} `json:"items"`
		Errors  []struct{ Context string } `json:"errors"`
		Targets []fleetSummaryTarget       `json:"targets"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("exit %d: %v\n%s%s", r.code, err, r.out, r.err)
	}
	if r.code != ops.ExitLocked || doc.Kind != "List" || len(doc.Items) != 1 || doc.Items[0].Context != "ctx-down" || doc.Items[0].Kind != "LockAction" ||
		doc.Items[0].Action != "released" || len(doc.Errors) != 1 || doc.Errors[0].Context != "ctx-b" ||
		len(doc.Targets) != 2 || doc.Targets[0].Outcome != "succeeded" || doc.Targets[1].Outcome != "skipped" {
		t.Errorf("exit %d: %+v\n%s", r.code, doc, r.out)
	}
	if fh.holder("ctx-down") != "" || fh.holder("ctx-b") != "bob@elsewhere" {
		t.Errorf("holders after release: ctx-down %q, ctx-b %q", fh.holder("ctx-down"), fh.holder("ctx-b"))
	}

	// lock status over the fleet: each target under its context; the unreadable one named.
	fh.clients["ctx-a"] = newFleetHarness(t).clients["ctx-down"]
	r = fh.run("lock", "status", "orders", "--contexts", "ctx-a,ctx-b,ctx-down")
	if r.code != ops.ExitForbidden || !strings.Contains(r.out, "Context:  ctx-b\n") || !strings.Contains(r.out, "bob@elsewhere") ||
		!strings.Contains(r.out, "Context:  ctx-down\n") || strings.Contains(r.out, "Context:  ctx-a") || !strings.Contains(r.err, "ERROR: context ctx-a: ") {
		t.Errorf("lock status: exit %d:\n%s%s", r.code, r.out, r.err)
	}
}

// deny add over a fleet: each target's deny list written in its own context; a target whose
// user may not update Leases (the access review says no) is refused before writing, named
// with its context, and the other target still gets its entry; deny list reads them back.
func TestFleetDeny(t *testing.T) {
	fh := newFleetHarness(t)
	fh.denied["update leases.coordination.k8s.io"] = true
	r := fh.run("deny", "add", "orders", "bad@x", "--contexts", "ctx-a,ctx-b", "--dry-run")
	if r.code != 0 || !strings.Contains(r.out, "=== context ctx-b: db/orders\nwould deny bad@x on db/orders") {
		t.Errorf("dry-run: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	fh.noWrites(t)

	r = fh.run("deny", "add", "orders", "bad@x", "--contexts", "ctx-a,ctx-b", "--yes", "--reason", "runaway")
	if r.code != ops.ExitForbidden || !strings.Contains(r.err, "ERROR: context ctx-a, cluster db/orders: failed: ") {
		t.Errorf("exit %d:\n%s%s", r.code, r.out, r.err)
	}
	if got := strings.Join(summaryRows(t, r.out), ","); got != "ctx-a failed,ctx-b succeeded" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	if w := fakecluster.Writes(fh.clients["ctx-a"]); len(w) > 0 {
		t.Errorf("ctx-a (refused): writes %v", w)
	}
	r = fh.run("deny", "list", "orders", "--contexts", "ctx-a,ctx-b")
	if r.code != 0 || !strings.Contains(r.out, "Context:  ctx-a\nno denied IDs on db/orders") ||
		!strings.Contains(r.out, "Context:  ctx-b\nID") || !strings.Contains(r.out, "bad@x") {
		t.Errorf("deny list: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	r = fh.run("deny", "list", "orders", "--contexts", "ctx-a,ctx-b", "-o", "json")
	var doc struct {
		Items []struct {
			Kind, Context string
			Items         []struct{ Metadata struct{ Name string } }
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil || len(doc.Items) != 2 || doc.Items[1].Context != "ctx-b" ||
		doc.Items[1].Kind != "DenyList" || len(doc.Items[1].Items) != 1 || doc.Items[1].Items[0].Metadata.Name != "bad@x" {
		t.Errorf("deny list -o json: %v %+v\n%s", err, doc, r.out)
	}
}
