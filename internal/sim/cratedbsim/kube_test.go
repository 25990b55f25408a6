package cratedbsim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

const testNS = "ns"

type fakeCluster struct {
	t      *testing.T
	client *fake.Clientset
	uids   int
}

func (f *fakeCluster) uid() types.UID {
	f.uids++
	return types.UID(fmt.Sprintf("uid-%d", f.uids))
}

// sts creates a StatefulSet of CrateDB nodes of cluster "c" (-Ccluster.name=c first, unless
// args name a cluster themselves).
func (f *fakeCluster) sts(name string, replicas int32, args ...string) {
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "-Ccluster.name=") }) {
		args = append([]string{"-Ccluster.name=c"}, args...)
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "crate", Image: "crate:5.10.3", Args: args,
				Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}}}},
		},
	}
	if _, err := f.client.AppsV1().StatefulSets(testNS).Create(context.Background(), sts, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeCluster) pvc(pod string) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + pod, Namespace: testNS, UID: f.uid()}}
	if _, err := f.client.CoreV1().PersistentVolumeClaims(testNS).Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeCluster) pod(name string, ready bool) {
	ctx := context.Background()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: f.uid()},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
	if old, err := f.client.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{}); err == nil {
		p.UID = old.UID
		if _, err := f.client.CoreV1().Pods(testNS).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
		return
	}
	if _, err := f.client.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeCluster) deletePod(name string) {
	if err := f.client.CoreV1().Pods(testNS).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeCluster) deletePVC(pod string) {
	if err := f.client.CoreV1().PersistentVolumeClaims(testNS).Delete(context.Background(), "data-"+pod, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFollowsKubernetes(t *testing.T) {
	f := &fakeCluster{t: t, client: fake.NewClientset()}
	gw := []string{"-Cgateway.expected_data_nodes=3", "-Cgateway.recover_after_data_nodes=2"}
	// The operator's naming for the master, the official guide's (pod name) for data nodes.
	f.sts("crate-master-c", 1, append([]string{"-Cnode.name=master-$(hostname | awk -F- '{print $NF}')", "-Cnode.master=true", "-Cnode.data=false"}, gw...)...)
	f.sts("crate-data-hot-c", 3, append([]string{"-Cnode.name=$(POD_NAME)", "-Cnode.master=false", "-Cnode.data=true"}, gw...)...)
	// Named like a group of c, but its nodes belong to another cluster.
	f.sts("crate-data-cold-c", 1, "-Ccluster.name=other", "-Cnode.name=$(POD_NAME)")
	for _, p := range []string{"crate-master-c-0", "crate-data-hot-c-0", "crate-data-hot-c-1", "crate-data-hot-c-2", "crate-data-cold-c-0"} {
		f.pvc(p)
		f.pod(p, true)
	}
	sim, err := Start(t.Context(), Config{Client: f.client, Namespace: testNS, Cluster: "c", TickInterval: -1, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	nodeCount := func(want int) func() bool {
		return func() bool { _, n := sim.Health(); return n == want }
	}
	waitFor(t, "4 nodes", nodeCount(4))
	res, err := sim.Exec("test", "crate", "SELECT name FROM sys.nodes ORDER BY name")
	if err != nil || fmt.Sprint(res.Rows) != "[[crate-data-hot-c-0] [crate-data-hot-c-1] [crate-data-hot-c-2] [master-0]]" {
		t.Fatalf("names = %v, %v", res, err)
	}
	checks := func(id int, passed bool) int64 {
		t.Helper()
		res, err := sim.Exec("test", "crate", "SELECT count(*) FROM sys.node_checks WHERE id = $1 AND passed = $2", fmt.Sprint(id), fmt.Sprint(passed))
		if err != nil {
			t.Fatal(err)
		}
		return res.Rows[0][0].(int64)
	}
	if n := checks(1, true); n != 4 {
		t.Fatalf("expected nodes check passes on %d nodes, want 4", n)
	}
	if _, err := sim.Exec("test", "crate", "CREATE TABLE t (a INT) CLUSTERED INTO 2 SHARDS WITH (number_of_replicas = 0)"); err != nil {
		t.Fatal(err)
	}
	severity := func(want int) func() bool {
		return func() bool { s, _ := sim.Health(); return s == want }
	}
	waitFor(t, "green", severity(severityGreen))

	// Not Ready: the node leaves sys.nodes, its primary is gone (no replicas): red.
	f.pod("crate-data-hot-c-1", false)
	waitFor(t, "3 nodes", nodeCount(3))
	waitFor(t, "red", severity(severityRed))
	if n := checks(1, false); n != 3 {
		t.Fatalf("expected nodes check fails on %d nodes with a data node missing, want 3", n)
	}
	// Recreated with its volume: data comes back at once.
	f.deletePod("crate-data-hot-c-1")
	f.pod("crate-data-hot-c-1", true)
	waitFor(t, "4 nodes", nodeCount(4))
	waitFor(t, "green", severity(severityGreen))

	// Recreated with a new volume: the data is lost.
	f.deletePod("crate-data-hot-c-1")
	f.deletePVC("crate-data-hot-c-1")
	waitFor(t, "3 nodes", nodeCount(3))
	f.pvc("crate-data-hot-c-1")
	f.pod("crate-data-hot-c-1", true)
	waitFor(t, "4 nodes", nodeCount(4))
	for range 5 {
		sim.Tick()
	}
	if s, _ := sim.Health(); s != severityRed {
		t.Fatalf("severity after losing a volume = %d, want red", s)
	}
	ups := 0
	for _, e := range sim.NodeEvents() {
		if e.Node == "crate-data-hot-c-1" && e.Up {
			ups++
		}
	}
	if ups != 3 {
		t.Fatalf("crate-data-hot-c-1 came up %d times, want 3: %+v", ups, sim.NodeEvents())
	}
}

// TestShutdownGraceFollowsTerminatingPods: with chaos on, a node whose pod starts
// terminating stops serving at once but stays listed in sys.nodes for the grace time.
func TestShutdownGraceFollowsTerminatingPods(t *testing.T) {
	f := &fakeCluster{t: t, client: fake.NewClientset()}
	f.sts("crate-data-hot-c", 2, "-Cnode.name=$(POD_NAME)")
	for _, p := range []string{"crate-data-hot-c-0", "crate-data-hot-c-1"} {
		f.pvc(p)
		f.pod(p, true)
	}
	sim, err := Start(t.Context(), Config{Client: f.client, Namespace: testNS, Cluster: "c", TickInterval: -1, Logf: t.Logf,
		Chaos: Chaos{ShutdownGrace: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	waitFor(t, "2 nodes", func() bool { _, n := sim.Health(); return n == 2 })
	p, err := f.client.CoreV1().Pods(testNS).Get(context.Background(), "crate-data-hot-c-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.DeletionTimestamp = ptr.To(metav1.Now())
	if _, err := f.client.CoreV1().Pods(testNS).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node stopped", func() bool { _, n := sim.Health(); return n == 1 })
	res, err := sim.Exec("test", "crate", "SELECT count(*) FROM sys.nodes WHERE name = 'crate-data-hot-c-1'")
	if err != nil || res.Rows[0][0] != int64(1) {
		t.Fatalf("terminating node not listed during the grace time: %v %v", res, err)
	}
}

// TestMembershipFromClusterName: the simulator's nodes are the pods whose CrateDB settings
// name its cluster (-Ccluster.name), whatever the StatefulSets are called or labelled.
// Before, membership came
// from StatefulSet names (crate-data-*-<cluster>) or dbops.io/* labels.
func TestMembershipFromClusterName(t *testing.T) {
	for _, tc := range []struct {
		name, cluster string
		want          string
	}{
		{"any StatefulSet name", "c", "[[db-one-0] [db-one-1]]"},
		{"another cluster", "prod", "[[db-one-0] [db-one-1]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCluster{t: t, client: fake.NewClientset()}
			f.sts("db-one", 2, "-Cnode.name=$(POD_NAME)", "-Ccluster.name="+tc.cluster)
			f.sts("crate-master-"+tc.cluster, 1, "-Ccluster.name=someone-else", "-Cnode.name=$(POD_NAME)")
			for _, p := range []string{"db-one-0", "db-one-1", "crate-master-" + tc.cluster + "-0"} {
				f.pvc(p)
				f.pod(p, true)
			}
			sim, err := Start(t.Context(), Config{Client: f.client, Namespace: testNS, Cluster: tc.cluster, TickInterval: -1, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sim.Close)
			waitFor(t, "2 nodes", func() bool { _, n := sim.Health(); return n == 2 })
			res, err := sim.Exec("test", "crate", "SELECT name FROM sys.nodes ORDER BY name")
			if err != nil || fmt.Sprint(res.Rows) != tc.want {
				t.Fatalf("nodes = %v, %v; want %s", res, err, tc.want)
			}
		})
	}
}
