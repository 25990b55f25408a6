// Package discovery finds a database cluster's StatefulSets, pods and zones
// in live API state and maps them onto the ops.Cluster model. It only ever
// reads (get/list): commands decide what to do with what it finds.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Options say which cluster to discover.
type Options struct {
	Namespace string
	// Name is the cluster name. With Selector it only names the cluster
	// (and its lock); it may then be empty if all selected StatefulSets
	// carry the same dbops.io/cluster label.
	Name string
	// Selector, when set, picks the StatefulSets explicitly (label selector
	// syntax) instead of trying the known layouts.
	Selector string
	// Engine, when set, overrides engine detection; one of Engines.
	Engine string
	// Engines are the engine names a caller can build (nil = ops.KnownEngines);
	// --engine and the dbops.io/engine label must name one.
	Engines []string
	// Recognizers are the engines' recognizers (the registry's, internal/commands/engines.go),
	// tried in order; only those of Engines count. Without them only the generic paths find a
	// cluster (labels, name, selector), of engine generic unless labels or Engine say another.
	Recognizers []ops.Recognizer
	// Dynamic is optional. When set, the CrateDB custom resource
	// (cratedbs.cloud.crate.io/v1) is read for the data groups' order.
	Dynamic dynamic.Interface
}

// listPageSize bounds each list response so large namespaces do not
// produce one huge reply.
const listPageSize = 500

// Discover finds the cluster described by opts. Layouts are tried in order:
// dbops.io labels, the recognizers' own naming (CrateDB operator, etcd),
// plain StatefulSet named opts.Name, then the recognizers' operator resources
// (a FoundationDBCluster); opts.Selector replaces them all. No cluster found is a usage
// error (ops.ErrUsage); API failures are wrapped.
func Discover(ctx context.Context, client kubernetes.Interface, opts Options) (*ops.Cluster, error) {
	if opts.Namespace == "" {
		return nil, ops.Usagef("no namespace given for database cluster %q", opts.Name)
	}
	if opts.Engine != "" {
		if err := validateEngine(opts, opts.Engine); err != nil {
			return nil, err
		}
	}

	var (
		layout string
		stss   []appsv1.StatefulSet
	)
	if opts.Selector != "" {
		sel, err := labels.Parse(opts.Selector)
		if err != nil {
			return nil, ops.Usagef("invalid selector %q: %v", opts.Selector, err)
		}
		stss, err = listStatefulSets(ctx, client, opts.Namespace, sel.String())
		if err != nil {
			return nil, err
		}
		if len(stss) == 0 {
			return nil, ops.Usagef("no database cluster in namespace %q: no StatefulSet matches selector %q",
				opts.Namespace, opts.Selector)
		}
		if opts.Name == "" {
			if opts.Name = commonLabel(stss, LabelCluster); opts.Name == "" {
				return nil, ops.Usagef("the StatefulSets matching selector %q carry no common %s label: give the cluster a name too (it names the cluster's lock)",
					opts.Selector, LabelCluster)
			}
		}
		layout = LayoutSelector
	} else {
		if opts.Name == "" {
			return nil, ops.Usagef("no database cluster name given (or use --selector to pick StatefulSets explicitly)")
		}
		// Under --engine, the engine's operator resources first (a FoundationDBCluster); else
		// its StatefulSets.
		var resErr error
		if opts.Engine != "" && len(opts.resourceRecognizers(opts.Engine)) > 0 {
			c, err := recognizeResourceOnly(ctx, client, opts)
			if err == nil || !errors.Is(err, ops.ErrUsage) {
				return c, err
			}
			resErr = err
		}
		all, err := listStatefulSets(ctx, client, opts.Namespace, "")
		if err != nil {
			return nil, err
		}
		layout, stss, err = selectLayout(opts, all)
		if err != nil && resErr != nil {
			return nil, resErr
		}
		if err != nil {
			// No StatefulSet layout: the name may be an operator's resource, whose pods have
			// no StatefulSet (asked only now, so other layouts cost no extra request).
			if opts.Dynamic != nil && opts.Engine == "" {
				for _, r := range opts.resourceRecognizers("") {
					if c, found, rerr := r.RecognizeResource(ctx, client, opts.Dynamic, opts.Namespace, opts.Name); rerr != nil || found {
						return c, rerr
					}
				}
			}
			return nil, err
		}
	}

	engine, err := resolveEngine(opts, layout, stss)
	if err != nil {
		return nil, err
	}
	objs := Objects{StatefulSets: stss}
	rec := opts.statefulSetRecognizer(layout, engine)
	if o, ok := rec.(ops.GroupOrderer); ok && rec.Engine() == engine && opts.Dynamic != nil {
		if objs.DataGroupOrder, err = o.DataGroupOrder(ctx, opts.Dynamic, opts.Namespace, opts.Name); err != nil {
			return nil, err
		}
	}
	// Classify before reading pods: label mistakes fail fast.
	specs, err := classify(opts.Name, engine, rec, objs)
	if err != nil {
		return nil, err
	}
	var podsRV string
	if objs.Pods, podsRV, err = listPods(ctx, client, opts.Namespace, stss); err != nil {
		return nil, err
	}
	zones, err := nodeZones(ctx, client, objs.Pods, nil)
	if err != nil {
		return nil, err
	}
	c := &ops.Cluster{Name: opts.Name, Namespace: opts.Namespace, Engine: engine, Layout: layout, NodeZones: zones, PodsResourceVersion: podsRV}
	assemble(c, specs, objs.Pods, zones)
	finish(c, rec)
	return c, nil
}

