//go:build e2e

package e2e

// End-to-end tests of the etcd engine against real etcd processes, one per
// pod (test/sim/etcdpods), driven through the ops API as the CLI does.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/etcd"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/discovery"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/etcdpods"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// etcdOpTimeout bounds one operation; the machine is slow and shared.
const etcdOpTimeout = 6 * time.Minute

// etcdEnv is one etcd cluster on the testbed.
type etcdEnv struct {
	t       *testing.T
	ns      string
	name    string
	runner  *etcdpods.Runner
	eng     *etcd.Engine
	etcdctl string
	keys    map[string]string
}

// newEtcd starts a cluster of n members named "etcd" in a new namespace,
// on loopback addresses the runner picks free.
func newEtcd(t *testing.T, n int32) *etcdEnv {
	t.Helper()
	ctx := t.Context()
	ns := newNamespace(t)
	bin, err := testbed.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	r, err := etcdpods.Start(ctx, etcdpods.Options{Bed: bed, Client: bed.Client, Namespace: ns, StatefulSet: "etcd", Logf: t.Logf})
	if err != nil {
		t.Fatalf("start etcd runner: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(r.LogDir(), "*.log"))
			for _, l := range logs {
				t.Logf("--- %s\n%s", filepath.Base(l), etcdTailFile(l, 8))
			}
		}
		if err := r.Stop(); err != nil {
			t.Errorf("stop runner: %v", err)
		}
	})
	sts, cm := r.Objects(n)
	if _, err := bed.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	x := &etcdEnv{t: t, ns: ns, name: "etcd", runner: r, etcdctl: filepath.Join(bin, "etcdctl"), keys: map[string]string{},
		eng: &etcd.Engine{Client: bed.Client, Exec: kube.APIExecutor{Config: bed.RESTConfig, Client: bed.Client},
			Options: etcd.Options{PollInterval: 500 * time.Millisecond}}}
	x.waitHealthy(int(n))
	return x
}

// etcdTailFile returns the last n lines of a file.
func etcdTailFile(path string, n int) string {
	out, err := exec.Command("tail", "-n", fmt.Sprint(n), path).Output()
	if err != nil {
		return err.Error()
	}
	return string(out)
}

func (x *etcdEnv) cluster() *ops.Cluster {
	x.t.Helper()
	c, err := discovery.Discover(x.t.Context(), bed.Client, discovery.Options{Namespace: x.ns, Name: x.name, Recognizers: etcd.Recognizers()})
	if err != nil {
		x.t.Fatalf("discover: %v", err)
	}
	if c.Engine != ops.EngineEtcd {
		x.t.Fatalf("discovered engine %q, want etcd", c.Engine)
	}
	return c
}

// waitHealthy waits until etcd itself, not the engine's Status, says n voting members are
// healthy and none is a learner (waitMembers).
func (x *etcdEnv) waitHealthy(n int) {
	x.t.Helper()
	x.waitMembers(n)
}

// memberID is the ID `member list` gives the member named pod (0: none).
func (x *etcdEnv) memberID(pod string) uint64 {
	x.t.Helper()
	ids, err := etcdMemberIDs(x.t.Context(), x.ctlTimeouts)
	if err != nil {
		x.t.Fatalf("member list: %v", err)
	}
	return ids[pod]
}

// oracle starts etcd's own verdict on the operation that follows (etcdOracle).
func (x *etcdEnv) oracle() *etcdOracle {
	x.t.Helper()
	return startEtcdOracle(x.t, x.ctlTimeouts)
}

// downAtOnce is the most members whose etcd processes were down at the same time since mark
// (len of the runner's Transitions then), among the pods whose process ran at mark. etcd shows
// a quorum loss shorter than an election timeout nowhere (no election, requests only stall; a
// rolling restart that took two of three pods at once here left the term and every request
// untouched): the runner's record of its processes does.
func (x *etcdEnv) downAtOnce(mark int) int {
	trs := x.runner.Transitions()
	up := map[string]bool{}
	for _, tr := range trs[:mark] {
		up[tr.Pod] = tr.Up
	}
	tracked := map[string]bool{}
	for pod, u := range up {
		tracked[pod] = u
	}
	worst := 0
	for _, tr := range trs[mark:] {
		up[tr.Pod] = tr.Up
		down := 0
		for pod := range tracked {
			if tracked[pod] && !up[pod] {
				down++
			}
		}
		worst = max(worst, down)
	}
	return worst
}

