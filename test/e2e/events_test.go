//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// eventsByReason lists the namespace's events from kubectl-dbops, by reason and object name.
func eventsByReason(t *testing.T, ns string) map[string]map[string][]corev1.Event {
	t.Helper()
	list, err := bed.Client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	out := map[string]map[string][]corev1.Event{}
	for _, e := range list.Items {
		if e.Source.Component != "kubectl-dbops" {
			continue
		}
		if out[e.Reason] == nil {
			out[e.Reason] = map[string][]corev1.Event{}
		}
		out[e.Reason][e.InvolvedObject.Name] = append(out[e.Reason][e.InvolvedObject.Name], e)
	}
	return out
}

// TestAuditEventsCountSteps: over five rolling restarts of a generic cluster, each pod gets
// exactly one DbopsRestartPod event per run (none lost to name collisions), and the StatefulSet
// one DbopsOperationStarted and one DbopsOperationSucceeded per run, naming the lock ID, so
// `kubectl describe sts` shows the operations.
func TestAuditEventsCountSteps(t *testing.T) {
	const runs = 5
	ns := newNamespace(t)
	createDBCluster(t, ns, webCluster, 3)
	env := cliEnv(t)
	const lockID = "e2e-events"
	for i := range runs {
		if res := runCLI(t, env, "restart", webCluster, "-n", ns, "--rolling", "--yes", "--no-tui", "--lock-id", lockID); res.Code != 0 {
			t.Fatalf("run %d: %s", i, res)
		}
	}
	evs := eventsByReason(t, ns)
	for _, pod := range webPods {
		if n := len(evs["DbopsRestartPod"][pod]); n != runs {
			t.Errorf("pod %s has %d DbopsRestartPod events, want %d (one per run)", pod, n, runs)
		}
	}
	for _, reason := range []string{"DbopsOperationStarted", "DbopsOperationSucceeded"} {
		got := evs[reason][webCluster]
		if len(got) != runs {
			t.Errorf("StatefulSet %s has %d %s events, want %d", webCluster, len(got), reason, runs)
		}
		for _, e := range got {
			if e.InvolvedObject.Kind != "StatefulSet" || !strings.Contains(e.Message, "lock id "+lockID) {
				t.Errorf("%s event %+v: want one on the StatefulSet naming lock id %s", reason, e.InvolvedObject, lockID)
			}
		}
	}
}

// TestAuditEventsEtcd: an etcd rolling restart records one DbopsRestartPod per member and the
// operation's start and end on the StatefulSet.
func TestAuditEventsEtcd(t *testing.T) {
	x := newEtcd(t, 3)
	x.waitHealthy(3)
	if res := runCLI(t, cliEnv(t), "restart", x.name, "-n", x.ns, "--rolling", "--yes", "--no-tui"); res.Code != 0 {
		t.Fatalf("restart: %s", res)
	}
	evs := eventsByReason(t, x.ns)
	for _, pod := range []string{"etcd-0", "etcd-1", "etcd-2"} {
		if n := len(evs["DbopsRestartPod"][pod]); n != 1 {
			t.Errorf("pod %s has %d DbopsRestartPod events, want 1", pod, n)
		}
	}
	for _, reason := range []string{"DbopsOperationStarted", "DbopsOperationSucceeded"} {
		if n := len(evs[reason]["etcd"]); n != 1 {
			t.Errorf("StatefulSet etcd has %d %s events, want 1", n, reason)
		}
	}
}

// TestNDJSONPodsEvents: -o json streams the documented pods events (the pods table: name,
// group, ready, phase, node, zone, uid, restarts) while the operation runs, and done stays last.
func TestNDJSONPodsEvents(t *testing.T) {
	ns := newNamespace(t)
	createDBCluster(t, ns, webCluster, 3)
	res := runCLI(t, cliEnv(t), "restart", webCluster, "-n", ns, "--rolling", "--yes", "-o", "json")
	if res.Code != 0 {
		t.Fatalf("restart: %s", res)
	}
	var pods int
	for line := range strings.Lines(res.Stdout) {
		var ev struct {
			Type string `json:"type"`
			Pods []struct {
				Name, Group, Phase, Node, Zone, UID string
				Ready                               bool
			} `json:"pods"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if ev.Type == "pods" {
			pods++
			if len(ev.Pods) == 0 || ev.Pods[0].Name == "" || ev.Pods[0].UID == "" || ev.Pods[0].Group == "" {
				t.Errorf("pods event without the table: %s", line)
			}
		}
	}
	if pods == 0 {
		t.Errorf("no pods event in the NDJSON stream:\n%s", res.Stdout)
	}
	if got := lastOutcome(parseNDJSON(t, res)); got != "succeeded" {
		t.Errorf("last event outcome %q, want done/succeeded last", got)
	}
}
