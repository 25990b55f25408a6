//go:build e2e

package testbed

import (
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStartT starts a small second testbed through StartT and checks that Stop removes every
// trace. Needs the binaries: go test -tags e2e ./internal/testbed/
func TestStartT(t *testing.T) {
	var tb *Testbed
	t.Run("start", func(t *testing.T) {
		tb = StartT(t, Options{Nodes: 2, Zones: []string{"zone-x"}})
		nodes, err := tb.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != 2 {
			t.Fatalf("got %d nodes, want 2", len(nodes.Items))
		}
		for _, n := range nodes.Items {
			if n.Labels[ZoneLabel] != "zone-x" || !NodeReady(&n) {
				t.Errorf("node %s: zone %q ready %v", n.Name, n.Labels[ZoneLabel], NodeReady(&n))
			}
		}
		if _, err := os.Stat(tb.KubeconfigPath); err != nil {
			t.Fatal(err)
		}
		t.Logf("started in %s", tb.StartupDuration)
	})
	// The subtest's cleanup has run: processes and folder must be gone.
	if tb == nil {
		t.Fatal("no testbed")
	}
	for _, p := range tb.procs {
		if p.running() {
			t.Errorf("%s still running after cleanup", p.name)
		}
	}
	if _, err := os.Stat(tb.Dir); !os.IsNotExist(err) {
		t.Errorf("testbed dir %s not removed: %v", tb.Dir, err)
	}
}
