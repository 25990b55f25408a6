package commands

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/golden"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func assertGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Assert(t, name, []byte(got))
}

// web is a generic 3-pod cluster labelled with dbops.io labels.
func webObjects() []fakecluster.Group {
	return []fakecluster.Group{{Name: "web", Role: "data", Replicas: 3}}
}

func dbGroups() []fakecluster.Group {
	return []fakecluster.Group{
		{Name: "master", Role: "master", Replicas: 3},
		{Name: "hot", Role: "data", Order: 1, Replicas: 2},
		{Name: "cold", Role: "data", Order: 2, Replicas: 1},
	}
}

// TestBadInput: every malformed request exits 2 with one clear line and
// makes no write to the API.
func TestBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string // substring of the error line
	}{
		{"missing cluster", []string{"restart", "--rolling"}, nil, "missing CLUSTER argument"},
		{"two clusters", []string{"status", "a", "b"}, nil, "takes one CLUSTER argument"},
		{"no --rolling", []string{"restart", "db"}, nil, "restart needs --rolling"},
		{"unknown cluster", []string{"restart", "nope", "--rolling", "--yes"}, nil, `no database cluster "nope" in namespace "prod"`},
		{"unknown cluster status", []string{"status", "nope"}, nil, `no database cluster "nope"`},
		{"unknown group", []string{"restart", "db", "--rolling", "--group", "warm", "--yes"}, nil, `unknown node group "warm" for cluster db; allowed: master, hot, cold`},
		{"empty group", []string{"restart", "db", "--rolling", "--group", "", "--yes"}, nil, "--group was given an empty value"},
		{"unknown engine", []string{"restart", "db", "--rolling", "--engine", "mongo", "--yes"}, nil, `unknown engine "mongo"; allowed: cratedb, etcd, foundationdb, replicated, generic`},
		{"unknown method", []string{"restart", "db", "--rolling", "--method", "bounce", "--yes"}, nil, `unknown --method "bounce"; allowed: pod, process`},
		{"method of another engine", []string{"restart", "db", "--rolling", "--method", "process", "--yes"}, nil, `--method process is not available for engine generic (allowed: pod)`},
		{"unknown output", []string{"status", "db", "-o", "xml"}, nil, `unknown output format "xml"; allowed: text, json, yaml`},
		{"negative timeout", []string{"restart", "db", "--rolling", "--timeout", "-1s", "--yes"}, nil, "--timeout must not be negative"},
		{"malformed timeout", []string{"restart", "db", "--rolling", "--timeout", "soon"}, nil, `invalid argument "soon"`},
		{"zero fdb timeout", []string{"restart", "db", "--rolling", "--fdb-timeout", "0s", "--yes"}, nil, "--fdb-timeout must be a whole number of seconds, at least 1s (got 0s)"},
		{"fractional fdb timeout", []string{"status", "db", "--fdb-timeout", "1500ms"}, nil, "--fdb-timeout must be a whole number of seconds, at least 1s (got 1.5s)"},
		{"malformed fdb timeout", []string{"restart", "db", "--rolling", "--fdb-timeout", "soon"}, nil, `invalid argument "soon"`},
		{"unknown flag", []string{"restart", "db", "--rolling", "--force"}, nil, "unknown flag: --force"},
		{"wrong context", []string{"status", "db", "--context", "nope"}, nil, `kubeconfig has no context "nope"; allowed: prod, staging`},
		{"bad env value", []string{"status", "db"}, map[string]string{"DBOPS_TIMEOUT": "abc"}, "invalid value \"abc\" for --timeout from DBOPS_TIMEOUT"},
		{"no terminal, no --yes", []string{"restart", "db", "--rolling"}, nil, "refusing to restart prod/db without confirmation: no terminal to ask on; pass --yes"},
		{"yaml for an operation", []string{"restart", "db", "--rolling", "--yes", "-o", "yaml"}, nil, "-o yaml is for status and --dry-run plans"},
		{"dry-run on status", []string{"status", "db", "--dry-run"}, nil, "--dry-run does not apply to status"},
		{"short lock duration", []string{"lock", "acquire", "db", "--duration", "1s"}, nil, "--duration must be at least 10s"},
		{"allow unlisted id", []string{"deny", "allow", "db", "bob@x"}, nil, "bob@x"},
		{"deny without id", []string{"deny", "add", "db"}, nil, "expects CLUSTER and ID"},
		{"deny empty id", []string{"deny", "add", "db", " "}, nil, "ID must not be empty"},
		{"extra arg to version", []string{"version", "x"}, nil, "takes no arguments"},
		{"unknown lock subcommand", []string{"lock", "db", "release"}, nil, `unknown lock subcommand "db"; allowed: status, acquire, release`},
		{"unknown deny subcommand", []string{"deny", "remove", "db", "x"}, nil, `unknown deny subcommand "remove"; allowed: add, allow, list`},
		{"replace without pod", []string{"replace", "db"}, nil, "replace needs POD names or --failed"},
		{"replace unknown pod", []string{"replace", "db", "db-hot-7", "--yes"}, nil, `pod "db-hot-7" is not part of cluster prod/db; did you mean "db-hot-0" or "db-hot-1"? allowed: db-master-0, db-master-1, db-master-2, db-hot-0, db-hot-1, db-cold-0`},
		{"replace unknown strategy", []string{"replace", "db", "db-hot-1", "--strategy", "bogus", "--yes"}, nil, `unknown --strategy "bogus"; allowed: replacement, deletion`},
		{"replace zero concurrency", []string{"replace", "db", "db-hot-1", "--max-concurrent", "0", "--yes"}, nil, "--max-concurrent must be 1 or more"},
		{"replace pods and --failed", []string{"replace", "db", "db-hot-1", "--failed", "--yes"}, nil, "name pods or use --failed, not both"},
		{"replace bad taint", []string{"replace", "db", "--failed", "--taint", "k=soon", "--yes"}, nil, `--taint k: "soon" is not a duration`},
		{"replace taint without --failed", []string{"replace", "db", "db-hot-1", "--taint", "k", "--yes"}, nil, "--taint only applies with --failed"},
		{"replace zero threshold", []string{"replace", "db", "--failed", "--failure-threshold", "0s", "--yes"}, nil, "--failure-threshold must be positive"},
		{"restart unknown mode", []string{"restart", "db", "--rolling", "--mode", "bogus", "--yes"}, nil, `unknown --mode "bogus"; allowed: pod, zone, all`},
		{"restart negative zones", []string{"restart", "db", "--rolling", "--mode", "zone", "--max-unavailable-zones", "-1", "--yes"}, nil, "--max-unavailable-zones must be 0 or more, got -1"},
		{"restart zones with all", []string{"restart", "db", "--rolling", "--mode", "all", "--max-unavailable-zones", "1", "--yes"}, nil, "--max-unavailable-zones does not apply to --mode all"},
		{"scale replicas zero", []string{"scale", "db", "--replicas", "0", "--yes"}, nil, "--replicas 0: must be at least 1"},
		{"scale replicas and data", []string{"scale", "db", "--replicas", "3", "--data", "hot=2"}, nil, "--replicas cannot be combined with --master or --data"},
		{"scale replicas not a number", []string{"scale", "db", "--replicas", "three"}, nil, `invalid argument "three"`},
		{"generic cannot scale", []string{"scale", "db", "--replicas", "3", "--yes"}, nil, "engine generic (cluster db) cannot scale"},
		{"scale processes bad syntax", []string{"scale", "db", "--processes", "storage:4", "--yes"}, nil, `--processes "storage:4": want CLASS=N with CLASS one of storage, log,`},
		{"scale processes unknown class", []string{"scale", "db", "--processes", "disk=4", "--yes"}, nil, `--processes "disk=4": want CLASS=N with CLASS one of storage, log,`},
		{"scale processes negative", []string{"scale", "db", "--processes", "storage=-2", "--yes"}, nil, "N must be a whole number of at least -1"},
		{"scale processes and replicas", []string{"scale", "db", "--processes", "storage=4", "--replicas", "3"}, nil, "--processes (FoundationDB) cannot be combined"},
		{"scale processes on generic", []string{"scale", "db", "--processes", "storage=4", "--yes"}, nil, "--processes is for FoundationDB clusters; cluster db is generic"},
		{"replace process class on generic", []string{"replace", "db", "--process-class", "storage", "--yes"}, nil, "--process-class is for FoundationDB clusters; cluster db is generic"},
		{"fdb timeout on generic", []string{"restart", "db", "--rolling", "--fdb-timeout", "5s", "--yes"}, nil, "--fdb-timeout is for FoundationDB clusters; cluster db is generic"},
		{"no-exclusion on generic, before the pod is looked up", []string{"replace", "db", "nope-0", "--no-exclusion", "--force", "--yes"}, nil, "--force is for FoundationDB clusters; cluster db is generic"},
		{"primaries on generic", []string{"scale", "db", "--primaries", "2", "--yes"}, nil, "--primaries is for replicated clusters; cluster db is generic"},
		{"replace no-exclusion without force", []string{"replace", "db", "db-hot-1", "--no-exclusion", "--yes"}, nil, "needs --force"},
		{"replace force without no-exclusion", []string{"replace", "db", "db-hot-1", "--force", "--yes"}, nil, "--force only applies to --no-exclusion"},
		{"replace node and pods", []string{"replace", "db", "db-hot-1", "--node", "n1", "--yes"}, nil, "choose the pods one way"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
			for k, v := range tt.env {
				h.env[k] = v
			}
			r := h.run(tt.args...)
			if r.code != ops.ExitUsage {
				t.Fatalf("exit %d, want 2; stderr: %s", r.code, r.err)
			}
			lines := strings.Split(strings.TrimSpace(r.err), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Errorf("stderr = %q, want one line containing %q", r.err, tt.want)
			}
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("bad input wrote to the API: %v", w)
			}
		})
	}
}

