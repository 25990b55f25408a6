package discovery

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// LayoutFoundationDBOperator: a FoundationDBCluster of the FoundationDB operator, whose pods
// the operator creates directly, one per process group.
const LayoutFoundationDBOperator = "foundationdb-operator"

// FoundationDBClusterGVR is the FoundationDB operator's cluster resource.
var FoundationDBClusterGVR = schema.GroupVersionResource{Group: "apps.foundationdb.org", Version: "v1beta2", Resource: "foundationdbclusters"}

// The FoundationDB operator's default labels (its api/v1beta2/foundationdb_labels.go); a
// cluster's spec.labels may replace them.
const (
	fdbLabelClusterName    = "foundationdb.org/fdb-cluster-name"
	fdbLabelProcessClass   = "foundationdb.org/fdb-process-class"
	fdbLabelProcessGroupID = "foundationdb.org/fdb-process-group-id"
)

// fdbClassOrder is the order of process classes in status: data first, stateless last.
var fdbClassOrder = []string{"storage", "log", "transaction", "stateless"}

// discoverFoundationDB reads the FoundationDBCluster opts.Name and its pods. found is false
// when there is no such resource (or no such resource type). The operator owns the pods by
// design: Cluster.Operator stays empty, since the engine works with the operator (a pod
// deletion lets it recreate the pod) and never edits what it owns.
func discoverFoundationDB(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, opts Options) (c *ops.Cluster, found bool, err error) {
	u, err := dyn.Resource(FoundationDBClusterGVR).Namespace(opts.Namespace).Get(ctx, opts.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading FoundationDBCluster %s/%s: %w", opts.Namespace, opts.Name, err)
	}
	match, _, _ := unstructured.NestedStringMap(u.Object, "spec", "labels", "matchLabels")
	if len(match) == 0 {
		match = map[string]string{fdbLabelClusterName: opts.Name}
	}
	classLabel := firstString(u.Object, fdbLabelProcessClass, "spec", "labels", "processClassLabels")
	idLabel := firstString(u.Object, fdbLabelProcessGroupID, "spec", "labels", "processGroupIDLabels")
	pods, podsRV, err := listPodsPaged(ctx, client, opts.Namespace, labels.SelectorFromSet(match).String(), "")
	if err != nil {
		return nil, true, err
	}
	// The zone of a pod is its process group's fault domain, FDB's zoneid
	// (status.processGroups[].faultDomain), not the node's topology zone.
	zones := map[string]string{}
	groupsStatus, _, _ := unstructured.NestedSlice(u.Object, "status", "processGroups")
	for _, g := range groupsStatus {
		m, _ := g.(map[string]any)
		id, _ := m["processGroupID"].(string)
		fd, _ := m["faultDomain"].(string)
		zones[id] = fd
	}
	// Desired counts as the operator reads spec.processCounts: unset or 0 is its default for the
	// redundancy mode, -1 none.
	counts := FoundationDBProcessCounts(u.Object)
	ref := &ops.ControllerRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(), Object: u.Object}
	byClass := map[string]*ops.NodeGroup{}
	for i := range pods {
		p := &pods[i]
		if !controlledBy(p, u) {
			continue
		}
		class := p.Labels[classLabel]
		if class == "" {
			continue
		}
		g := byClass[class]
		if g == nil {
			order := slices.Index(fdbClassOrder, class)
			if order < 0 {
				order = len(fdbClassOrder)
			}
			g = &ops.NodeGroup{Name: class, Role: ops.RoleData, Order: order, Owner: NewFoundationDBOwner(ref, class)}
			byClass[class] = g
		}
		id := p.Labels[idLabel]
		op := ops.Pod{
			Name:     p.Name,
			Member:   id,
			Group:    class,
			Ordinal:  trailingNumber(id),
			UID:      p.UID,
			Phase:    string(p.Status.Phase),
			Ready:    podReady(p),
			Node:     p.Spec.NodeName,
			Zone:     zones[id],
			Created:  p.CreationTimestamp.Time,
			Deleting: p.DeletionTimestamp != nil,
		}
		for _, cs := range p.Status.ContainerStatuses {
			op.Restarts += cs.RestartCount
		}
		g.Pods = append(g.Pods, op)
		g.Current++
		if op.Ready {
			g.Ready++
		}
	}
	// A class with a count but no pod yet is a group too.
	for class := range counts {
		if byClass[class] == nil && counts[class] > 0 {
			order := slices.Index(fdbClassOrder, class)
			if order < 0 {
				order = len(fdbClassOrder)
			}
			byClass[class] = &ops.NodeGroup{Name: class, Role: ops.RoleData, Order: order, Owner: NewFoundationDBOwner(ref, class)}
		}
	}
	c = &ops.Cluster{Name: opts.Name, Namespace: opts.Namespace, Engine: ops.EngineFoundationDB, Layout: LayoutFoundationDBOperator,
		PodsResourceVersion: podsRV}
	for _, g := range byClass {
		g.Desired = g.Owner.Desired()
		slices.SortFunc(g.Pods, func(a, b ops.Pod) int { return cmp.Compare(a.Name, b.Name) })
		c.Groups = append(c.Groups, g)
	}
	c.SortGroups()
	// SortGroups orders pods by ordinal (random process group numbers): keep names' order.
	for _, g := range c.Groups {
		slices.SortStableFunc(g.Pods, func(a, b ops.Pod) int { return cmp.Compare(a.Name, b.Name) })
	}
	return c, true, nil
}

