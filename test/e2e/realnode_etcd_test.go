//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// realEtcd is an etcd StatefulSet on the real nodes (testbed.RealEtcdObjects: /readyz
// readiness probes, DNS peer URLs), reached from the test through etcdctl on the pod IPs.
type realEtcd struct {
	t       *testing.T
	ns      string
	name    string
	etcdctl string
	// scheme of the client URLs and extra etcdctl flags (TLS files, credentials).
	scheme string
	flags  []string
}

func newRealEtcd(t *testing.T, replicas int32) *realEtcd {
	t.Helper()
	x := newRealEtcdIn(t, newNamespace(t))
	x.deploy(testbed.RealEtcdObjects(x.ns, x.name, replicas), replicas)
	return x
}

// newRealEtcdIn is the handle of an etcd named "etcd" in ns, not yet deployed.
func newRealEtcdIn(t *testing.T, ns string) *realEtcd {
	t.Helper()
	bin, err := testbed.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	return &realEtcd{t: t, ns: ns, name: "etcd", etcdctl: filepath.Join(bin, "etcdctl"), scheme: "http"}
}

// deploy creates objs and waits for replicas Ready pods.
func (x *realEtcd) deploy(objs testbed.RealEtcd, replicas int32) {
	t, ns := x.t, x.ns
	t.Helper()
	ctx := t.Context()
	if _, err := bed.Client.CoreV1().Services(ns).Create(ctx, objs.Service, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bed.Client.CoreV1().ConfigMaps(ns).Create(ctx, objs.ConfigMap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(ctx, objs.StatefulSet, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	x.waitReady(int(replicas))
}

func (x *realEtcd) selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{"app.kubernetes.io/instance": x.name})
}

// waitReady waits until n pods pass their /readyz probe (Ready only as voters).
func (x *realEtcd) waitReady(n int) []*corev1.Pod {
	x.t.Helper()
	return waitPods(x.t, x.ns, x.selector(), n, func(p *corev1.Pod) bool {
		return testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
}

// endpoints are the client URLs of the running pods, by pod IP: the host reaches the pod
// network through the real nodes' bridge.
func (x *realEtcd) endpoints(ctx context.Context) string {
	pods, err := bed.Client.CoreV1().Pods(x.ns).List(ctx, metav1.ListOptions{LabelSelector: x.selector().String()})
	if err != nil {
		return ""
	}
	var eps []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			eps = append(eps, x.scheme+"://"+p.Status.PodIP+":2379")
		}
	}
	return strings.Join(eps, ",")
}

func (x *realEtcd) ctl(ctx context.Context, args ...string) ([]byte, error) {
	return x.ctlTimeouts(ctx, "2s", "4s", args...)
}

// ctlTimeouts runs etcdctl on every pod's client URL. It returns stdout also on an error:
// `endpoint health` and `endpoint status` print what the members that answered said and
// exit non-zero when one did not.
func (x *realEtcd) ctlTimeouts(ctx context.Context, dial, command string, args ...string) ([]byte, error) {
	eps := x.endpoints(ctx)
	if eps == "" {
		return nil, fmt.Errorf("no etcd pod has an IP")
	}
	flags := append([]string{"--endpoints=" + eps, "--dial-timeout=" + dial, "--command-timeout=" + command}, x.flags...)
	cmd := exec.CommandContext(ctx, x.etcdctl, append(flags, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("etcdctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// oracle starts etcd's own verdict on the operation that follows (etcdOracle).
func (x *realEtcd) oracle() *etcdOracle {
	x.t.Helper()
	return startEtcdOracle(x.t, x.ctlTimeouts)
}

// writer puts keys one after the other until stopped and remembers those etcd acknowledged.
type writer struct {
	stopCh chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	acked  map[string]string
	failed int
}

func (x *realEtcd) startWriter() *writer {
	w := &writer{stopCh: make(chan struct{}), done: make(chan struct{}), acked: map[string]string{}}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stopCh:
				return
			default:
			}
			k, v := fmt.Sprintf("/e2e/k%06d", i), fmt.Sprintf("v%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			_, err := x.ctl(ctx, "put", k, v)
			cancel()
			w.mu.Lock()
			if err == nil {
				w.acked[k] = v
			} else {
				w.failed++
			}
			w.mu.Unlock()
			time.Sleep(100 * time.Millisecond) // pacing of a background load, not a wait for state
		}
	}()
	return w
}

func (w *writer) stop() (map[string]string, int) {
	close(w.stopCh)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.failed
}

// verify reads every key back: none acknowledged may be lost.
func (x *realEtcd) verify(acked map[string]string) {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), 30*time.Second)
	defer cancel()
	out, err := x.ctl(ctx, "get", "--prefix", "/e2e/", "-w", "json")
	if err != nil {
		x.t.Fatalf("read keys: %v: %s", err, out)
	}
	var resp struct {
		Kvs []struct {
			Key   []byte `json:"key"`
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		x.t.Fatalf("decode get: %v", err)
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	lost := 0
	for k, v := range acked {
		if got[k] != v {
			lost++
			if lost < 5 {
				x.t.Errorf("key %s: got %q, want %q (acknowledged, then lost)", k, got[k], v)
			}
		}
	}
	if lost > 0 {
		x.t.Fatalf("%d of %d acknowledged keys lost", lost, len(acked))
	}
}

// etcdMember is one entry of `member list -w json`.
type etcdMember struct {
	ID        uint64   `json:"ID"`
	Name      string   `json:"name"`
	PeerURLs  []string `json:"peerURLs"`
	IsLearner bool     `json:"isLearner"`
}

func (x *realEtcd) memberList() []etcdMember {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), 20*time.Second)
	defer cancel()
	out, err := x.ctl(ctx, "member", "list", "-w", "json")
	if err != nil {
		x.t.Fatalf("member list: %v: %s", err, out)
	}
	var ml struct {
		Members []etcdMember `json:"members"`
	}
	if err := json.Unmarshal(out, &ml); err != nil {
		x.t.Fatalf("decode member list: %v", err)
	}
	return ml.Members
}

// members returns voters and learners by name.
func (x *realEtcd) members() (voters, learners []string) {
	x.t.Helper()
	for _, m := range x.memberList() {
		if m.IsLearner {
			learners = append(learners, m.Name)
		} else {
			voters = append(voters, m.Name)
		}
	}
	return voters, learners
}

// memberID is the member ID of pod, 0 when it is no member.
func (x *realEtcd) memberID(pod string) uint64 {
	x.t.Helper()
	for _, m := range x.memberList() {
		if m.Name == pod {
			return m.ID
		}
	}
	return 0
}

// checkConverged asserts n Ready pods <name>-0..n-1, each the one voting member of its name
// whose peer URL is the pod's own DNS name, no other member (learner or pod-less), and no PVC
// of a removed ordinal.
func (x *realEtcd) checkConverged(n int) {
	x.t.Helper()
	pods := map[string]bool{}
	for _, p := range x.waitReady(n) {
		pods[p.Name] = true
	}
	ms := x.memberList()
	matched := map[string]bool{}
	for _, m := range ms {
		host := ""
		if len(m.PeerURLs) == 1 {
			if u, err := url.Parse(m.PeerURLs[0]); err == nil {
				host = u.Hostname()
			}
		}
		switch {
		case m.IsLearner:
			x.t.Errorf("member %s (%x) is still a learner", m.Name, m.ID)
		case !pods[m.Name]:
			x.t.Errorf("member %s (%x, %v) has no pod among %v", m.Name, m.ID, m.PeerURLs, slices.Sorted(maps.Keys(pods)))
		case host != m.Name+"."+x.name+"-headless."+x.ns+".svc.cluster.local":
			x.t.Errorf("member %s advertises peer URLs %v, not its pod's DNS name", m.Name, m.PeerURLs)
		case matched[m.Name]:
			x.t.Errorf("pod %s has two members", m.Name)
		}
		matched[m.Name] = true
	}
	for p := range pods {
		if !matched[p] {
			x.t.Errorf("pod %s is no etcd member", p)
		}
	}
	if x.t.Failed() {
		x.t.FailNow()
	}
	if len(ms) != n {
		x.t.Fatalf("%d members, want %d", len(ms), n)
	}
	pvcs, err := bed.Client.CoreV1().PersistentVolumeClaims(x.ns).List(x.t.Context(), metav1.ListOptions{})
	if err != nil {
		x.t.Fatal(err)
	}
	for _, p := range pvcs.Items {
		var o int
		if _, err := fmt.Sscanf(p.Name, "data-"+x.name+"-%d", &o); err == nil && o >= n {
			x.t.Errorf("PVC %s of a removed member is left", p.Name)
		}
	}
}

// raftState is the highest raft term the members answer with and the leader named at it.
func (x *realEtcd) raftState(ctx context.Context) (term, leader uint64, err error) {
	out, err := x.ctlTimeouts(ctx, "500ms", "1500ms", "endpoint", "status", "-w", "json")
	var sts []struct {
		Status struct {
			Leader   uint64 `json:"leader"`
			RaftTerm uint64 `json:"raftTerm"`
		} `json:"Status"`
	}
	if jerr := json.Unmarshal(out, &sts); jerr != nil || len(sts) == 0 {
		return 0, 0, fmt.Errorf("no member answered endpoint status: %w", errors.Join(err, jerr))
	}
	for _, s := range sts {
		if s.Status.RaftTerm > term {
			term, leader = s.Status.RaftTerm, s.Status.Leader
		}
	}
	return term, leader, nil
}

// raftWatch samples the raft term and leader in the background: each election raises the
// term (a restarted follower does not: etcd's pre-vote, on by default, keeps it from
// campaigning while a leader is live), so terms count elections even between samples.
type raftWatch struct {
	cancel  context.CancelFunc
	done    chan struct{}
	terms   []uint64 // distinct terms in the order seen
	leaders []uint64 // leader named at each term (0: not seen)
}

func (x *realEtcd) watchRaft() *raftWatch {
	ctx, cancel := context.WithCancel(x.t.Context())
	w := &raftWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			if term, leader, err := x.raftState(ctx); err == nil {
				switch n := len(w.terms); {
				case n == 0 || term > w.terms[n-1]:
					w.terms, w.leaders = append(w.terms, term), append(w.leaders, leader)
				case term == w.terms[n-1] && w.leaders[n-1] == 0:
					w.leaders[n-1] = leader
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *raftWatch) stop() ([]uint64, []uint64) {
	w.cancel()
	<-w.done
	return w.terms, w.leaders
}

// pinLeader makes pod's member the leader, so scaling or replacing other members is designed
// to cause no election.
func (x *realEtcd) pinLeader(pod string) {
	x.t.Helper()
	pinEtcdLeader(x.t, x.ctlTimeouts, pod)
}

// memberName is the name of member id.
func (x *realEtcd) memberName(id uint64) string {
	x.t.Helper()
	for _, m := range x.memberList() {
		if m.ID == id {
			return m.Name
		}
	}
	return fmt.Sprintf("%x", id)
}

var moveLeaderLine = regexp.MustCompile(`moving etcd leadership from ([a-z0-9.-]+) to ([a-z0-9.-]+)`)

// restartHandsOff runs a rolling restart (with extra flags) and checks etcd's leadership
// changed once only, by the move-leader the tool reports, to the member it named, with quorum
// kept throughout.
func (x *realEtcd) restartHandsOff(env []string, w *writer, extra ...string) {
	x.t.Helper()
	t := x.t
	what := strings.TrimSpace("restart --rolling " + strings.Join(extra, " "))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	term0, leader0, err := x.raftState(ctx)
	cancel()
	if err != nil || leader0 == 0 {
		w.stop()
		t.Fatalf("%s: leader before: %v (leader %x)", what, err, leader0)
	}
	leaderPod := x.memberName(leader0)
	rw := x.watchRaft()
	began := time.Now()
	res := runCLI(t, env, append([]string{"restart", x.name, "-n", x.ns, "--rolling", "--yes", "--timeout", "170s", "-o", "json"}, extra...)...)
	terms, leaders := rw.stop()
	t.Logf("%s: exit %d in %s", what, res.Code, time.Since(began).Round(time.Millisecond))
	if res.Code != 0 {
		w.stop()
		t.Fatalf("%s: %s", what, res)
	}
	x.checkConverged(3)
	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
	term1, leader1, err := x.raftState(ctx)
	cancel()
	if err != nil {
		t.Fatalf("%s: leader after: %v", what, err)
	}
	names := []string{}
	for i := range terms {
		names = append(names, fmt.Sprintf("term %d: %s", terms[i], x.memberName(leaders[i])))
	}
	t.Logf("%s: leader %s at term %d before, %s at term %d after; sampled %v", what, leaderPod, term0, x.memberName(leader1), term1, names)
	m := moveLeaderLine.FindStringSubmatch(res.Stdout)
	switch {
	case m == nil || m[1] != leaderPod:
		t.Errorf("%s: no move-leader away from the leader %s reported:\n%s", what, leaderPod, res.Stdout)
	case term1 != term0+1:
		t.Errorf("%s: %d elections (term %d to %d, sampled %v), want one, by move-leader", what, term1-term0, term0, term1, names)
	case x.memberName(leader1) != m[2]:
		t.Errorf("%s: leader after is %s, not %s that move-leader chose", what, x.memberName(leader1), m[2])
	}
}

// TestRealNodeEtcdScale: on real kubelets with /readyz probes (a learner's pod is never Ready),
// scale 3→5→3, repair a member and restart all members through the CLI, one pod at a time and
// by zone (the real nodes are in three zones, one member each), with keys written all along
// and none lost. With etcd-0 leading, scaling and replacing etcd-1 cause no election (etcd's
// own verdict, etcdOracle); each restart moves leadership once, by move-leader.
func TestRealNodeEtcdScale(t *testing.T) {
	needRealNodes(t)
	x := newRealEtcd(t, 3)
	w := x.startWriter()
	env := cliEnv(t)
	x.pinLeader(x.name + "-0")
	steps := []struct {
		args []string
		want int
	}{
		{[]string{"scale", x.name, "-n", x.ns, "--replicas", "5", "--yes", "--timeout", "170s"}, 5},
		{[]string{"scale", x.name, "-n", x.ns, "--replicas", "3", "--yes", "--timeout", "170s"}, 3},
		{[]string{"replace", x.name, x.name + "-1", "-n", x.ns, "--yes", "--timeout", "170s"}, 3},
	}
	for _, s := range steps {
		var old uint64
		if s.args[0] == "replace" {
			old = x.memberID(x.name + "-1")
		}
		o := x.oracle()
		began := time.Now()
		res := runCLI(t, env, s.args...)
		t.Logf("%s: exit %d in %s", strings.Join(s.args[:1], " "), res.Code, time.Since(began).Round(time.Millisecond))
		if res.Code != 0 {
			w.stop()
			t.Fatalf("%v: %s", s.args, res)
		}
		x.checkConverged(s.want)
		o.check(t, strings.Join(s.args[:1], " "), 0)
		if s.args[0] == "replace" {
			if now := x.memberID(x.name + "-1"); now == old || old == 0 {
				t.Fatalf("replace %s-1: member ID %x before, %x after: want a new member", x.name, old, now)
			}
		}
	}
	x.restartHandsOff(env, w)
	x.checkZones()
	x.restartHandsOff(env, w, "--mode", "zone")
	acked, failed := w.stop()
	t.Logf("writes: %d acknowledged, %d failed (leader changes)", len(acked), failed)
	if len(acked) < 20 {
		t.Fatalf("only %d writes acknowledged: the load did not run", len(acked))
	}
	x.verify(acked)
}

// checkZones asserts each member's pod runs in a zone of its own, so --mode zone restarts
// one member per step (the fixture's hard zone spread).
func (x *realEtcd) checkZones() {
	x.t.Helper()
	zones := map[string]string{}
	for _, p := range x.waitReady(3) {
		n, err := bed.Client.CoreV1().Nodes().Get(x.t.Context(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			x.t.Fatal(err)
		}
		z := n.Labels[testbed.ZoneLabel]
		if other, ok := zones[z]; ok || z == "" {
			x.t.Fatalf("pods %s and %s share zone %q", other, p.Name, z)
		}
		zones[z] = p.Name
	}
	x.t.Logf("zones: %v", zones)
}

// TestRealNodeEtcdScaleNeedsNotReadyAddresses: the members' /readyz probe fails for a learner,
// so its pod is never Ready; once the headless Service no longer publishes not-ready
// addresses (someone edited it: the cluster bootstrapped with them), the new member's DNS name
// would never resolve and a scale-up would hang. It is refused (exit 5, naming the Service and
// the field) with nothing changed.
func TestRealNodeEtcdScaleNeedsNotReadyAddresses(t *testing.T) {
	needRealNodes(t)
	x := newRealEtcd(t, 3)
	ctx := t.Context()
	svcName := x.name + "-headless"
	svc, err := bed.Client.CoreV1().Services(x.ns).Get(ctx, svcName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.PublishNotReadyAddresses = false
	if _, err := bed.Client.CoreV1().Services(x.ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The kubelets update pod status on their own, so "nothing changed" is read from the audit
	// log: no write by kubectl-dbops other than its lock Lease.
	start := time.Now()
	res := runCLI(t, cliEnv(t), "scale", x.name, "-n", x.ns, "--replicas", "4", "--yes", "--timeout", "170s")
	if res.Code != 5 || !strings.Contains(res.Stderr, "service/"+svcName+" does not set publishNotReadyAddresses: true") {
		t.Fatalf("want exit 5 naming service/%s and publishNotReadyAddresses: %s", svcName, res)
	}
	if w := dbopsWrites(t, x.ns, start.Add(-time.Second), "leases"); len(w) != 0 {
		t.Errorf("the refused scale wrote to the namespace: %v", w)
	}
	x.checkConverged(3)
}
