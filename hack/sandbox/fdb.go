package main

import (
	"context"
	"fmt"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/fdbsim/fdbwire"
)

// The demo FoundationDB cluster: a FoundationDBCluster run by the stand-in operator, its FDB
// processes in the simulator (internal/sim/fdbsim).
const (
	fdbDemoNamespace = "demo"
	fdbDemoName      = "myfdb"
)

// runFDB creates the demo FoundationDB cluster (3 zones, storage/log/stateless, triple
// redundancy: 5 coordinators) and runs its simulator and stand-in operator until interrupted.
// The simulator keeps its state in memory: running it again starts the cluster afresh.
func runFDB(ctx context.Context) error {
	dir, client, dyn, err := demoClients(ctx, fdbDemoNamespace)
	if err != nil {
		return err
	}
	bed := sandboxBed{dyn: dyn, shimDir: filepath.Join(dir, "shims")}
	b, err := fdbwire.Start(ctx, bed, client, dyn, fdbDemoNamespace, fdbsim.Config{})
	if err != nil {
		return err
	}
	defer b.Close()
	// A cluster left by an earlier run is taken over: its pods are recreated as needed and
	// the simulator starts it afresh.
	spec := fdbwire.ClusterSpec{Namespace: fdbDemoNamespace, Name: fdbDemoName, Storage: 3, Log: 3, Stateless: 3,
		RedundancyMode: "triple", ZoneFromNodeLabel: true}
	err = b.Create(ctx, spec)
	if apierrors.IsAlreadyExists(err) {
		err = b.WaitReconciled(ctx, fdbDemoNamespace, fdbDemoName)
	}
	if err != nil {
		return err
	}
	fmt.Printf("# FoundationDB cluster %s/%s runs while this command runs (Ctrl-C stops it)\n", fdbDemoNamespace, fdbDemoName)
	fmt.Println("# in another shell:")
	for _, h := range []string{
		"export KUBECONFIG=" + kubeconfig(dir),
		"kubectl dbops status " + fdbDemoName + " -n " + fdbDemoNamespace,
		"kubectl dbops restart " + fdbDemoName + " -n " + fdbDemoNamespace + " --rolling --mode zone --dry-run",
		"kubectl get pods -n " + fdbDemoNamespace + " -l foundationdb.org/fdb-cluster-name=" + fdbDemoName,
		"kubectl exec -n " + fdbDemoNamespace + " <a myfdb pod> -c foundationdb -- fdbcli --exec status --timeout 10",
	} {
		fmt.Printf("#   %s\n", h)
	}
	<-ctx.Done()
	return nil
}
