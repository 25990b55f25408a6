package ops_test

import (
	"bytes"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/discovery"
)

// largeCluster returns the listed objects of a 5,000-pod cluster in 50
// node groups, as discovery would have read them from the API.
func largeCluster() discovery.Objects {
	var objs discovery.Objects
	for i := 0; i < 3; i++ {
		objs.Nodes = append(objs.Nodes, corev1.Node{})
		objs.Nodes[i].Name = fmt.Sprintf("node-%d", i)
		objs.Nodes[i].Labels = map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("zone-%c", 'a'+i)}
	}
	for g := 0; g < 50; g++ {
		sts := fakecluster.StatefulSet("prod", fmt.Sprintf("big-g%02d", g), 100)
		sts.Labels["dbops.io/cluster"] = "big"
		sts.Labels["dbops.io/node-group"] = fmt.Sprintf("g%02d", g)
		sts.Annotations["dbops.io/order"] = fmt.Sprint(g)
		if g == 0 {
			sts.Labels["dbops.io/role"] = "master"
		}
		objs.StatefulSets = append(objs.StatefulSets, *sts)
		for o := 0; o < 100; o++ {
			objs.Pods = append(objs.Pods, *fakecluster.Pod(sts, o, types.UID(fmt.Sprintf("%s-%d", sts.Name, o))))
		}
	}
	return objs
}

// BenchmarkRollingRestartPlan5000 measures turning listed API objects of
// 5,000 pods in 50 groups into a rolling restart plan and rendering it for
// --dry-run. Target (#15): under 30 ms and 15 MB per operation.
func BenchmarkRollingRestartPlan5000(b *testing.B) {
	objs := largeCluster()
	rr := &ops.RollingRestart{Client: fake.NewClientset()}
	opts := discovery.Options{Namespace: "prod", Name: "big"}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c, err := discovery.BuildCluster(opts, discovery.LayoutLabels, objs)
		if err != nil {
			b.Fatal(err)
		}
		p, err := rr.Plan(c, ops.EngineGeneric, ops.RestartOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Steps) != 5000 {
			b.Fatalf("%d steps", len(p.Steps))
		}
		var buf bytes.Buffer
		if err := ops.WritePlanText(&buf, p.View()); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLargePlanOrder checks the plan the benchmark builds is right: the
// master group first, then groups by order, pods by ordinal.
func TestLargePlanOrder(t *testing.T) {
	c, err := discovery.BuildCluster(discovery.Options{Namespace: "prod", Name: "big"}, discovery.LayoutLabels, largeCluster())
	if err != nil {
		t.Fatal(err)
	}
	p, err := (&ops.RollingRestart{Client: fake.NewClientset()}).Plan(c, ops.EngineGeneric, ops.RestartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int]string{0: "pod/big-g00-0", 99: "pod/big-g00-99", 100: "pod/big-g01-0", 4999: "pod/big-g49-99"} {
		if p.Steps[i].Target != want {
			t.Errorf("step %d = %s, want %s", i, p.Steps[i].Target, want)
		}
	}
}
