//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/bedwire"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// Kill-and-resume matrix: an operation is killed with SIGKILL at a seeded random point (after
// the j-th step event, plus a short random delay so some kills land mid-action), then run
// again, as a CI retry would. The re-run must succeed: a refused or failed resume is the bug
// the matrix exists to find, so it fails the test unless its reason is one of
// expectedRetryReasons (each logged, and counted per test). Invariants are checked after
// every point.
//
//	DBOPS_E2E_SEED=N          repeat a failing run (the seed is logged; without it every run
//	                          draws a fresh one from the clock, so CI tries new points each run)
//	DBOPS_E2E_KILL_POINTS=N   kill points per engine (default 10; more for a soak)

// killMatrixRNG returns the matrix's random source and how many kill points to try.
func killMatrixRNG(t *testing.T) (*rand.Rand, int) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DBOPS_E2E_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("DBOPS_E2E_SEED=%q: %v", s, err)
		}
		seed = v
	}
	points := 10
	if s := os.Getenv("DBOPS_E2E_KILL_POINTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("DBOPS_E2E_KILL_POINTS=%q: want a positive number", s)
		}
		points = v
	}
	t.Logf("kill matrix: seed %d, %d kill points (repeat with DBOPS_E2E_SEED=%d)", seed, points, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), points
}

