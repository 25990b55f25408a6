package bedwire

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/podgw"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// TestFixtureNodeNames creates a fixture's StatefulSets and their pods (as the StatefulSet
// controller would) in a fake API and checks that the simulator names the nodes as
// Fixture.NodeName says and reports the fixture's version.
func TestFixtureNodeNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f       Fixture
		wantArg string
	}{
		{"pod-name", Fixture{Cluster: "c", Layout: LayoutPodName, Version: "5.10.3"}, "-Cgateway.expected_data_nodes=3"},
		{"operator", Fixture{Cluster: "c", Layout: LayoutOperator, Version: "5.2.11"}, "-Cgateway.recover_after_data_nodes=2"},
		{"operator-4.6", Fixture{Cluster: "c", Layout: LayoutOperator, Version: "4.6.7"}, "-Cgateway.expected_nodes=4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const ns = "ns"
			f := tc.f
			f.Namespace = ns
			f.Groups = []Group{{Name: "master", Replicas: 1}, {Name: "hot", Replicas: 3}}
			client := fake.NewClientset()
			ctx := context.Background()
			// The nodes find each other through its SRV records.
			if _, err := client.CoreV1().Services(ns).Create(ctx, f.DiscoveryService(), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, sts := range f.StatefulSets() {
				c := sts.Spec.Template.Spec.Containers[0]
				if !slices.Contains(append(c.Command, c.Args...), tc.wantArg) {
					t.Fatalf("%s lacks %s: %q", sts.Name, tc.wantArg, append(c.Command, c.Args...))
				}
				if _, err := client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				group := sts.Labels["cloud.crate.io/node-name"]
				for i := range int(*sts.Spec.Replicas) {
					pod := &corev1.Pod{
						ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", sts.Name, i), Namespace: ns, UID: types.UID(fmt.Sprintf("%s-%d", sts.Name, i)), Labels: sts.Spec.Template.Labels},
						Spec:       *sts.Spec.Template.Spec.DeepCopy(),
						Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.0.%d", len(want)+2),
							Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
					}
					if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
					want = append(want, f.NodeName(group, i))
				}
			}
			sim, err := cratedbsim.Start(t.Context(), cratedbsim.Config{Client: client, Namespace: ns, Cluster: f.Cluster, TickInterval: -1, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sim.Close)
			deadline := time.Now().Add(10 * time.Second)
			for {
				var got []string
				for _, n := range sim.Nodes() {
					if n.Up {
						got = append(got, n.Name)
						if n.Version != f.Version {
							t.Fatalf("node %s version %s, want %s", n.Name, n.Version, f.Version)
						}
					}
				}
				slices.Sort(got)
				slices.Sort(want)
				if slices.Equal(got, want) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("nodes %v, want %v", got, want)
				}
				time.Sleep(20 * time.Millisecond)
			}
			// All expected nodes joined: the state is recovered and every node check 1-3 passes.
			res, err := sim.Exec("t", "crate", "SELECT count(*) FROM sys.node_checks WHERE passed = false")
			if err != nil {
				t.Fatal(err)
			}
			if n := res.Rows[0][0].(int64); n != 0 {
				rows, _ := sim.Exec("t", "crate", "SELECT id, node_id, passed FROM sys.node_checks")
				t.Fatalf("%d failing node checks: %v", n, rows.Rows)
			}
			if _, err := sim.Exec("t", "crate", "SELECT max(severity) FROM sys.health"); err != nil {
				t.Fatalf("state not recovered: %v", err)
			}
		})
	}
}

// TestFixtureRealNodes: on real nodes the pods run the simulator image of the fixture's
// version on real nodes only, with the pod gateway, the operator's readiness probe and the
// real nodes' storage class; a version the image lacks is an error.
func TestFixtureRealNodes(t *testing.T) {
	f := Fixture{Namespace: "ns", Cluster: "c", Layout: LayoutOperator, Version: "5.2.11",
		Groups: []Group{{Name: "master", Replicas: 1}, {Name: "hot", Replicas: 2}}, RealNodes: &RealNodes{PodGateway: "10.100.0.1:4321"}}
	for _, sts := range f.StatefulSets() {
		spec := sts.Spec.Template.Spec
		c := spec.Containers[0]
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		switch {
		case c.Image != testbed.ImageCrateDB("5.2.11") || c.Image == "" || c.ImagePullPolicy != corev1.PullNever:
			t.Errorf("%s: image %q pull %s", sts.Name, c.Image, c.ImagePullPolicy)
		case env[podgw.EnvGateway] != "10.100.0.1:4321":
			t.Errorf("%s: gateway env %q", sts.Name, env[podgw.EnvGateway])
		case c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/ready" || c.ReadinessProbe.HTTPGet.Port.IntValue() != ExporterPort:
			t.Errorf("%s: readiness probe %+v", sts.Name, c.ReadinessProbe)
		case spec.NodeSelector[testbed.RealNodeLabel] != "true" || len(spec.Tolerations) != 1:
			t.Errorf("%s: not on real nodes: %v %v", sts.Name, spec.NodeSelector, spec.Tolerations)
		case ptr.Deref(sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName, "") != testbed.RealNodeStorageClass:
			t.Errorf("%s: storage class %v", sts.Name, sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName)
		case sts.Spec.UpdateStrategy.Type != "OnDelete":
			t.Errorf("%s: update strategy %s", sts.Name, sts.Spec.UpdateStrategy.Type)
		}
	}
	if svc := f.DiscoveryService(); svc.Name != "crate-discovery-c" || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("discovery service %+v", svc)
	}
	f.Version = "5.9.9"
	if _, err := f.Image(); err == nil {
		t.Error("Image accepted a version the simulator image is not tagged with")
	}
	f.RealNodes = nil
	if img, err := f.Image(); err != nil || img != "crate:5.9.9" {
		t.Errorf("kwok image = %q, %v", img, err)
	}
}
