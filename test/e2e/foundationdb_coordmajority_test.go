//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbwire"
)

// TestFoundationDBRestartByPodRefusesCoordinatorMajority (issue #37 item 2): a double cluster
// placed in two zones only has its 3 coordinators in 2 zones, so one zone holds 2 of them. A
// `--method pod --mode zone` restart deletes no pod of that zone: its batch is refused (exit 5,
// one line naming the coordinators) before any pod of it is deleted or any maintenance zone is
// set for it, and the run ends there.
func TestFoundationDBRestartByPodRefusesCoordinatorMajority(t *testing.T) {
	ns := newNamespace(t)
	uncordon := cordonOtherZones(t, "zone-a", "zone-b")
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	b, err := fdbwire.Start(ctx, bed, bed.Client, bed.Dynamic, ns, fdbsim.Config{RestartDelay: time.Second}, fdbE2EPacing())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	spec := fdbwire.ClusterSpec{Namespace: ns, Name: "myfdb", Storage: 3, Log: 2, Stateless: 2, RedundancyMode: "double", ZoneFromNodeLabel: true,
		WaitBetweenRemovalsSeconds: fdbE2EWaitBetweenRemovals()}
	if err := b.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	uncordon()
	model := fdbModel(t, ns, b.Host)
	byZone := map[string]int{}
	for _, p := range model.Processes() {
		if slices.Contains(p.Roles, "coordinator") {
			byZone[p.Zone]++
		}
	}
	majority := ""
	for z, n := range byZone {
		if n >= 2 {
			majority = z
		}
	}
	if len(byZone) != 2 || majority == "" {
		t.Fatalf("setup: coordinators by zone %v, want 3 in two zones", byZone)
	}
	pods, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-cluster-name=myfdb"})
	if err != nil {
		t.Fatal(err)
	}
	inMajority := map[string]string{} // pod -> UID, the pods of the zone holding 2 coordinators
	for _, p := range model.Processes() {
		if p.Zone != majority {
			continue
		}
		for _, pod := range pods.Items {
			if strings.HasSuffix(p.ID, strings.TrimPrefix(pod.Name, "myfdb-")) {
				inMajority[pod.Name] = string(pod.UID)
			}
		}
	}
	if len(inMajority) == 0 {
		t.Fatalf("setup: no pod found for the processes of zone %s", majority)
	}
	r := runCLI(t, cliEnv(t), "restart", "myfdb", "-n", ns, "--rolling", "--method", "pod", "--mode", "zone", "--yes")
	if r.Code != 5 || !strings.Contains(r.Stderr, "the batch holds 2 of 3 coordinators; deleting its pods would leave no majority running") {
		t.Fatalf("want exit 5 naming the coordinator majority: %s", r)
	}
	after, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-cluster-name=myfdb"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range after.Items {
		if uid, ok := inMajority[p.Name]; ok && (string(p.UID) != uid || p.DeletionTimestamp != nil) {
			t.Errorf("pod %s of zone %s (2 of 3 coordinators) was deleted", p.Name, majority)
		}
	}
	for _, m := range fdbMutations(model) {
		if strings.Contains(m, "maintenance on "+majority) {
			t.Errorf("maintenance set on the zone holding the coordinator majority: %q", m)
		}
	}
}
