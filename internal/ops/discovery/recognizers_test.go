package discovery

import (
	"context"
	"slices"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestOtherEngineOnARecognizedLayout: --engine generic on the CrateDB operator's StatefulSets
// keeps the operator's group names (the layout's recognizer names them), but nothing of the
// CrateDB engine: no data group becomes master-eligible.
func TestOtherEngineOnARecognizedLayout(t *testing.T) {
	hot, cold := crateData("hot"), crateData("cold")
	client := fake.NewClientset(hot, cold, mkPod(hot, 0), mkPod(cold, 0))
	c, err := discover(context.Background(), client, Options{Namespace: ns, Name: "foo", Engine: ops.EngineGeneric})
	if err != nil {
		t.Fatal(err)
	}
	if c.Engine != ops.EngineGeneric || c.Layout != LayoutCrateDBOperator || !slices.Equal(c.GroupNames(), []string{"cold", "hot"}) {
		t.Fatalf("engine %s, layout %s, groups %v", c.Engine, c.Layout, c.GroupNames())
	}
	if g := MasterEligible(c); g != nil {
		t.Fatalf("master-eligible %s under engine generic", g.Name)
	}
}
