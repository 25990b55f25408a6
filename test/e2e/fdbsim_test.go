//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbop"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbwire"
)

// fdbE2EPacing is the stand-in operator's pacing in the e2e tests: the operator's waits after a
// recovery, scaled down. Its defaults (fdbop.DefaultPacing: 600 s before an inclusion, 120 s
// before an exclusion, 2 and 5 minutes before a coordinator change) would make each
// replacement take over ten minutes; the operator's own e2e suite lowers them too (30 s, 30 s,
// 10 s, 20 s: e2e/fixtures/fdb_operator_client.go). Not zero, so the engine meets the pacing.
func fdbE2EPacing() fdbwire.Option {
	return fdbwire.WithPacing(fdbop.Pacing{
		MinimumRecoveryTimeForInclusion:                       8 * time.Second,
		MinimumRecoveryTimeForExclusion:                       4 * time.Second,
		MinimumUptimeForCoordinatorChangeWithMissingProcess:   3 * time.Second,
		MinimumUptimeForCoordinatorChangeWithUndesiredProcess: 5 * time.Second,
	})
}

// fdbE2EWaitBetweenRemovals is spec.automationOptions.waitBetweenRemovalsSeconds in the e2e
// clusters (the operator's default: 60 s).
func fdbE2EWaitBetweenRemovals() *int { n := 3; return &n }

// fdbSimFixture starts the FoundationDB simulator and stand-in operator for ns and creates the
// sandbox's cluster layout: storage/log/stateless, triple redundancy (5 coordinators), the
// zoneid from the node's zone label. The test bed has four zones, one more than triple's
// replicas, as FoundationDB needs to re-replicate when a storage replacement is scheduled while
// the pod it replaces still runs (teams span distinct zoneids); each class spreads over three.
func fdbSimFixture(t *testing.T, ns, name string) *fdbwire.Bed {
	t.Helper()
	return fdbSimFixtureWith(t, ns, name, false)
}

// fdbSimFixtureWith is fdbSimFixture, with spec.mainContainer.enableTls when tls.
func fdbSimFixtureWith(t *testing.T, ns, name string, tls bool) *fdbwire.Bed {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	b, err := fdbwire.Start(ctx, bed, bed.Client, bed.Dynamic, ns, fdbsim.Config{RestartDelay: time.Second}, fdbE2EPacing())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	spec := fdbwire.ClusterSpec{Namespace: ns, Name: name, Storage: 3, Log: 3, Stateless: 3, RedundancyMode: "triple", ZoneFromNodeLabel: true, TLS: tls,
		WaitBetweenRemovalsSeconds: fdbE2EWaitBetweenRemovals()}
	if err := b.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	return b
}

func fdbcliIn(ctx context.Context, ns, pod string, args ...string) (string, string, error) {
	out, errOut, err := kube.Exec(ctx, bed.RESTConfig, bed.Client, ns, pod, fdbop.MainContainer, append([]string{"fdbcli"}, args...), nil)
	return string(out), string(errOut), err
}

// TestFDBSimReachedThroughPodsAndStandInOperator: fdbcli in a pod of the cluster reaches the
// model (status json with the operator's zones, fdbcli's refusals), and a deleted pod comes back
// under the same name with a new UID, its process reporting again.
func TestFDBSimReachedThroughPodsAndStandInOperator(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	ctx := t.Context()
	pods, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-cluster-name=myfdb"})
	if err != nil || len(pods.Items) != 9 {
		t.Fatalf("pods: %v %d", err, len(pods.Items))
	}
	pod := pods.Items[0].Name
	out, errOut, err := fdbcliIn(ctx, ns, pod, "--exec", "status json", "--timeout", "10")
	if err != nil {
		t.Fatalf("status json: %v %s", err, errOut)
	}
	var st struct {
		Client struct {
			DatabaseStatus struct{ Available bool } `json:"database_status"`
		}
		Cluster struct {
			Processes map[string]struct {
				Address  string
				Locality map[string]string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status json: %v\n%s", err, out)
	}
	zones := map[string]bool{}
	for _, p := range st.Cluster.Processes {
		zones[p.Locality["zoneid"]] = true
	}
	if !st.Client.DatabaseStatus.Available || len(st.Cluster.Processes) != 9 || len(zones) < 3 {
		t.Fatalf("status: available %v processes %d zones %v", st.Client.DatabaseStatus.Available, len(st.Cluster.Processes), zones)
	}
	// fdbcli's rules hold through the pod: a kill without a prior kill fails, exit 1.
	var addr string
	for _, p := range st.Cluster.Processes {
		addr = p.Address
		break
	}
	_, errOut, err = fdbcliIn(ctx, ns, pod, "--exec", "kill "+addr, "--timeout", "10")
	var xe *kube.ExitError
	if !errors.As(err, &xe) || xe.Code != 1 || !strings.Contains(errOut, "ERROR: process `"+addr+"' not recognized.") {
		t.Fatalf("kill without kill: %v %q", err, errOut)
	}
	_, errOut, err = fdbcliIn(ctx, ns, pod, "--timeout", "10")
	if !errors.As(err, &xe) || xe.Code != 1 || !strings.Contains(errOut, "--timeout may only be specified with --exec") {
		t.Fatalf("timeout without exec: %v %q", err, errOut)
	}

	// Delete a pod: the stand-in recreates it under the same name and the process reports again.
	victim := pods.Items[len(pods.Items)-1]
	if err := bed.Client.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	id := victim.Labels["foundationdb.org/fdb-process-group-id"]
	// The stand-in writes the group's status when its pod is back and its process reports.
	var newIP string
	err = waitCluster(waitCtx, ns, "myfdb", func(u *unstructured.Unstructured) bool {
		groups, _, _ := unstructured.NestedSlice(u.Object, "status", "processGroups")
		for _, g := range groups {
			m, _ := g.(map[string]any)
			if m["processGroupID"] != id {
				continue
			}
			addrs, _, _ := unstructured.NestedStringSlice(m, "addresses")
			conds, _, _ := unstructured.NestedSlice(m, "processGroupConditions")
			again, err := bed.Client.CoreV1().Pods(ns).Get(waitCtx, victim.Name, metav1.GetOptions{})
			if err == nil && again.UID != victim.UID && len(conds) == 0 && len(addrs) == 1 && addrs[0] == again.Status.PodIP {
				newIP = again.Status.PodIP
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("pod %s not recreated with its process: %v", victim.Name, err)
	}
	model := b.Host.Cluster(fdbop.Key(ns, "myfdb"))
	for _, p := range model.Processes() {
		if p.ID == id && (!p.Up || p.Address != newIP+":4501") {
			t.Fatalf("process %s in the model: %+v", id, p)
		}
	}
	u, err := bed.Dynamic.Resource(fdbop.GVR).Namespace(ns).Get(ctx, "myfdb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	groups, _, _ := unstructured.NestedSlice(u.Object, "status", "processGroups")
	if len(groups) != 9 {
		t.Fatalf("processGroups: %v", groups)
	}
}

// waitCluster watches the FoundationDBCluster until ok holds.
func waitCluster(ctx context.Context, ns, name string, ok func(*unstructured.Unstructured) bool) error {
	w, err := bed.Dynamic.Resource(fdbop.GVR).Namespace(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if u, isU := ev.Object.(*unstructured.Unstructured); isU && ok(u) {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch ended")
}
