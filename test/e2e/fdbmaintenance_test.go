//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbop"
)

// TestFoundationDBRestartWithMaintenanceChecker: on a cluster whose operator runs its
// maintenance-mode checker, the stand-in operator clears any maintenance zone whose storage
// processes nobody listed under its maintenance prefix — at once. A restart by zone lists each
// batch's storage process groups first, so no storage process is down outside a maintenance
// zone, and the operator recognises the entries as finished and removes them.
func TestFoundationDBRestartWithMaintenanceChecker(t *testing.T) {
	// By pod, a storage pod stays away for longer than the recovery its loss causes, so an
	// operator that cleared the zone would do so while it is down.
	for _, method := range []string{"pod", "process"} {
		t.Run(method, func(t *testing.T) { restartWithMaintenanceChecker(t, method) })
	}
}

func restartWithMaintenanceChecker(t *testing.T, method string) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	res := bed.Dynamic.Resource(fdbop.GVR).Namespace(ns)
	patch := `{"spec":{"automationOptions":{"maintenanceModeOptions":{"UseMaintenanceModeChecker":true}}}}`
	if _, err := res.Patch(t.Context(), "myfdb", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if err := b.WaitReconciled(ctx, ns, "myfdb"); err != nil {
		t.Fatal(err)
	}
	env := cliEnv(t)
	dry := runCLI(t, env, "restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--method", method, "--dry-run")
	if dry.Code != 0 || strings.Count(dry.Stdout, "option on ACCESS_SYSTEM_KEYS; writemode on; set \\xff\\x02/org.foundationdb.kubernetes-operator/maintenance/") != len(fdbZones(model, "storage")) {
		t.Fatalf("dry-run does not show the maintenance-list registration:\n%s", dry)
	}
	start := time.Now()
	r := runCLI(t, env, "restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--method", method, "--yes")
	if r.Code != 0 {
		t.Fatal(r)
	}
	for _, p := range model.Processes() {
		if p.Class == "storage" && !p.Started.After(start) {
			t.Fatalf("storage process %s not restarted", p.ID)
		}
	}
	// A kill is logged when fdbcli returns, 3 s after it sent the reboots, so the order of the
	// log does not show protection; the model's own record of unprotected storage failures does.
	if d := model.DegradedStorage(); len(d) != 0 {
		for _, e := range model.Log() {
			t.Logf("fdbcli log: %s %s %q ok=%v", e.Time.Format(time.RFC3339Nano), e.Client, e.Command, e.OK)
		}
		t.Fatalf("storage processes failed outside a maintenance zone: %q", d)
	}
	if z, _ := model.MaintenanceZone(); z != "" {
		t.Fatalf("maintenance zone %s left after the run", z)
	}
	// Every zone was set in a session that first listed the batch's storage process group.
	ons, prev := 0, map[string]string{}
	for _, e := range model.Log() {
		if strings.HasPrefix(e.Command, "maintenance on ") {
			ons++
			if !strings.Contains(prev[e.Client], "/maintenance/") {
				t.Fatalf("%s set maintenance without listing its process groups first (previous command %q)", e.Client, prev[e.Client])
			}
		}
		prev[e.Client] = e.Command
	}
	if want := len(fdbZones(model, "storage")); ons != want {
		t.Fatalf("%d maintenance zones set, want one per storage zone (%d)", ons, want)
	}
	// The operator drops the entries of processes restarted since their maintenance start; an
	// entry it cannot match (wrong key, wrong time encoding) would stay for 4 hours.
	prefix := "\xff\x02/org.foundationdb.kubernetes-operator/maintenance/"
	deadline := time.Now().Add(waitTimeout)
	for len(model.KV(prefix)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("maintenance list not emptied by the operator: %q", model.KV(prefix))
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(100 * time.Millisecond): // the simulator has no watch; the operator resyncs every 500 ms
		}
	}
}

// TestFoundationDBStatusWatchSeesFDBHealth: `status --watch` on an FDB cluster prints a new
// document when only FoundationDB's own state changes (a maintenance zone set with fdbcli: no
// Kubernetes object changes). That uptimes and seconds remaining alone print nothing is
// TestStatusSignatureIgnoresVolatile's.
func TestFoundationDBStatusWatchSeesFDBHealth(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	w := startJSONWatch(ctx, t, cliEnv(t), "status", "myfdb", "-n", ns, "--watch", "-o", "json", "--timeout", "2m")
	type doc struct {
		Health struct {
			Details map[string]string `json:"details"`
		} `json:"health"`
	}
	next := func(what string) (d doc) {
		t.Helper()
		if err := json.Unmarshal(w.next(what), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := next("the first status"); d.Health.Details["maintenance"] != "none" {
		t.Fatalf("first document: maintenance %q", d.Health.Details["maintenance"])
	}
	var o, e strings.Builder
	if code := model.Run(context.Background(), []string{"--exec", "maintenance on zone-b 300", "--timeout", "10"}, &o, &e); code != 0 {
		t.Fatal(e.String())
	}
	// Documents printed before the zone was seen differ in what the operator's status shows;
	// none is printed for uptimes alone, so only a few come first.
	for i := 0; ; i++ {
		d := next("the maintenance zone")
		if strings.HasPrefix(d.Health.Details["maintenance"], "zone zone-b, ") {
			break
		}
		if i >= 3 {
			t.Fatalf("maintenance zone not shown after %d documents", i+1)
		}
	}
	// Every restart waits for that zone to end: `wait --for=healthy` must not pass, and `list`
	// shows the state with the way to end a stale zone.
	env := cliEnv(t)
	r := runCLI(t, env, "wait", "myfdb", "-n", ns, "--for=healthy", "--timeout", "3s")
	if r.Code == 0 || !strings.Contains(r.Stderr, "maintenance zone-b") || !strings.Contains(r.Stderr, "fdbcli --exec 'maintenance off'") {
		t.Fatalf("wait --for=healthy during a maintenance zone: %s", r)
	}
	if r := runCLI(t, env, "list", "-n", ns); r.Code != 0 || !strings.Contains(r.Stdout, "maintenance") {
		t.Fatalf("list during a maintenance zone: %s", r)
	}
	// explain: one failed line for the one cause (the restart's preflight refuses for the same
	// zone and is not repeated), with the fix.
	r = runCLI(t, env, "explain", "myfdb", "-n", ns)
	if r.Code != 5 || strings.Count(r.Stdout, "[FAIL]") != 1 || !strings.Contains(r.Stdout, "[FAIL] maintenance-zone ") ||
		!strings.Contains(r.Stdout, "fdbcli --exec 'maintenance off'") {
		t.Fatalf("explain during someone else's maintenance zone: want exit 5 and one failed line: %s", r)
	}
}
