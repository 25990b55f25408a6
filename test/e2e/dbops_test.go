//go:build e2e

package e2e

// End-to-end tests of kubectl-dbops operations: the real binary against the testbed.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

const webCluster = "web"

// webPods are the pods of the 3-replica test cluster, in ordinal order.
var webPods = []string{"web-0", "web-1", "web-2"}

// checkRestartOrder checks the pod watch of a rolling restart: each pod in names (in this order) was
// restarted exactly once — the only serving (once Ready) incarnation deleted is the one it had in
// old —, and pod N+1 was first touched only after pod N was back with a new UID and Ready.
//
// A replacement that is deleted before it was ever Ready is not counted as a restart: the
// StatefulSet controller occasionally deletes and recreates a fresh pod on the testbed. That it
// was not the tool is proved from the API server's audit log (notToolDeleted), not assumed.
func checkRestartOrder(t *testing.T, changes []podTransition, names []string, old map[string]types.UID) {
	t.Helper()
	served := map[types.UID]bool{} // UIDs seen Ready (the original pods were Ready at the start)
	for _, uid := range old {
		served[uid] = true
	}
	for _, c := range changes {
		if c.Ready {
			served[c.UID] = true
		}
	}
	dump := func() string {
		var b strings.Builder
		for _, c := range changes {
			b.WriteString("  " + c.String() + "\n")
		}
		return b.String()
	}
	prevReady := -1 // seq at which the previous pod's replacement was Ready
	var ignored []podTransition
	for _, name := range names {
		deleted, ready := -1, -1
		deletedUIDs := map[types.UID]bool{}
		for _, c := range changes {
			if c.Name != name {
				continue
			}
			if c.Terminating && !served[c.UID] {
				if c.Type == watch.Deleted {
					ignored = append(ignored, c)
				}
				continue
			}
			if c.Terminating {
				deletedUIDs[c.UID] = true
				if deleted < 0 {
					deleted = c.Seq
				}
			}
			if ready < 0 && deleted >= 0 && c.UID != old[name] && c.Ready && !c.Terminating {
				ready = c.Seq
			}
		}
		switch {
		case deleted < 0:
			t.Errorf("pod %s was never deleted; pod watch:\n%s", name, dump())
			continue
		case len(deletedUIDs) != 1 || !deletedUIDs[old[name]]:
			t.Errorf("pod %s: deleted UIDs %v, want exactly its original UID %s (each pod restarted once); pod watch:\n%s", name, uidKeys(deletedUIDs), old[name], dump())
		case ready < 0:
			t.Errorf("pod %s never came back Ready with a new UID; pod watch:\n%s", name, dump())
			continue
		}
		if deleted < prevReady {
			t.Errorf("pod %s was deleted (event #%d) before the previous pod's replacement was Ready (event #%d); pod watch:\n%s", name, deleted, prevReady, dump())
		}
		prevReady = ready
	}
	for _, c := range ignored {
		by, err := notToolDeleted(changes, c)
		if err != nil {
			t.Errorf("%v; pod watch:\n%s", err, dump())
			continue
		}
		t.Logf("pod %s: replacement uid %s was deleted before it was ever Ready, by %s (audit log), not by kubectl-dbops; not counted as a restart", c.Name, c.UID, by)
	}
}

