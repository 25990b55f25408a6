package ops

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// PodOwner is the resource that creates and recreates a node group's pods: a StatefulSet, or
// an operator's resource (a FoundationDBCluster, whose owner lives with the code that
// recognises it). Audit events, the run's pod informer, the pods table and restart read the
// group's pods through it, whatever owns them.
type PodOwner interface {
	// Ref names the owner, for the operation's audit events.
	Ref(namespace string) ObjectRef
	// String is the owner as the status table shows it.
	String() string
	// PodSelector selects the group's pods, as discovery read it; nil when unknown.
	PodSelector() *metav1.LabelSelector
	// Member tells whether pod is one of the group's, its identity in the database when the
	// owner labels pods with it ("" otherwise) and its ordinal (-1 when it has none).
	Member(pod *corev1.Pod) (member string, ordinal int, ok bool)
	// PodName is the name the owner gives the pod of an ordinal; "" when the owner names its
	// pods itself (an operator), so a missing ordinal has no name to stand in for it.
	PodName(ordinal int) string
	// Desired is how many pods the owner wants for the group.
	Desired() int32
}

// StatefulSetOwner is a group's StatefulSet.
type StatefulSetOwner struct {
	// Name is the StatefulSet's name (Object's, when Object is set).
	Name string
	// Object is the StatefulSet as read, for engines that need its spec; nil when only the
	// name is known.
	Object *appsv1.StatefulSet
}

// NewStatefulSetOwner is the owner for a StatefulSet as read.
func NewStatefulSetOwner(s *appsv1.StatefulSet) *StatefulSetOwner {
	return &StatefulSetOwner{Name: s.Name, Object: s}
}

// Ref implements PodOwner.
func (o *StatefulSetOwner) Ref(namespace string) ObjectRef {
	ref := ObjectRef{Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: namespace, Name: o.Name}
	if o.Object != nil {
		ref.UID = string(o.Object.GetUID())
	}
	return ref
}

// String implements PodOwner: the StatefulSet's name.
func (o *StatefulSetOwner) String() string { return o.Name }

// PodSelector implements PodOwner: the StatefulSet's selector.
func (o *StatefulSetOwner) PodSelector() *metav1.LabelSelector {
	if o.Object == nil {
		return nil
	}
	return o.Object.Spec.Selector
}

// Member implements PodOwner: a StatefulSet's pod is named <name>-<ordinal> and matches its
// selector (a selector not read matches every pod so named).
func (o *StatefulSetOwner) Member(pod *corev1.Pod) (string, int, bool) {
	rest, ok := strings.CutPrefix(pod.Name, o.Name+"-")
	if !ok {
		return "", -1, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return "", -1, false
	}
	if sel := o.PodSelector(); sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil || !s.Matches(labels.Set(pod.Labels)) {
			return "", -1, false
		}
	}
	return "", n, true
}

// PodName implements PodOwner: <name>-<ordinal>, as the StatefulSet controller names pods.
func (o *StatefulSetOwner) PodName(ordinal int) string { return fmt.Sprintf("%s-%d", o.Name, ordinal) }

// Desired implements PodOwner: spec.replicas, 1 when unset (the API server's default).
func (o *StatefulSetOwner) Desired() int32 {
	if o.Object == nil || o.Object.Spec.Replicas == nil {
		return 1
	}
	return *o.Object.Spec.Replicas
}

// StatefulSetOf is g's StatefulSet as read, for engines whose groups are StatefulSets and
// need its spec; nil when g's pods have another owner or the StatefulSet was not read.
func StatefulSetOf(g *NodeGroup) *appsv1.StatefulSet {
	if o, ok := g.Owner.(*StatefulSetOwner); ok {
		return o.Object
	}
	return nil
}

// StatefulSetName is the name of g's StatefulSet; "" when another owner recreates g's pods.
func StatefulSetName(g *NodeGroup) string {
	if o, ok := g.Owner.(*StatefulSetOwner); ok {
		return o.Name
	}
	return ""
}

// MarshalJSON keeps the group's document as it was before the owner was one field: the
// StatefulSet's name under "statefulSet" ("" for another owner), and an operator's resource
// under "controller".
func (g *NodeGroup) MarshalJSON() ([]byte, error) {
	type plain NodeGroup
	doc := struct {
		*plain
		StatefulSet string         `json:"statefulSet"`
		Controller  *ControllerRef `json:"controller,omitempty"`
	}{plain: (*plain)(g), StatefulSet: StatefulSetName(g)}
	doc.Controller = ControllerOf(g)
	return json.Marshal(doc)
}

// ControllerOf is the operator's resource that recreates g's pods, as read, for the engine
// that recognised it; nil when g's owner is not an operator's resource.
func ControllerOf(g *NodeGroup) *ControllerRef {
	if c, ok := g.Owner.(interface{ ControllerRef() *ControllerRef }); ok {
		return c.ControllerRef()
	}
	return nil
}
