package discovery

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Objects is already-listed API state for one cluster; BuildCluster needs
// nothing else, so plans can be computed (and benchmarked) without an API.
type Objects struct {
	// StatefulSets are the cluster's StatefulSets, already selected.
	StatefulSets []appsv1.StatefulSet
	// Pods may include pods of other owners: only pods whose controller is
	// one of StatefulSets (by UID) are kept. Duplicates (by name) are ignored.
	Pods []corev1.Pod
	// Nodes the pods run on, for zones only; may be empty or partial.
	Nodes []corev1.Node
	// DataGroupOrder is the data groups' order as the cluster's resource defines it (the
	// CrateDB resource's spec.nodes.data[].name), when it could be read; only used when the
	// engine's recognizer is an ops.GroupOrderer.
	DataGroupOrder []string
}

// groupSpec is a node group's identity before live state is attached.
type groupSpec struct {
	name  string
	role  string
	order int
	sts   *appsv1.StatefulSet
}

// BuildCluster turns listed objects into a Cluster: it classifies the
// StatefulSets into node groups (opts.Name, opts.Namespace and opts.Engine
// are used; Selector and Dynamic are not), attaches their pods and zones and
// sorts everything into procedure order. Pods and nodes are indexed by
// owner UID and name, so it is linear in the number of objects apart from
// ordering each group's pods. layout is one of the Layout* constants or a
// recognizer's Layout.
func BuildCluster(opts Options, layout string, objs Objects) (*ops.Cluster, error) {
	engine, err := resolveEngine(opts, layout, objs.StatefulSets)
	if err != nil {
		return nil, err
	}
	rec := opts.statefulSetRecognizer(layout, engine)
	specs, err := classify(opts.Name, engine, rec, objs)
	if err != nil {
		return nil, err
	}
	zones := make(map[string]string, len(objs.Nodes))
	for i := range objs.Nodes {
		if z := nodeZone(&objs.Nodes[i]); z != "" {
			zones[objs.Nodes[i].Name] = z
		}
	}
	c := &ops.Cluster{
		Name:      opts.Name,
		Namespace: opts.Namespace,
		Engine:    engine,
		Layout:    layout,
	}
	assemble(c, specs, objs.Pods, zones)
	finish(c, rec)
	return c, nil
}

// resolveEngine picks the engine: the explicit option, else what the layout
// implies, else the dbops.io/engine labels, else the StatefulSets' shape.
func resolveEngine(opts Options, layout string, stss []appsv1.StatefulSet) (string, error) {
	if opts.Engine != "" {
		if err := validateEngine(opts, opts.Engine); err != nil {
			return "", err
		}
		return opts.Engine, nil
	}
	for _, r := range opts.statefulSetRecognizers() {
		if r.Layout() == layout {
			return r.Engine(), nil
		}
	}
	engine, from := "", ""
	for i := range stss {
		s := &stss[i]
		v, ok := s.Labels[LabelEngine]
		if !ok {
			continue
		}
		if !slices.Contains(opts.engines(), v) {
			return "", ops.Usagef("StatefulSet %q: label %s=%q is not a known engine (allowed: %s)",
				s.Name, LabelEngine, v, strings.Join(opts.engines(), ", "))
		}
		if engine != "" && v != engine {
			return "", ops.Usagef("StatefulSets of cluster %q disagree on %s: %q says %s, %q says %s (label them alike or pass --engine)",
				opts.Name, LabelEngine, from, engine, s.Name, v)
		}
		engine, from = v, s.Name
	}
	if engine != "" {
		return engine, nil
	}
	if len(stss) == 0 {
		return ops.EngineGeneric, nil
	}
	for _, r := range opts.statefulSetRecognizers() {
		if all(stss, func(s *appsv1.StatefulSet) bool { return r.Runs(s, opts.Name) }) {
			return r.Engine(), nil
		}
	}
	return ops.EngineGeneric, nil
}

func all(stss []appsv1.StatefulSet, ok func(*appsv1.StatefulSet) bool) bool {
	for i := range stss {
		if !ok(&stss[i]) {
			return false
		}
	}
	return true
}

func validateEngine(opts Options, e string) error {
	if slices.Contains(opts.engines(), e) {
		return nil
	}
	return ops.Usagef("unknown engine %q (allowed: %s)", e, strings.Join(opts.engines(), ", "))
}

// engines are the engine names opts allows.
func (opts Options) engines() []string {
	if opts.Engines != nil {
		return opts.Engines
	}
	return ops.KnownEngines
}

