//go:build e2e

package e2e

// CrateDB on the test bed's real nodes: every pod runs the CrateDB simulator image
// (internal/testbed/images.go) in a real container, whose main process forwards the pod's
// HTTP, PostgreSQL and exporter ports to its node in the simulator on the host (its pod
// gateway on the pod bridge). crash runs in the container through the real kubelet's exec,
// with stdin delivered and closed; pgwire goes through the real kubelet's port-forward; pods
// turn Ready through the CrateDB operator's readiness probe, which the node itself answers;
// deletions honour grace periods.

import (
	"strings"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/cratedbsim/bedwire"
	"github.com/kubectl-dbops/kubectl-dbops/internal/testbed"
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
// server recorded. From 5.3 on, --license-secret is ignored as documented.
func TestRealNodeCrateDBBootstrap(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		layout        bedwire.Layout
		license       bool
	}{
		{"v5-2-operator-names", "5.2.11", bedwire.LayoutOperator, true},
		{"v5-10-pod-names", "5.10.3", bedwire.LayoutPodName, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newRealCrateEnv(t, crateSetup{layout: tc.layout, version: tc.version})
			testCrateDBBootstrap(t, x, tc.license)
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