// notToolDeleted proves from the API server's audit log that the pod incarnation whose
// watch.Deleted event is gone was deleted by another client than kubectl-dbops, and returns
// that client's user agent (all clients of the test bed authenticate as one admin user; the
// plugin's user agent is "kubectl-dbops/<version>", internal/commands/factory.go). The audit
// log at Metadata level names the pod but not its UID, so the incarnation is found by time:
// between the previous incarnation's last watch event (the API server had removed it, and the
// StatefulSet controller creates the next one only after that) and gone's own deletion, the
// name belonged to gone alone. Every successful DELETE of that name then deleted gone; none
// may come from kubectl-dbops and at least one must come from someone.
func notToolDeleted(changes []podTransition, gone podTransition) (string, error) {
	from := time.Time{}
	for _, c := range changes {
		if c.Seq >= gone.Seq {
			break
		}
		if c.Name == gone.Name && c.Namespace == gone.Namespace && c.UID != gone.UID {
			from = c.At // the last event of an earlier incarnation
		}
	}
	events, err := bed.AuditEvents()
	if err != nil {
		return "", fmt.Errorf("who deleted pod %s/%s uid %s: %w", gone.Namespace, gone.Name, gone.UID, err)
	}
	var others []string
	for _, e := range events {
		if e.Verb != "delete" || e.ObjectRef == nil || e.ObjectRef.Resource != "pods" || e.ObjectRef.Subresource != "" ||
			e.ObjectRef.Namespace != gone.Namespace || e.ObjectRef.Name != gone.Name ||
			e.ResponseStatus == nil || e.ResponseStatus.Code/100 != 2 ||
			!e.RequestReceived.After(from) || e.RequestReceived.After(gone.At) {
			continue
		}
		if strings.HasPrefix(e.UserAgent, "kubectl-dbops/") {
			return "", fmt.Errorf("pod %s/%s: uid %s, never Ready, was deleted by kubectl-dbops (audit: %s)", gone.Namespace, gone.Name, gone.UID, e.Raw)
		}
		others = append(others, e.UserAgent)
	}
	if len(others) == 0 {
		return "", fmt.Errorf("pod %s/%s: uid %s was deleted (watch, %s) but the audit log has no successful DELETE of it since %s",
			gone.Namespace, gone.Name, gone.UID, gone.At.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano))
	}
	return strings.Join(slices.Compact(slices.Sorted(slices.Values(others))), ", "), nil
}

// TestNotToolDeleted proves the audit check of checkRestartOrder can fail: a pod deleted by a
// client whose user agent is the plugin's is reported, one deleted by another client is not.
func TestNotToolDeleted(t *testing.T) {
	ns := newNamespace(t)
	pods := recordPodWatch(t, ns)
	for i, tc := range []struct {
		agent   string
		wantErr bool
	}{
		{"statefulset-probe/v0", false},
		{"kubectl-dbops/e2e-probe", true},
	} {
		cfg := rest.CopyConfig(bed.RESTConfig)
		cfg.UserAgent = tc.agent
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.local/pause:dev"}},
				// Never scheduled, so the delete removes it at once.
				NodeSelector: map[string]string{"dbops.test/no-such-node": "true"}}}
		created, err := bed.Client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().Pods(ns).Delete(t.Context(), "probe", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		err = pods.waitUntil(ctx, func(evs []recordedEvent) bool {
			for _, c := range podTransitions(evs) {
				if c.UID == created.UID && c.Type == watch.Deleted {
					return true
				}
			}
			return false
		})
		cancel()
		if err != nil {
			t.Fatalf("round %d: no Deleted event for the probe pod: %v", i, err)
		}
		changes := podTransitions(pods.snapshot())
		gone := changes[len(changes)-1]
		by, err := notToolDeleted(changes, gone)
		switch {
		case tc.wantErr && (err == nil || !strings.Contains(err.Error(), "deleted by kubectl-dbops")):
			t.Errorf("deleted as %s: notToolDeleted = %q, %v; want an error naming kubectl-dbops", tc.agent, by, err)
		case !tc.wantErr && (err != nil || by != tc.agent):
			t.Errorf("deleted as %s: notToolDeleted = %q, %v; want %q", tc.agent, by, err, tc.agent)
		}
	}
}

func uidKeys[K comparable, V any](m map[K]V) []K {
	var out []K
	for k := range m {
		out = append(out, k)
	}
	return out
}

func uidsByName(pods []*corev1.Pod) map[string]types.UID {
	m := map[string]types.UID{}
	for _, p := range pods {
		m[p.Name] = p.UID
	}
	return m
}

// waitReplacementsReady waits until the pod watch has seen every named pod Ready under a UID
// other than its original one (the command may exit before our watch delivers the last event).
func waitReplacementsReady(t *testing.T, pods *watchRecorder, names []string, old map[string]types.UID) []podTransition {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	err := pods.waitUntil(ctx, func(evs []recordedEvent) bool {
		back := map[string]bool{}
		for _, c := range podTransitions(evs) {
			if c.UID != old[c.Name] && c.Ready && !c.Terminating {
				back[c.Name] = true
			}
		}
		for _, n := range names {
			if !back[n] {
				return false
			}
		}
		return true
	})
	changes := podTransitions(pods.snapshot())
	if err != nil {
		t.Fatalf("waiting for the replacements of %v to be Ready: %v; seen: %v", names, err, changes)
	}
	return changes
}

