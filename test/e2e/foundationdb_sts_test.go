//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/fdbsim/fdbsts"
	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/fdbsim/fdbwire"
	"github.com/kubectl-dbops/kubectl-dbops/internal/testbed"
)

// fdbSampleStatefulSet is FoundationDB's own Kubernetes sample
// (apple/foundationdb packaging/docker/kubernetes/statefulset.yaml): a `foundationdb` container
// of the foundationdb-kubernetes image whose zone and instance ID are the pod's name.
func fdbSampleStatefulSet(name string, replicas int32) *appsv1.StatefulSet {
	s := statefulSet(name, replicas)
	byName := &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}
	byIP := &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}
	s.Spec.Template.Spec.Containers = []corev1.Container{{
		Name:  fdbsts.MainContainer,
		Image: "foundationdb/foundationdb-kubernetes:" + fdbsim.Version,
		Env: []corev1.EnvVar{
			{Name: "FDB_CLUSTER_FILE", Value: "/var/fdb/data/fdb.cluster"},
			{Name: "FDB_PUBLIC_IP", ValueFrom: byIP},
			{Name: "FDB_POD_IP", ValueFrom: byIP},
			{Name: "FDB_MACHINE_ID", ValueFrom: byName},
			{Name: "FDB_ZONE_ID", ValueFrom: byName},
			{Name: "FDB_INSTANCE_ID", ValueFrom: byName},
		},
		Args:         []string{"--input-dir", "/var/fdb/dynamic-conf"},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/fdb/data"}},
	}}
	return s
}

// fdbSTSFixture creates the sample's StatefulSet with replicas pods in ns and the simulator
// behind it (double redundancy, the sample's `configure new double ssd`).
func fdbSTSFixture(t *testing.T, ns, name string, replicas int32) *fdbwire.Bed {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	b, err := fdbwire.StartStatefulSets(ctx, bed, bed.Client, ns, fdbsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(ctx, fdbSampleStatefulSet(name, replicas), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create statefulset: %v", err)
	}
	waitPods(t, ns, labels.SelectorFromSet(labels.Set{"app": name}), int(replicas), func(p *corev1.Pod) bool {
		return testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
	if err := b.WaitStatefulSet(ctx, ns, name, int(replicas)); err != nil {
		t.Fatal(err)
	}
	return b
}

func fdbSTSModel(t *testing.T, b *fdbwire.Bed, ns, name string) *fdbsim.Cluster {
	t.Helper()
	m := b.Host.Cluster(fdbsts.Key(ns, name))
	if m == nil {
		t.Fatalf("no model for %s", name)
	}
	return m
}

// TestFoundationDBStatefulSetStatus: a StatefulSet laid out as FoundationDB's sample, with no
// label of this tool, is detected as FoundationDB by its image and its status read through
// fdbcli in its pods, each pod's process under its name (locality_instance_id).
func TestFoundationDBStatefulSetStatus(t *testing.T) {
	ns := newNamespace(t)
	fdbSTSFixture(t, ns, "fdbsample", 5)
	r := runCLI(t, cliEnv(t), "status", "fdbsample", "-n", ns)
	if r.Code != 0 {
		t.Fatal(r)
	}
	for _, want := range []string{"engine foundationdb, layout foundationdb-statefulset", "Health:   healthy",
		"Processes:", "coordinators: 3/3 reachable", "recovery: fully_recovered", "fdbsample-4"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.Stdout)
		}
	}
	// Each pod's row names its own process (instance ID = pod name), none reported without a pod.
	procs, _, _ := strings.Cut(r.Stdout[strings.Index(r.Stdout, "Processes:"):], "Node groups:")
	for _, line := range strings.Split(procs, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && strings.HasPrefix(f[0], "fdbsample-") && (f[1] != f[0] || !strings.Contains(line, ":4501")) {
			t.Errorf("row of %s names process group %s: %q", f[0], f[1], line)
		}
		if len(f) > 2 && f[0] == "-" && strings.Contains(line, ":4501") {
			t.Errorf("process without its pod: %q", line)
		}
	}
}
