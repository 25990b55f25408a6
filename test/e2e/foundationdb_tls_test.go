//go:build e2e

package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFoundationDBTLS: a FoundationDBCluster with spec.mainContainer.enableTls (processes on
// ip:4500:tls). restart --method process kills every process by its address without ":tls" (the
// key of fdbcli's kill list; the dry run shows the exact lines), then replace and scale finish on
// the same cluster.
func TestFoundationDBTLS(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixtureWith(t, ns, "myfdb", true)
	model := fdbModel(t, ns, b.Host)
	for _, p := range model.Processes() {
		if !strings.HasSuffix(p.Address, ":4500:tls") {
			t.Fatalf("process %s at %s: the fixture is not a TLS cluster", p.ID, p.Address)
		}
	}
	env := cliEnv(t)
	dry := runCLI(t, env, "restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--dry-run")
	kills := regexp.MustCompile(`fdbcli --exec '(kill; kill [^']*)'`).FindAllStringSubmatch(dry.Stdout, -1)
	if dry.Code != 0 || len(kills) != len(fdbZones(model, "")) {
		t.Fatalf("dry-run:\n%s", dry)
	}
	for _, k := range kills {
		if strings.Contains(k[1], ":tls") || !strings.Contains(k[1], ":4500") {
			t.Fatalf("kill line %q: want ip:4500 addresses without :tls", k[1])
		}
	}
	start := time.Now()
	r := runCLI(t, env, "restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--yes")
	if r.Code != 0 {
		t.Fatal(r)
	}
	for _, p := range model.Processes() {
		if !p.Started.After(start) {
			t.Fatalf("process %s (%s) not restarted by the run", p.ID, p.Address)
		}
	}
	checkMaintenanceDiscipline(t, model, fdbMutations(model), true)

	pods, err := bed.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-process-class=storage"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("storage pods: %v", err)
	}
	r = runCLI(t, env, "replace", "myfdb", pods.Items[0].Name, "-n", ns, "--yes", "-o", "json")
	if r.Code != 0 || lastOutcome(parseNDJSON(t, r)) != "succeeded" {
		t.Fatalf("replace on a TLS cluster: %s", r)
	}
	for _, n := range []int{4, 3} {
		r := runCLI(t, env, "scale", "myfdb", "--processes", "storage="+string(rune('0'+n)), "-n", ns, "--yes", "-o", "json")
		if r.Code != 0 || lastOutcome(parseNDJSON(t, r)) != "succeeded" {
			t.Fatalf("scale to %d on a TLS cluster: %s", n, r)
		}
		if g, m, p := fdbStorage(t, ns, model); g != n || m != 0 || p != n {
			t.Fatalf("after scale to %d: %d groups, %d marked, %d processes", n, g, m, p)
		}
	}
}
