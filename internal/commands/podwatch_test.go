package commands

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/discovery"
)

// The pods table follows the cluster's pods (and only them) as they change.
func TestWatchPodsEmitsSnapshots(t *testing.T) {
	objs := fakecluster.Objects("prod", "db", "", dbGroups()...)
	other := fakecluster.StatefulSet("prod", "unrelated", 1)
	objs = append(objs, other, fakecluster.Pod(other, 0, "x"))
	client := fake.NewClientset(objs...)
	// The fake clientset has no resourceVersions: a deletion between the informer's LIST and
	// its WATCH would be lost, so the test deletes only once the watch is open.
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := client.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		once.Do(func() { close(watching) }) // the watcher is registered now
		return true, w, err
	})
	c, err := discovery.Discover(t.Context(), client, discovery.Options{Namespace: "prod", Name: "db", Recognizers: builtinRecognizers()})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan ops.Event, 16)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pods := kube.StartPods(ctx, client, "prod", clusterSelector(c), "")
	watchPods(ctx, pods, client, c, fixedClock{testNow}, ops.SinkFunc(func(e ops.Event) { got <- e }))

	first := receive(t, got)
	if len(first.Pods) != 6 || first.Pods[0].Name != "db-cold-0" || first.Pods[0].Zone != "zone-a" {
		t.Fatalf("first snapshot = %+v", first.Pods)
	}
	select {
	case <-watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the informer never opened its watch")
	}
	if err := client.CoreV1().Pods("prod").Delete(ctx, "db-hot-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := receive(t, got)
	if len(second.Pods) != 5 {
		t.Errorf("after a deletion: %d pods", len(second.Pods))
	}
}

func receive(t *testing.T, ch <-chan ops.Event) ops.Event {
	t.Helper()
	select {
	case e := <-ch:
		if e.Type != ops.EventPods {
			t.Fatalf("event type %s", e.Type)
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no pods snapshot")
	}
	return ops.Event{}
}

// The pods view places pods that move with the zones discovery listed; it reads a node only
// when the node joined after discovery and the cluster uses zones.
func TestNodeZonesReadOnlyNewNodesWhenZonesMatter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nodeZones map[string]string // as discovery read them
		moveTo    string
		wantZone  string
		wantGets  int
	}{
		{name: "a node discovery listed", nodeZones: map[string]string{"n1": "za", "n2": "zb"}, moveTo: "n2", wantZone: "zb"},
		{name: "a node that joined since", nodeZones: map[string]string{"n1": "za", "n2": "zb"}, moveTo: "n3", wantZone: "zc", wantGets: 1},
		{name: "no zones in the cluster", nodeZones: map[string]string{"n1": "", "n2": ""}, moveTo: "n3", wantZone: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3", Labels: map[string]string{"topology.kubernetes.io/zone": "zc"}}})
			c := &ops.Cluster{NodeZones: tc.nodeZones, Groups: []*ops.NodeGroup{{Pods: []ops.Pod{{Name: "db-0", Node: "n1", Zone: tc.nodeZones["n1"]}}}}}
			z := newNodeZones(client, c)
			moved := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0"}, Spec: corev1.PodSpec{NodeName: tc.moveTo}}
			z.lookup(t.Context(), []*corev1.Pod{moved})
			z.lookup(t.Context(), []*corev1.Pod{moved}) // asked once per node
			if got := z.zones[tc.moveTo]; got != tc.wantZone {
				t.Errorf("zone of %s = %q, want %q", tc.moveTo, got, tc.wantZone)
			}
			if got := len(client.Actions()); got != tc.wantGets {
				t.Errorf("node reads %v, want %d get(s)", client.Actions(), tc.wantGets)
			}
		})
	}
}

// builtinRecognizers are the registry's recognizers, as commands hand them to discovery.
func builtinRecognizers() []ops.Recognizer {
	return (&Factory{Engines: builtinEngines()}).recognizers()
}
