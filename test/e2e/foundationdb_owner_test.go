//go:build e2e

package e2e

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A FoundationDBCluster's pods are owned by the operator's resource, not a StatefulSet:
// `restart --disable-locks` records its warning event on the FoundationDBCluster (it
// dereferenced the group's nil StatefulSet and crashed), and every operation-level audit event
// of a run names the FoundationDBCluster, never a StatefulSet with an empty name.
func TestFoundationDBAuditTargetsOperatorResource(t *testing.T) {
	ns := newNamespace(t)
	fdbSimFixture(t, ns, "myfdb")
	r := runCLI(t, cliEnv(t), "restart", "myfdb", "-n", ns, "--rolling", "--yes", "--disable-locks", "--lock-id", "oncall@test")
	if r.Code != 0 || !strings.Contains(r.Stderr, "WARNING: --disable-locks") || strings.Contains(r.Stderr, "panic") {
		t.Fatalf("restart --disable-locks: %s", r)
	}
	evs, err := bed.Client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, e := range evs.Items {
		io := e.InvolvedObject
		if io.Kind == "StatefulSet" {
			t.Errorf("event %s on StatefulSet %q: the cluster has none", e.Reason, io.Name)
		}
		if strings.HasPrefix(e.Reason, "Dbops") && io.Kind != "Pod" {
			if io.Kind != "FoundationDBCluster" || io.Name != "myfdb" || io.UID == "" {
				t.Errorf("event %s on %s/%s (uid %q), want FoundationDBCluster/myfdb with its UID", e.Reason, io.Kind, io.Name, io.UID)
			}
			reasons[e.Reason] = true
		}
	}
	for _, want := range []string{"DbopsLocksDisabled", "DbopsOperationStarted", "DbopsOperationSucceeded"} {
		if !reasons[want] {
			t.Errorf("no %s event on the FoundationDBCluster; got %v", want, reasons)
		}
	}
}