// pinLeader makes pod's member the leader, so scaling or replacing other members is designed
// to cause no election.
func (x *etcdEnv) pinLeader(pod string) {
	x.t.Helper()
	pinEtcdLeader(x.t, x.ctlTimeouts, pod)
}

// waitMembers waits until etcd itself, not the engine's Status, says the cluster converged
// on n members: `member list` has exactly the voters etcd-0..n-1, each once, no learner, each
// advertising the peer URL its pod's runner gives it, `endpoint health --cluster` finds every
// one healthy, and each member's pod exists.
func (x *etcdEnv) waitMembers(n int) {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), 3*time.Minute)
	defer cancel()
	var last string
	for {
		last = x.membersConverged(ctx, n)
		if last == "" {
			return
		}
		select {
		case <-ctx.Done():
			x.t.Fatalf("etcd did not converge on %d healthy voters: %s", n, last)
		case <-time.After(time.Second):
		}
	}
}

// membersConverged is "" when waitMembers' conditions hold, else what does not.
func (x *etcdEnv) membersConverged(ctx context.Context, n int) string {
	out, err := x.ctl(ctx, "member", "list", "-w", "json")
	if err != nil {
		return err.Error()
	}
	var ml struct {
		Members []struct {
			ID        uint64   `json:"ID"`
			Name      string   `json:"name"`
			PeerURLs  []string `json:"peerURLs"`
			IsLearner bool     `json:"isLearner"`
		} `json:"members"`
	}
	if err := json.Unmarshal(out, &ml); err != nil {
		return fmt.Sprintf("decode member list: %v", err)
	}
	if len(ml.Members) != n {
		return fmt.Sprintf("%d members, want %d: %s", len(ml.Members), n, out)
	}
	seen := map[string]bool{}
	for _, m := range ml.Members {
		var o int
		if _, err := fmt.Sscanf(m.Name, "etcd-%d", &o); err != nil || o < 0 || o >= n || m.Name != fmt.Sprintf("etcd-%d", o) {
			return fmt.Sprintf("member %x named %q, not one of etcd-0..%d", m.ID, m.Name, n-1)
		}
		switch {
		case m.IsLearner:
			return fmt.Sprintf("member %s (%x) is a learner", m.Name, m.ID)
		case seen[m.Name]:
			return fmt.Sprintf("two members named %s", m.Name)
		case !slices.Equal(m.PeerURLs, []string{x.runner.PeerURL(o)}):
			return fmt.Sprintf("member %s advertises %v, its pod's peer URL is %s", m.Name, m.PeerURLs, x.runner.PeerURL(o))
		}
		seen[m.Name] = true
		if _, err := bed.Client.CoreV1().Pods(x.ns).Get(ctx, m.Name, metav1.GetOptions{}); err != nil {
			return fmt.Sprintf("member %s has no pod: %v", m.Name, err)
		}
	}
	out, err = x.ctl(ctx, "endpoint", "health", "--cluster", "-w", "json")
	if err != nil {
		return err.Error()
	}
	var hs []struct {
		Endpoint string `json:"endpoint"`
		Health   bool   `json:"health"`
	}
	if err := json.Unmarshal(out, &hs); err != nil {
		return fmt.Sprintf("decode endpoint health: %v", err)
	}
	healthy := 0
	for _, h := range hs {
		if h.Health {
			healthy++
		}
	}
	if healthy != n {
		return fmt.Sprintf("%d of %d endpoints healthy: %s", healthy, n, out)
	}
	return ""
}