// restartEvents returns the DbopsRestartPod events of the namespace by pod name.
func restartEvents(t *testing.T, ns string) map[string][]corev1.Event {
	t.Helper()
	list, err := bed.Client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "reason=DbopsRestartPod"})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	out := map[string][]corev1.Event{}
	for _, e := range list.Items {
		out[e.InvolvedObject.Name] = append(out[e.InvolvedObject.Name], e)
	}
	return out
}

// describedRestartEvents returns the DbopsRestartPod events `kubectl describe pod` shows for
// the pod's live incarnation.
func describedRestartEvents(t *testing.T, ns, name string) (types.UID, []corev1.Event) {
	t.Helper()
	return describedPodEvents(t, ns, name, "DbopsRestartPod")
}

// describedPodEvents returns the events with reason that `kubectl describe pod` shows for the
// pod's live incarnation: describe lists the namespace's events by field selector on the
// involved object's name, namespace and UID (the kind left out), so only events on that UID.
func describedPodEvents(t *testing.T, ns, name, reason string) (types.UID, []corev1.Event) {
	t.Helper()
	pod, err := bed.Client.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	sel := fields.Set{"involvedObject.name": name, "involvedObject.namespace": ns, "involvedObject.uid": string(pod.UID)}
	list, err := bed.Client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		t.Fatalf("list events of pod %s: %v", name, err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return pod.UID, out
}

// checkReplaceEvents asserts the audit trail of a replacement: each pod of old (name -> the
// UID it had before) has exactly one event with reason (DbopsReplacePod, DbopsEtcdReplace),
// on its new incarnation, where `kubectl describe pod` finds it, from kubectl-dbops, naming a
// lock ID, the old UID and the pod's replaced PVC data-<pod>.
func checkReplaceEvents(t *testing.T, ns, reason string, old map[string]types.UID) {
	t.Helper()
	all := eventsByReason(t, ns)[reason]
	for _, name := range slices.Sorted(maps.Keys(old)) {
		if n := len(all[name]); n != 1 {
			t.Errorf("pod %s has %d %s events, want 1: %+v", name, n, reason, all[name])
		}
		uid, got := describedPodEvents(t, ns, name, reason)
		if len(got) != 1 {
			t.Errorf("kubectl describe pod %s (uid %s) would show %d %s events, want 1", name, uid, len(got), reason)
			continue
		}
		e := got[0]
		if uid == old[name] || !strings.Contains(e.Message, string(old[name])) || !strings.Contains(e.Message, "PVC data-"+name) ||
			!strings.Contains(e.Message, "lock id ") || e.Source.Component != "kubectl-dbops" || e.Type != corev1.EventTypeNormal {
			t.Errorf("%s event of %s: %s from %q %q; want a Normal event from kubectl-dbops on the new incarnation, naming the old uid %s, PVC data-%s and the lock ID",
				reason, name, e.Type, e.Source.Component, e.Message, old[name], name)
		}
	}
}

// checkRestartEvents asserts one DbopsRestartPod Event per pod, naming the lock ID and the old
// UID, on the pod's new incarnation, where `kubectl describe pod` finds it after the restart.
func checkRestartEvents(t *testing.T, ns, lockID string, old map[string]types.UID) {
	t.Helper()
	evs := restartEvents(t, ns)
	for _, name := range slices.Sorted(maps.Keys(old)) {
		if n := len(evs[name]); n != 1 {
			t.Errorf("pod %s has %d DbopsRestartPod events, want 1: %+v", name, n, evs[name])
		}
		uid, got := describedRestartEvents(t, ns, name)
		if len(got) != 1 {
			t.Errorf("kubectl describe pod %s (uid %s) would show %d DbopsRestartPod events, want 1", name, uid, len(got))
			continue
		}
		e := got[0]
		if e.ReportingInstance != lockID && !strings.Contains(e.Message, lockID) {
			t.Errorf("DbopsRestartPod event of %s does not name lock ID %q: reportingInstance=%q message=%q", name, lockID, e.ReportingInstance, e.Message)
		}
		if e.InvolvedObject.Kind != "Pod" || !strings.Contains(e.Message, string(old[name])) || uid == old[name] {
			t.Errorf("DbopsRestartPod event of %s: %s %q; want on the Pod's new incarnation, naming its old uid %s", name, e.InvolvedObject.Kind, e.Message, old[name])
		}
		if e.Source.Component != "kubectl-dbops" {
			t.Errorf("DbopsRestartPod event of %s has source %q, want kubectl-dbops", name, e.Source.Component)
		}
	}
}

// Case 1: a generic rolling restart restarts each pod once, in ordinal order, waiting for each
// replacement to be Ready, under the cluster lock, with an audit Event per pod.
func TestRollingRestart(t *testing.T) {
	ns := newNamespace(t)
	old := uidsByName(createDBCluster(t, ns, webCluster, 3))
	lockID := defaultLockID(t)
	pods := recordPodWatch(t, ns)
	leases := recordLeaseWatch(t, ns)

	res := runCLI(t, cliEnv(t), "restart", webCluster, "-n", ns, "--rolling", "--yes", "--no-tui")
	if res.Code != 0 {
		t.Fatalf("want exit 0: %s", res)
	}
	for _, want := range []string{"lock acquired by " + lockID, "Plan: restart " + ns + "/" + webCluster, "lock released", "done: succeeded"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, res.Stdout)
		}
	}
	for line := range strings.Lines(res.Stdout) {
		// Plain lines start with an RFC 3339 timestamp; plan details are indented under them.
		if !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "20") {
			t.Errorf("plain output line without a timestamp: %q", line)
		}
	}

	changes := waitReplacementsReady(t, pods, webPods, old)
	checkRestartOrder(t, changes, webPods, old)
	for _, c := range changes {
		t.Logf("pod watch %s", c)
	}

	// The lock: seen held by our ID during the run, released at the end, journal succeeded.
	if !leaseHolderSeen("dbops-"+webCluster, lockID)(leases.snapshot()) {
		t.Errorf("the lease dbops-%s was never seen held by %s", webCluster, lockID)
	}
	lease, j := getLockLease(t, ns, webCluster)
	if h := holderString(lease.Spec.HolderIdentity); h != "" {
		t.Errorf("lock still held by %q after the run, want released", h)
	}
	if j.State != "succeeded" || j.Steps != 3 || len(j.Done) != 3 || j.Holder != lockID {
		t.Errorf("journal = %+v, want state succeeded, 3 steps done, holder %s", j, lockID)
	}
	checkRestartEvents(t, ns, lockID, old)
}

