package foundationdb

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
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

// Layout names of FoundationDB's two layouts (Cluster.Layout, which status prints).
const (
	// LayoutOperator: a FoundationDBCluster of the FoundationDB operator, whose pods the
	// operator creates directly, one per process group.
	LayoutOperator = "foundationdb-operator"
	// LayoutStatefulSet: fdbserver run by a StatefulSet, as FoundationDB's own Kubernetes
	// sample does (apple/foundationdb packaging/docker/kubernetes/statefulset.yaml), with no
	// operator; each pod's locality_instance_id is its name.
	LayoutStatefulSet = "foundationdb-statefulset"
)

// layout is how a FoundationDB cluster runs, as its recognizer attached it to the cluster
// (ops.Cluster.Recognized): the engine's procedures differ by it.
type layout int

const (
	// layoutOperator: the operator's FoundationDBCluster recreates the pods.
	layoutOperator layout = iota
	// layoutStatefulSet: StatefulSets run fdbserver, with no operator.
	layoutStatefulSet
)

// layoutOf is the layout c's recognizer attached; a cluster that none attached (built by hand)
// is the operator's, as the engine's procedures then read its FoundationDBCluster.
func layoutOf(c *ops.Cluster) layout {
	l, _ := c.Recognized.(layout)
	return l
}

// ClusterGVR is the FoundationDB operator's cluster resource.
var ClusterGVR = schema.GroupVersionResource{Group: "apps.foundationdb.org", Version: "v1beta2", Resource: "foundationdbclusters"}

// ClusterKind is ClusterGVR's kind.
const ClusterKind = "FoundationDBCluster"

// Recognizers are FoundationDB's two layouts, in the order discovery tries them: the operator's
// FoundationDBCluster, then StatefulSets running fdbserver.
func Recognizers() []ops.Recognizer {
	return []ops.Recognizer{operatorRecognizer{}, statefulSetRecognizer{}}
}

// operatorRecognizer recognises a FoundationDBCluster named as the cluster.
type operatorRecognizer struct{}

func (operatorRecognizer) Engine() string                        { return ops.EngineFoundationDB }
func (operatorRecognizer) Layout() string                        { return LayoutOperator }
func (operatorRecognizer) Resource() schema.GroupVersionResource { return ClusterGVR }
func (operatorRecognizer) Kind() string                          { return ClusterKind }

func (operatorRecognizer) RecognizeResource(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, namespace, name string) (*ops.Cluster, bool, error) {
	return recognizeCluster(ctx, client, dyn, namespace, name)
}

// statefulSetRecognizer recognises StatefulSets running fdbserver (FoundationDB's own sample):
// the cluster is found by the generic paths (label, name, selector), and this layout is theirs
// when a foundationdb image runs in every StatefulSet.
type statefulSetRecognizer struct{}

func (statefulSetRecognizer) Engine() string { return ops.EngineFoundationDB }
func (statefulSetRecognizer) Layout() string { return LayoutStatefulSet }

// Members: the sample has no naming of its own.
func (statefulSetRecognizer) Members(string, string, []appsv1.StatefulSet) ([]appsv1.StatefulSet, error) {
	return nil, nil
}

// Runs: a container with a foundationdb image (foundationdb/foundationdb,
// foundationdb/foundationdb-kubernetes of FoundationDB's own sample).
func (statefulSetRecognizer) Runs(s *appsv1.StatefulSet, _ string) bool {
	for _, c := range s.Spec.Template.Spec.Containers {
		if strings.Contains(imageRepo(c.Image), "foundationdb") {
			return true
		}
	}
	return false
}

// Finish attaches the StatefulSet layout, and each pod's member (layout.Finish).
func (statefulSetRecognizer) Finish(c *ops.Cluster) {
	c.Layout, c.Recognized = LayoutStatefulSet, layoutStatefulSet
	layoutStatefulSet.Finish(c)
}

// Finish is the layout's reading of a cluster discovery assembled again (discovery.Refresh):
// in the StatefulSet layout each pod's member is its name, as FoundationDB's sample sets
// locality_instance_id from metadata.name.
func (l layout) Finish(c *ops.Cluster) {
	if l != layoutStatefulSet {
		return
	}
	for _, g := range c.Groups {
		for i := range g.Pods {
			g.Pods[i].Member = g.Pods[i].Name
		}
	}
}

// imageRepo returns the last path element of an image reference without tag or digest.
func imageRepo(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, "/"); i >= 0 {
		image = image[i+1:]
	}
	image, _, _ = strings.Cut(image, ":")
	return image
}

// defaultProcessClassLabel is the operator's process class label (api/v1beta2
// foundationdb_labels.go), unless spec.labels.processClassLabels names another.
const defaultProcessClassLabel = "foundationdb.org/fdb-process-class"

// fdbClassOrder is the order of process classes in status: data first, stateless last.
var fdbClassOrder = []string{"storage", "log", "transaction", "stateless"}

// recognizeCluster reads the FoundationDBCluster namespace/name and its pods. found is false
// when there is no such resource (or no such resource type). The operator owns the pods by
// design: Cluster.Operator stays empty, since the engine works with the operator (a pod
// deletion lets it recreate the pod) and never edits what it owns.
func recognizeCluster(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, namespace, name string) (c *ops.Cluster, found bool, err error) {
	u, err := dyn.Resource(ClusterGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading FoundationDBCluster %s/%s: %w", namespace, name, err)
	}
	match, _, _ := unstructured.NestedStringMap(u.Object, "spec", "labels", "matchLabels")
	if len(match) == 0 {
		match = map[string]string{defaultClusterNameLabel: name}
	}
	classLabel := firstString(u.Object, defaultProcessClassLabel, "spec", "labels", "processClassLabels")
	idLabel := firstString(u.Object, defaultProcessGroupIDLabel, "spec", "labels", "processGroupIDLabels")
	pods, podsRV, err := listPods(ctx, client, namespace, labels.SelectorFromSet(match).String())
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
	counts := ProcessCounts(u.Object)
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
			g = &ops.NodeGroup{Name: class, Role: ops.RoleData, Order: order, Owner: NewOwner(ref, class)}
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
			byClass[class] = &ops.NodeGroup{Name: class, Role: ops.RoleData, Order: order, Owner: NewOwner(ref, class)}
		}
	}
	c = &ops.Cluster{Name: name, Namespace: namespace, Engine: ops.EngineFoundationDB, Layout: LayoutOperator, Recognized: layoutOperator,
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

// listPods lists the pods matching selector, page by page, and returns the list's
// resourceVersion (the run's pod informer starts from it).
func listPods(ctx context.Context, client kubernetes.Interface, namespace, selector string) ([]corev1.Pod, string, error) {
	lo := metav1.ListOptions{LabelSelector: selector, Limit: 500}
	var out []corev1.Pod
	rv := ""
	for {
		l, err := client.CoreV1().Pods(namespace).List(ctx, lo)
		if err != nil {
			return nil, "", fmt.Errorf("listing pods by %q in %s: %w", selector, namespace, err)
		}
		out = append(out, l.Items...)
		if l.ResourceVersion != "" {
			rv = l.ResourceVersion
		}
		if l.Continue == "" {
			return out, rv, nil
		}
		lo.Continue = l.Continue
	}
}

// podReady is the pod's Ready condition (discovery's reading: phase and deletion are shown
// apart).
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