// Refresh re-reads live state for the StatefulSets of c, keeping its
// identity (name, engine, layout, group names, roles and orders). It
// returns a new Cluster; c is not modified. A StatefulSet that disappeared
// is an error, since procedures must not carry on against a stale model.
func Refresh(ctx context.Context, client kubernetes.Interface, c *ops.Cluster) (*ops.Cluster, error) {
	if c == nil || len(c.Groups) == 0 {
		return nil, errors.New("refresh: cluster has no node groups")
	}
	specs := make([]groupSpec, 0, len(c.Groups))
	stss := make([]appsv1.StatefulSet, 0, len(c.Groups))
	known := make(map[string]string)
	for _, g := range c.Groups {
		name := ops.StatefulSetName(g)
		s, err := client.AppsV1().StatefulSets(c.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("refreshing node group %q of cluster %q: reading StatefulSet %s/%s: %w",
				g.Name, c.Name, c.Namespace, name, err)
		}
		specs = append(specs, groupSpec{name: g.Name, role: g.Role, order: g.Order, sts: s})
		stss = append(stss, *s)
		// Nodes do not change zone, so known zones save API calls between steps.
		for _, p := range g.Pods {
			if p.Node != "" && p.Zone != "" {
				known[p.Node] = p.Zone
			}
		}
	}
	pods, podsRV, err := listPods(ctx, client, c.Namespace, stss)
	if err != nil {
		return nil, err
	}
	zones, err := nodeZones(ctx, client, pods, known)
	if err != nil {
		return nil, err
	}
	out := &ops.Cluster{Name: c.Name, Namespace: c.Namespace, Engine: c.Engine, Layout: c.Layout, Recognized: c.Recognized, NodeZones: zones, PodsResourceVersion: podsRV}
	assemble(out, specs, pods, zones)
	// Which group is master-eligible is identity too (a recognizer chose it).
	for _, g := range out.Groups {
		if old := c.Group(g.Name); old != nil && old.MasterEligible {
			g.MasterEligible = true
		}
	}
	// The recognizer's finish again, as the value it attached knows it.
	if f, ok := c.Recognized.(ops.ClusterFinisher); ok {
		f.Finish(out)
	}
	return out, nil
}

// MasterEligible returns the node group whose pods can be elected master: the first group
// with role master, else the group the engine's recognizer marked (CrateDB makes the first
// data group master-eligible when there is no master group). nil when neither applies.
func MasterEligible(c *ops.Cluster) *ops.NodeGroup {
	for _, g := range c.Groups {
		if g.Role == ops.RoleMaster {
			return g
		}
	}
	for _, g := range c.Groups {
		if g.MasterEligible {
			return g
		}
	}
	return nil
}

