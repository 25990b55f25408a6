//go:build e2e

package e2e

// CrateDB on the test bed's real nodes: every pod runs the CrateDB simulator image
// (test/testbed/images.go) in a real container, whose main process forwards the pod's
// HTTP, PostgreSQL and exporter ports to its node in the simulator on the host (its pod
// gateway on the pod bridge). crash runs in the container through the real kubelet's exec,
// with stdin delivered and closed; pgwire goes through the real kubelet's port-forward; pods
// turn Ready through the CrateDB operator's readiness probe, which the node itself answers;
// deletions honour grace periods.

import (
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/bedwire"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// realCrateGroups is the shape of the real-node clusters: 3 dedicated masters (a quorum
// survives a restart) and 2 data nodes, 5 containers on the 3 real nodes.
var realCrateGroups = []crateE2EGroup{{"master", 3, ""}, {"hot", 2, "0"}}

// newRealCrateEnv creates a CrateDB cluster in real containers and checks that it runs
// where it should: every pod on a real node, Ready through its probe, in the simulator image.
func newRealCrateEnv(t *testing.T, cs crateSetup) *crateEnv {
	t.Helper()
	needRealNodes(t)
	cs.realNodes = true
	if cs.groups == nil {
		cs.groups = realCrateGroups
	}
	x := newCrateEnvWith(t, cs)
	pods, err := bed.Client.CoreV1().Pods(x.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	img, _ := x.fixture().Image()
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Spec.NodeName, "realnode-") || p.Spec.Containers[0].Image != img || !testbed.PodReady(&p) {
			t.Fatalf("pod %s: node %q image %q ready %v; want a Ready pod of %s on a real node", p.Name, p.Spec.NodeName, p.Spec.Containers[0].Image, testbed.PodReady(&p), img)
		}
		if p.Spec.Containers[0].ReadinessProbe == nil {
			t.Fatalf("pod %s has no readiness probe", p.Name)
		}
	}
	return x
}

// TestRealNodeCrateDBBootstrap is bootstrap case 1 with crash in real containers: the license
// (5.2) and the password statements reach crash on its stdin over the real kubelet's exec,
// which delivers and closes stdin, so crash runs them; none is in an exec argument the API
// server recorded. From 5.3 on, --license-secret is ignored as documented. On 5.2 and on the
// 5.10 pod-names cluster the system user exists already with another password, so crash's
// CREATE USER fails with that version's already-exists error and bootstrap sets the password
// with ALTER USER; the TLS cluster starts without it.
func TestRealNodeCrateDBBootstrap(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		layout        bedwire.Layout
		license       bool
		tls           bool
		userExists    bool
	}{
		{"v5-2-operator-names", "5.2.11", bedwire.LayoutOperator, true, false, true},
		{"v5-10-pod-names", "5.10.3", bedwire.LayoutPodName, false, false, true},
		// The operator's TLS settings: HTTPS and PostgreSQL TLS, passwords only over TLS.
		{"v5-10-tls", "5.10.3", bedwire.LayoutOperator, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newRealCrateEnv(t, crateSetup{layout: tc.layout, version: tc.version, tls: tc.tls})
			oldSysPW := ""
			if tc.userExists {
				oldSysPW = "old-" + randomHex(t, 12)
			}
			testCrateDBBootstrap(t, x, tc.license, oldSysPW)
		})
	}
}

// TestRealNodeCrateDBRestart is the rolling restart through the CLI on real nodes,
// interrupted after two pods and resumed: the real kubelet deletes each pod with its grace
// period and the StatefulSet controller recreates it; the tool's health gates wait for the
// node to rejoin the simulator; the cluster ends green with allocation re-enabled.
func TestRealNodeCrateDBRestart(t *testing.T) {
	x := newRealCrateEnv(t, crateSetup{systemUser: true, layout: bedwire.LayoutPodName})
	testCrateDBRollingRestartOn(t, x, syscall.SIGINT)
}

// TestRealNodeCrateDBScaleDown scales the data group 3->2 on real nodes and back: the node of
// the removed pod is drained before the StatefulSet controller deletes its pod (the real
// kubelet stops it with its grace period), no shard copy is lost, including those of a table
// without replicas, the exclusion is cleaned up, and the scale-up's new pod rejoins.
func TestRealNodeCrateDBScaleDown(t *testing.T) {
	x := newRealCrateEnv(t, crateSetup{systemUser: true, layout: bedwire.LayoutOperator,
		groups: []crateE2EGroup{{"master", 3, ""}, {"hot", 3, "0"}}})
	x.sql(`CREATE TABLE doc.single (id TEXT) CLUSTERED INTO 4 SHARDS WITH (number_of_replicas = '0')`)
	x.waitGreen()
	before := x.shardState()
	hot2 := x.node("hot", 2)
	podRec := recordPodWatch(t, x.ns)

	res := runCLI(t, x.env, x.args("scale", "--data", "hot=2", "--yes", "--no-tui")...)
	if res.Code != 0 {
		t.Fatalf("scale down: want exit 0: %s", res)
	}
	x.wantSameShards("scale --data hot=2", before)
	lines := x.simLog.snapshot()
	most := 0
	n, at, ok := shardsOnWhenDown(lines, hot2)
	if ok {
		most, _ = shardHistory(lines[:at], hot2)
	}
	switch {
	case !ok:
		t.Errorf("no tick summary with %s before it went down (down at log line %d)", hot2, at)
	case n != 0:
		t.Errorf("%s held %d shards when its pod went:\n  %s", hot2, n, strings.Join(lines[max(0, at-5):at+1], "\n  "))
	case most == 0:
		t.Errorf("%s never held a shard: the drain proves nothing", hot2)
	}
	if got := x.exclusions(); got != "" {
		t.Errorf("exclusions after the scale-down: %q, want none", got)
	}
	// The pod went through a graceful termination by the real kubelet: marked for deletion
	// with a grace period, then removed once its container stopped.
	pod := "crate-data-hot-" + x.name + "-2"
	terminating, gone := false, false
	for _, e := range podRec.snapshot() {
		p, ok := e.Obj.(*corev1.Pod)
		if !ok || p.Name != pod {
			continue
		}
		if e.Type == watch.Modified && p.DeletionTimestamp != nil && ptr.Deref(p.DeletionGracePeriodSeconds, 0) > 0 {
			terminating = true
		}
		if e.Type == watch.Deleted {
			gone = true
		}
	}
	if !terminating || !gone {
		t.Errorf("pod %s: terminating with a grace period %v, deleted %v; want both", pod, terminating, gone)
	}

	res = runCLI(t, x.env, x.args("scale", "--data", "hot=3", "--yes", "--no-tui")...)
	if res.Code != 0 {
		t.Fatalf("scale up: want exit 0: %s", res)
	}
	x.wantSameShards("scale --data hot=3", before)
	if health, sres := x.statusHealth(); health != "green" {
		t.Errorf("status health %q after scaling back, want green: %s", health, sres)
	}
}