// ctl runs the local etcdctl against every address a member may have.
func (x *etcdEnv) ctl(ctx context.Context, args ...string) ([]byte, error) {
	return x.ctlTimeouts(ctx, "1s", "3s", args...)
}

func (x *etcdEnv) ctlTimeouts(ctx context.Context, dial, command string, args ...string) ([]byte, error) {
	full := append([]string{"--endpoints=" + x.runner.Endpoints(5), "--dial-timeout=" + dial, "--command-timeout=" + command}, args...)
	cmd := exec.CommandContext(ctx, x.etcdctl, full...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("etcdctl %s: %w: %s", strings.Join(args, " "), err, etcdLastLine(ee.Stderr))
		}
		return out, fmt.Errorf("etcdctl %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

func etcdLastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// writeKeys writes count new keys (retrying through leader changes).
func (x *etcdEnv) writeKeys(tag string, count int) {
	x.t.Helper()
	for i := range count {
		k, v := fmt.Sprintf("/e2e/%s/%d", tag, i), fmt.Sprintf("%s-value-%d", tag, i)
		var err error
		for try := 0; try < 5; try++ {
			if _, err = x.ctl(x.t.Context(), "put", k, v); err == nil {
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil {
			x.t.Fatalf("write %s: %v", k, err)
		}
		x.keys[k] = v
	}
}

// checkKeys reads back every key written so far with a linearizable read.
func (x *etcdEnv) checkKeys() {
	x.t.Helper()
	if err := x.verifyKeys(); err != nil {
		x.t.Fatal(err)
	}
}

func (x *etcdEnv) verifyKeys() error {
	out, err := x.ctl(x.t.Context(), "get", "/e2e/", "--prefix", "-w", "json")
	if err != nil {
		return fmt.Errorf("read keys: %w", err)
	}
	var resp struct {
		KVs []struct {
			Key   []byte `json:"key"`
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return fmt.Errorf("parse get: %w", err)
	}
	got := map[string]string{}
	for _, kv := range resp.KVs {
		got[string(kv.Key)] = string(kv.Value)
	}
	for k, v := range x.keys {
		if got[k] != v {
			return fmt.Errorf("key %s = %q, want %q (%d of %d keys read back)", k, got[k], v, len(got), len(x.keys))
		}
	}
	return nil
}

// executor runs plans as the CLI's execute() does: lock, journal, events.
func (x *etcdEnv) executor(rec ops.Sink) *ops.Executor {
	id := "e2e-etcd@testbed"
	return &ops.Executor{
		Locker: &lock.Manager{Client: bed.Client, Namespace: x.ns, Cluster: x.name, ID: id,
			Duration: 10 * time.Minute, Session: "e2e-session"},
		LockID:  id,
		Sink:    rec,
		Auditor: &ops.KubeAuditor{Client: bed.Client, Clock: ops.RealClock{}, Instance: id},
		Timeout: etcdOpTimeout,
	}
}

// scale plans and runs `scale --replicas n`.
func (x *etcdEnv) scale(ctx context.Context, n int32, sink ops.Sink) (*ops.Plan, error) {
	x.t.Helper()
	plan, err := x.eng.PlanScale(ctx, x.cluster(), ops.ScaleRequest{Replicas: &n})
	if err != nil {
		return nil, err
	}
	if sink == nil {
		sink = ops.SinkFunc(func(e ops.Event) { etcdLogEvent(x.t, e) })
	}
	return plan, x.executor(sink).Run(ctx, plan)
}

func etcdLogEvent(t *testing.T, e ops.Event) {
	switch e.Type {
	case ops.EventStepStarted, ops.EventStepSkipped, ops.EventStepFailed, ops.EventStepWaiting:
		msg := e.Reason + e.Error
		t.Logf("  %s %d/%d %s %s %s", e.Type, e.Step.Index, e.Step.Total, e.Step.ID, e.Step.Target, msg)
	case ops.EventWarning:
		t.Logf("  warning: %s", e.Message)
	}
}

// replicas reads the StatefulSet's spec.replicas.
func (x *etcdEnv) replicas() int32 {
	x.t.Helper()
	s, err := bed.Client.AppsV1().StatefulSets(x.ns).Get(x.t.Context(), x.name, metav1.GetOptions{})
	if err != nil {
		x.t.Fatal(err)
	}
	return *s.Spec.Replicas
}

// checkConverged asserts n voters, no learner, one pod and member per
// ordinal below n, and no PVC above.
func (x *etcdEnv) checkConverged(n int) {
	x.t.Helper()
	x.waitMembers(n)
	if got := x.replicas(); int(got) != n {
		x.t.Fatalf("replicas = %d, want %d", got, n)
	}
	pvcs, err := bed.Client.CoreV1().PersistentVolumeClaims(x.ns).List(x.t.Context(), metav1.ListOptions{})
	if err != nil {
		x.t.Fatal(err)
	}
	for _, p := range pvcs.Items {
		var o int
		if _, err := fmt.Sscanf(p.Name, "data-etcd-%d", &o); err == nil && o >= n && p.DeletionTimestamp == nil {
			x.t.Fatalf("PVC %s of a removed member is left", p.Name)
		}
	}
}

func TestEtcdScale(t *testing.T) {
	x := newEtcd(t, 3)
	x.writeKeys("initial", 20)
	// etcd-0 leads throughout: no step removes or restarts it, so no step may cause an election.
	x.pinLeader("etcd-0")
	for i, n := range []int32{5, 3, 1, 3} {
		o := x.oracle()
		start := time.Now()
		// Every key must be readable after every step, not only at the end.
		checked := 0
		sink := ops.SinkFunc(func(e ops.Event) {
			etcdLogEvent(t, e)
			if e.Type == ops.EventStepDone {
				checked++
				if err := x.verifyKeys(); err != nil {
					t.Errorf("after step %s: %v", e.Step.ID, err)
				}
			}
		})
		plan, err := x.scale(t.Context(), n, sink)
		if err != nil {
			t.Fatalf("scale to %d: %v", n, err)
		}
		t.Logf("scale to %d: %d steps in %s, keys read back after %d of them", n, len(plan.Steps), time.Since(start).Round(time.Second), checked)
		x.checkConverged(int(n))
		o.check(t, fmt.Sprintf("scale to %d", n), 0)
		x.checkKeys()
		x.writeKeys(fmt.Sprintf("after-%d-%d", i, n), 5)
		x.checkKeys()
	}
}

func TestEtcdScaleRefusals(t *testing.T) {
	x := newEtcd(t, 3)
	ctx := t.Context()
	one := int32(0)
	if _, err := x.eng.PlanScale(ctx, x.cluster(), ops.ScaleRequest{Replicas: &one}); ops.ExitCode(err) != ops.ExitUsage {
		t.Fatalf("scale to 0: got %v (exit %d), want a usage error", err, ops.ExitCode(err))
	}
	x.runner.Suspend("etcd-1")
	defer x.runner.Resume("etcd-1")
	two := int32(2)
	_, err := x.eng.PlanScale(ctx, x.cluster(), ops.ScaleRequest{Replicas: &two})
	if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), "etcd-1") {
		t.Fatalf("scale down with etcd-1 stopped: got %v (exit %d), want a precondition error naming etcd-1", err, ops.ExitCode(err))
	}
	t.Logf("refused: %v", err)
	if got := x.replicas(); got != 3 {
		t.Fatalf("replicas changed to %d", got)
	}
	x.runner.Resume("etcd-1")
	x.waitHealthy(3)
}

func TestEtcdRepair(t *testing.T) {
	x := newEtcd(t, 3)
	ctx := t.Context()
	x.writeKeys("before", 20)
	x.waitHealthy(3)
	old := x.memberID("etcd-2")
	// The member loses its data: PVC deleted, pod recreated.
	if err := bed.Client.CoreV1().PersistentVolumeClaims(x.ns).Delete(ctx, "data-etcd-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := bed.Client.CoreV1().Pods(x.ns).Delete(ctx, "etcd-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := bed.WaitPodsReady(ctx, x.ns, "app.kubernetes.io/instance=etcd", 3); err != nil {
		t.Fatal(err)
	}
	plan, err := x.eng.PlanRepair(ctx, x.cluster(), "etcd-2")
	if err != nil {
		t.Fatalf("plan repair: %v", err)
	}
	oldPod, err := bed.Client.CoreV1().Pods(x.ns).Get(ctx, "etcd-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// etcd-0 leads: the repair removes and re-adds etcd-2 only, so it may cause no election.
	x.pinLeader("etcd-0")
	o := x.oracle()
	err = x.executor(ops.SinkFunc(func(e ops.Event) { etcdLogEvent(t, e) })).Run(ctx, plan)
	if err != nil {
		t.Fatalf("repair: %v", err)
	}
	x.waitHealthy(3)
	o.check(t, "repair", 0)
	if m := x.memberID("etcd-2"); m == 0 || m == old {
		t.Fatalf("etcd-2 after repair: member ID %x (old ID %x), want a new voting member", m, old)
	}
	x.checkKeys()
	checkReplaceEvents(t, x.ns, "DbopsEtcdReplace", map[string]types.UID{"etcd-2": oldPod.UID})
}

func TestEtcdRollingRestart(t *testing.T) {
	x := newEtcd(t, 3)
	ctx := t.Context()
	x.writeKeys("before", 10)
	x.waitHealthy(3)
	leader := etcdLeaderName(t, x.ctlTimeouts)
	old := map[string]string{}
	pods, err := bed.Client.CoreV1().Pods(x.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		old[p.Name] = string(p.UID)
	}
	o, mark := x.oracle(), len(x.runner.Transitions())
	res := runCLI(t, cliEnv(t), "restart", x.name, "-n", x.ns, "--rolling", "--yes", "-o", "json")
	if res.Code != 0 {
		t.Fatalf("restart failed: %s", res)
	}
	x.waitHealthy(3)
	// etcd elects once, the move-leader hand-off before the leader's pod goes, to the
	// member the tool named; one member is down at a time.
	o.check(t, "rolling restart", 1)
	if d := x.downAtOnce(mark); d != 1 {
		t.Errorf("rolling restart: %d members down at once, want 1", d)
	}
	m := moveLeaderLine.FindStringSubmatch(res.Stdout)
	if m == nil || m[1] != leader {
		t.Errorf("no move-leader away from the leader %s reported", leader)
	} else if now := etcdLeaderName(t, x.ctlTimeouts); now != m[2] {
		t.Errorf("leader after the restart is %s, not %s that move-leader chose", now, m[2])
	}
	evs := parseNDJSON(t, res)
	done := stepsOf(evs, string(ops.EventStepDone))
	t.Logf("restart steps done: %v (leader before: %s)", done, leader)
	if len(done) != 3 || done[2] != "restart/"+leader {
		t.Fatalf("steps done %v: want every member once, leader %s last", done, leader)
	}
	pods, err = bed.Client.CoreV1().Pods(x.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if old[p.Name] == string(p.UID) {
			t.Fatalf("pod %s was not restarted", p.Name)
		}
	}
	x.waitHealthy(3)
	x.checkKeys()
	st2 := runCLI(t, cliEnv(t), "status", x.name, "-n", x.ns)
	if st2.Code != 0 || !strings.Contains(st2.Stdout, "healthy (3/3 healthy, leader etcd-") {
		t.Fatalf("status does not show etcd health: %s", st2)
	}
}

// TestEtcdInterrupted kills scale runs right after member add and right
// after member remove; running the same request again converges.
func TestEtcdInterrupted(t *testing.T) {
	x := newEtcd(t, 3)
	x.writeKeys("before", 10)
	for _, tc := range []struct {
		n     int32
		after string
	}{{4, "add/etcd-3"}, {3, "remove/etcd-3"}} {
		x.scaleInterruptedAfter(tc.n, tc.after)
		ml, err := x.ctl(t.Context(), "member", "list")
		t.Logf("after interrupting at %s: member list (%v):\n%s", tc.after, err, ml)
		if _, err := x.scale(t.Context(), tc.n, nil); err != nil {
			t.Fatalf("re-run scale to %d: %v", tc.n, err)
		}
		x.checkConverged(int(tc.n))
		x.checkKeys()
	}
	// Killed right after member remove, then the old size asked for: the
	// pod still runs but is no member any more, so it rejoins as a fresh
	// learner on empty data.
	if _, err := x.scale(t.Context(), 4, nil); err != nil {
		t.Fatalf("scale to 4: %v", err)
	}
	x.checkConverged(4)
	x.scaleInterruptedAfter(3, "remove/etcd-3")
	plan, err := x.scale(t.Context(), 4, nil)
	if err != nil {
		t.Fatalf("back to 4 after an interrupted scale to 3: %v", err)
	}
	if !slices.ContainsFunc(plan.Steps, func(s *ops.Step) bool { return s.ID == "recreate/etcd-3" }) {
		t.Errorf("plan back to 4 does not recreate etcd-3: %s", etcdPlanIDs(plan))
	}
	x.checkConverged(4)
	x.checkKeys()
	if _, err := x.scale(t.Context(), 3, nil); err != nil {
		t.Fatalf("scale to 3: %v", err)
	}
	x.checkConverged(3)

	// Cancelling by asking for the old size mid-way leaves no learner.
	x.scaleInterruptedAfter(4, "add/etcd-3")
	if _, err := x.scale(t.Context(), 3, nil); err != nil {
		t.Fatalf("back to 3 after an interrupted scale to 4: %v", err)
	}
	x.checkConverged(3)
	x.checkKeys()
}

// scaleInterruptedAfter runs a scale to n and cancels it once step after is done; it fails
// the test unless that step was reached and the run then ended interrupted (a run that
// finished, or failed before the step, would not test the resume that follows).
func (x *etcdEnv) scaleInterruptedAfter(n int32, after string) {
	x.t.Helper()
	ctx, cancel := context.WithCancel(x.t.Context())
	defer cancel()
	var reached atomic.Bool
	sink := ops.SinkFunc(func(e ops.Event) {
		etcdLogEvent(x.t, e)
		if e.Type == ops.EventStepDone && e.Step.ID == after {
			reached.Store(true)
			cancel()
		}
	})
	_, err := x.scale(ctx, n, sink)
	if !reached.Load() {
		x.t.Fatalf("scale to %d: step %s never done (err %v)", n, after, err)
	}
	if ops.ExitCode(err) != ops.ExitInterrupted {
		x.t.Fatalf("scale to %d cancelled after %s: got %v (exit %d), want interrupted", n, after, err, ops.ExitCode(err))
	}
}

func etcdPlanIDs(p *ops.Plan) string {
	ids := make([]string, 0, len(p.Steps))
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	return strings.Join(ids, " ")
}

// TestEtcdCLIScaleAndReplace drives scale --replicas and replace through the
// real binary: the same procedures as above, reached from the command line.
func TestEtcdCLIScaleAndReplace(t *testing.T) {
	x := newEtcd(t, 3)
	ctx := t.Context()
	x.writeKeys("before", 10)
	x.waitHealthy(3)
	// etcd-0 leads throughout: no step removes or restarts it, so none may cause an election.
	x.pinLeader("etcd-0")

	if res := runCLI(t, cliEnv(t), "scale", x.name, "-n", x.ns, "--replicas", "0", "--yes"); res.Code != 2 {
		t.Fatalf("scale --replicas 0: want exit 2, got %s", res)
	}
	o := x.oracle()
	res := runCLI(t, cliEnv(t), "scale", x.name, "-n", x.ns, "--replicas", "4", "--yes")
	if res.Code != 0 {
		t.Fatalf("scale to 4: %s", res)
	}
	x.waitHealthy(4)
	o.check(t, "scale to 4", 0)
	x.checkKeys()

	// etcd-3 loses its data; replace brings it back as a fresh member.
	x.waitHealthy(4)
	old := x.memberID("etcd-3")
	if err := bed.Client.CoreV1().PersistentVolumeClaims(x.ns).Delete(ctx, "data-etcd-3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := bed.Client.CoreV1().Pods(x.ns).Delete(ctx, "etcd-3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := bed.WaitPodsReady(ctx, x.ns, "app.kubernetes.io/instance=etcd", 4); err != nil {
		t.Fatal(err)
	}
	if res := runCLI(t, cliEnv(t), "replace", x.name, "no-such-pod", "-n", x.ns, "--yes"); res.Code != 2 {
		t.Fatalf("replace of a pod outside the cluster: want exit 2, got %s", res)
	}
	o = x.oracle()
	res = runCLI(t, cliEnv(t), "replace", x.name, "etcd-3", "-n", x.ns, "--yes")
	if res.Code != 0 {
		t.Fatalf("replace etcd-3: %s", res)
	}
	x.waitHealthy(4)
	o.check(t, "replace etcd-3", 0)
	if m := x.memberID("etcd-3"); m == 0 || m == old {
		t.Fatalf("etcd-3 after replace: member ID %x (old ID %x), want a new voting member", m, old)
	}
	x.checkKeys()

	o = x.oracle()
	res = runCLI(t, cliEnv(t), "scale", x.name, "-n", x.ns, "--replicas", "3", "--yes")
	if res.Code != 0 {
		t.Fatalf("scale to 3: %s", res)
	}
	x.checkConverged(3)
	o.check(t, "scale to 3", 0)
	x.checkKeys()
	st := runCLI(t, cliEnv(t), "status", x.name, "-n", x.ns)
	if st.Code != 0 || !strings.Contains(st.Stdout, "Members:") || !strings.Contains(st.Stdout, "leader") {
		t.Fatalf("status should list the members: %s", st)
	}
	t.Logf("status:\n%s", st.Stdout)
}

// TestEtcdRestartRefusedWithMemberDown: with one of three members stopped
// (kwok still shows its pod Ready), restart --rolling refuses before the
// lock, exit 5, naming the member and how to repair it, and writes nothing;
// once the member is back the same command restarts every member.
func TestEtcdRestartRefusedWithMemberDown(t *testing.T) {
	x := newEtcd(t, 3)
	x.waitHealthy(3)
	x.runner.Suspend("etcd-2")
	defer x.runner.Resume("etcd-2")
	before := snapshotNamespace(t, x.ns)
	for _, extra := range [][]string{nil, {"--dry-run"}} {
		args := append([]string{"restart", x.name, "-n", x.ns, "--rolling", "--yes"}, extra...)
		res := runCLI(t, cliEnv(t), args...)
		if res.Code != 5 || !strings.Contains(res.Stderr, "etcd member etcd-2") || !strings.Contains(res.Stderr, "replace") {
			t.Fatalf("restart %v with etcd-2 stopped: want exit 5 naming etcd-2, got %s", extra, res)
		}
	}
	if d := diffRVSnapshots(t, before, snapshotNamespace(t, x.ns)); len(d) != 0 {
		t.Fatalf("refused restart wrote: %v", d)
	}
	x.runner.Resume("etcd-2")
	x.waitHealthy(3)
	o, mark := x.oracle(), len(x.runner.Transitions())
	res := runCLI(t, cliEnv(t), "restart", x.name, "-n", x.ns, "--rolling", "--yes")
	if res.Code != 0 {
		t.Fatalf("restart once healthy: %s", res)
	}
	x.waitHealthy(3)
	// One election: the move-leader hand-off before the leader's pod goes; one member down
	// at a time.
	o.check(t, "restart", 1)
	if d := x.downAtOnce(mark); d != 1 {
		t.Errorf("restart: %d members down at once, want 1", d)
	}
	x.checkKeys()
}