// classify derives each StatefulSet's node group name, role and order.
// dbops.io/* labels win; the recognizer of the cluster's layout or engine (an
// ops.GroupNamer) otherwise names the groups (the CrateDB operator's); anything
// else is a data group named after its StatefulSet. Data groups are ordered by
// the recognizer (an ops.GroupOrderer) only when the engine is its own.
func classify(cluster, engine string, rec ops.StatefulSetRecognizer, objs Objects) ([]groupSpec, error) {
	namer, _ := rec.(ops.GroupNamer)
	stss := objs.StatefulSets
	specs := make([]groupSpec, 0, len(stss))
	hasOrder := make([]bool, len(stss))
	byName := make(map[string]string, len(stss))
	for i := range stss {
		s := stss[i].DeepCopy()
		g := groupSpec{name: s.Name, role: ops.RoleData, sts: s}
		if group, master, ok := groupOf(namer, s, cluster); ok {
			g.name = group
			if master {
				g.role = ops.RoleMaster
			}
		}
		if v := s.Labels[LabelNodeGroup]; v != "" {
			g.name = v
		}
		if v, ok := s.Labels[LabelRole]; ok {
			if v != ops.RoleMaster && v != ops.RoleData {
				return nil, ops.Usagef("StatefulSet %q: label %s=%q is not valid (allowed: %s, %s)",
					s.Name, LabelRole, v, ops.RoleMaster, ops.RoleData)
			}
			g.role = v
		}
		if v, ok := s.Annotations[AnnotationOrder]; ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return nil, ops.Usagef("StatefulSet %q: annotation %s=%q is not an integer (allowed: any integer such as 0, 1, 2; lower goes first)",
					s.Name, AnnotationOrder, v)
			}
			g.order = n
			hasOrder[i] = true
		}
		if other, dup := byName[g.name]; dup {
			return nil, ops.Usagef("StatefulSets %q and %q both form node group %q of cluster %q (set distinct %s labels)",
				other, s.Name, g.name, cluster, LabelNodeGroup)
		}
		byName[g.name] = s.Name
		specs = append(specs, g)
	}
	if _, ok := rec.(ops.GroupOrderer); ok && rec.Engine() == engine {
		defaultDataOrder(specs, hasOrder, objs.DataGroupOrder)
	}
	return specs, nil
}

func groupOf(namer ops.GroupNamer, s *appsv1.StatefulSet, cluster string) (string, bool, bool) {
	if namer == nil {
		return "", false, false
	}
	return namer.GroupOf(s, cluster)
}

// defaultDataOrder ranks data groups that carry no order annotation: by
// their position in the cluster resource's order (CrateDB: spec.nodes.data) when known
// (procedures follow the cluster definition), else by creation time, then
// name. Annotated groups keep their value.
func defaultDataOrder(specs []groupSpec, hasOrder []bool, crOrder []string) {
	pos := make(map[string]int, len(crOrder))
	for i, n := range crOrder {
		if _, seen := pos[n]; !seen {
			pos[n] = i
		}
	}
	var idx []int
	for i := range specs {
		if !hasOrder[i] && specs[i].role == ops.RoleData {
			idx = append(idx, i)
		}
	}
	rank := func(i int) int {
		if p, ok := pos[specs[i].name]; ok {
			return p
		}
		return len(crOrder) // unknown to the resource: after the known ones
	}
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := specs[idx[a]], specs[idx[b]]
		if rx, ry := rank(idx[a]), rank(idx[b]); rx != ry {
			return rx < ry
		}
		tx, ty := x.sts.CreationTimestamp, y.sts.CreationTimestamp
		if !tx.Equal(&ty) {
			return tx.Before(&ty)
		}
		return x.name < y.name
	})
	for r, i := range idx {
		specs[i].order = r
	}
}