// killedRun starts args (with -o json), kills the process with SIGKILL after the j-th step
// event (0 = right after the plan) and a random delay of up to 300 ms, and reports whether
// the kill happened before the run ended by itself.
func killedRun(t *testing.T, rng *rand.Rand, env []string, args ...string) (killed bool, point string) {
	t.Helper()
	run := startCLI(t, env, args...)
	steps := -1
	j := 0
	for {
		ev, ok := run.next()
		if !ok {
			break
		}
		switch ev.Type {
		case "plan":
			if ev.Plan != nil {
				steps = len(ev.Plan.Steps)
				j = rng.IntN(2*steps + 1)
			}
		case "step-started", "step-done", "step-skipped":
			j--
		default:
			continue
		}
		if steps >= 0 && j <= 0 {
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
			point = fmt.Sprintf("after %s %s", ev.Type, ev.stepID())
			_ = run.cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	res := run.wait()
	if res.Code != 0 && res.Code != -1 {
		t.Fatalf("run before the kill failed: %s", res)
	}
	return res.Code == -1, point
}

// retryReason is a documented reason for which a re-run after a kill may fail and be run
// again: not a bug of the resume.
type retryReason struct {
	code int
	// stderr is a substring of the refused run's error output.
	stderr string
	why    string
	// extraArgs are added to the next attempt.
	extraArgs []string
}

// expectedRetryReasons lists the only failures of a re-run that are retried. The matrix
// releases the killed run's lock session before re-running (lock release --lock-id), so a
// lock still held by another session of the matrix's own ID can only be the killed one
// until it counts as dead (its renewals stopped for the session timeout, a minute:
// internal/ops/lock Manager.otherSession): wait for that.
func expectedRetryReasons(lockID string) []retryReason {
	return []retryReason{{
		code:      ops.ExitLocked,
		stderr:    "is locked by another kubectl-dbops session of " + lockID,
		why:       "the killed run's lock session counts as alive until its renewals stop for the session timeout",
		extraArgs: []string{"--wait-for-lock=3m"},
	}}
}

// retryUntilDone re-runs args as a CI retry after a crash would: give up the dead run's
// lock session (lock release), then run again. Every failed re-run is logged with its
// reason; one whose reason is not in expectedRetryReasons fails the test at once, and so
// does a third expected one. A run that finished before the kill landed needs no retry.
func retryUntilDone(t *testing.T, env []string, cluster, ns, lockID string, killed bool, args ...string) {
	t.Helper()
	if !killed {
		return
	}
	if res := runCLI(t, env, "lock", "release", cluster, "-n", ns, "--lock-id", lockID); res.Code != 0 && !strings.Contains(res.Stderr, "is not locked") {
		t.Fatalf("lock release after the kill: %s", res)
	}
	// The kill may land after the run finished its work (journal succeeded) but before the
	// process exited: then there is nothing to resume, as `status` would show.
	if journalState(t, ns, cluster) == "succeeded" {
		t.Logf("  the killed run had already succeeded: no re-run")
		return
	}
	runArgs := args
	for attempt := 1; ; attempt++ {
		res := runCLI(t, env, runArgs...)
		if res.Code == 0 {
			for _, e := range parseNDJSON(t, res) {
				if strings.HasPrefix(e.Type, "step-") && e.Type != "step-progress" || e.Type == "warning" {
					t.Logf("  re-run: %s %s %s%s", e.Type, e.stepID(), e.Reason, e.Message)
				}
			}
			return
		}
		reason := lastLine(res.Stderr)
		var expected *retryReason
		for _, r := range expectedRetryReasons(lockID) {
			if res.Code == r.code && strings.Contains(res.Stderr, r.stderr) {
				expected = &r
				break
			}
		}
		if expected == nil {
			t.Fatalf("re-run %d after the kill failed (exit %d: %s), not an expected reason to retry: the resume is broken:\n%s", attempt, res.Code, reason, res)
		}
		t.Logf("  RETRY %d after the kill: exit %d: %s (expected: %s)", attempt, res.Code, reason, expected.why)
		if attempt == 3 {
			t.Fatalf("re-run %d after the kill failed: %s", attempt, res)
		}
		runArgs = append(slices.Clone(args), expected.extraArgs...)
	}
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestKillMatrixGenericRestart(t *testing.T) {
	rng, points := killMatrixRNG(t)
	ns := newNamespace(t)
	uids := uidsByName(createDBCluster(t, ns, webCluster, 3))
	pods := recordPodWatch(t, ns)
	env := cliEnv(t)
	const lockID = "e2e-kill-generic"
	args := []string{"restart", webCluster, "-n", ns, "--rolling", "--yes", "-o", "json", "--lock-id", lockID}
	for i := range points {
		from := len(pods.snapshot())
		killed, at := killedRun(t, rng, env, args...)
		t.Logf("point %d: killed=%v %s", i, killed, at)
		retryUntilDone(t, env, webCluster, ns, lockID, killed, args...)
		// Converged: every pod restarted exactly once in this point, never two down at once.
		waitReplacementsReady(t, pods, webPods, uids)
		evs := pods.snapshot()[from:]
		created := map[string]int{}
		for _, e := range evs {
			if p, ok := e.Obj.(*corev1.Pod); ok && e.Type == watch.Added {
				created[p.Name]++
			}
		}
		for _, n := range webPods {
			if created[n] != 1 {
				var hist []string
				for _, e := range evs {
					if p, ok := e.Obj.(*corev1.Pod); ok && p.Name == n {
						hist = append(hist, fmt.Sprintf("%s uid=%s deleting=%v ready=%v phase=%s", e.Type, p.UID, p.DeletionTimestamp != nil, testbed.PodReady(p), p.Status.Phase))
					}
				}
				t.Fatalf("point %d (%s): pod %s was created %d times, want exactly 1 (restarted once); its events:\n  %s",
					i, at, n, created[n], strings.Join(hist, "\n  "))
			}
		}
		if worst := maxUnavailable(pods.initialObjects(), pods.snapshot()[:from], evs, webPods); worst > 1 {
			var hist []string
			for _, e := range evs {
				if p, ok := e.Obj.(*corev1.Pod); ok {
					hist = append(hist, fmt.Sprintf("%s %s %s uid=%s deleting=%v ready=%v", e.At.Format("15:04:05.000"), e.Type, p.Name, p.UID, p.DeletionTimestamp != nil, testbed.PodReady(p)))
				}
			}
			t.Fatalf("point %d (%s): %d pods were unavailable at once; pod watch:\n  %s", i, at, worst, strings.Join(hist, "\n  "))
		}
		uids = currentUIDs(pods.snapshot(), webPods)
	}
}

// currentUIDs returns the UID each named pod has after the recorded events.
func currentUIDs(evs []recordedEvent, names []string) map[string]types.UID {
	out := map[string]types.UID{}
	for _, e := range evs {
		if p, ok := e.Obj.(*corev1.Pod); ok && slices.Contains(names, p.Name) && e.Type != watch.Deleted {
			out[p.Name] = p.UID
		}
	}
	return out
}

// initialObjects returns what the recorder's list returned.
func (r *watchRecorder) initialObjects() []runtime.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.initial)
}

// maxUnavailable replays the pod watch: the most pods at once that were missing, terminating
// or not Ready during evs, starting from the listed pods and the events before.
func maxUnavailable(initial []runtime.Object, before, evs []recordedEvent, names []string) int {
	up := map[string]bool{}
	apply := func(e recordedEvent) {
		p, ok := e.Obj.(*corev1.Pod)
		if !ok {
			return
		}
		up[p.Name] = e.Type != watch.Deleted && p.DeletionTimestamp == nil && testbed.PodReady(p)
	}
	for _, o := range initial {
		apply(recordedEvent{Type: watch.Added, Obj: o})
	}
	for _, e := range before {
		apply(e)
	}
	worst := 0
	for _, e := range evs {
		apply(e)
		down := 0
		for _, n := range names {
			if !up[n] {
				down++
			}
		}
		worst = max(worst, down)
	}
	return worst
}

func TestKillMatrixEtcdScale(t *testing.T) {
	rng, points := killMatrixRNG(t)
	x := newEtcd(t, 3)
	x.writeKeys("before", 10)
	// etcd-0 leads: scaling 3↔5 touches etcd-3 and etcd-4 only, so no run may cause an election.
	x.pinLeader("etcd-0")
	env := cliEnv(t)
	const lockID = "e2e-kill-etcd"
	for i := 0; i < points; i++ {
		n := int32(5)
		if i%2 == 1 {
			n = 3
		}
		args := []string{"scale", x.name, "-n", x.ns, "--replicas", strconv.Itoa(int(n)), "--yes", "-o", "json", "--lock-id", lockID}
		o := x.oracle()
		killed, at := killedRun(t, rng, env, args...)
		t.Logf("point %d (scale to %d): killed=%v %s", i, n, killed, at)
		retryUntilDone(t, env, x.name, x.ns, lockID, killed, args...)
		// No learner, no member without a pod, no PVC of a removed ordinal, keys all there,
		// and etcd elected no leader meanwhile.
		x.checkConverged(int(n))
		o.check(t, fmt.Sprintf("point %d", i), 0)
		x.checkKeys()
		x.writeKeys(fmt.Sprintf("point-%d", i), 3)
	}
}

// journalState is the state of the journal on the cluster's lock, "" when there is none.
func journalState(t *testing.T, ns, cluster string) string {
	t.Helper()
	l, err := bed.Client.CoordinationV1().Leases(ns).Get(t.Context(), "dbops-"+cluster, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatalf("get lock lease dbops-%s: %v", cluster, err)
	}
	var j leaseJournal
	if raw := l.Annotations["dbops.io/journal"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &j); err != nil {
			t.Fatalf("decode journal %q: %v", raw, err)
		}
	}
	return j.State
}