// Case 2: --dry-run computes the plan from live state and writes nothing.
func TestDryRunWritesNothing(t *testing.T) {
	ns := newNamespace(t)
	createDBCluster(t, ns, webCluster, 3)
	env := cliEnv(t)

	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, res cliResult)
	}{{
		name: "text",
		args: []string{"restart", webCluster, "-n", ns, "--rolling", "--dry-run"},
		check: func(t *testing.T, res cliResult) {
			for _, want := range append([]string{"Plan: restart " + ns + "/" + webCluster}, "pod/web-0", "pod/web-1", "pod/web-2") {
				if !strings.Contains(res.Stdout, want) {
					t.Errorf("plan lacks %q:\n%s", want, res.Stdout)
				}
			}
			if i0, i2 := strings.Index(res.Stdout, "pod/web-0"), strings.Index(res.Stdout, "pod/web-2"); i0 > i2 {
				t.Errorf("plan does not list pods in ordinal order:\n%s", res.Stdout)
			}
		},
	}, {
		name: "json",
		args: []string{"restart", webCluster, "-n", ns, "--rolling", "--dry-run", "-o", "json"},
		check: func(t *testing.T, res cliResult) {
			// NDJSON, as a run streams it: the plan event, then done with outcome dry-run.
			type planView struct {
				Operation string `json:"operation"`
				Steps     []struct {
					ID     string `json:"id"`
					Target string `json:"target"`
				} `json:"steps"`
			}
			var plan planView
			var lines []struct {
				Type    string    `json:"type"`
				Outcome string    `json:"outcome"`
				Plan    *planView `json:"plan"`
			}
			for line := range strings.Lines(res.Stdout) {
				var ev struct {
					Type    string    `json:"type"`
					Outcome string    `json:"outcome"`
					Plan    *planView `json:"plan"`
				}
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("dry-run -o json is not NDJSON: %v\n%s", err, res)
				}
				lines = append(lines, ev)
			}
			if len(lines) != 2 || lines[0].Type != "plan" || lines[0].Plan == nil || lines[1].Type != "done" || lines[1].Outcome != "dry-run" {
				t.Fatalf("dry-run -o json: want a plan event and done/dry-run, got %s", res.Stdout)
			}
			plan = *lines[0].Plan
			var targets []string
			for _, s := range plan.Steps {
				targets = append(targets, s.Target)
			}
			if want := []string{"pod/web-0", "pod/web-1", "pod/web-2"}; plan.Operation != "restart" || !slices.Equal(targets, want) {
				t.Errorf("plan = %s %v, want restart %v", plan.Operation, targets, want)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshotNamespace(t, ns)
			res := runCLI(t, env, tc.args...)
			if res.Code != 0 {
				t.Fatalf("want exit 0: %s", res)
			}
			tc.check(t, res)
			if diffs := diffRVSnapshots(t, before, snapshotNamespace(t, ns)); len(diffs) > 0 {
				t.Errorf("--dry-run changed the namespace:\n  %s", strings.Join(diffs, "\n  "))
			}
			if _, err := bed.Client.CoordinationV1().Leases(ns).Get(t.Context(), "dbops-"+webCluster, metav1.GetOptions{}); err == nil {
				t.Errorf("--dry-run created the lock lease")
			}
		})
	}
}

