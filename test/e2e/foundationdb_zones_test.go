//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbwire"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// fdbSimFixtureThreeZones is fdbSimFixture created while only zone-a..zone-c take pods (the
// test bed's other nodes cordoned until the cluster is reconciled): every one of its zones then
// holds a process of each class, so every zone batch of a restart holds storage and sets a
// maintenance zone, whichever batch the restart takes first.
func fdbSimFixtureThreeZones(t *testing.T, ns, name string) *fdbwire.Bed {
	t.Helper()
	uncordon := cordonOtherZones(t, "zone-a", "zone-b", "zone-c")
	b := fdbSimFixture(t, ns, name)
	uncordon()
	return b
}

// TestFoundationDBReplaceIntoUsedZone: issue #40 item 17 through the stand-in operator. A
// storage replacement the scheduler can only place in a zone already holding storage (every
// other zone cordoned) leaves triple's storage, the excluded group aside, in two zoneids:
// FoundationDB builds no team, the excluded data cannot move. The run does not report success;
// its exclude step says the exclusion is stalled, naming the zone the replacement shares, and
// status json says the data is not healthy. Interrupted, it exits non-zero.
func TestFoundationDBReplaceIntoUsedZone(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	env := cliEnv(t)
	ctx := t.Context()
	pods, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-process-class=storage"})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("storage pods: %v", err)
	}
	if z := fdbZones(model, "storage"); len(z) != 3 {
		t.Fatalf("setup: storage in zones %v, want three", z)
	}
	victim, other := pods.Items[0], pods.Items[1]
	node, err := bed.Client.CoreV1().Nodes().Get(ctx, other.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := node.Labels[testbed.ZoneLabel]
	cordonOtherZones(t, used)

	run := startCLI(t, env, "replace", "myfdb", victim.Name, "-n", ns, "--yes", "-o", "json")
	ev := run.waitEvent("the stalled exclusion", func(e ndEvent) bool {
		return e.Type == "step-waiting" && strings.Contains(e.Reason, "is stalled; waiting for a storage process in another zoneid")
	})
	if !strings.HasPrefix(ev.stepID(), "exclude/") || !strings.Contains(ev.Reason, "spans 2 zoneid(s), ") || !strings.Contains(ev.Reason, " "+used+" (") ||
		!strings.Contains(ev.Reason, "redundancy mode triple needs 3") {
		t.Fatalf("waiting event %s: %q", ev.stepID(), ev.Reason)
	}
	var st struct {
		Cluster struct {
			Data struct {
				State struct {
					Name    string `json:"name"`
					Healthy bool   `json:"healthy"`
				} `json:"state"`
			} `json:"data"`
		} `json:"cluster"`
	}
	if err := json.Unmarshal(model.StatusJSON(), &st); err != nil {
		t.Fatal(err)
	}
	if st.Cluster.Data.State.Healthy || st.Cluster.Data.State.Name != "healing" {
		t.Fatalf("status json data.state %+v, want healing, not healthy", st.Cluster.Data.State)
	}
	if err := run.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	res := run.wait()
	if res.Code == 0 || lastOutcome(run.all) == "succeeded" {
		t.Fatalf("the run with the replacement in a used zone succeeded: %s", res)
	}
}