// TestKillMatrixCrateDB kills CrateDB scale (hot 3<->2) and rolling restarts (hot group) at
// random points and retries like CI. After every point: the goal is reached, green, the shards
// of every table (one with 0 replicas) neither missing nor under-replicated and as many copies
// as before, allocation enabled again and no exclusion left behind.
func TestKillMatrixCrateDB(t *testing.T) {
	rng, points := killMatrixRNG(t)
	x := newCrateEnvLayout(t, true, bedwire.LayoutPodName)
	x.sql(`CREATE TABLE doc.single (id TEXT) CLUSTERED INTO 4 SHARDS WITH (number_of_replicas = '0')`)
	x.waitGreen()
	before := x.shardState()
	const lockID = "e2e-kill-crate"
	for i := range points {
		var step []string
		switch i % 3 {
		case 0:
			step = []string{"scale", "--data", "hot=2"}
		case 1:
			step = []string{"scale", "--data", "hot=3"}
		default:
			step = []string{"restart", "--rolling", "--group", "hot", "--health-checks", "1", "--health-interval", "200ms"}
		}
		args := x.args(step[0], append(step[1:], "--yes", "-o", "json", "--lock-id", lockID)...)
		killed, at := killedRun(t, rng, x.env, args...)
		t.Logf("point %d (%s): killed=%v %s", i, strings.Join(step, " "), killed, at)
		retryUntilDone(t, x.env, x.name, x.ns, lockID, killed, args...)
		x.wantSameShards(fmt.Sprintf("point %d (%s, killed %s)", i, strings.Join(step, " "), at), before)
		if ex := x.exclusions(); ex != "" {
			t.Fatalf("point %d: allocation exclusions left: %q", i, ex)
		}
		if r := x.sql(`SELECT settings['cluster']['routing']['allocation']['enable'] FROM sys.cluster`); len(r.Rows) != 1 || fmt.Sprint(r.Rows[0][0]) != "all" {
			t.Fatalf("point %d: allocation not enabled again: %v", i, r.Rows)
		}
		if t.Failed() {
			return
		}
	}
}

