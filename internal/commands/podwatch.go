package commands

import (
	"context"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// watchPods feeds the views' pods table: it follows the cluster's pods
// with an informer and emits an EventPods snapshot whenever one changes,
// until ctx ends. It is a view concern, so it lives beside the views and
// not in the procedures.
func watchPods(ctx context.Context, client kubernetes.Interface, c *ops.Cluster, clock ops.Clock, sink ops.Sink) {
	groups := map[string]string{} // StatefulSet name -> node group
	for _, g := range c.Groups {
		groups[g.StatefulSet] = g.Name
	}
	zones := map[string]string{} // node -> zone, from discovery
	for _, p := range c.AllPods() {
		if p.Node != "" {
			zones[p.Node] = p.Zone
		}
	}
	// A plain pod informer, not client-go's generated factory: the factory links an informer
	// and lister for every API type into the binary (tens of MiB) for this one use.
	pods := client.CoreV1().Pods(c.Namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.Pod{}, 0, cache.Indexers{})
	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, n any) { notify(n) },
		DeleteFunc: notify,
	})
	go inf.RunWithContext(ctx)
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return
		}
		var last string
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			objs := inf.GetStore().List()
			lookupZones(ctx, client, objs, zones)
			rows := podRows(objs, groups, zones)
			key := rowsKey(rows)
			if key == last {
				continue
			}
			last = key
			sink.Emit(ops.Event{Type: ops.EventPods, Time: clock.Now(), Operation: "", Cluster: c.Name, Pods: rows})
		}
	}()
}

// lookupZones fills in the zones of nodes pods moved to since discovery
// (once per node; a node that cannot be read keeps an empty zone).
func lookupZones(ctx context.Context, client kubernetes.Interface, objs []any, zones map[string]string) {
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			continue
		}
		if _, known := zones[p.Spec.NodeName]; known {
			continue
		}
		zones[p.Spec.NodeName] = ""
		if n, err := client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{}); err == nil {
			zones[p.Spec.NodeName] = n.Labels["topology.kubernetes.io/zone"]
		}
	}
}

var ordinalSuffix = regexp.MustCompile(`^(.*)-(\d+)$`)

func podRows(objs []any, groups, zones map[string]string) []ops.PodSummary {
	type row struct {
		ops.PodSummary
		sts string
		ord int
	}
	var rows []row
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok {
			continue
		}
		m := ordinalSuffix.FindStringSubmatch(p.Name)
		if m == nil {
			continue
		}
		g, ok := groups[m[1]]
		if !ok {
			continue
		}
		ord, _ := strconv.Atoi(m[2])
		var restarts int32
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		phase := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		rows = append(rows, row{PodSummary: ops.PodSummary{Name: p.Name, Group: g, Ready: ops.PodReady(p), Phase: phase,
			Node: p.Spec.NodeName, Zone: zones[p.Spec.NodeName], UID: string(p.UID), Restarts: restarts}, sts: m[1], ord: ord})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].sts != rows[j].sts {
			return rows[i].sts < rows[j].sts
		}
		return rows[i].ord < rows[j].ord
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
