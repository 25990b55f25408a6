//go:build e2e

package testbed

import (
	"bytes"
	"os"
	"strings"
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
		checkAuditLog(t, tb)
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

// checkAuditLog makes an exec request whose argv holds a marker and checks that the audit log
// records it in the request URI, as a real cluster's audit log would.
func checkAuditLog(t *testing.T, tb *Testbed) {
	t.Helper()
	const marker = "audit-marker-4f1c9"
	// The pod does not exist: the request is still authenticated, authorised and audited.
	err := tb.Client.CoreV1().RESTClient().Post().
		Namespace("default").Resource("pods").Name("no-such-pod").SubResource("exec").
		Param("command", "echo").Param("command", marker).Param("stdout", "true").
		Do(t.Context()).Error()
	if err == nil {
		t.Fatal("exec into a missing pod succeeded")
	}
	events, err := tb.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range events {
		if ev.ObjectRef != nil && ev.ObjectRef.Subresource == "exec" && ev.ObjectRef.Name == "no-such-pod" {
			if !strings.Contains(ev.RequestURI, "command="+marker) || !bytes.Contains(ev.Raw, []byte(marker)) {
				t.Errorf("exec audit event without the argv in its URI: %s", ev.Raw)
			}
			if ev.Verb != "create" || ev.User.Username == "" {
				t.Errorf("exec audit event: verb %q user %q", ev.Verb, ev.User.Username)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("no exec audit event among %d events in %s", len(events), tb.AuditLogPath())
	}
}