func TestRestartDryRunWritesNothing(t *testing.T) {
	for _, format := range []string{"text", "json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
			r := h.run("restart", "db", "--rolling", "--dry-run", "-o", format)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			assertGolden(t, "restart-dry-run."+format, r.out)
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("dry-run wrote: %v", w)
			}
		})
	}
}

// waitingLine is a plain view's waiting line: "[i/n] target waiting[ duration]: reason".
var waitingLine = regexp.MustCompile(`\] \S+ waiting( \S+)?: `)

func TestRestartRunsPlainView(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
	ctrl := fakecluster.Start(t, h.client, "prod")
	r := h.run("restart", "db", "--rolling", "--group", "hot", "--yes", "--lock-id", "alice@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	if got, want := ctrl.Deleted(), []string{"db-hot-0", "db-hot-1"}; !slices.Equal(got, want) {
		t.Errorf("deleted %v, want %v", got, want)
	}
	// What a step reports while it waits depends on when the pod informer sees the deletion
	// and the recreation; the golden file has the lines that do not.
	var stable []string
	for _, l := range strings.SplitAfter(r.out, "\n") {
		if !waitingLine.MatchString(l) {
			stable = append(stable, l)
		}
	}
	assertGolden(t, "restart-plain.txt", strings.Join(stable, ""))

	// Running it again is safe: a fresh run restarts again (a new request),
	// and the journal of the finished one does not make it skip anything.
	lease, err := h.client.CoordinationV1().Leases("prod").Get(t.Context(), "dbops-db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("lock still held by %q after the run", *lease.Spec.HolderIdentity)
	}
	var j ops.Journal
	if err := json.Unmarshal([]byte(lease.Annotations["dbops.io/journal"]), &j); err != nil {
		t.Fatal(err)
	}
	if j.State != ops.JournalSucceeded || len(j.Done) != 2 {
		t.Errorf("journal = %+v", j)
	}
}