// assemble attaches live state to the group specs and fills c.Groups.
func assemble(c *ops.Cluster, specs []groupSpec, pods []corev1.Pod, zones map[string]string) {
	owners := make(map[types.UID]int, len(specs))
	for i, g := range specs {
		owners[g.sts.UID] = i
	}
	// One pass over pods, indexed by controlling StatefulSet, keeps
	// discovery linear for thousands of pods.
	byGroup := make([][]*corev1.Pod, len(specs))
	// Pod names are unique in a namespace; UIDs may be unset in
	// hand-built inputs.
	seen := make(map[string]struct{}, len(pods))
	for i := range pods {
		p := &pods[i]
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil {
			continue
		}
		gi, ok := owners[ref.UID]
		if !ok {
			continue
		}
		if _, dup := seen[p.Name]; dup {
			continue
		}
		seen[p.Name] = struct{}{}
		byGroup[gi] = append(byGroup[gi], p)
	}

	var operators []string
	c.Groups = make([]*ops.NodeGroup, 0, len(specs))
	for i, g := range specs {
		s := g.sts
		owner := ops.NewStatefulSetOwner(s)
		ng := &ops.NodeGroup{
			Name:    g.name,
			Owner:   owner,
			Role:    g.role,
			Order:   g.order,
			Desired: owner.Desired(),
			Current: s.Status.Replicas,
			Ready:   s.Status.ReadyReplicas,
			Pods:    make([]ops.Pod, 0, len(byGroup[i])),
		}
		// Lists come back in name order (…-1, …-10, …-2). Sorting small
		// (ordinal, pointer) pairs here is far cheaper than letting
		// SortGroups move whole Pod structs; it then finds them in order.
		members := make([]member, len(byGroup[i]))
		prefix := s.Name + "-"
		for j, p := range byGroup[i] {
			members[j] = member{ordinal: podOrdinal(p, prefix), pod: p}
		}
		slices.SortFunc(members, func(a, b member) int {
			return cmp.Or(cmp.Compare(a.ordinal, b.ordinal), strings.Compare(a.pod.Name, b.pod.Name))
		})
		for _, m := range members {
			ng.Pods = append(ng.Pods, toPod(m.pod, m.ordinal, s, g.name, zones))
		}
		c.Groups = append(c.Groups, ng)
		if op := operatorOf(s); op != "" && !slices.Contains(operators, op) {
			operators = append(operators, op)
		}
	}
	c.Operator = strings.Join(operators, ", ")
	c.SortGroups()
	if g := MasterEligible(c); g != nil {
		g.MasterEligible = true
	}
}

// member is a pod with its parsed ordinal, for sorting.
type member struct {
	ordinal int
	pod     *corev1.Pod
}

func toPod(p *corev1.Pod, ordinal int, s *appsv1.StatefulSet, group string, zones map[string]string) ops.Pod {
	out := ops.Pod{
		Name:     p.Name,
		Group:    group,
		Ordinal:  ordinal,
		UID:      p.UID,
		Phase:    string(p.Status.Phase),
		Ready:    podReady(p),
		Node:     p.Spec.NodeName,
		Zone:     zones[p.Spec.NodeName],
		Created:  p.CreationTimestamp.Time,
		Deleting: p.DeletionTimestamp != nil,
	}
	if n := len(s.Spec.VolumeClaimTemplates); n > 0 {
		out.PVCs = make([]string, 0, n)
		for _, t := range s.Spec.VolumeClaimTemplates {
			out.PVCs = append(out.PVCs, t.Name+"-"+p.Name)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		out.Restarts += cs.RestartCount
	}
	return out
}

// podOrdinal parses <sts>-<N> given prefix "<sts>-"; the pod-index label
// is the fallback. -1 means neither was usable, which a StatefulSet
// controller never produces.
func podOrdinal(p *corev1.Pod, prefix string) int {
	if rest, ok := strings.CutPrefix(p.Name, prefix); ok {
		if n, ok := parseOrdinal(rest); ok {
			return n
		}
	}
	if n, ok := parseOrdinal(p.Labels[labelPodIndex]); ok {
		return n
	}
	return -1
}

func parseOrdinal(s string) (int, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false // Atoi alone would accept signs
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeZone(n *corev1.Node) string {
	if z := n.Labels[labelZone]; z != "" {
		return z
	}
	return n.Labels[labelZoneBeta]
}

// operatorOf names the operator owning a StatefulSet, or "". Built-in
// controllers and Helm releases are not operators: they do not fight manual
// changes.
func operatorOf(s *appsv1.StatefulSet) string {
	if ref := metav1.GetControllerOfNoCopy(s); ref != nil && !builtinAPI(ref.APIVersion) {
		return fmt.Sprintf("%s/%s (%s)", ref.Kind, ref.Name, ref.APIVersion)
	}
	switch v := s.Labels[labelManagedBy]; {
	case v == "", strings.EqualFold(v, "Helm"), strings.EqualFold(v, "kubectl-dbops"):
		return ""
	default:
		return "managed-by=" + v
	}
}

// builtinAPI reports whether apiVersion belongs to Kubernetes itself: the
// core group, undotted groups (apps, batch, ...) and *.k8s.io. Custom
// resources always live in dotted groups.
func builtinAPI(apiVersion string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return false
	}
	return !strings.Contains(gv.Group, ".") || strings.HasSuffix(gv.Group, ".k8s.io")
}