// Case 3: while one invocation runs, a second one is refused with exit 3 naming the holder,
// whether it uses another lock ID or the same (default) one from another process.
func TestConcurrentInvocationsAreLocked(t *testing.T) {
	tests := []struct {
		name       string
		firstID    string // "" = the default ID derived from the kubeconfig
		secondID   string
		wantStderr []string
	}{
		{name: "different-ids", firstID: "a", secondID: "b", wantStderr: []string{"is locked by a (restart --rolling) until "}},
		{name: "same-default-id", wantStderr: []string{"is locked by another kubectl-dbops session of " + defaultLockID(t) + " (restart --rolling)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			old := uidsByName(createDBCluster(t, ns, webCluster, 3))
			pods := recordPodWatch(t, ns)
			leases := recordLeaseWatch(t, ns)
			env := cliEnv(t)
			args := func(id string) []string {
				a := []string{"restart", webCluster, "-n", ns, "--rolling", "--yes", "-o", "json"}
				if id != "" {
					a = append(a, "--lock-id", id)
				}
				return a
			}
			firstID := tc.firstID
			if firstID == "" {
				firstID = defaultLockID(t)
			}

			first := startCLI(t, env, args(tc.firstID)...)
			ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
			defer cancel()
			if err := leases.waitUntil(ctx, leaseHolderSeen("dbops-"+webCluster, firstID)); err != nil {
				t.Fatalf("the first invocation never held the lock: %v\n%s", err, first.wait())
			}
			// Freeze the first invocation while it holds the lock, so the second one
			// deterministically meets a live holder however fast the restart would be.
			if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatalf("SIGSTOP: %v", err)
			}
			if l, err := bed.Client.CoordinationV1().Leases(ns).Get(t.Context(), "dbops-"+webCluster, metav1.GetOptions{}); err != nil || holderString(l.Spec.HolderIdentity) != firstID {
				_ = first.cmd.Process.Signal(syscall.SIGCONT)
				t.Fatalf("the first invocation no longer holds the lock once frozen (get: %v); test inconclusive:\n%s", err, first.wait())
			}
			second := runCLI(t, env, args(tc.secondID)...)
			if err := first.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatalf("SIGCONT: %v", err)
			}
			firstRes := first.wait()

			if second.Code != 3 {
				t.Errorf("second invocation: want exit 3 (lock held): %s", second)
			}
			stderr := strings.TrimSpace(second.Stderr)
			for _, want := range tc.wantStderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("second invocation's stderr lacks %q: %q", want, stderr)
				}
			}
			if strings.Count(stderr, "\n") != 0 || !strings.HasPrefix(stderr, "error: ") {
				t.Errorf("second invocation's stderr is not one error line: %q", stderr)
			}
			if started := stepsOf(parseNDJSON(t, second), "step-started"); len(started) != 0 {
				t.Errorf("the refused invocation started steps %v", started)
			}
			if firstRes.Code != 0 || lastOutcome(first.all) != "succeeded" {
				t.Errorf("first invocation: want exit 0 and outcome succeeded (outcome %s): %s", lastOutcome(first.all), firstRes)
			}
			// Exactly one proceeded: every pod restarted exactly once, by the first.
			checkRestartOrder(t, waitReplacementsReady(t, pods, webPods, old), webPods, old)
			lease, j := getLockLease(t, ns, webCluster)
			if j.State != "succeeded" || j.Holder != firstID || len(j.Done) != 3 {
				t.Errorf("journal = %+v, want succeeded by %s with 3 steps done", j, firstID)
			}
			if h := holderString(lease.Spec.HolderIdentity); h != "" {
				t.Errorf("lock still held by %q, want released", h)
			}
		})
	}
}

