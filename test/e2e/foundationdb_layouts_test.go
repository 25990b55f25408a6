//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbwire"
)

// fdbLayoutFixture starts the simulator and stand-in operator for ns with spec (named myfdb).
func fdbLayoutFixture(t *testing.T, ns string, spec fdbwire.ClusterSpec) *fdbwire.Bed {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	b, err := fdbwire.Start(ctx, bed, bed.Client, bed.Dynamic, ns, fdbsim.Config{RestartDelay: time.Second}, fdbE2EPacing())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	spec.Namespace, spec.Name = ns, "myfdb"
	spec.WaitBetweenRemovalsSeconds = fdbE2EWaitBetweenRemovals()
	if err := b.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFoundationDBLayouts runs status, restart and replace against the FoundationDB operator's
// own sample cluster (config/samples/cluster.yaml: processCounts with storage and log unset,
// stateless -1, a cluster_controller process, faultDomain foundationdb.org/none) and against a
// cluster whose cluster file names coordinators by DNS name (spec.routing.useDNSInClusterFile).
func TestFoundationDBLayouts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   fdbwire.ClusterSpec
		groups map[string]int // process groups per class the operator runs
		coords int
		scale  string // a scale --processes run after the replace ("" for none)
	}{
		// Double (the operator's default mode): 3 storage, 3 logs + 1, no stateless.
		// scale stateless=-1 on the sample: already none, a run that waits for no stateless group.
		{name: "operator sample", spec: fdbwire.ClusterSpec{OperatorSample: true},
			groups: map[string]int{"storage": 3, "log": 4, "cluster_controller": 1}, coords: 3, scale: "stateless=-1"},
		{name: "DNS cluster file", spec: fdbwire.ClusterSpec{Storage: 3, Log: 3, Stateless: 3, RedundancyMode: "triple", ZoneFromNodeLabel: true, DNS: true},
			groups: map[string]int{"storage": 3, "log": 3, "stateless": 3}, coords: 5, scale: "stateless=-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			b := fdbLayoutFixture(t, ns, tc.spec)
			model := fdbModel(t, ns, b.Host)
			env := cliEnv(t)
			if tc.spec.DNS {
				for _, c := range model.Coordinators() {
					if !strings.Contains(c, ".myfdb."+ns+".svc.cluster.local:") {
						t.Fatalf("coordinator %q is not a DNS name", c)
					}
				}
			}

			// status: the groups the operator runs, each pod and process, the coordinators by role.
			r := runCLI(t, env, "status", "myfdb", "-n", ns, "-o", "json")
			if r.Code != 0 {
				t.Fatal(r)
			}
			var doc struct {
				Cluster struct {
					Groups []struct {
						Name             string
						Desired, Current int32
					}
				}
				Health struct {
					Status  string
					Details map[string]string
					Table   struct{ Rows [][]string }
				}
			}
			if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
				t.Fatalf("%v\n%s", err, r.Stdout)
			}
			got := map[string]int{}
			for _, g := range doc.Cluster.Groups {
				if g.Desired != g.Current {
					t.Fatalf("group %s: desired %d, current %d", g.Name, g.Desired, g.Current)
				}
				got[g.Name] = int(g.Desired)
			}
			if !equalCounts(got, tc.groups) || doc.Health.Status != "healthy" {
				t.Fatalf("groups %v (want %v), health %s:\n%s", got, tc.groups, doc.Health.Status, r.Stdout)
			}
			yes := 0
			for _, row := range doc.Health.Table.Rows {
				if row[5] == "yes" {
					yes++
				}
			}
			if want := fmt.Sprintf("%d/%d reachable", tc.coords, tc.coords); doc.Health.Details["coordinators"] != want {
				t.Fatalf("coordinators %q, want %q", doc.Health.Details["coordinators"], want)
			}
			if yes != tc.coords {
				t.Fatalf("COORDINATOR yes on %d processes, want %d:\n%v", yes, tc.coords, doc.Health.Table.Rows)
			}
			if r := runCLI(t, env, "wait", "myfdb", "-n", ns, "--for=ready"); r.Code != 0 {
				t.Fatalf("wait --for=ready: %v", r)
			}

			// restart, both methods: every process bounced (fdbcli kill, the default), then every
			// pod deleted by batches (--method pod keeps the coordinator majority guard in play).
			for _, method := range []string{"process", "pod"} {
				start := time.Now()
				if r := runCLI(t, env, "restart", "myfdb", "-n", ns, "--rolling", "--method", method, "--yes"); r.Code != 0 {
					t.Fatal(r)
				}
				for _, p := range model.Processes() {
					if !p.Started.After(start) {
						t.Fatalf("--method %s: process %s not restarted", method, p.ID)
					}
				}
			}

			// replace a coordinator's process group: finishes with its class back at its count.
			// With DNS the coordinators step sees it by its role, not by the cluster file's
			// hostnames. Which group holds a coordinator is the stand-in operator's choice (it
			// moves them when pods come back with new addresses), so it is read, not assumed.
			pods, err := bed.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-process-class in (storage,log)"})
			if err != nil || len(pods.Items) == 0 {
				t.Fatalf("storage and log pods: %v %d", err, len(pods.Items))
			}
			var victim *corev1.Pod
			for i := range pods.Items {
				for _, p := range model.Processes() {
					if p.ID == pods.Items[i].Labels[fdbGroupLabel] && slices.Contains(p.Roles, "coordinator") && victim == nil {
						victim = &pods.Items[i]
					}
				}
			}
			if victim == nil {
				t.Fatalf("no storage or log process holds a coordinator: %+v", model.Processes())
			}
			if r := runCLI(t, env, "replace", "myfdb", victim.Name, "-n", ns, "--yes"); r.Code != 0 {
				t.Fatal(r)
			}
			groups, _ := fdbGroups(t, ns)
			if _, ok := groups[victim.Labels[fdbGroupLabel]]; ok {
				t.Fatalf("replaced group %s still in the status", victim.Labels[fdbGroupLabel])
			}
			perClass := map[string]int{}
			for _, g := range groups {
				c, _ := g["processClass"].(string)
				perClass[c]++
			}
			if !equalCounts(perClass, tc.groups) {
				t.Fatalf("process groups after replace %v, want %v", perClass, tc.groups)
			}
			if tc.scale == "" {
				return
			}
			// scale --processes stateless=-1: the operator removes every stateless group.
			if r := runCLI(t, env, "scale", "myfdb", "-n", ns, "--processes", tc.scale, "--yes"); r.Code != 0 {
				t.Fatal(r)
			}
			groups, _ = fdbGroups(t, ns)
			for id, g := range groups {
				if g["processClass"] == "stateless" {
					t.Fatalf("stateless group %s left after stateless=-1", id)
				}
			}
		})
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