// selectLayout tries the layouts in order on all StatefulSets of the namespace: the
// dbops.io/cluster label, the engines' recognizers' own naming (registry order), a StatefulSet
// named as the cluster.
func selectLayout(opts Options, all []appsv1.StatefulSet) (string, []appsv1.StatefulSet, error) {
	name := opts.Name
	if m := filter(all, func(s *appsv1.StatefulSet) bool { return s.Labels[LabelCluster] == name }); len(m) > 0 {
		return LayoutLabels, m, nil
	}
	for _, r := range opts.statefulSetRecognizers() {
		m, err := r.Members(opts.Namespace, name, all)
		if err != nil {
			return "", nil, err
		}
		if len(m) > 0 {
			return r.Layout(), m, nil
		}
	}
	if m := filter(all, func(s *appsv1.StatefulSet) bool { return s.Name == name }); len(m) > 0 {
		return LayoutStatefulSet, m, nil
	}
	return "", nil, ops.Usagef("no database cluster %q in namespace %q: %s (use --selector to pick StatefulSets explicitly)",
		name, opts.Namespace, opts.notFound())
}

// notFound lists what selectLayout looked for.
func (opts Options) notFound() string {
	what := []string{fmt.Sprintf("no StatefulSet labelled %s=%s", LabelCluster, opts.Name)}
	for _, r := range opts.statefulSetRecognizers() {
		if n, ok := r.(ops.NameDescriber); ok {
			what = append(what, n.Names(opts.Name)...)
		}
	}
	what = append(what, opts.Name)
	if len(what) == 2 {
		return what[0] + " or named " + what[1]
	}
	return what[0] + ", named " + strings.Join(what[1:len(what)-1], ", ") + " or " + what[len(what)-1]
}

func filter(all []appsv1.StatefulSet, keep func(*appsv1.StatefulSet) bool) []appsv1.StatefulSet {
	var out []appsv1.StatefulSet
	for i := range all {
		if keep(&all[i]) {
			out = append(out, all[i])
		}
	}
	return out
}

// commonLabel returns the value of key shared by all StatefulSets, or "".
func commonLabel(stss []appsv1.StatefulSet, key string) string {
	v := stss[0].Labels[key]
	for i := range stss[1:] {
		if stss[i+1].Labels[key] != v {
			return ""
		}
	}
	return v
}

func listStatefulSets(ctx context.Context, client kubernetes.Interface, ns, selector string) ([]appsv1.StatefulSet, error) {
	var out []appsv1.StatefulSet
	lo := metav1.ListOptions{LabelSelector: selector, Limit: listPageSize}
	for {
		l, err := client.AppsV1().StatefulSets(ns).List(ctx, lo)
		if err != nil {
			return nil, fmt.Errorf("listing StatefulSets in namespace %q: %w", ns, err)
		}
		out = append(out, l.Items...)
		if l.Continue == "" {
			return out, nil
		}
		lo.Continue = l.Continue
	}
}

