package cratedbsim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

const testNS = "ns"

type fakeCluster struct {
	t      *testing.T
	client *fake.Clientset
	uids   int

	mu      sync.Mutex
	watches map[string]int // resource -> watches registered
}

// newFakeCluster is a fake API server whose watches a test can wait for. The fake's tracker
// replays objects created or updated between an informer's List and its Watch, but not
// deletions (client-go testing/fixture.go, tracker.Watch): a pod deleted before the
// simulator's pod watch is registered is never seen, and a test waiting for that node to stop
// times out (1 run in about 70 under load). Tests call waitWatches after Start.
func newFakeCluster(t *testing.T) *fakeCluster {
	f := &fakeCluster{t: t, client: fake.NewClientset(), watches: map[string]int{}}
	tracker := f.client.Tracker()
	f.client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		// Registered with the tracker before it is counted: once counted, no event is lost.
		w, err := tracker.Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		f.mu.Lock()
		f.watches[a.GetResource().Resource]++
		f.mu.Unlock()
		return true, w, nil
	})
	return f
}

// waitWatches waits until the simulator watches every resource it follows.
func (f *fakeCluster) waitWatches() {
	f.t.Helper()
	waitFor(f.t, "the simulator's watches", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, r := range []string{"statefulsets", "pods", "persistentvolumeclaims", "services"} {
			if f.watches[r] == 0 {
				return false
			}
		}
		return true
	})
}

func (f *fakeCluster) uid() types.UID {
	f.uids++
	return types.UID(fmt.Sprintf("uid-%d", f.uids))
}

// sts creates a StatefulSet of CrateDB nodes of cluster "c" (-Ccluster.name=c first, unless
// args name a cluster themselves) that find each other through the SRV records of the
// headless Service crate-discovery (created with the first StatefulSet), unless args set
// their own discovery.
func (f *fakeCluster) sts(name string, replicas int32, args ...string) {
	has := func(prefix string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, prefix) })
	}
	if !has("-Ccluster.name=") {
		args = append([]string{"-Ccluster.name=c"}, args...)
	}
	if !has("-Cdiscovery.") {
		args = append(args, "-Cdiscovery.seed_providers=srv", "-Cdiscovery.srv.query=_cluster._tcp.crate-discovery."+testNS+".svc.cluster.local")
	}
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "crate-discovery", Namespace: testNS},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "crate"},
			Ports: []corev1.ServicePort{{Name: "cluster", Port: 4300}}},
	}
	if _, err := f.client.CoreV1().Services(testNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: "crate-discovery",
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "crate"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "crate", Image: "crate:5.10.3", Args: args,
					Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}}}},
		},
	}
	if _, err := f.client.AppsV1().StatefulSets(testNS).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
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
	f := newFakeCluster(t)
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
	f.waitWatches()
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
	f := newFakeCluster(t)
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
	f.waitWatches()
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
			f := newFakeCluster(t)
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
			f.waitWatches()
			waitFor(t, "2 nodes", func() bool { _, n := sim.Health(); return n == 2 })
			res, err := sim.Exec("test", "crate", "SELECT name FROM sys.nodes ORDER BY name")
			if err != nil || fmt.Sprint(res.Rows) != tc.want {
				t.Fatalf("nodes = %v, %v; want %s", res, err, tc.want)
			}
		})
	}
}

// TestMembershipNeedsDiscovery: a group's nodes are members only when their discovery settings
// reach the others, as CrateDB's discovery does: seed hosts, or the srv provider whose query
// names a headless Service with that TCP port selecting the pods. Without either a node looks
// on its own host only. Seed hosts must resolve, as Kubernetes DNS resolves them, to a node of
// the cluster: before, any discovery.seed_hosts value was taken as reaching the others (the
// "resolve nowhere", "beyond the replicas", "another subdomain", "another namespace" and
// "selecting other pods" cases failed).
func TestMembershipNeedsDiscovery(t *testing.T) {
	svc := func(name string, mutate func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "crate"},
				Ports: []corev1.ServicePort{{Name: "cluster", Port: 4300}}},
		}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	srv := func(q string) []string {
		return []string{"-Cdiscovery.seed_providers=srv", "-Cdiscovery.srv.query=" + q}
	}
	for _, tc := range []struct {
		name   string
		args   []string
		extra  *corev1.Service
		member bool
	}{
		{"srv, headless Service selecting the pods", srv("_cluster._tcp.crate-discovery.ns.svc.cluster.local"), nil, true},
		{"srv, short name", srv("_cluster._tcp.crate-discovery"), nil, true},
		{"seed hosts", []string{"-Cdiscovery.seed_hosts=db-0.crate-discovery,db-1.crate-discovery"}, nil, true},
		{"seed hosts, qualified, with port", []string{"-Cdiscovery.seed_hosts=db-1.crate-discovery.ns.svc.cluster.local:4300"}, nil, true},
		{"seed host, a Service", []string{"-Cdiscovery.seed_hosts=crate-discovery:4300"}, nil, true},
		{"seed host, a Service with a virtual IP", []string{"-Cdiscovery.seed_hosts=vip.ns.svc"},
			svc("vip", func(s *corev1.Service) { s.Spec.ClusterIP = "10.0.0.9" }), true},
		{"seed hosts resolve nowhere", []string{"-Cdiscovery.seed_hosts=crate-0.crate-discovery,nope:4300"}, nil, false},
		{"seed host, pod beyond the replicas", []string{"-Cdiscovery.seed_hosts=db-2.crate-discovery"}, nil, false},
		{"seed host, another subdomain", []string{"-Cdiscovery.seed_hosts=db-0.vip"},
			svc("vip", func(s *corev1.Service) { s.Spec.ClusterIP = "10.0.0.9" }), false},
		{"seed host, another namespace", []string{"-Cdiscovery.seed_hosts=db-0.crate-discovery.other.svc"}, nil, false},
		{"seed host, a Service selecting other pods", []string{"-Cdiscovery.seed_hosts=others"},
			svc("others", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "web"} }), false},
		{"no discovery", []string{"-Cdiscovery.type=zen"}, nil, false},
		{"srv, no such Service", srv("_cluster._tcp.nope.ns.svc.cluster.local"), nil, false},
		{"srv, another namespace", srv("_cluster._tcp.crate-discovery.other.svc.cluster.local"), nil, false},
		{"srv, port not named so", srv("_transport._tcp.crate-discovery.ns.svc.cluster.local"), nil, false},
		{"srv, Service not headless", srv("_cluster._tcp.vip.ns.svc.cluster.local"),
			svc("vip", func(s *corev1.Service) { s.Spec.ClusterIP = "10.0.0.9" }), false},
		{"srv, Service selects other pods", srv("_cluster._tcp.others.ns.svc.cluster.local"),
			svc("others", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "web"} }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t)
			if tc.extra != nil {
				if _, err := f.client.CoreV1().Services(testNS).Create(t.Context(), tc.extra, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			f.sts("db", 2, append([]string{"-Cnode.name=$(POD_NAME)"}, tc.args...)...)
			for _, p := range []string{"db-0", "db-1"} {
				f.pvc(p)
				f.pod(p, true)
			}
			sim, err := Start(t.Context(), Config{Client: f.client, Namespace: testNS, Cluster: "c", TickInterval: -1, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sim.Close)
			f.waitWatches()
			want := 0
			if tc.member {
				want = 2
				waitFor(t, "2 nodes", func() bool { _, n := sim.Health(); return n == 2 })
			}
			if got := len(sim.Nodes()); got != want {
				t.Fatalf("%d nodes, want %d: %+v", got, want, sim.Nodes())
			}
		})
	}
}
