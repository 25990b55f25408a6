package fdbop

import (
	"maps"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStandInAppliesOperatorDefaults: the operator's config/samples/cluster.yaml (no
// redundancy mode, cluster_controller 1, stateless -1, storage and log unset) gets the
// operator's defaults: 3 storage, 4 log, 1 cluster_controller and no stateless process group
// (GetProcessCountsWithDefaults); the database comes up with the cluster controller on its
// cluster_controller process.
func TestStandInAppliesOperatorDefaults(t *testing.T) {
	b := newBed(t, map[string]any{
		"version":       "7.3.69",
		"faultDomain":   map[string]any{"key": "foundationdb.org/none"},
		"processCounts": map[string]any{"cluster_controller": int64(1), "stateless": int64(-1)},
	})
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	got := map[string]int{}
	for _, pg := range b.status(t).ProcessGroups {
		got[pg.ProcessClass]++
	}
	if want := map[string]int{"storage": 3, "log": 4, "cluster_controller": 1}; !maps.Equal(got, want) {
		t.Fatalf("process groups per class %v, want %v", got, want)
	}
	st := b.status(t)
	if st.Generations["reconciled"] != 2 || !st.Health.Available {
		t.Fatalf("status %+v", st)
	}
	model := b.host.Cluster("demo/myfdb")
	if model == nil {
		t.Fatal("no model")
	}
	for _, p := range model.Processes() {
		if p.Zone != "myfdb-"+strings.ReplaceAll(p.ID, "_", "-") { // foundationdb.org/none: zoneid = pod name
			t.Fatalf("process %s zone %q", p.ID, p.Zone)
		}
		if p.Class == "cluster_controller" && !slices.Contains(p.Roles, "cluster_controller") {
			t.Fatalf("cluster controller not on the cluster_controller process: %+v", p)
		}
	}
}

// TestDesiredCounts: the defaults worked out by hand from the operator's source.
func TestDesiredCounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec clusterSpec
		want map[string]int
	}{
		{name: "double, nothing set", want: map[string]int{"storage": 3, "log": 4, "stateless": 9}},
		{name: "triple", spec: func() clusterSpec {
			var s clusterSpec
			s.DatabaseConfiguration.RedundancyMode = "triple"
			return s
		}(), want: map[string]int{"storage": 5, "log": 5, "stateless": 10}},
		{name: "explicit and none", spec: clusterSpec{ProcessCounts: map[string]int{"storage": 4, "log": 3, "stateless": -1}},
			want: map[string]int{"storage": 4, "log": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.spec.desiredCounts(); !maps.Equal(got, tc.want) {
				t.Fatalf("%v, want %v", got, tc.want)
			}
		})
	}
}

// TestStandInDNSClusterFile: with spec.routing.useDNSInClusterFile the stand-in writes the
// coordinators as the pods' DNS names (GetCoordinatorAddress, GetPodDNSName), serves those
// names from the pods' IPs, and status json names the coordinators by hostname while the
// processes behind them hold the coordinator role.
func TestStandInDNSClusterFile(t *testing.T) {
	spec := sandboxSpec()
	spec["routing"] = map[string]any{"useDNSInClusterFile": true}
	b := newBed(t, spec)
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	model := b.host.Cluster("demo/myfdb")
	if model == nil {
		t.Fatal("no model")
	}
	coords := model.Coordinators()
	if len(coords) != 5 {
		t.Fatalf("coordinators %v", coords)
	}
	pods := map[string]bool{}
	for _, p := range b.pods(t) {
		pods[p.Name] = true
	}
	for _, c := range coords {
		pod, rest, ok := strings.Cut(c, ".")
		if !ok || rest != "myfdb.demo.svc.cluster.local:4501" || !pods[pod] {
			t.Fatalf("coordinator %q is not <pod>.myfdb.demo.svc.cluster.local:4501", c)
		}
	}
	if st := b.status(t); !strings.HasSuffix(st.ConnectionString, strings.Join(coords, ",")) {
		t.Fatalf("status.connectionString %s", st.ConnectionString)
	}
	n := 0
	for _, p := range model.Processes() {
		if slices.Contains(p.Roles, "coordinator") {
			n++
		}
	}
	if n != 5 {
		t.Fatalf("%d processes hold the coordinator role, want 5", n)
	}
}

// TestStandInPVCsCarryMatchLabels: a PVC has the pod labels (match labels, class, process group
// ID) and the resource labels, as GetPvcMetadata builds them, so a selector by match labels
// AND process group ID finds it.
func TestStandInPVCsCarryMatchLabels(t *testing.T) {
	spec := sandboxSpec()
	spec["labels"] = map[string]any{"matchLabels": map[string]any{"app": "mine"}}
	b := newBed(t, spec)
	b.reconcile(t)
	pvcs, err := b.kube.CoreV1().PersistentVolumeClaims("demo").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(pvcs.Items) == 0 {
		t.Fatalf("PVCs: %v %d", err, len(pvcs.Items))
	}
	for _, p := range pvcs.Items {
		if p.Labels["app"] != "mine" || p.Labels[labelProcessGroupID] == "" || p.Labels[labelClusterName] != "myfdb" {
			t.Fatalf("PVC %s labels %v", p.Name, p.Labels)
		}
	}
}
