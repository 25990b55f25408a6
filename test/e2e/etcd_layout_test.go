//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// etcd StatefulSets whose members learn the initial cluster in ways the tool cannot drive
// safely are refused before any write, by scale and by replace (member repair), with one line
// saying what to change. The fixtures follow the real layouts: the Bitnami chart's environment
// (templates/statefulset.yaml of bitnami/etcd, which renders the release namespace into its
// URLs rather than reading it from the downward API) and a static --initial-cluster argument
// list as in etcd's own static-bootstrap docs, with $(POD_NAMESPACE) in the advertised URLs.
// No etcd runs: the refusal comes from the pod template alone, before etcd is asked anything.
// The layouts the tool drives (a ConfigMap of any name and keys) run real etcd on the real
// nodes: TestEtcdLayoutConfigMap.

func TestEtcdLayoutBitnamiRefused(t *testing.T) {
	ns := newNamespace(t)
	sts, sel := etcdChartStatefulSet("foo-etcd", "foo", "foo-etcd-headless")
	// The chart labels its pods app.kubernetes.io/component=etcd too, and selects by it.
	sel["app.kubernetes.io/component"] = "etcd"
	sts.Labels["app.kubernetes.io/component"] = "etcd"
	domain := "foo-etcd-headless." + ns + ".svc.cluster.local"
	initial := "foo-etcd-0=http://foo-etcd-0." + domain + ":2380," +
		"foo-etcd-1=http://foo-etcd-1." + domain + ":2380," +
		"foo-etcd-2=http://foo-etcd-2." + domain + ":2380"
	// The chart's env in its order (values: replicaCount 3, no TLS, no RBAC auth, service
	// enabled), as templates/statefulset.yaml renders it.
	sts.Spec.Template.Spec.Containers = []corev1.Container{{
		Name:  "etcd",
		Image: "docker.io/bitnami/etcd:3.6.8-debian-12-r0",
		Env: []corev1.EnvVar{
			{Name: "BITNAMI_DEBUG", Value: "false"},
			{Name: "MY_POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "MY_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "MY_STS_NAME", Value: "foo-etcd"},
			{Name: "ETCDCTL_API", Value: "3"},
			{Name: "ETCD_ON_K8S", Value: "yes"},
			{Name: "ETCD_START_FROM_SNAPSHOT", Value: "no"},
			{Name: "ETCD_DISASTER_RECOVERY", Value: "no"},
			{Name: "ETCD_NAME", Value: "$(MY_POD_NAME)"},
			{Name: "ETCD_DATA_DIR", Value: "/bitnami/etcd/data"},
			{Name: "ETCD_LOG_LEVEL", Value: "info"},
			{Name: "ALLOW_NONE_AUTHENTICATION", Value: "yes"},
			{Name: "ETCD_ADVERTISE_CLIENT_URLS", Value: "http://$(MY_POD_NAME)." + domain + ":2379,http://foo-etcd." + ns + ".svc.cluster.local:2379"},
			{Name: "ETCD_LISTEN_CLIENT_URLS", Value: "http://0.0.0.0:2379"},
			{Name: "ETCD_INITIAL_ADVERTISE_PEER_URLS", Value: "http://$(MY_POD_NAME)." + domain + ":2380"},
			{Name: "ETCD_LISTEN_PEER_URLS", Value: "http://0.0.0.0:2380"},
			{Name: "ETCD_INITIAL_CLUSTER_TOKEN", Value: "etcd-cluster-k8s"},
			{Name: "ETCD_INITIAL_CLUSTER_STATE", Value: "new"},
			{Name: "ETCD_INITIAL_CLUSTER", Value: initial},
			{Name: "ETCD_CLUSTER_DOMAIN", Value: domain},
		},
		Ports:        []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/bitnami/etcd"}},
	}}
	checkLayoutRefused(t, ns, sts.Name, "foo", sel, sts, "Bitnami chart's layout", "helm upgrade --set replicaCount=N")
}

func TestEtcdLayoutStaticArgsRefused(t *testing.T) {
	ns := newNamespace(t)
	sts, sel := etcdChartStatefulSet("etcd", "etcd", "etcd")
	peers := []string{}
	for _, p := range []string{"etcd-0", "etcd-1", "etcd-2"} {
		peers = append(peers, p+"=http://"+p+".etcd."+ns+".svc:2380")
	}
	sts.Spec.Template.Spec.Containers = []corev1.Container{{
		Name:  "etcd",
		Image: "registry.k8s.io/etcd:3.6.8-0",
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		},
		Command: []string{"etcd"},
		Args: []string{
			"--name=$(POD_NAME)",
			"--data-dir=/var/lib/etcd",
			"--listen-peer-urls=http://0.0.0.0:2380",
			"--listen-client-urls=http://0.0.0.0:2379",
			"--advertise-client-urls=http://$(POD_NAME).etcd.$(POD_NAMESPACE).svc:2379",
			"--initial-advertise-peer-urls=http://$(POD_NAME).etcd.$(POD_NAMESPACE).svc:2380",
			"--initial-cluster-token=etcd-cluster-1",
			"--initial-cluster=" + strings.Join(peers, ","),
			"--initial-cluster-state=new",
		},
		Ports:        []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
	}}
	checkLayoutRefused(t, ns, sts.Name, "etcd", sel, sts, "passes a fixed --initial-cluster=", "--initial-cluster=$(ETCD_INITIAL_CLUSTER)")
}

