//go:build e2e

package e2e

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestFoundationDBDenyOperatorInstance: deny add … --operator-instance dc2 then deny allow: the
// CR's deny list holds {id: dc2} then {id: dc2, allow: true}; --dry-run leaves the
// resourceVersion unchanged; deny list and lock status show the CR's deny list.
func TestFoundationDBDenyOperatorInstance(t *testing.T) {
	ns := newNamespace(t)
	fdbSimFixture(t, ns, "myfdb")
	env := cliEnv(t)
	denyList := func() ([]any, string) {
		t.Helper()
		// The stand-in writes the status once it has reconciled a spec change: read the CR
		// once it has, so its resourceVersion stays until our next write.
		if err := waitCluster(t.Context(), ns, "myfdb", func(u *unstructured.Unstructured) bool {
			rec, _, _ := unstructured.NestedInt64(u.Object, "status", "generations", "reconciled")
			return rec == u.GetGeneration()
		}); err != nil {
			t.Fatal(err)
		}
		_, u := fdbGroups(t, ns)
		l, _, _ := unstructured.NestedSlice(u.Object, "spec", "lockOptions", "denyList")
		return l, u.GetResourceVersion()
	}
	_, rv := denyList()
	for _, action := range []string{"add", "allow"} {
		if r := runCLI(t, env, "deny", action, "myfdb", "--operator-instance", "dc2", "-n", ns, "--dry-run"); r.Code != 0 || !strings.Contains(r.Stdout, "would set") {
			t.Fatalf("dry-run %s: %s", action, r)
		}
		if _, now := denyList(); now != rv {
			t.Fatalf("--dry-run %s changed the resourceVersion %s -> %s", action, rv, now)
		}
		if r := runCLI(t, env, "deny", action, "myfdb", "--operator-instance", "dc2", "-n", ns, "--reason", "test"); r.Code != 0 {
			t.Fatalf("deny %s: %s", action, r)
		}
		want := []any{map[string]any{"id": "dc2"}}
		if action == "allow" {
			want = []any{map[string]any{"id": "dc2", "allow": true}}
		}
		l, now := denyList()
		if !reflect.DeepEqual(l, want) {
			t.Fatalf("after deny %s: denyList %v, want %v", action, l, want)
		}
		rv = now
		// Again: nothing to change, nothing written.
		if r := runCLI(t, env, "deny", action, "myfdb", "--operator-instance", "dc2", "-n", ns); r.Code != 0 || !strings.Contains(r.Stdout, "already set") {
			t.Fatalf("deny %s again: %s", action, r)
		}
		if _, again := denyList(); again != rv {
			t.Fatalf("a no-op deny %s wrote the CR", action)
		}
	}
	for _, args := range [][]string{{"deny", "list", "myfdb"}, {"lock", "status", "myfdb"}} {
		r := runCLI(t, env, append(args, "-n", ns)...)
		if r.Code != 0 || !strings.Contains(r.Stdout, "spec.lockOptions.denyList:   dc2 (allowed)") {
			t.Fatalf("%s: %s", strings.Join(args, " "), r)
		}
		r = runCLI(t, env, append(args, "-n", ns, "-o", "jsonpath={.foundationdbOperator.denyList[0].allow}")...)
		if r.Code != 0 || strings.TrimSpace(r.Stdout) != "true" {
			t.Fatalf("%s -o jsonpath: %s", strings.Join(args, " "), r)
		}
	}
	if r := runCLI(t, env, "deny", "add", "myfdb", "someone", "--operator-instance", "dc2", "-n", ns); r.Code != 2 {
		t.Fatalf("lock ID and --operator-instance: want exit 2: %s", r)
	}
}
