package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbop"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbwire"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// The demo FoundationDB cluster: a FoundationDBCluster run by the stand-in operator, its FDB
// processes in the simulator (test/sim/fdbsim).
const (
	fdbDemoNamespace = "demo"
	fdbDemoName      = "myfdb"
	// fdbSampleName is the FoundationDB operator's own sample cluster
	// (config/samples/cluster.yaml: storage and log counts left to the operator's defaults,
	// stateless -1, one cluster_controller process, every pod its own fault domain).
	fdbSampleName = "fdb-sample"
	// fdbDNSName names its coordinators by the pods' DNS names in the cluster file
	// (spec.routing.useDNSInClusterFile).
	fdbDNSName = "fdb-dns"
	// fdbTLSName runs its processes with TLS (spec.mainContainer.enableTls): they listen on
	// ip:4500:tls, and fdbcli's kill names them without the ":tls" flag.
	fdbTLSName = "fdb-tls"
)

// fdbDemoSpecs are the sandbox's FoundationDBClusters, all in fdbDemoNamespace.
func fdbDemoSpecs() []fdbwire.ClusterSpec {
	return []fdbwire.ClusterSpec{
		{Namespace: fdbDemoNamespace, Name: fdbDemoName, Storage: 3, Log: 3, Stateless: 3, RedundancyMode: "triple", ZoneFromNodeLabel: true},
		{Namespace: fdbDemoNamespace, Name: fdbSampleName, OperatorSample: true},
		{Namespace: fdbDemoNamespace, Name: fdbDNSName, Storage: 3, Log: 3, Stateless: 3, RedundancyMode: "triple", ZoneFromNodeLabel: true, DNS: true},
		{Namespace: fdbDemoNamespace, Name: fdbTLSName, Storage: 3, Log: 3, Stateless: 3, RedundancyMode: "triple", ZoneFromNodeLabel: true, TLS: true},
	}
}

// runFDB creates the demo FoundationDB cluster (storage/log/stateless, triple redundancy: 5
// coordinators, over the test bed's four zones) and runs its simulator and stand-in operator
// until interrupted. The simulator keeps its state in memory: running it again starts the
// cluster afresh.
func runFDB(ctx context.Context) error {
	return serveFDB(ctx, nil)
}

// serveFDB is runFDB; ready (the pipe of `sandbox up`, when detached) is told once the cluster
// is reconciled and reachable, then closed.
func serveFDB(ctx context.Context, ready *os.File) error {
	dir, client, dyn, err := demoClients(ctx, fdbDemoNamespace)
	if err != nil {
		return err
	}
	bed := sandboxBed{dyn: dyn, shimDir: filepath.Join(dir, "shims")}
	// The stand-in paces as the operator's own e2e suite configures it
	// (e2e/fixtures/fdb_operator_client.go), not with its defaults (fdbop.DefaultPacing: 600 s
	// before an inclusion would hold every replacement in the sandbox for ten minutes).
	b, err := fdbwire.Start(ctx, bed, client, dyn, fdbDemoNamespace, fdbsim.Config{}, fdbwire.WithPacing(fdbop.Pacing{
		MinimumRecoveryTimeForInclusion:                       30 * time.Second,
		MinimumRecoveryTimeForExclusion:                       30 * time.Second,
		MinimumUptimeForCoordinatorChangeWithMissingProcess:   10 * time.Second,
		MinimumUptimeForCoordinatorChangeWithUndesiredProcess: 20 * time.Second,
	}))
	if err != nil {
		return err
	}
	defer b.Close()
	// A cluster left by an earlier run is taken over: its pods are recreated as needed and
	// the simulator starts it afresh.
	for _, spec := range fdbDemoSpecs() {
		err = b.Create(ctx, spec)
		if apierrors.IsAlreadyExists(err) {
			err = b.WaitReconciled(ctx, spec.Namespace, spec.Name)
		}
		if err != nil {
			return err
		}
	}
	if ready != nil {
		_, err := fmt.Fprintln(ready, "ready")
		ready.Close()
		if err != nil {
			return fmt.Errorf("tell sandbox up: %w", err)
		}
		<-ctx.Done()
		return nil
	}
	fmt.Printf("# FoundationDB clusters %s/%s, %s (the operator's sample), %s (DNS cluster file) and %s (TLS) run while this command runs (Ctrl-C stops them)\n",
		fdbDemoNamespace, fdbDemoName, fdbSampleName, fdbDNSName, fdbTLSName)
	fmt.Println("# in another shell:")
	for _, h := range []string{
		"export KUBECONFIG=" + kubeconfig(dir),
		"kubectl dbops status " + fdbDemoName + " -n " + fdbDemoNamespace,
		"kubectl dbops restart " + fdbDemoName + " -n " + fdbDemoNamespace + " --rolling --mode zone --dry-run",
		"kubectl dbops status " + fdbSampleName + " -n " + fdbDemoNamespace,
		"kubectl dbops status " + fdbDNSName + " -n " + fdbDemoNamespace,
		"kubectl dbops restart " + fdbTLSName + " -n " + fdbDemoNamespace + " --rolling --dry-run",
		"kubectl get pods -n " + fdbDemoNamespace + " -l foundationdb.org/fdb-cluster-name=" + fdbDemoName,
		"kubectl exec -n " + fdbDemoNamespace + " <a myfdb pod> -c foundationdb -- fdbcli --exec status --timeout 10",
	} {
		fmt.Printf("#   %s\n", h)
	}
	<-ctx.Done()
	return nil
}