// checkLayoutRefused creates the StatefulSet (kwok runs its pods), then checks that scale and
// replace are refused with exit 5 and the given phrases, writing nothing.
func checkLayoutRefused(t *testing.T, ns, stsName, cluster string, sel map[string]string, sts *appsv1.StatefulSet, want ...string) {
	t.Helper()
	if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(t.Context(), sts, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create statefulset: %v", err)
	}
	waitPods(t, ns, labels.SelectorFromSet(sel), 3, func(p *corev1.Pod) bool { return testbed.PodReady(p) && p.DeletionTimestamp == nil })
	waitPVCsBound(t, ns, 3)
	waitStatefulSetSettled(t, ns, stsName, 3)
	before := snapshotNamespace(t, ns)
	env := cliEnv(t)
	for _, args := range [][]string{
		{"scale", cluster, "-n", ns, "--replicas", "5", "--yes"},
		{"scale", cluster, "-n", ns, "--replicas", "5", "--dry-run"},
		{"replace", cluster, stsName + "-1", "-n", ns, "--yes"},
	} {
		res := runCLI(t, env, args...)
		if res.Code != 5 || strings.Count(strings.TrimSpace(res.Stderr), "\n") != 0 {
			t.Fatalf("%v: want exit 5 and one line, got %s", args, res)
		}
		for _, w := range want {
			if !strings.Contains(res.Stderr, w) {
				t.Errorf("%v: refusal lacks %q: %s", args, w, res.Stderr)
			}
		}
		t.Logf("%v refused: %s", args, strings.TrimSpace(res.Stderr))
	}
	if d := diffRVSnapshots(t, before, snapshotNamespace(t, ns)); len(d) != 0 {
		t.Fatalf("refused commands wrote: %v", d)
	}
}

// etcdChartStatefulSet is a 3-replica StatefulSet labelled as the charts label etcd
// (app.kubernetes.io/name=etcd, instance=<instance>), selecting its pods by those labels.
func etcdChartStatefulSet(name, instance, service string) (*appsv1.StatefulSet, map[string]string) {
	sts := statefulSet(name, 3)
	sts.Labels = map[string]string{"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": instance}
	sel := maps.Clone(sts.Labels)
	sts.Spec.Selector.MatchLabels = sel
	sts.Spec.Template.Labels = sel
	sts.Spec.Template.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels = sel
	sts.Spec.ServiceName = service
	return sts, sel
}

// TestEtcdLayoutConfigMap: members that read the initial cluster from a ConfigMap of another
// name and keys than the default, through envFrom with a prefix or through configMapKeyRef
// variables behind --initial-cluster=$(VAR) --initial-cluster-state=$(VAR), are scaled 3→4→3.
// The members run on the real nodes, so each new etcd really starts from what the tool wrote
// there: a key written elsewhere would leave it with state "new" and it would not join. The
// tool writes that ConfigMap's keys only (no default <sts>-cluster-state appears), the members
// match the pods, and keys written all along are readable.
func TestEtcdLayoutConfigMap(t *testing.T) {
	needRealNodes(t)
	for _, tc := range []struct {
		name   string
		layout testbed.RealEtcdStateLayout
	}{
		{"envFrom with prefix", testbed.RealEtcdStateLayout{ConfigMap: "etcd-members", Prefix: "ETCD_"}},
		{"configMapKeyRef", testbed.RealEtcdStateLayout{ConfigMap: "etcd-peers", ClusterKey: "peers", StateKey: "state"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newRealEtcdIn(t, newNamespace(t))
			x.deploy(testbed.RealEtcdObjectsLayout(x.ns, x.name, 3, tc.layout), 3)
			cmName, clusterKey, stateKey := tc.layout.Keys(x.name)
			w := x.startWriter()
			env := cliEnv(t)
			// etcd-0 leads: scaling 3→4→3 touches etcd-3 only, so it may cause no election.
			x.pinLeader(x.name + "-0")
			for _, n := range []int{4, 3} {
				o := x.oracle()
				began := time.Now()
				res := runCLI(t, env, "scale", x.name, "-n", x.ns, "--replicas", fmt.Sprint(n), "--yes", "--timeout", "170s")
				t.Logf("scale to %d: exit %d in %s", n, res.Code, time.Since(began).Round(time.Millisecond))
				if res.Code != 0 {
					w.stop()
					st := runCLI(t, env, "status", x.name, "-n", x.ns, "-o", "json")
					t.Fatalf("scale to %d: %s\nstatus now: %s", n, res, st.Stdout)
				}
				x.checkConverged(n)
				o.check(t, fmt.Sprintf("scale to %d", n), 0)
				cm, err := bed.Client.CoreV1().ConfigMaps(x.ns).Get(t.Context(), cmName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]string{clusterKey: testbed.RealEtcdInitialCluster(x.ns, x.name, n), stateKey: "existing"}
				if !maps.Equal(cm.Data, want) {
					t.Errorf("after scale to %d, ConfigMap %s holds %v, want %v", n, cmName, cm.Data, want)
				}
				if _, err := bed.Client.CoreV1().ConfigMaps(x.ns).Get(t.Context(), x.name+"-cluster-state", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("the default ConfigMap %s-cluster-state was created (get: %v)", x.name, err)
				}
			}
			acked, failed := w.stop()
			t.Logf("writes: %d acknowledged, %d failed", len(acked), failed)
			if len(acked) < 10 {
				t.Fatalf("only %d writes acknowledged: the load did not run", len(acked))
			}
			x.verify(acked)
		})
	}
}