func TestRestartJSONEvents(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	fakecluster.Start(t, h.client, "prod")
	r := h.run("restart", "db", "--rolling", "--yes", "-o", "json", "--lock-id", "ci@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(r.out), "\n") {
		var ev ops.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not NDJSON: %q: %v", line, err)
		}
		// Pod snapshots come from the pod watch, which runs beside the procedure, so they may
		// arrive before the lock is taken: only the procedure's own events have an order.
		if ev.Type != "pods" {
			types = append(types, string(ev.Type))
		}
	}
	if types[0] != "lock" || types[1] != "plan" || types[len(types)-1] != "done" {
		t.Errorf("event order = %v", types)
	}
}

func TestRestartRefusesOperatorOwned(t *testing.T) {
	objs := fakecluster.Objects("prod", "db", "", webObjects()...)
	for _, o := range objs {
		if s, ok := o.(interface{ GetLabels() map[string]string }); ok && s.GetLabels()["dbops.io/cluster"] == "db" {
			s.GetLabels()["app.kubernetes.io/managed-by"] = "some-operator"
		}
	}
	h := newHarness(t, objs...)
	r := h.run("restart", "db", "--rolling", "--yes")
	if r.code != ops.ExitPrecondition || !strings.Contains(r.err, "managed by an operator (managed-by=some-operator)") || !strings.Contains(r.err, "--ignore-operator") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("wrote: %v", w)
	}
	// A harness of its own: the refused run's RBAC prefetch may still be asking its client
	// (askAhead), and the controller's reactor must not be added under it.
	h = newHarness(t, objs...)
	fakecluster.Start(t, h.client, "prod")
	if r := h.run("restart", "db", "--rolling", "--yes", "--ignore-operator"); r.code != 0 {
		t.Errorf("with --ignore-operator: exit %d: %s", r.code, r.err)
	}
}