// discoverFoundationDBOnly is discovery under --engine foundationdb.
func discoverFoundationDBOnly(ctx context.Context, client kubernetes.Interface, opts Options) (*ops.Cluster, error) {
	if opts.Dynamic == nil {
		return nil, fmt.Errorf("discovering FoundationDBCluster %s/%s: no dynamic client", opts.Namespace, opts.Name)
	}
	c, found, err := discoverFoundationDB(ctx, client, opts.Dynamic, opts)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ops.Usagef("no FoundationDBCluster %q in namespace %q", opts.Name, opts.Namespace)
	}
	return c, nil
}

func controlledBy(p *corev1.Pod, u *unstructured.Unstructured) bool {
	for _, r := range p.OwnerReferences {
		if r.Kind == u.GetKind() && r.Name == u.GetName() && (r.UID == "" || r.UID == u.GetUID()) {
			return true
		}
	}
	return false
}

// firstString is the first entry of a string list field, or def.
func firstString(obj map[string]any, def string, fields ...string) string {
	l, _, _ := unstructured.NestedStringSlice(obj, fields...)
	if len(l) > 0 && l[0] != "" {
		return l[0]
	}
	return def
}

func trailingNumber(id string) int {
	i := strings.LastIndexByte(id, '-')
	n, err := strconv.Atoi(id[i+1:])
	if err != nil {
		return -1
	}
	return n
}

func int64Of(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	return 0
}

// NewFoundationDBOwner is the owner of a process class's pods: the FoundationDBCluster ref as
// read. Its pods are those with the cluster's match labels and the class label (the
// operator's GetPodLabels puts both on every pod it creates).
func NewFoundationDBOwner(ref *ops.ControllerRef, class string) ops.PodOwner {
	match, _, _ := unstructured.NestedStringMap(ref.Object, "spec", "labels", "matchLabels")
	if len(match) == 0 {
		match = map[string]string{fdbLabelClusterName: ref.Name}
	}
	l := maps.Clone(match)
	l[firstString(ref.Object, fdbLabelProcessClass, "spec", "labels", "processClassLabels")] = class
	return &fdbOwner{ref: ref, class: class, selector: &metav1.LabelSelector{MatchLabels: l},
		idLabel: firstString(ref.Object, fdbLabelProcessGroupID, "spec", "labels", "processGroupIDLabels"),
		desired: int32(FoundationDBProcessCounts(ref.Object)[class])}
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
