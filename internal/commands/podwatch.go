package commands

import (
	"context"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// clusterSelector is the label selector of the run's pod informer: what the selectors of the
// cluster's groups have in common, whatever owns their pods ("" = the whole namespace).
func clusterSelector(c *ops.Cluster) string {
	sels := make([]*metav1.LabelSelector, 0, len(c.Groups))
	for _, g := range c.Groups {
		sels = append(sels, g.Owner.PodSelector())
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

// podGroup tells which pods belong to a node group: those its owner says are its own.
type podGroup struct {
	name  string
	owner ops.PodOwner
}

type podGroupList []podGroup

// podGroups are the cluster's groups as the pods table sorts pods into them.
func podGroups(c *ops.Cluster) podGroupList {
	out := make(podGroupList, 0, len(c.Groups))
	for _, g := range c.Groups {
		out = append(out, podGroup{name: g.Name, owner: g.Owner})
	}
	return out
}

// of returns the index of the group pod p belongs to and its ordinal as the group's owner
// numbers it, or -1.
func (gs podGroupList) of(p *corev1.Pod) (int, int) {
	for i, g := range gs {
		if _, ord, ok := g.owner.Member(p); ok {
			return i, ord
		}
	}
	return -1, -1
}

func podRows(objs []*corev1.Pod, groups podGroupList, zones map[string]string) []ops.PodSummary {
	type row struct {
		ops.PodSummary
		owner, group string // the owner's name, then the group's: the table's order
		ord          int
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
			Node: p.Spec.NodeName, Zone: zones[p.Spec.NodeName], UID: string(p.UID), Restarts: restarts}, owner: groups[gi].owner.String(), group: groups[gi].name, ord: ord})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].owner != rows[j].owner {
			return rows[i].owner < rows[j].owner
		}
		if rows[i].group != rows[j].group {
			return rows[i].group < rows[j].group
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
