package fdbsts

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

func sampleSTS(replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "fdb", Namespace: "ns", UID: "sts-uid"},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: MainContainer, Image: "foundationdb/foundationdb-kubernetes:7.3.43"}},
		}}},
	}
}

func samplePod(i int, uid string) *corev1.Pod {
	ctrl := true
	byName := &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fdb-%d", i), Namespace: "ns", UID: types.UID(uid),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "fdb", UID: "sts-uid", Controller: &ctrl}}},
		Spec: corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: MainContainer,
			Env: []corev1.EnvVar{{Name: "FDB_ZONE_ID", ValueFrom: byName}, {Name: "FDB_INSTANCE_ID", ValueFrom: byName}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.0.%d", 10+i),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// TestRunnerFollowsPods: the model appears once every pod runs, with the first three pods as
// coordinators and each pod's name as instance ID and zone; a deleted pod stops its process, a
// recreated one starts it at its new IP, a new ordinal joins.
func TestRunnerFollowsPods(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(sampleSTS(4), samplePod(0, "a0"), samplePod(1, "a1"), samplePod(2, "a2"))
	host := fdbsim.NewHost(fdbsim.RealClock{})
	r := New(kube, host, Options{Namespace: "ns"})
	if err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if host.Cluster(Key("ns", "fdb")) != nil {
		t.Fatal("model created before every pod runs")
	}
	if _, err := kube.CoreV1().Pods("ns").Create(ctx, samplePod(3, "a3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	m := host.Cluster(Key("ns", "fdb"))
	if m == nil {
		t.Fatal("no model")
	}
	if got, want := m.Coordinators(), []string{"10.0.0.10:4501", "10.0.0.11:4501", "10.0.0.12:4501"}; !slices.Equal(got, want) {
		t.Fatalf("coordinators %v, want %v", got, want)
	}
	up := func() map[string]string {
		out := map[string]string{}
		for _, p := range m.Processes() {
			if p.Up {
				out[p.ID] = p.Address + " " + p.Zone + " " + p.Class
			}
		}
		return out
	}
	if got := up(); len(got) != 4 || got["fdb-3"] != "10.0.0.13:4501 fdb-3 storage" {
		t.Fatalf("processes %v", got)
	}
	if err := kube.CoreV1().Pods("ns").Delete(ctx, "fdb-3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := up(); len(got) != 3 || got["fdb-3"] != "" {
		t.Fatalf("after delete: %v", got)
	}
	back := samplePod(3, "b3")
	back.Status.PodIP = "10.0.0.99"
	if _, err := kube.CoreV1().Pods("ns").Create(ctx, back, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Pods("ns").Create(ctx, samplePod(4, "a4"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := up(); len(got) != 5 || got["fdb-3"] != "10.0.0.99:4501 fdb-3 storage" || got["fdb-4"] == "" {
		t.Fatalf("after recreate and scale up: %v", got)
	}
}