// podsStartIn makes the StatefulSet's pods take d to start (kwok), as real ones take a while.
func podsStartIn(d string) func(*appsv1.StatefulSet) {
	return func(s *appsv1.StatefulSet) {
		s.Spec.Template.Annotations = map[string]string{testbed.PodStartDelayAnnotation: d}
	}
}

// Case 6: SIGINT after the first restarted pod stops safely (exit 130, journal interrupted,
// lock released); re-running resumes without restarting that pod again.
func TestInterruptAndResume(t *testing.T) {
	ns := newNamespace(t)
	// Pods take 2s to start, as real ones take longer: the SIGINT sent on web-0's done then
	// lands while the run waits for web-1, which it deleted just before reporting web-0 done.
	old := uidsByName(createDBCluster(t, ns, webCluster, 3, podsStartIn("2s")))
	pods := recordPodWatch(t, ns)
	env := cliEnv(t)
	args := []string{"restart", webCluster, "-n", ns, "--rolling", "--yes", "-o", "json", "--lock-id", "e2e-interrupt"}

	run := startCLI(t, env, args...)
	first := run.waitEvent("the first step-done event", func(e ndEvent) bool { return e.Type == "step-done" })
	if first.stepID() != "restart/web-0" {
		t.Fatalf("first step done is %q, want restart/web-0", first.stepID())
	}
	if err := run.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("SIGINT: %v", err)
	}
	res := run.wait()
	if res.Code != 130 {
		t.Fatalf("interrupted run: want exit 130: %s", res)
	}
	if got := lastOutcome(run.all); got != "interrupted" {
		t.Errorf("interrupted run's last event outcome = %q, want interrupted", got)
	}
	if done := stepsOf(run.all, "step-done"); !slices.Equal(done, []string{"restart/web-0"}) {
		t.Errorf("interrupted run finished steps %v, want only restart/web-0", done)
	}
	lease, j := getLockLease(t, ns, webCluster)
	if j.State != "interrupted" || !slices.Equal(j.Done, []string{"restart/web-0"}) {
		t.Errorf("journal after SIGINT = %+v, want state interrupted with restart/web-0 done", j)
	}
	if h := holderString(lease.Spec.HolderIdentity); h != "" {
		t.Errorf("lock still held by %q after SIGINT, want released", h)
	}
	// `kubectl describe sts` shows the interruption, as a Warning naming the lock ID.
	opEvents := eventsByReason(t, ns)
	if got := opEvents["DbopsOperationInterrupted"][webCluster]; len(got) != 1 || got[0].Type != corev1.EventTypeWarning ||
		got[0].InvolvedObject.Kind != "StatefulSet" || !strings.Contains(got[0].Message, "lock id e2e-interrupt") {
		t.Errorf("DbopsOperationInterrupted events on StatefulSet %s = %+v, want one Warning naming lock id e2e-interrupt", webCluster, got)
	}
	if n := len(opEvents["DbopsOperationSucceeded"][webCluster]); n != 0 {
		t.Errorf("%d DbopsOperationSucceeded events after the interrupted run, want 0", n)
	}

	// Resume. The interrupted run may have deleted web-1 already (the action in flight
	// finishes); the re-run then finds it restarted. Either way no pod is restarted twice.
	res = runCLI(t, env, args...)
	if res.Code != 0 {
		t.Fatalf("re-run: want exit 0: %s", res)
	}
	evs := parseNDJSON(t, res)
	if got := lastOutcome(evs); got != "succeeded" {
		t.Errorf("re-run outcome = %q, want succeeded", got)
	}
	skipped := map[string]string{}
	for _, e := range evs {
		if e.Type == "step-skipped" {
			skipped[e.stepID()] = e.Reason
		}
	}
	if r, ok := skipped["restart/web-0"]; !ok || !strings.Contains(r, "earlier run") {
		t.Errorf("re-run did not skip restart/web-0 as done in an earlier run (skipped: %v)", skipped)
	}
	if started := stepsOf(evs, "step-started"); slices.Contains(started, "restart/web-0") {
		t.Errorf("re-run started restart/web-0 again (started %v)", started)
	}
	if !slices.Contains(stepsOf(evs, "step-done"), "restart/web-2") {
		t.Errorf("re-run did not restart web-2 (done %v)", stepsOf(evs, "step-done"))
	}
	changes := waitReplacementsReady(t, pods, webPods, old)
	checkRestartOrder(t, changes, webPods, old)
	for _, c := range changes {
		t.Logf("pod watch %s", c)
	}
	lease, j = getLockLease(t, ns, webCluster)
	if j.State != "succeeded" || len(j.Done) != 3 {
		t.Errorf("journal after re-run = %+v, want succeeded with 3 steps done", j)
	}
	if h := holderString(lease.Spec.HolderIdentity); h != "" {
		t.Errorf("lock still held by %q after re-run, want released", h)
	}
	checkRestartEvents(t, ns, "e2e-interrupt", old)
	opEvents = eventsByReason(t, ns)
	if n, m := len(opEvents["DbopsOperationStarted"][webCluster]), len(opEvents["DbopsOperationSucceeded"][webCluster]); n != 2 || m != 1 {
		t.Errorf("StatefulSet %s has %d DbopsOperationStarted (want 2: run and resume) and %d DbopsOperationSucceeded (want 1)", webCluster, n, m)
	}
}

