package foundationdb

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// NewOwner is the owner of a process class's pods: the FoundationDBCluster ref as
// read. Its pods are those with the cluster's match labels and the class label (the
// operator's GetPodLabels puts both on every pod it creates).
func NewOwner(ref *ops.ControllerRef, class string) ops.PodOwner {
	match, _, _ := unstructured.NestedStringMap(ref.Object, "spec", "labels", "matchLabels")
	if len(match) == 0 {
		match = map[string]string{defaultClusterNameLabel: ref.Name}
	}
	l := maps.Clone(match)
	l[firstString(ref.Object, defaultProcessClassLabel, "spec", "labels", "processClassLabels")] = class
	return &fdbOwner{ref: ref, class: class, selector: &metav1.LabelSelector{MatchLabels: l},
		idLabel: firstString(ref.Object, defaultProcessGroupIDLabel, "spec", "labels", "processGroupIDLabels"),
		desired: int32(ProcessCounts(ref.Object)[class])}
}

// fdbOwner is a process class's owner: the FoundationDBCluster, whose operator creates and
// recreates the class's pods and names them after their process group IDs.
type fdbOwner struct {
	ref      *ops.ControllerRef
	class    string
	selector *metav1.LabelSelector
	idLabel  string
	desired  int32
}

// ControllerRef is the FoundationDBCluster as read, for the engine (ops.ControllerOf).
func (o *fdbOwner) ControllerRef() *ops.ControllerRef { return o.ref }

// Ref implements ops.PodOwner: the FoundationDBCluster.
func (o *fdbOwner) Ref(namespace string) ops.ObjectRef {
	ref := ops.ObjectRef{Kind: o.ref.Kind, APIVersion: o.ref.APIVersion, Namespace: namespace, Name: o.ref.Name}
	if md, ok := o.ref.Object["metadata"].(map[string]any); ok {
		ref.UID, _ = md["uid"].(string)
	}
	return ref
}

// String implements ops.PodOwner.
func (o *fdbOwner) String() string { return o.ref.Kind + "/" + o.ref.Name }

// PodSelector implements ops.PodOwner: the cluster's match labels and the class label.
func (o *fdbOwner) PodSelector() *metav1.LabelSelector { return o.selector }

// Member implements ops.PodOwner: a pod the class selector matches; its process group ID
// label is its identity and that ID's number its ordinal.
func (o *fdbOwner) Member(p *corev1.Pod) (string, int, bool) {
	s, err := metav1.LabelSelectorAsSelector(o.selector)
	if err != nil || !s.Matches(labels.Set(p.Labels)) {
		return "", -1, false
	}
	id := p.Labels[o.idLabel]
	if id == "" {
		return "", trailingNumber(p.Name), true
	}
	return id, trailingNumber(id), true
}

// PodName implements ops.PodOwner: the operator names the pods itself.
func (o *fdbOwner) PodName(int) string { return "" }

// Desired implements ops.PodOwner: the class's count as the operator reads spec.processCounts.
func (o *fdbOwner) Desired() int32 { return o.desired }