func TestRestartLockedByOther(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	if r := h.run("lock", "acquire", "db", "--id", "bob@test", "--reason", "INC-1"); r.code != 0 {
		t.Fatalf("acquire: %d %s", r.code, r.err)
	}
	h.client.ClearActions()
	r := h.run("restart", "db", "--rolling", "--yes", "--lock-id", "alice@test")
	if r.code != ops.ExitLocked || !strings.Contains(r.err, "bob@test") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("wrote: %v", w)
	}
}

func TestLockAndDenyCommands(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	steps := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"lock", "status", "db"}, 0, "Lock:     free"},
		{[]string{"lock", "acquire", "db", "--reason", "INC-7"}, 0, "lock on prod/db acquired by alice@api.prod.example:6443 until 2026-11-22T07:10:00Z"},
		{[]string{"lock", "status", "db"}, 0, "Lock:     held by alice@api.prod.example:6443 (manual lock) until 2026-11-22T07:10:00Z, reason: INC-7"},
		{[]string{"lock", "acquire", "db", "--context", "staging", "-n", "prod"}, ops.ExitLocked, "locked by alice@api.prod.example:6443"},
		{[]string{"deny", "add", "db", "alice@api.prod.example:6443", "--context", "staging", "-n", "prod", "--reason", "stuck session"}, 0, "denied"},
		{[]string{"deny", "list", "db"}, 0, "stuck session"},
		{[]string{"lock", "acquire", "db"}, ops.ExitLocked, "denied"},
		{[]string{"lock", "acquire", "db", "--context", "staging", "-n", "prod"}, 0, "takeover from alice@api.prod.example:6443 by bob@api.prod.example:6443"},
		{[]string{"deny", "allow", "db", "alice@api.prod.example:6443", "--context", "staging", "-n", "prod", "--reason", "fixed"}, 0, "allowed"},
		{[]string{"lock", "release", "db"}, ops.ExitLocked, "bob@api.prod.example:6443 (manual lock), not by alice@api.prod.example:6443; only the holder can release it, or release it for them (stopping what it does) with --force"},
		{[]string{"lock", "acquire", "db"}, ops.ExitLocked, "--force"},
		{[]string{"lock", "acquire", "db", "--force", "--reason", "INC-8"}, 0, "takeover from bob@api.prod.example:6443 by alice@api.prod.example:6443"},
		{[]string{"lock", "release", "db", "--context", "staging", "-n", "prod", "--force", "--reason", "alice unreachable"}, 0, "released by bob@api.prod.example:6443 (held by alice@api.prod.example:6443 (manual lock; reason: INC-8))"},
		{[]string{"lock", "acquire", "db", "--context", "staging", "-n", "prod"}, 0, "acquired"},
		{[]string{"lock", "release", "db", "--context", "staging", "-n", "prod"}, 0, "released by bob@api.prod.example:6443\n"},
		{[]string{"deny", "list", "db"}, 0, "no denied IDs"},
	}
	for i, s := range steps {
		before := len(fakecluster.Writes(h.client))
		r := h.run(s.args...)
		if r.code != s.code || !strings.Contains(r.out+r.err, s.want) {
			t.Fatalf("step %d %v: exit %d (want %d), output %q, want %q", i, s.args, r.code, s.code, r.out+r.err, s.want)
		}
		if w := fakecluster.Writes(h.client); s.code != 0 && len(w) != before {
			t.Errorf("step %d %v refused, but wrote %v", i, s.args, w[before:])
		}
	}
	// Every change of the lock and the deny list is an Event on the Lease, in order.
	events, err := h.client.CoreV1().Events("prod").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range events.Items {
		if ev.InvolvedObject.Kind != "Lease" || ev.InvolvedObject.Name != "dbops-db" {
			t.Errorf("event %s on %s/%s, want it on the lease", ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name)
		}
		got = append(got, ev.Type+" "+ev.Reason)
	}
	slices.Sort(got) // listed by name, not by time
	want := []string{
		"Normal DbopsLockAcquired", "Normal DbopsLockAcquired", "Normal DbopsLockIDAllowed", "Normal DbopsLockReleased",
		"Warning DbopsLockForceReleased", "Warning DbopsLockIDDenied", "Warning DbopsLockTakeover", "Warning DbopsLockTakeover",
	}
	if !slices.Equal(got, want) {
		t.Errorf("lock events %v, want %v", got, want)
	}
}