// Case 7: bad input against the real API fails with exit 2 and one error line, changing
// nothing.
func TestBadInputChangesNothing(t *testing.T) {
	ns := newNamespace(t)
	createDBCluster(t, ns, webCluster, 3)
	env := cliEnv(t)
	tests := []struct {
		name   string
		args   []string
		stderr string // substring of the error line
	}{
		{"restart unknown cluster", []string{"restart", "nosuch", "-n", ns, "--rolling", "--yes"}, `no database cluster "nosuch"`},
		{"status unknown cluster", []string{"status", "nosuch", "-n", ns}, `no database cluster "nosuch"`},
		{"lock acquire unknown cluster", []string{"lock", "acquire", "nosuch", "-n", ns}, `nosuch`},
		{"unknown node group", []string{"restart", webCluster, "-n", ns, "--rolling", "--yes", "--group", "nope"}, `unknown node group "nope"`},
		{"no --yes without a terminal", []string{"restart", webCluster, "-n", ns, "--rolling"}, "--yes"},
		{"unknown flag", []string{"restart", webCluster, "-n", ns, "--rolling", "--yes", "--bogus"}, "bogus"},
		{"bad output format", []string{"status", webCluster, "-n", ns, "-o", "xml"}, "xml"},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.name, " ", "-"), func(t *testing.T) {
			before := snapshotNamespace(t, ns)
			res := runCLI(t, env, tc.args...)
			if res.Code != 2 {
				t.Errorf("want exit 2 (usage): %s", res)
			}
			stderr := strings.TrimSuffix(res.Stderr, "\n")
			if stderr == "" || strings.Contains(stderr, "\n") || !strings.HasPrefix(stderr, "error: ") {
				t.Errorf("stderr is not exactly one \"error: ...\" line: %q", res.Stderr)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q lacks %q", stderr, tc.stderr)
			}
			if res.Stdout != "" {
				t.Errorf("stdout is not empty: %q", res.Stdout)
			}
			if diffs := diffRVSnapshots(t, before, snapshotNamespace(t, ns)); len(diffs) > 0 {
				t.Errorf("a rejected command changed the namespace:\n  %s", strings.Join(diffs, "\n  "))
			}
		})
	}
}

// decodeOneJSON decodes one JSON document from s.
func decodeOneJSON(s string, v any) error {
	d := json.NewDecoder(strings.NewReader(s))
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("more than one JSON document")
	}
	return nil
}
