package commands

import (
	"cmp"
	"context"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// clusterSelector is the label selector of the run's pod informer: what the selectors of the
// cluster's groups have in common, whatever owns their pods ("" = the whole namespace).
func clusterSelector(c *ops.Cluster) string {
	sels := make([]*metav1.LabelSelector, 0, len(c.Groups))
	for _, g := range c.Groups {
		sels = append(sels, g.Selector)
	}
	return kube.SelectorFor(sels)
}

// watchPods feeds the views' pods table from the run's pod informer: it emits an
// EventPods snapshot whenever a pod changes, until ctx ends. It is a view concern, so it
// lives beside the views and not in the procedures.
func watchPods(ctx context.Context, pods *kube.Pods, client kubernetes.Interface, c *ops.Cluster, clock ops.Clock, sink ops.Sink) {
	groups := podGroups(c)
	zones := newNodeZones(client, c)
	changed, unsubscribe := pods.Subscribe()
	go func() {
		defer unsubscribe()
		if pods.Synced(ctx) != nil {
			return
		}
		var last string
		for {
			live := pods.List()
			objs := make([]*corev1.Pod, 0, len(live))
			for _, p := range live {
				objs = append(objs, p)
			}
			zones.lookup(ctx, objs)
			rows := podRows(objs, groups, zones.zones)
			if key := rowsKey(rows); key != last {
				last = key
				sink.Emit(ops.Event{Type: ops.EventPods, Time: clock.Now(), Operation: "", Cluster: c.Name, Pods: rows})
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
}

// nodeZones knows the zones of nodes: those discovery read with the run's one node list
// (ops.Cluster.NodeZones, every node's when a pod was placed), so a pod that moves to another
// node needs no read. Only a node discovery did not see (one that joined since) is read, with
// one get, and only when the cluster uses zones at all; without zones no node is read.
type nodeZones struct {
	client kubernetes.Interface
	zones  map[string]string
	matter bool
}

func newNodeZones(client kubernetes.Interface, c *ops.Cluster) *nodeZones {
	z := &nodeZones{client: client, zones: make(map[string]string, len(c.NodeZones))}
	for n, zone := range c.NodeZones {
		z.zones[n] = zone
		z.matter = z.matter || zone != ""
	}
	for _, p := range c.AllPods() {
		if _, known := z.zones[p.Node]; p.Node != "" && !known {
			z.zones[p.Node] = p.Zone
			z.matter = z.matter || p.Zone != ""
		}
	}
	return z
}

func (z *nodeZones) lookup(ctx context.Context, pods []*corev1.Pod) {
	for _, p := range pods {
		n := p.Spec.NodeName
		if _, known := z.zones[n]; n == "" || known {
			continue
		}
		z.zones[n] = "" // asked once, whatever the answer
		if !z.matter {
			continue
		}
		// A namespace-scoped user who may not read nodes keeps the zones discovery found.
		if node, err := z.client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{}); err == nil {
			z.zones[n] = node.Labels["topology.kubernetes.io/zone"]
		}
	}
}

var ordinalSuffix = regexp.MustCompile(`^(.*)-(\d+)$`)

// podGroup tells which pods belong to a node group: those its selector matches and, for a
// StatefulSet's group, named as the StatefulSet names its pods.
type podGroup struct {
	name, statefulSet string
	selector          labels.Selector
}

type podGroupList []podGroup

// podGroups are the cluster's groups as the pods table sorts pods into them. A group without
// a selector (none read) falls back to the StatefulSet's pod names.
func podGroups(c *ops.Cluster) podGroupList {
	out := make(podGroupList, 0, len(c.Groups))
	for _, g := range c.Groups {
		sel := labels.Everything()
		if g.Selector != nil {
			s, err := metav1.LabelSelectorAsSelector(g.Selector)
			if err != nil {
				sel = labels.Nothing()
			} else {
				sel = s
			}
		} else if g.StatefulSet == "" {
			sel = labels.Nothing()
		}
		out = append(out, podGroup{name: g.Name, statefulSet: g.StatefulSet, selector: sel})
	}
	return out
}

// of returns the index of the group pod p belongs to, and its ordinal (the trailing number of
// its name: StatefulSet ordinals, or the operator's process group numbers), or -1.
func (gs podGroupList) of(p *corev1.Pod) (int, int) {
	m := ordinalSuffix.FindStringSubmatch(p.Name)
	ord := -1
	if m != nil {
		ord, _ = strconv.Atoi(m[2])
	}
	for i, g := range gs {
		if g.statefulSet != "" && (m == nil || m[1] != g.statefulSet) {
			continue
		}
		if g.selector.Matches(labels.Set(p.Labels)) {
			return i, ord
		}
	}
	return -1, ord
}

func podRows(objs []*corev1.Pod, groups podGroupList, zones map[string]string) []ops.PodSummary {
	type row struct {
		ops.PodSummary
		key string // the StatefulSet's name, else the group's: the table's order
		ord int
	}
	var rows []row
	for _, p := range objs {
		gi, ord := groups.of(p)
		if gi < 0 {
			continue
		}
		var restarts int32
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		phase := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		rows = append(rows, row{PodSummary: ops.PodSummary{Name: p.Name, Group: groups[gi].name, Ready: ops.PodReady(p), Phase: phase,
			Node: p.Spec.NodeName, Zone: zones[p.Spec.NodeName], UID: string(p.UID), Restarts: restarts}, key: cmp.Or(groups[gi].statefulSet, groups[gi].name), ord: ord})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].key != rows[j].key {
			return rows[i].key < rows[j].key
		}
		if rows[i].ord != rows[j].ord {
			return rows[i].ord < rows[j].ord
		}
		return rows[i].Name < rows[j].Name
	})
	out := make([]ops.PodSummary, len(rows))
	for i, r := range rows {
		out[i] = r.PodSummary
	}
	return out
}

func rowsKey(rows []ops.PodSummary) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(r.Name + "|" + r.UID + "|" + r.Phase + "|" + strconv.FormatBool(r.Ready) + "|" + r.Node + ";")
	}
	return b.String()
}