func TestStatusGolden(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
	h.run("lock", "acquire", "db", "--id", "bob@test", "--reason", "INC-9")
	h.run("deny", "add", "db", "ci@test", "--reason", "runaway pipeline")
	h.client.ClearActions()
	for _, format := range []string{"text", "json"} {
		r := h.run("status", "db", "-o", format)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		assertGolden(t, "status."+format, r.out)
	}
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("status wrote: %v", w)
	}
}

func TestConfigPrecedence(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	cfg := filepath.Join(h.env["XDG_CONFIG_HOME"], "kubectl-dbops", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("lock-id: from-config\noutput: json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"config file", nil, nil, `"self": "from-config"`},
		{"env beats config", map[string]string{"DBOPS_LOCK_ID": "from-env"}, nil, `"self": "from-env"`},
		{"flag beats env", map[string]string{"DBOPS_LOCK_ID": "from-env"}, []string{"--lock-id", "from-flag"}, `"self": "from-flag"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			delete(h.env, "DBOPS_LOCK_ID")
			for k, v := range tt.env {
				h.env[k] = v
			}
			r := h.run(append([]string{"lock", "status", "db"}, tt.args...)...)
			if r.code != 0 || !strings.Contains(r.out, tt.want) {
				t.Errorf("exit %d, out %s, want %s (%s)", r.code, r.out, tt.want, r.err)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	h := newHarness(t)
	r := h.run("version", "-o", "json")
	var v VersionInfo
	if err := json.Unmarshal([]byte(r.out), &v); err != nil || v.Version == "" {
		t.Fatalf("version json %q: %v", r.out, err)
	}
}

func TestDisableLocksWarnsAndRecords(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	fakecluster.Start(t, h.client, "prod")
	r := h.run("restart", "db", "--rolling", "--yes", "--disable-locks", "--lock-id", "oncall@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if !strings.Contains(r.err, "WARNING: --disable-locks") {
		t.Errorf("no loud warning on stderr: %q", r.err)
	}
	evs, _ := h.client.CoreV1().Events("prod").List(t.Context(), metav1.ListOptions{})
	found := false
	for _, e := range evs.Items {
		found = found || (e.Reason == "DbopsLocksDisabled" && strings.Contains(e.Message, "oncall@test") && e.InvolvedObject.Kind == "StatefulSet")
	}
	if !found {
		t.Error("no DbopsLocksDisabled event on the StatefulSet")
	}
	if _, err := h.client.CoordinationV1().Leases("prod").Get(t.Context(), "dbops-db", metav1.GetOptions{}); err == nil {
		t.Error("a lease was written despite --disable-locks")
	}
}

// After an interrupted run, --dry-run shows which steps a re-run skips.
func TestDryRunShowsResumedSteps(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	j := ops.Journal{Operation: "restart", Args: "--rolling", Holder: "alice@test", State: ops.JournalInterrupted,
		Started: testNow.Add(-time.Hour), Steps: 3, Done: []string{"restart/db-web-0"}}
	b, _ := json.Marshal(j)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "dbops-db", Namespace: "prod",
		Annotations: map[string]string{"dbops.io/journal": string(b)}}}
	if _, err := h.client.CoordinationV1().Leases("prod").Create(t.Context(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.client.ClearActions()
	r := h.run("restart", "db", "--rolling", "--dry-run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	assertGolden(t, "restart-dry-run-resume.text", r.out)
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("dry-run wrote: %v", w)
	}
}

// TestBadInputWritesNothing covers explicitly empty values, flags given
// without the flag they need, engine flags for another engine, unknown
// commands and shells and a missing kubeconfig: exit 2, one line, no write.
func TestBadInputWritesNothing(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"empty lock id", []string{"restart", "db", "--rolling", "--yes", "--lock-id", ""}, `--lock-id was given an empty value`},
		{"empty --id acquire", []string{"lock", "acquire", "db", "--id", ""}, `--id was given an empty value`},
		{"empty --id release", []string{"lock", "release", "db", "--id", ""}, `--id was given an empty value`},
		{"empty license secret", []string{"bootstrap", "db", "--license-secret", "", "--yes"}, `--license-secret was given an empty value`},
		{"empty user", []string{"bootstrap", "db", "--user", "", "--yes"}, `--user was given an empty value`},
		{"empty selector", []string{"restart", "db", "--rolling", "--yes", "-l", ""}, `--selector was given an empty value`},
		{"empty namespace", []string{"restart", "db", "--rolling", "--yes", "-n", ""}, `--namespace was given an empty value`},
		{"empty pg-ca-secret", []string{"restart", "db", "--rolling", "--yes", "--pg-ca-secret", ""}, `--pg-ca-secret was given an empty value`},
		{"failure threshold without --failed", []string{"replace", "db", "db-hot-0", "--failure-threshold", "1h", "--yes"}, "--failure-threshold only applies with --failed"},
		{"taint without --failed", []string{"replace", "db", "db-hot-0", "--taint", "k", "--yes"}, "--taint only applies with --failed"},
		{"pg-port without pg-host", []string{"restart", "db", "--rolling", "--pg-port", "5433", "--yes"}, "--pg-port only applies with --pg-host"},
		{"ca without verify", []string{"restart", "db", "--rolling", "--pg-sslmode", "disable", "--pg-ca-secret", "ca", "--yes"}, "--pg-ca-secret only applies with --pg-sslmode verify-ca or verify-full (got disable)"},
		{"crate flag on a generic cluster", []string{"restart", "db", "--rolling", "--health-checks", "5", "--yes"}, "--health-checks is for CrateDB clusters; cluster db is generic"},
		{"crate flag on replace", []string{"replace", "db", "db-hot-0", "--pg-host", "h", "--yes"}, "--pg-host is for CrateDB clusters"},
		{"etcd flag on a generic cluster", []string{"restart", "db", "--rolling", "--etcd-auth-secret", "s", "--yes"}, "--etcd-auth-secret is for etcd clusters; cluster db is generic"},
		{"unknown command", []string{"restrat", "db"}, `unknown command "restrat" for "kubectl dbops"; allowed: `},
		{"unknown shell", []string{"completion", "tcsh"}, `unknown command "tcsh" for "kubectl dbops completion"; allowed: bash, fish, powershell, zsh`},
		{"missing kubeconfig", []string{"status", "db", "--kubeconfig", "/nonexistent/kubeconfig"}, "kubeconfig /nonexistent/kubeconfig does not exist"},
		{"missing kubeconfig, mutating", []string{"restart", "db", "--rolling", "--yes", "--kubeconfig", "/nonexistent/kubeconfig"}, "kubeconfig /nonexistent/kubeconfig does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
			r := h.run(tt.args...)
			if r.code != ops.ExitUsage {
				t.Fatalf("exit %d, want 2; stderr: %s; stdout: %.200s", r.code, r.err, r.out)
			}
			if strings.Count(r.err, "\n") != 1 || !strings.Contains(r.err, tt.want) {
				t.Errorf("stderr = %q, want one line containing %q", r.err, tt.want)
			}
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("bad input wrote to the API: %v", w)
			}
		})
	}
}

// A run asks, while discovery runs, what it asks whatever discovery finds: the lock's lease
// and the engine-independent permission reviews, once discovery's first request was answered
// (on its connection, not each on a connection of its own). The stand-in API server answers
// discovery's pod list only once it has seen both (else after 10s), so a run that asks them
// only after discovery fails, and one that sends them before the StatefulSet list was
// answered fails too.
func TestRunAsksAheadWhileDiscovering(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	var problems []string
	both := make(chan struct{})
	note := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		if !seen["sts answered"] {
			problems = append(problems, what+" sent before discovery's first answer")
		}
		seen[what] = true
		if seen["lease"] && seen["review"] && !seen["both"] {
			seen["both"] = true
			close(both)
		}
	}
	var stsList appsv1.StatefulSetList
	for _, o := range fakecluster.Objects("prod", "db", "", webObjects()...) {
		if sts, ok := o.(*appsv1.StatefulSet); ok {
			stsList.Items = append(stsList.Items, *sts)
		}
	}
	stsList.APIVersion, stsList.Kind = "apps/v1", "StatefulSetList"
	var early atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/apis/coordination.k8s.io/v1/namespaces/prod/leases/dbops-db":
			note("lease")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		case r.Method == http.MethodPost && r.URL.Path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
			body, _ := io.ReadAll(r.Body)
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil) // JSON or protobuf
			review, ok := obj.(*authorizationv1.SelfSubjectAccessReview)
			if err != nil || !ok {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			if review.Spec.ResourceAttributes != nil && review.Spec.ResourceAttributes.Resource == "leases" {
				note("review")
			}
			review.Status.Allowed = true
			review.APIVersion, review.Kind = "authorization.k8s.io/v1", "SelfSubjectAccessReview"
			_ = json.NewEncoder(w).Encode(review)
		case r.URL.Path == "/apis/apps/v1/namespaces/prod/statefulsets":
			mu.Lock()
			seen["sts answered"] = true
			mu.Unlock()
			_ = json.NewEncoder(w).Encode(&stsList)
		case r.URL.Path == "/api/v1/namespaces/prod/pods":
			select {
			case <-both:
				early.Store(true)
			case <-time.After(10 * time.Second):
			}
			_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","items":[]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		}
	}))
	defer srv.Close()
	h := newHarness(t)
	h.runWith(func(g *GlobalOptions) {
		g.NewClients = func() (*Clients, error) {
			cfg, answered := &rest.Config{Host: srv.URL}, newFirstAnswer()
			cfg.Wrap(answered.WrapTransport)
			cs, err := kubernetes.NewForConfig(cfg)
			return &Clients{Kube: cs, Clock: h.clock, answered: answered}, err
		}
	}, "restart", "db", "--rolling", "--yes", "--lock-id", "ci@test")
	if !early.Load() {
		t.Errorf("the lease read and the lock's permission review were not sent while discovery ran (seen: %v)", seen)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("%v", problems)
	}
}

// A run reads the lock's lease once before it takes the lock: the journal check before
// planning (scale, replace), the one before the prompt and the acquisition share that read.
// (The fake clientset sets no resourceVersion, so the held lock reads again after it.)
func TestRunReadsTheLeaseOnce(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	fakecluster.Start(t, h.client, "prod")
	if r := h.run("restart", "db", "--rolling", "--yes", "--lock-id", "ci@test"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var calls []string
	for _, a := range h.client.Actions() {
		if a.GetResource().Resource == "leases" {
			calls = append(calls, a.GetVerb())
		}
	}
	if len(calls) < 2 || calls[0] != "get" || calls[1] != "create" {
		t.Errorf("lease calls %v, want one get, then the create that takes the lock", calls)
	}
}