// fdbDemoHints are what `sandbox up` suggests for the FoundationDB demo.
func fdbDemoHints() []string {
	return []string{
		"kubectl dbops status " + fdbDemoName + " -n " + fdbDemoNamespace,
		"kubectl dbops restart " + fdbDemoName + " -n " + fdbDemoNamespace + " --rolling --mode zone --dry-run",
		"kubectl dbops status " + fdbSampleName + " -n " + fdbDemoNamespace + "   # the operator's sample: processCounts defaults, stateless -1",
		"kubectl dbops status " + fdbDNSName + " -n " + fdbDemoNamespace + "   # coordinators by DNS name in the cluster file",
		"kubectl dbops restart " + fdbTLSName + " -n " + fdbDemoNamespace + " --rolling --dry-run   # TLS: kill by ip:port, without :tls",
		"kubectl exec -n " + fdbDemoNamespace + " <a myfdb pod> -c foundationdb -- fdbcli --exec status --timeout 10",
	}
}

// startFDBDemo runs `sandbox fdb --detached` in its own session next to the test bed (the
// simulator keeps its cluster in memory, so it lives as long as the sandbox), records it in
// the pidfile for `down`, and waits until it reports the cluster reconciled on the pipe it
// gets as fd 3 — or until it exits (EOF) or the deadline passes.
func startFDBDemo(ctx context.Context, tb *testbed.Testbed, stateDir string) error {
	bin := filepath.Join(stateDir, "bin", "sandbox") // built by startReaper
	logFile, err := os.OpenFile(filepath.Join(tb.LogDir, "fdb.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open fdb demo log: %w", err)
	}
	defer logFile.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(bin, "fdb", "--detached")
	cmd.Env = append(os.Environ(), "DBOPS_SANDBOX_DIR="+stateDir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start the FoundationDB demo: %w", err)
	}
	w.Close()
	pid := cmd.Process.Pid
	// Reap it if it exits while up still runs (a failed start); after up it belongs to the
	// sandbox.
	go func() { _ = cmd.Wait() }()
	if err := recordPid(tb, pid, "fdb-demo", bin); err != nil {
		return err
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- s
	}()
	timer := time.NewTimer(3 * time.Minute)
	defer timer.Stop()
	select {
	case s := <-line:
		if strings.TrimSpace(s) != "ready" {
			return fmt.Errorf("the FoundationDB demo stopped before its cluster was ready; see %s", logFile.Name())
		}
		return nil
	case <-timer.C:
		return fmt.Errorf("the FoundationDB demo was not ready within 3 minutes; see %s", logFile.Name())
	case <-ctx.Done():
		return ctx.Err()
	}
}
