package cratedbsim

import (
	"context"
	"fmt"
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

func (f *fakeCluster) sts(name string, replicas int32, args ...string) {
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "crate", Args: args}}}},
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
	f.sts("crate-master-c", 1)
	f.sts("crate-data-hot-c", 2, "-Cgateway.expected_data_nodes=2")
	f.sts("unrelated", 1)
	for _, p := range []string{"crate-master-c-0", "crate-data-hot-c-0", "crate-data-hot-c-1", "unrelated-0"} {
		f.pvc(p)
		f.pod(p, true)
	}
	sim, err := Start(t.Context(), Config{Client: f.client, Namespace: testNS, Cluster: "c", AddrBase: "127.0.3",
		EphemeralPorts: true, TickInterval: -1, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	nodeCount := func(want int) func() bool {
		return func() bool { _, n := sim.Health(); return n == want }
	}
	waitFor(t, "3 nodes", nodeCount(3))
	res, err := sim.Exec("test", "crate", "SELECT name FROM sys.nodes ORDER BY name")
	if err != nil || fmt.Sprint(res.Rows) != "[[data-hot-0] [data-hot-1] [master-0]]" {
		t.Fatalf("names = %v, %v", res, err)
	}
	res, err = sim.Exec("test", "crate", "SELECT passed FROM sys.node_checks")
	if err != nil || res.Rows[0][0] != true {
		t.Fatalf("expected nodes check = %v, %v", res, err)
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
	waitFor(t, "2 nodes", nodeCount(2))
	waitFor(t, "red", severity(severityRed))
	res, _ = sim.Exec("test", "crate", "SELECT passed FROM sys.node_checks")
	if res.Rows[0][0] != false {
		t.Fatalf("expected nodes check passes with a data node missing")
	}
	// Recreated with its volume: data comes back at once.
	f.deletePod("crate-data-hot-c-1")
	f.pod("crate-data-hot-c-1", true)
	waitFor(t, "3 nodes", nodeCount(3))
	waitFor(t, "green", severity(severityGreen))

	// Recreated with a new volume: the data is lost.
	f.deletePod("crate-data-hot-c-1")
	f.deletePVC("crate-data-hot-c-1")
	waitFor(t, "2 nodes", nodeCount(2))
	f.pvc("crate-data-hot-c-1")
	f.pod("crate-data-hot-c-1", true)
	waitFor(t, "3 nodes", nodeCount(3))
	for range 5 {
		sim.Tick()
	}
	if s, _ := sim.Health(); s != severityRed {
		t.Fatalf("severity after losing a volume = %d, want red", s)
	}
	ups := 0
	for _, e := range sim.NodeEvents() {
		if e.Node == "data-hot-1" && e.Up {
			ups++
		}
	}
	if ups != 3 {
		t.Fatalf("data-hot-1 came up %d times, want 3: %+v", ups, sim.NodeEvents())
	}
}