// listPods lists the StatefulSets' pods and keeps, for each StatefulSet, those it controls
// and selects: labels alone can match foreign pods. It also returns the resourceVersion of the
// newest list.
//
// StatefulSets whose selectors share labels (the CrateDB operator's node groups: name and
// component) are read with one list by those labels: a cluster of many groups costs one round
// trip, not one per group. Without shared labels each StatefulSet is listed by its own
// selector.
//
// The first list is a consistent read. The API server answers one from its watch cache
// once the cache has caught up with etcd, which, when anything was written since the
// cache's last pod event, waits for etcd's next progress notification; the API server
// asks for those at most every 100 ms, so a second consistent pod read right after the
// first can wait that long (-v 6 traces showed 65-90 ms). The other StatefulSets' lists
// therefore ask for a state not older than the first list's, which the cache has at once.
func listPods(ctx context.Context, client kubernetes.Interface, ns string, stss []appsv1.StatefulSet) ([]corev1.Pod, string, error) {
	sels := make([]labels.Selector, len(stss))
	raw := make([]*metav1.LabelSelector, len(stss))
	for i := range stss {
		s := &stss[i]
		if s.Spec.Selector == nil {
			return nil, "", fmt.Errorf("StatefulSet %s/%s has no selector", ns, s.Name)
		}
		sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
		if err != nil {
			return nil, "", fmt.Errorf("StatefulSet %s/%s: invalid selector: %w", ns, s.Name, err)
		}
		sels[i], raw[i] = sel, s.Spec.Selector
	}
	// owned reports which StatefulSet (index) controls and selects p, or -1.
	owned := func(p *corev1.Pod) int {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil {
			return -1
		}
		for i := range stss {
			if ref.UID == stss[i].UID && sels[i].Matches(labels.Set(p.Labels)) {
				return i
			}
		}
		return -1
	}
	if common := kube.SelectorFor(raw); len(stss) > 1 && common != "" {
		items, rv, err := listPodsPaged(ctx, client, ns, common, "")
		if err != nil {
			return nil, "", fmt.Errorf("listing pods of %d StatefulSets by %q in %s: %w", len(stss), common, ns, err)
		}
		byOwner := make([][]corev1.Pod, len(stss))
		for j := range items {
			if i := owned(&items[j]); i >= 0 {
				byOwner[i] = append(byOwner[i], items[j])
			}
		}
		return slices.Concat(byOwner...), rv, nil
	}
	var out []corev1.Pod
	rv := ""
	for i := range stss {
		items, lrv, err := listPodsPaged(ctx, client, ns, sels[i].String(), rv)
		if err != nil {
			return nil, "", fmt.Errorf("listing pods of StatefulSet %s/%s: %w", ns, stss[i].Name, err)
		}
		for j := range items {
			if owned(&items[j]) == i {
				out = append(out, items[j])
			}
		}
		if lrv != "" {
			rv = lrv
		}
	}
	return out, rv, nil
}

// listPodsPaged lists the pods matching selector, page by page, not older than notOlderThan
// when set (see listPods), and returns the list's resourceVersion.
func listPodsPaged(ctx context.Context, client kubernetes.Interface, ns, selector, notOlderThan string) ([]corev1.Pod, string, error) {
	lo := metav1.ListOptions{LabelSelector: selector, Limit: listPageSize}
	if notOlderThan != "" {
		lo.ResourceVersion, lo.ResourceVersionMatch = notOlderThan, metav1.ResourceVersionMatchNotOlderThan
	}
	var out []corev1.Pod
	rv := ""
	for {
		l, err := client.CoreV1().Pods(ns).List(ctx, lo)
		if err != nil {
			return nil, "", err
		}
		out = append(out, l.Items...)
		if l.ResourceVersion != "" {
			rv = l.ResourceVersion
		}
		if l.Continue == "" {
			return out, rv, nil
		}
		// A continued list carries its snapshot in the token; the API server refuses a
		// resourceVersion beside it.
		lo.Continue, lo.ResourceVersion, lo.ResourceVersionMatch = l.Continue, "", ""
	}
}

// nodeZones returns node name → zone ("" for a node without one), starting from known. When
// a pod runs on a node known does not cover, it reads every node's zone with one (paged) node
// list: the run's one read of nodes, which the pods view reuses (ops.Cluster.NodeZones) for
// pods that move. RBAC Forbidden on nodes (common for namespace-scoped users) leaves zones
// as known.
func nodeZones(ctx context.Context, client kubernetes.Interface, pods []corev1.Pod, known map[string]string) (map[string]string, error) {
	zones := maps.Clone(known)
	if zones == nil {
		zones = map[string]string{}
	}
	need := false
	for i := range pods {
		if n := pods[i].Spec.NodeName; n != "" {
			if _, ok := zones[n]; !ok {
				need = true
				break
			}
		}
	}
	if !need {
		return zones, nil
	}
	lo := metav1.ListOptions{Limit: listPageSize}
	for {
		l, err := client.CoreV1().Nodes().List(ctx, lo)
		if apierrors.IsForbidden(err) {
			return zones, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing nodes for zones: %w", err)
		}
		for i := range l.Items {
			if _, ok := zones[l.Items[i].Name]; !ok {
				zones[l.Items[i].Name] = nodeZone(&l.Items[i])
			}
		}
		if l.Continue == "" {
			return zones, nil
		}
		lo.Continue = l.Continue
	}
}