// A SIGKILL after the run deleted a pod (web-1) and before it journaled that pod's step done
// leaves web-1's step current (web-0's done), with web-1's UID staged and web-1 gone. A retry
// right away, while web-1 is still coming back, resumes: the preflight and web-1's step do
// not refuse for the pod this request deleted, and no pod is deleted twice. A ResourceQuota
// in the test's namespace keeps the StatefulSet from recreating web-1 until the kill, so the
// kill lands in that window every time.
func TestKillBetweenNextDeleteAndDone(t *testing.T) {
	ns := newNamespace(t)
	old := uidsByName(createDBCluster(t, ns, webCluster, 3, podsStartIn("2s")))
	pods := recordPodWatch(t, ns)
	env := cliEnv(t)
	const lockID = "e2e-kill-between"
	args := []string{"restart", webCluster, "-n", ns, "--rolling", "--yes", "-o", "json", "--lock-id", lockID}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	podEvent := func(what string, cond func(p *corev1.Pod, typ watch.EventType) bool) {
		t.Helper()
		err := pods.waitUntil(ctx, func(evs []recordedEvent) bool {
			for _, e := range evs {
				if p, ok := e.Obj.(*corev1.Pod); ok && cond(p, e.Type) {
					return true
				}
			}
			return false
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}

	run := startCLI(t, env, args...)
	// web-0's new incarnation exists (and takes 2s to be Ready): from now on no pod of the
	// namespace can be created.
	podEvent("web-0's new incarnation", func(p *corev1.Pod, _ watch.EventType) bool { return p.Name == "web-0" && p.UID != old["web-0"] })
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "hold-pods", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}}}
	if _, err := bed.Client.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create quota: %v", err)
	}
	podEvent("web-1's old incarnation deleted", func(p *corev1.Pod, typ watch.EventType) bool {
		return p.Name == "web-1" && p.UID == old["web-1"] && (p.DeletionTimestamp != nil || typ == watch.Deleted)
	})
	_ = run.cmd.Process.Signal(syscall.SIGKILL)
	if res := run.wait(); res.Code != -1 {
		t.Fatalf("the run ended before the kill: %s", res)
	}
	_, j := getLockLease(t, ns, webCluster)
	if j.Current != "restart/web-1" || !slices.Equal(j.Done, []string{"restart/web-0"}) || j.Data["restart.uid/web-1"] != string(old["web-1"]) {
		t.Fatalf("journal after the kill: current %q, done %v, data %v; want web-1's step current, web-0's done, web-1's old UID staged", j.Current, j.Done, j.Data)
	}
	if err := bed.Client.CoreV1().ResourceQuotas(ns).Delete(ctx, quota.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete quota: %v", err)
	}

	// The retry, as CI would: give up the dead run's lock session, run again. web-1 is not back
	// and Ready for at least 2s.
	if res := runCLI(t, env, "lock", "release", webCluster, "-n", ns, "--lock-id", lockID); res.Code != 0 {
		t.Fatalf("lock release after the kill: %s", res)
	}
	res := runCLI(t, env, args...)
	if res.Code != 0 {
		t.Fatalf("re-run after the kill: %s", res)
	}
	evs := parseNDJSON(t, res)
	if skipped := stepsOf(evs, "step-skipped"); !slices.Contains(skipped, "restart/web-0") {
		t.Errorf("re-run skipped %v, want restart/web-0 (restarted by the killed run)", skipped)
	}
	changes := waitReplacementsReady(t, pods, webPods, old)
	checkRestartOrder(t, changes, webPods, old)
	created := map[string]int{}
	for _, e := range pods.snapshot() {
		if p, ok := e.Obj.(*corev1.Pod); ok && e.Type == watch.Added && p.UID != old[p.Name] {
			created[p.Name]++
		}
	}
	for _, n := range webPods {
		if created[n] != 1 {
			t.Errorf("pod %s was created %d times, want exactly 1 (restarted once)", n, created[n])
		}
	}
	if worst := maxUnavailable(pods.initialObjects(), nil, pods.snapshot(), webPods); worst > 1 {
		t.Errorf("%d pods were unavailable at once, want at most 1", worst)
	}
	if _, j := getLockLease(t, ns, webCluster); j.State != "succeeded" || len(j.Done) != 3 {
		t.Errorf("journal after the re-run = %+v, want succeeded with 3 steps done", j)
	}
}
