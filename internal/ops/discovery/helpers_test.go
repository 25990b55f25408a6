package discovery

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/cratedb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/etcd"
	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/foundationdb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

const ns = "prod"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type stsMod func(*appsv1.StatefulSet)

// mkSTS builds a StatefulSet with a selector, a "data" claim template and
// status counts equal to replicas.
func mkSTS(name string, replicas int32, mods ...stsMod) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID("uid-" + name),
			Labels:            map[string]string{},
			Annotations:       map[string]string{},
			CreationTimestamp: metav1.NewTime(t0),
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"sts": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"sts": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "example/db:1"}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
		},
		Status: appsv1.StatefulSetStatus{Replicas: replicas, ReadyReplicas: replicas},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func withLabels(kv ...string) stsMod {
	return func(s *appsv1.StatefulSet) {
		for i := 0; i < len(kv); i += 2 {
			s.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withAnnotation(k, v string) stsMod {
	return func(s *appsv1.StatefulSet) { s.Annotations[k] = v }
}

func createdAt(minutes int) stsMod {
	return func(s *appsv1.StatefulSet) {
		s.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(minutes) * time.Minute))
	}
}

func withImage(container, image string) stsMod {
	return func(s *appsv1.StatefulSet) {
		s.Spec.Template.Spec.Containers = []corev1.Container{{Name: container, Image: image}}
	}
}

func ownedBy(apiVersion, kind, name string) stsMod {
	return func(s *appsv1.StatefulSet) {
		ctrl := true
		s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{
			APIVersion: apiVersion, Kind: kind, Name: name, UID: "owner-" + types.UID(name), Controller: &ctrl,
		})
	}
}

type podMod func(*corev1.Pod)

// mkPod builds pod <sts>-<ordinal>, controlled by s, Ready and Running.
func mkPod(s *appsv1.StatefulSet, ordinal int, mods ...podMod) *corev1.Pod {
	ctrl := true
	name := fmt.Sprintf("%s-%d", s.Name, ordinal)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID("uid-" + name),
			Labels:            map[string]string{"sts": s.Name},
			CreationTimestamp: metav1.NewTime(t0.Add(time.Hour)),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: s.Name, UID: s.UID, Controller: &ctrl,
			}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func onNode(n string) podMod { return func(p *corev1.Pod) { p.Spec.NodeName = n } }

func notReady(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
}

func mkNode(name, zone string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if zone != "" {
		n.Labels[labelZone] = zone
	}
	return n
}

// crateCR is a CrateDB custom resource listing data groups in order.
func crateCR(name string, groups ...string) *unstructured.Unstructured {
	data := make([]any, 0, len(groups))
	for _, g := range groups {
		data = append(data, map[string]any{"name": g, "replicas": int64(3)})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cloud.crate.io/v1",
		"kind":       "CrateDB",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       map[string]any{"nodes": map[string]any{"data": data}},
	}}
}

// assertReadOnly fails if the fake saw anything but reads.
func assertReadOnly(t *testing.T, actions []k8stesting.Action) {
	t.Helper()
	for _, a := range actions {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			t.Errorf("discovery wrote to the API: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// The engines' names for what these tests build (their recognizers own them).
const (
	labelAppName                  = "app.kubernetes.io/name"
	labelAppInstance              = "app.kubernetes.io/instance"
	labelAppComponent             = "app.kubernetes.io/component"
	labelCrateNode                = "cloud.crate.io/node-name"
	fdbLabelClusterName           = "foundationdb.org/fdb-cluster-name"
	fdbLabelProcessClass          = "foundationdb.org/fdb-process-class"
	fdbLabelProcessGroupID        = "foundationdb.org/fdb-process-group-id"
	LayoutCrateDBOperator         = cratedb.LayoutOperator
	LayoutEtcd                    = etcd.LayoutStatefulSet
	LayoutFoundationDBOperator    = foundationdb.LayoutOperator
	LayoutFoundationDBStatefulSet = foundationdb.LayoutStatefulSet
)

// FoundationDBClusterGVR is the FoundationDB operator's resource.
var FoundationDBClusterGVR = foundationdb.ClusterGVR

// builtinRecognizers are the built-in engines' recognizers in registry order (as
// internal/commands/engines.go hands them to discovery).
func builtinRecognizers() []ops.Recognizer {
	return slices.Concat(cratedb.Recognizers(), etcd.Recognizers(), foundationdb.Recognizers())
}

// withRecognizers is opts with the built-in recognizers when it has none.
func withRecognizers(opts Options) Options {
	if opts.Recognizers == nil {
		opts.Recognizers = builtinRecognizers()
	}
	return opts
}

// discover is Discover with the built-in recognizers.
func discover(ctx context.Context, client kubernetes.Interface, opts Options) (*ops.Cluster, error) {
	return Discover(ctx, client, withRecognizers(opts))
}

// buildCluster is BuildCluster with the built-in recognizers.
func buildCluster(opts Options, layout string, objs Objects) (*ops.Cluster, error) {
	return BuildCluster(withRecognizers(opts), layout, objs)
}

// crateDBResource is the CrateDB operator's resource, which discovery reads for the groups' order.
var crateDBResource = schema.GroupVersionResource{Group: "cloud.crate.io", Version: "v1", Resource: "cratedbs"}
