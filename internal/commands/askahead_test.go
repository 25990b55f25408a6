package commands

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// slowLeases is a client whose lease reads answer only when their context ends (an API
// server that does not answer), and count how many are still in flight.
type slowLeases struct {
	kubernetes.Interface
	inFlight *atomic.Int32
}

func (c slowLeases) CoordinationV1() coordv1client.CoordinationV1Interface {
	return slowCoordination{c.Interface.CoordinationV1(), c.inFlight}
}

type slowCoordination struct {
	coordv1client.CoordinationV1Interface
	inFlight *atomic.Int32
}

func (c slowCoordination) Leases(ns string) coordv1client.LeaseInterface {
	return slowLeaseClient{c.CoordinationV1Interface.Leases(ns), c.inFlight}
}

type slowLeaseClient struct {
	coordv1client.LeaseInterface
	inFlight *atomic.Int32
}

func (c slowLeaseClient) Get(ctx context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestRefusedRunLeavesNothingRunning: a command refused before it needs the lock returns
// only once the lock read it asked ahead (askAhead) has ended. Found by -race: the read of
// TestRestartRefusesOperatorOwned's first, refused run was still going when the test changed
// the fake client's reactors for its second run.
func TestRefusedRunLeavesNothingRunning(t *testing.T) {
	objs := fakecluster.Objects("prod", "db", "", webObjects()...)
	for _, o := range objs {
		if s, ok := o.(interface{ GetLabels() map[string]string }); ok && s.GetLabels()["dbops.io/cluster"] == "db" {
			s.GetLabels()["app.kubernetes.io/managed-by"] = "some-operator"
		}
	}
	h := newHarness(t, objs...)
	var inFlight atomic.Int32
	r := h.runWith(func(g *GlobalOptions) {
		g.NewClients = func() (*Clients, error) {
			return &Clients{Kube: slowLeases{h.client, &inFlight}, Clock: h.clock}, nil
		}
	}, "restart", "db", "--rolling", "--yes")
	if r.code != ops.ExitPrecondition || !strings.Contains(r.err, "managed by an operator") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if n := inFlight.Load(); n != 0 {
		t.Errorf("the refused command returned with %d lock read(s) still in flight", n)
	}
}
