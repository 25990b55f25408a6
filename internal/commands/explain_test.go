package commands

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestExplain: a cluster a restart could start on exits 0 with every line ok; each blocked
// one exits 5 with the failing line and its fix; nothing is ever written (no lock taken).
func TestExplain(t *testing.T) {
	tests := []struct {
		name    string
		objs    func() []runtime.Object
		setup   func(t *testing.T, h *harness)
		args    []string
		code    int
		failing string // "[FAIL] <name>" line expected
		fix     string
	}{
		{name: "healthy", code: 0},
		{name: "lock held by someone else", setup: func(t *testing.T, h *harness) {
			if r := h.run("lock", "acquire", "db", "--id", "bob@test", "--reason", "INC-1"); r.code != 0 {
				t.Fatalf("acquire: %d %s", r.code, r.err)
			}
		}, code: ops.ExitPrecondition, failing: "lock", fix: "kubectl dbops deny add db bob@test -n prod"},
		{name: "denied lock ID", setup: func(t *testing.T, h *harness) {
			if r := h.run("deny", "add", "db", "alice@test", "--reason", "INC-2"); r.code != 0 {
				t.Fatalf("deny: %d %s", r.code, r.err)
			}
		}, code: ops.ExitPrecondition, failing: "lock", fix: "kubectl dbops deny allow db alice@test -n prod"},
		{name: "rbac", setup: func(t *testing.T, h *harness) { h.denied["delete pods"] = true },
			code: ops.ExitPrecondition, failing: "rbac", fix: "a Role in namespace prod"},
		{name: "pod not ready", objs: func() []runtime.Object {
			objs := fakecluster.Objects("prod", "db", "", webObjects()...)
			for _, o := range objs {
				if p, ok := o.(*corev1.Pod); ok && p.Name == "db-web-1" {
					p.Status.Conditions[0].Status = corev1.ConditionFalse
				}
			}
			return objs
		}, code: ops.ExitPrecondition, failing: "preflight", fix: "--rolling --dry-run"},
		{name: "operator owned", objs: func() []runtime.Object {
			objs := fakecluster.Objects("prod", "db", "", webObjects()...)
			for _, o := range objs {
				if s, ok := o.(interface{ GetLabels() map[string]string }); ok && s.GetLabels()["dbops.io/cluster"] == "db" {
					s.GetLabels()["app.kubernetes.io/managed-by"] = "some-operator"
				}
			}
			return objs
		}, code: ops.ExitPrecondition, failing: "operator-owned", fix: "--ignore-operator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := fakecluster.Objects("prod", "db", "", webObjects()...)
			if tt.objs != nil {
				objs = tt.objs()
			}
			h := newHarness(t, objs...)
			if tt.setup != nil {
				tt.setup(t, h)
			}
			h.client.ClearActions()
			r := h.run("explain", "db", "--lock-id", "alice@test")
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d: %s\n%s", r.code, tt.code, r.err, r.out)
			}
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("explain wrote: %v", w)
			}
			if tt.failing == "" {
				if strings.Contains(r.out, "[FAIL]") {
					t.Errorf("healthy cluster has a failed line:\n%s", r.out)
				}
				assertGolden(t, "explain-healthy.txt", r.out)
				return
			}
			if !strings.Contains(r.out, "[FAIL] "+tt.failing+" ") || !strings.Contains(r.out, "fix: ") || !strings.Contains(r.out, tt.fix) {
				t.Errorf("want failed line %q with fix %q:\n%s", tt.failing, tt.fix, r.out)
			}
			if strings.Count(r.out, "[FAIL]") != 1 {
				t.Errorf("want exactly one failed line:\n%s", r.out)
			}
			if !strings.Contains(r.err, "failed "+tt.failing) {
				t.Errorf("error line %q does not name %s", r.err, tt.failing)
			}
		})
	}
}

// TestExplainJSON: -o json is one document with canStart and typed checks, for pipelines.
func TestExplainJSON(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	h.denied["delete pods"] = true
	r := h.run("explain", "db", "-o", "json", "--lock-id", "alice@test")
	if r.code != ops.ExitPrecondition {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var ex Explanation
	if err := json.Unmarshal([]byte(r.out), &ex); err != nil {
		t.Fatalf("%v:\n%s", err, r.out)
	}
	if ex.CanStart || ex.For != "restart" || len(ex.Checks) == 0 {
		t.Fatalf("explanation = %+v", ex)
	}
	for _, c := range ex.Checks {
		if c.Name == "rbac" && (c.OK || c.Fix == "" || !strings.Contains(c.Detail, "delete pods")) {
			t.Errorf("rbac check = %+v", c)
		}
	}
}

// TestExplainFor: --for picks the procedure (its RBAC; no restart preflight for scale); an
// unknown one is exit 2 naming the allowed values, with no API call at all.
func TestExplainFor(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	r := h.run("explain", "db", "--for", "replace", "--lock-id", "alice@test")
	if r.code != 0 || !strings.Contains(r.out, "replace of prod/db (generic) could start now") || strings.Contains(r.out, "preflight") {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	h.client.ClearActions()
	r = h.run("explain", "db", "--for", "upgrade")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, "allowed: restart, scale, replace") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if a := h.client.Actions(); len(a) > 0 {
		t.Errorf("bad input called the API: %v", a)
	}
}

// TestExplainOneLinePerCause: a preflight refusal that repeats an engine line's failure (an
// FDB maintenance zone set by someone else fails both) is one failed line; a preflight
// refusal of its own keeps its line.
func TestExplainOneLinePerCause(t *testing.T) {
	zone := "zone zone-c is in maintenance, set by someone else (299 seconds remaining)"
	engineLines := []ops.Check{{Name: "operator-owned", OK: true, Detail: "no operator"},
		{Name: "maintenance-zone", Detail: zone, Fix: "fdbcli --exec 'maintenance off'"}}
	for _, tt := range []struct {
		name string
		pf   ops.Check
		want bool
	}{
		{"same cause", ops.Check{Name: "preflight", Detail: "preflight: " + zone + "; refusing to take it over"}, true},
		{"own cause", ops.Check{Name: "preflight", Detail: "pod db-web-1 is not Ready"}, false},
		{"ok line never repeats", ops.Check{Name: "preflight", Detail: "no operator"}, false},
	} {
		if got := repeatsFailed(engineLines, tt.pf); got != tt.want {
			t.Errorf("%s: repeatsFailed = %v, want %v", tt.name, got, tt.want)
		}
	}
}
