//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/bedwire"
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

// checkEventCounts asserts the audit trail of `runs` runs of one operation under lockID: each
// pod has exactly one DbopsRestartPod event per run naming the lock ID, the last of them on its
// live incarnation (what `kubectl describe pod` shows), and each StatefulSet one
// DbopsOperationStarted and one DbopsOperationSucceeded per run naming the lock ID, and no
// failed, interrupted or timed-out operation. Events of other lock IDs (a bootstrap before)
// are not counted.
func checkEventCounts(t *testing.T, ns string, pods, sets []string, runs int, lockID string) {
	t.Helper()
	evs := eventsByReason(t, ns)
	mine := func(reason, name string) []corev1.Event {
		var out []corev1.Event
		for _, e := range evs[reason][name] {
			if strings.Contains(e.Message, "lock id "+lockID) {
				out = append(out, e)
			}
		}
		return out
	}
	for _, pod := range pods {
		if n := len(mine("DbopsRestartPod", pod)); n != runs {
			t.Errorf("pod %s has %d DbopsRestartPod events naming lock id %s, want %d (one per run)", pod, n, lockID, runs)
		}
		if uid, got := describedRestartEvents(t, ns, pod); len(got) != 1 || !strings.Contains(got[0].Message, "lock id "+lockID) {
			t.Errorf("kubectl describe pod %s (uid %s) would show %d DbopsRestartPod events, want the last run's one", pod, uid, len(got))
		}
	}
	for _, sts := range sets {
		for _, reason := range []string{"DbopsOperationStarted", "DbopsOperationSucceeded"} {
			got := mine(reason, sts)
			if len(got) != runs {
				t.Errorf("StatefulSet %s has %d %s events naming lock id %s, want %d", sts, len(got), reason, lockID, runs)
			}
			for _, e := range got {
				if e.InvolvedObject.Kind != "StatefulSet" || e.Type != corev1.EventTypeNormal {
					t.Errorf("%s event on %s %s (%s), want a Normal event on the StatefulSet", reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Type)
				}
			}
		}
		for _, reason := range []string{"DbopsOperationFailed", "DbopsOperationInterrupted", "DbopsOperationTimeout"} {
			if n := len(evs[reason][sts]); n != 0 {
				t.Errorf("StatefulSet %s has %d %s events, want none", sts, n, reason)
			}
		}
	}
}

// The audit trail of five rolling restarts, in every engine: none lost to name collisions,
// one per restarted pod per run, the operation's start and success per StatefulSet per run.
const eventRuns = 5

// TestAuditEventsCountSteps: a generic cluster.
func TestAuditEventsCountSteps(t *testing.T) {
	ns := newNamespace(t)
	createDBCluster(t, ns, webCluster, 3)
	env := cliEnv(t)
	const lockID = "e2e-events"
	for i := range eventRuns {
		if res := runCLI(t, env, "restart", webCluster, "-n", ns, "--rolling", "--yes", "--no-tui", "--lock-id", lockID); res.Code != 0 {
			t.Fatalf("run %d: %s", i, res)
		}
	}
	checkEventCounts(t, ns, webPods, []string{webCluster}, eventRuns, lockID)
}

// TestAuditEventsEtcd: an etcd cluster of three members.
func TestAuditEventsEtcd(t *testing.T) {
	x := newEtcd(t, 3)
	x.waitHealthy(3)
	const lockID = "e2e-events-etcd"
	for i := range eventRuns {
		if res := runCLI(t, cliEnv(t), "restart", x.name, "-n", x.ns, "--rolling", "--yes", "--no-tui", "--lock-id", lockID); res.Code != 0 {
			t.Fatalf("run %d: %s", i, res)
		}
	}
	checkEventCounts(t, x.ns, []string{"etcd-0", "etcd-1", "etcd-2"}, []string{"etcd"}, eventRuns, lockID)
}

// TestAuditEventsCrateDB: a CrateDB cluster (simulator under kwok) of 3 masters and 2 data
// nodes, two StatefulSets.
func TestAuditEventsCrateDB(t *testing.T) {
	groups := []crateE2EGroup{{"master", 3, ""}, {"hot", 2, "0"}}
	x := newCrateEnvGroups(t, true, bedwire.LayoutPodName, groups)
	const lockID = "e2e-events-crate"
	for i := range eventRuns {
		res := runCLI(t, x.env, x.args("restart", "--rolling", "--yes", "--no-tui", "--lock-id", lockID,
			"--health-checks", "2", "--health-interval", "200ms")...)
		if res.Code != 0 {
			t.Fatalf("run %d: %s", i, res)
		}
	}
	var pods, sets []string
	for _, g := range groups {
		sets = append(sets, g.sts(x.name))
		for o := range int(g.replicas) {
			pods = append(pods, fmt.Sprintf("%s-%d", g.sts(x.name), o))
		}
	}
	checkEventCounts(t, x.ns, pods, sets, eventRuns, lockID)
	// The gate's events: allocation held to primaries before each delete (on the incarnation
	// deleted) and enabled again once the pod rejoined, on the new one, so `kubectl describe
	// pod` shows the last run's.
	evs := eventsByReason(t, x.ns)
	for _, pod := range pods {
		for _, reason := range []string{"DbopsAllocationPrimaries", "DbopsAllocationEnabled"} {
			if n := len(evs[reason][pod]); n != eventRuns {
				t.Errorf("pod %s has %d %s events, want %d", pod, n, reason, eventRuns)
			}
		}
		live, err := bed.Client.CoreV1().Pods(x.ns).Get(t.Context(), pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var onLive int
		for _, e := range evs["DbopsAllocationEnabled"][pod] {
			if e.InvolvedObject.UID == live.UID {
				onLive++
			}
		}
		if onLive != 1 {
			t.Errorf("pod %s (uid %s) has %d DbopsAllocationEnabled events on its live incarnation, want the last run's", pod, live.UID, onLive)
		}
	}
}

// TestAuditEventsReplicated: a replicated application of three pods, one primary (bootstrapped
// first, under another lock ID).
func TestAuditEventsReplicated(t *testing.T) {
	a := newReplApp(t, "app", 3, 3, func(a *replApp) string { return a.config(1) })
	for o, v := range []string{"5", "3", "1"} {
		a.setSeq(o, v)
	}
	if r := a.run("bootstrap", "app"); r.Code != 0 {
		t.Fatalf("bootstrap: %s", r)
	}
	const lockID = "e2e-events-repl"
	for i := range eventRuns {
		if r := a.run("restart", "app", "--rolling", "--lock-id", lockID); r.Code != 0 {
			t.Fatalf("run %d: %s", i, r)
		}
	}
	checkEventCounts(t, a.ns, []string{"app-0", "app-1", "app-2"}, []string{"app"}, eventRuns, lockID)
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
