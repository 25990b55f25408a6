//go:build e2e

package e2e

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbop"
)

// TestFoundationDBLockPausesOperator: lock acquire --pause-operator sets spec.skip and records
// it on the Lease; release clears it. A skip someone else set is left set by both.
func TestFoundationDBLockPausesOperator(t *testing.T) {
	for _, preset := range []bool{false, true} {
		name := map[bool]string{false: "we pause", true: "already paused"}[preset]
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t)
			fdbSimFixture(t, ns, "myfdb")
			env := cliEnv(t)
			res := bed.Dynamic.Resource(fdbop.GVR).Namespace(ns)
			skip := func() bool {
				u, err := res.Get(t.Context(), "myfdb", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				s, _, _ := unstructured.NestedBool(u.Object, "spec", "skip")
				return s
			}
			if preset {
				u, err := res.Get(t.Context(), "myfdb", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				_ = unstructured.SetNestedField(u.Object, true, "spec", "skip")
				if _, err := res.Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if r := runCLI(t, env, "lock", "acquire", "myfdb", "-n", ns, "--lock-id", "alice", "--pause-operator", "--dry-run"); r.Code != 0 || skip() != preset {
				t.Fatalf("dry-run: skip %v: %s", skip(), r)
			}
			r := runCLI(t, env, "lock", "acquire", "myfdb", "-n", ns, "--lock-id", "alice", "--pause-operator")
			if r.Code != 0 || !skip() {
				t.Fatalf("acquire --pause-operator: skip %v: %s", skip(), r)
			}
			// Issue #41 item 6: the operator note printed a literal `\n` (an escaped newline).
			if strings.Contains(r.Stdout, `\n`) || !strings.HasSuffix(r.Stdout, "\n") {
				t.Fatalf("acquire --pause-operator output has a literal \\n or no final newline: %q", r.Stdout)
			}
			l, err := bed.Client.CoordinationV1().Leases(ns).Get(t.Context(), lock.LeaseName("myfdb"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rec := l.Annotations[lock.AnnotationPausedOperator]; (rec != "") == preset {
				t.Fatalf("pause recorded %q with skip preset %v", rec, preset)
			}
			// The pause is shown wherever the cluster is, with the exact command that ends it;
			// a restart refuses naming it.
			resume := "resume it with: kubectl dbops lock release myfdb -n " + ns + " --id alice"
			if preset {
				resume = "resume it with: kubectl patch foundationdbcluster myfdb -n " + ns + " --type merge"
			}
			for _, args := range [][]string{{"lock", "status", "myfdb", "-n", ns}, {"status", "myfdb", "-n", ns}} {
				if r := runCLI(t, env, args...); r.Code != 0 || !strings.Contains(r.Stdout, resume) {
					t.Fatalf("%v does not show the pause (%q): %s", args, resume, r)
				}
			}
			if r := runCLI(t, env, "list", "-n", ns); r.Code != 0 || !strings.Contains(r.Stdout, "(operator paused)") {
				t.Fatalf("list does not show the pause: %s", r)
			}
			if r := runCLI(t, env, "restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--lock-id", "alice", "--yes"); r.Code != 5 || !strings.Contains(r.Stderr, resume) {
				t.Fatalf("restart while paused: %s", r)
			}
			r = runCLI(t, env, "lock", "release", "myfdb", "-n", ns, "--lock-id", "alice")
			if r.Code != 0 || skip() != preset {
				t.Fatalf("release: skip %v, want %v: %s", skip(), preset, r)
			}
			if strings.Contains(r.Stdout, `\n`) {
				t.Fatalf("lock release output has a literal \\n: %q", r.Stdout)
			}
		})
	}
}
