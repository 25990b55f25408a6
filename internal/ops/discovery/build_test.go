package discovery

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// bigObjects is a cluster of groups × perGroup pods spread over nodes in 3 zones.
func bigObjects(groups, perGroup int) Objects {
	var objs Objects
	nodes := 100
	for n := 0; n < nodes; n++ {
		objs.Nodes = append(objs.Nodes, *mkNode(fmt.Sprintf("node-%d", n), fmt.Sprintf("zone-%d", n%3)))
	}
	for g := 0; g < groups; g++ {
		s := mkSTS(fmt.Sprintf("crate-data-g%02d-foo", g), int32(perGroup),
			withLabels(labelAppName, "foo", labelAppComponent, "cratedb", labelCrateNode, fmt.Sprintf("g%02d", g)),
			createdAt(groups-g))
		objs.StatefulSets = append(objs.StatefulSets, *s)
		// Reverse ordinal order, so sorting is exercised.
		for i := perGroup - 1; i >= 0; i-- {
			objs.Pods = append(objs.Pods, *mkPod(s, i, onNode(fmt.Sprintf("node-%d", (g*perGroup+i)%nodes))))
		}
	}
	return objs
}

func TestBuildClusterLarge(t *testing.T) {
	objs := bigObjects(50, 100)
	objs.Pods = append(objs.Pods, objs.Pods[0]) // a duplicate is ignored
	c, err := buildCluster(Options{Name: "foo", Namespace: ns}, LayoutCrateDBOperator, objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Groups) != 50 || len(c.AllPods()) != 5000 {
		t.Fatalf("%d groups, %d pods", len(c.Groups), len(c.AllPods()))
	}
	// Created last-to-first, so creation order reverses the names.
	if first, last := c.Groups[0].Name, c.Groups[49].Name; first != "g49" || last != "g00" {
		t.Errorf("order: first %s, last %s", first, last)
	}
	for _, g := range c.Groups {
		for i, p := range g.Pods {
			if p.Ordinal != i || p.Zone == "" || p.Group != g.Name {
				t.Fatalf("group %s pod %d: %+v", g.Name, i, p)
			}
		}
	}
	if g := MasterEligible(c); g == nil || g.Name != "g49" {
		t.Errorf("MasterEligible = %v", g)
	}
}

func TestBuildClusterDoesNotAliasInput(t *testing.T) {
	s := mkSTS("foo", 1)
	objs := Objects{StatefulSets: []appsv1.StatefulSet{*s}, Pods: []corev1.Pod{*mkPod(s, 0)}}
	c, err := buildCluster(Options{Name: "foo", Namespace: ns}, LayoutStatefulSet, objs)
	if err != nil {
		t.Fatal(err)
	}
	objs.StatefulSets[0].Name = "changed"
	if ops.StatefulSetOf(c.Groups[0]).Name != "foo" || c.Engine != ops.EngineGeneric {
		t.Errorf("object %s engine %s", ops.StatefulSetOf(c.Groups[0]).Name, c.Engine)
	}
}

func TestPodOrdinal(t *testing.T) {
	for _, tt := range []struct {
		pod, sts, index string
		want            int
	}{
		{"db-0", "db", "", 0},
		{"db-12", "db", "", 12},
		{"db-data-3", "db-data", "", 3},
		{"db-+1", "db", "", -1},
		{"other-1", "db", "", -1},
		{"odd-name", "db", "7", 7},
	} {
		p := &corev1.Pod{}
		p.Name = tt.pod
		if tt.index != "" {
			p.Labels = map[string]string{labelPodIndex: tt.index}
		}
		if got := podOrdinal(p, tt.sts+"-"); got != tt.want {
			t.Errorf("podOrdinal(%s, %s) = %d, want %d", tt.pod, tt.sts, got, tt.want)
		}
	}
}

func BenchmarkBuildCluster(b *testing.B) {
	objs := bigObjects(50, 100)
	opts := Options{Name: "foo", Namespace: ns}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := buildCluster(opts, LayoutCrateDBOperator, objs); err != nil {
			b.Fatal(err)
		}
	}
}
