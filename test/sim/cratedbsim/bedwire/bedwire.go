// Package bedwire connects a CrateDB simulator (test/sim/cratedbsim) to the pods of a
// local testbed (test/testbed): `kubectl exec` into a pod runs the crash shim against the
// pod's simulated node, and port-forwards to the pod's 5432/4200 reach that node's listeners.
// It is test support, kept apart so that cratedbsim does not depend on the testbed.
//
// Fixture builds clusters in the official guide's layout (nodes named after their pods) or
// the CrateDB operator's (master-<i>, data-<group>-<i>), for a CrateDB version, with or
// without TLS; ServerTLS gives the simulator a certificate from the test bed CA.
//
// The crash shim reads statements from stdin as crash does: all of stdin up to EOF before it
// runs any (a "\q" line only ends it once EOF arrived). kwok's exec copies stdin but never
// delivers EOF, so statements fed on stdin hang there as they would with real crash; on kwok
// only -c works, stdin needs the real-node test bed. There, Fixture.RealNodes runs the pods in
// the simulator image, which serves exec (crash in the container) and port-forwards itself:
// Attach is for kwok only.
package bedwire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/racebuild"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// ShimPackage is the crash shim, installed on kwok's PATH as `crash`.
const ShimPackage = "github.com/kubectl-dbops/kubectl-dbops/test/cmd/crash-shim"

// pollInterval is how often Attach looks for pods it has not wired yet.
const pollInterval = 250 * time.Millisecond

// ServerTLS is a server TLS configuration for a simulator of the test bed: a certificate
// signed by the test bed CA (tb.CAPEM) for localhost, 127.0.0.1 and the cluster's
// in-namespace service names, as a real cluster's certificate would name its pods.
func ServerTLS(tb *testbed.Testbed, namespace string) (*tls.Config, error) {
	certPEM, keyPEM, err := tb.IssueServerCert(
		[]string{"localhost", "*." + namespace + ".svc", "*." + namespace + ".svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback})
	if err != nil {
		return nil, fmt.Errorf("issue simulator certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load simulator certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// InstallShim builds the crash shim (with the go tool, from the current module) into the
// testbed's shim folder, unless it is already there.
func InstallShim(ctx context.Context, tb *testbed.Testbed) error {
	if _, err := os.Stat(filepath.Join(tb.ShimDir(), "crash")); err == nil {
		return nil
	}
	tmp, err := os.MkdirTemp("", "crash-shim-")
	if err != nil {
		return fmt.Errorf("build crash shim: %w", err)
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "crash")
	out, err := exec.CommandContext(ctx, "go", append(append([]string{"build"}, racebuild.BuildFlags(racebuild.CrashShim)...), "-o", bin, ShimPackage)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("build crash shim: %w\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("read crash shim: %w", err)
	}
	if _, err := tb.WriteShim("crash", data); err != nil {
		return err
	}
	return nil
}

// Attach installs the crash shim and maps exec and port-forward of every pod the simulator
// plays to its node; it returns once the pods running now are wired. Until ctx ends it keeps
// wiring pods with new names (scale-up). A recreated pod keeps its name and its mapping, and
// its node keeps its address, so each name is wired once.
func Attach(ctx context.Context, tb *testbed.Testbed, sim *cratedbsim.Sim, namespace string) error {
	if err := InstallShim(ctx, tb); err != nil {
		return err
	}
	wired := map[string]string{}
	if err := wireNew(ctx, tb, sim, namespace, wired); err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(pollInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// Failures are retried on the next poll; there is no one to report them to.
				_ = wireNew(ctx, tb, sim, namespace, wired)
			}
		}
	}()
	return nil
}

func wireNew(ctx context.Context, tb *testbed.Testbed, sim *cratedbsim.Sim, namespace string, wired map[string]string) error {
	var errs []error
	for _, n := range sim.Nodes() {
		if n.Pod == "" || n.HTTPAddr == "" || wired[n.Pod] == n.HTTPAddr {
			continue
		}
		if err := wire(ctx, tb, namespace, n); err != nil {
			errs = append(errs, err)
			continue
		}
		wired[n.Pod] = n.HTTPAddr
	}
	return errors.Join(errs...)
}

func wire(ctx context.Context, tb *testbed.Testbed, namespace string, n cratedbsim.NodeInfo) error {
	pgPort, err := port(n.PGAddr)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	httpPort, err := port(n.HTTPAddr)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := tb.SetExec(ctx, namespace, n.Pod, testbed.ExecTarget{Env: n.ExecEnv()}); err != nil {
		return err
	}
	return tb.SetPortForward(ctx, namespace, n.Pod,
		testbed.PortTarget{Ports: []int32{cratedbsim.PodPGPort}, Address: n.Host, Port: pgPort},
		testbed.PortTarget{Ports: []int32{cratedbsim.PodHTTPPort}, Address: n.Host, Port: httpPort},
	)
}

func port(addr string) (int32, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("address %q: %w", addr, err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("address %q: %w", addr, err)
	}
	return int32(n), nil
}
