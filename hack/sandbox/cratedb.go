package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/bedwire"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// The demo CrateDB cluster, laid out like the CrateDB operator does it, played by the CrateDB
// SIMULATOR (test/cmd/cratedb-simulator) running in the background.
const (
	crateNamespace = "demo"
	crateCluster   = "mycrate"
)

type crateGroup struct {
	sts      string
	nodeName string // cloud.crate.io/node-name
	replicas int32
	order    string // dbops.io/order, data groups only
}

func crateGroups() []crateGroup {
	return []crateGroup{
		{sts: "crate-master-" + crateCluster, nodeName: "master", replicas: 3},
		{sts: "crate-data-hot-" + crateCluster, nodeName: "hot", replicas: 3, order: "0"},
		{sts: "crate-data-cold-" + crateCluster, nodeName: "cold", replicas: 2, order: "1"},
	}
}

// crateHints are printed after `up`; debugAddr is where this sandbox's simulator serves its
// debug endpoint (a free port: sandboxes never share the simulator's addresses).
func crateHints(debugAddr string) []string {
	return []string{
		"kubectl dbops status " + crateCluster + " -n " + crateNamespace,
		"kubectl exec -n " + crateNamespace + " crate-master-" + crateCluster + "-0 -c crate -- crash --verify-ssl=false --host http://localhost:4200 -c 'SELECT name FROM sys.nodes'",
		"curl -s http://" + debugAddr + "/_sim/statements   # statements the simulator ran",
	}
}

// installCrateDemo creates the demo CrateDB cluster, starts the simulator for it (recorded in
// the testbed pidfile so that `down` stops it) and creates demo tables.
func installCrateDemo(ctx context.Context, tb *testbed.Testbed, stateDir string, logf func(string, ...any)) ([]string, error) {
	// Building first, outside the fixture deadline: a cold build cache takes minutes.
	binDir := filepath.Join(stateDir, "bin")
	simBin := filepath.Join(binDir, "cratedb-simulator")
	crashBin := filepath.Join(binDir, "crash")
	logf("sandbox: building the CrateDB simulator and crash shim")
	for pkg, out := range map[string]string{
		"github.com/kubectl-dbops/kubectl-dbops/test/cmd/cratedb-simulator": simBin,
		"github.com/kubectl-dbops/kubectl-dbops/test/cmd/crash-shim":        crashBin,
	} {
		if b, err := exec.CommandContext(ctx, "go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %w\n%s", pkg, err, b)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: crateNamespace}}
	if _, err := tb.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	dataNodes := int32(0)
	for _, g := range crateGroups() {
		if g.order != "" {
			dataNodes += g.replicas
		}
	}
	// The nodes find each other through its SRV records (-Cdiscovery.srv.query).
	svc := bedwire.Fixture{Namespace: crateNamespace, Cluster: crateCluster}.DiscoveryService()
	if _, err := tb.Client.CoreV1().Services(crateNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service %s: %w", svc.Name, err)
	}
	for _, g := range crateGroups() {
		if _, err := tb.Client.AppsV1().StatefulSets(crateNamespace).Create(ctx, crateStatefulSet(g, dataNodes), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create statefulset %s: %w", g.sts, err)
		}
	}
	for _, g := range crateGroups() {
		sel := labels.SelectorFromSet(crateLabels(g)).String()
		if err := tb.WaitPodsReady(ctx, crateNamespace, sel, int(g.replicas)); err != nil {
			return nil, err
		}
	}

	shim, err := os.ReadFile(crashBin)
	if err != nil {
		return nil, fmt.Errorf("read crash shim: %w", err)
	}
	if _, err := tb.WriteShim("crash", shim); err != nil {
		return nil, err
	}

	addrFile := filepath.Join(stateDir, "cratedb-simulator.addr")
	_ = os.Remove(addrFile) // a previous run's address must not be read
	pid, err := startCrateSimulator(tb, stateDir, simBin, addrFile)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = syscall.Kill(-pid, syscall.SIGTERM)
		}
	}()
	debugAddr, nodes, err := waitCrateSimulator(ctx, addrFile, int(dataNodes)+3)
	if err != nil {
		return nil, fmt.Errorf("%w (simulator log: %s)", err, filepath.Join(tb.LogDir, "cratedb-simulator.log"))
	}
	// What the CrateDB operator leaves behind: the system user and its password Secret, which
	// kubectl-dbops reads to connect.
	password, err := randomPassword()
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "user-system-" + crateCluster, Namespace: crateNamespace, Labels: map[string]string{"app.kubernetes.io/name": crateCluster}},
		StringData: map[string]string{"password": password},
	}
	if _, err := tb.Client.CoreV1().Secrets(crateNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create system user secret: %w", err)
	}
	for _, req := range []cratedbsim.SQLRequest{
		{Stmt: `CREATE USER "system" WITH (password = $1)`, Args: []any{password}},
		{Stmt: `GRANT ALL PRIVILEGES TO "system"`},
	} {
		if err := crateSQL(ctx, nodes[0].HTTPAddr, req); err != nil {
			return nil, err
		}
	}
	for _, stmt := range []string{
		`CREATE TABLE IF NOT EXISTS doc.events (id TEXT, ts TIMESTAMP, payload OBJECT) CLUSTERED INTO 6 SHARDS WITH (number_of_replicas = '1')`,
		`CREATE TABLE IF NOT EXISTS doc.metrics (host TEXT, value DOUBLE) CLUSTERED INTO 6 SHARDS WITH (number_of_replicas = '0-1')`,
	} {
		if err := crateSQL(ctx, nodes[0].HTTPAddr, cratedbsim.SQLRequest{Stmt: stmt}); err != nil {
			return nil, err
		}
	}
	ok = true
	return crateHints(debugAddr), nil
}

func crateLabels(g crateGroup) map[string]string {
	return bedwire.Labels(crateCluster, g.nodeName)
}

func crateStatefulSet(g crateGroup, dataNodes int32) *appsv1.StatefulSet {
	return bedwire.StatefulSet(crateNamespace, crateCluster, g.sts, g.nodeName, g.order, g.replicas, dataNodes)
}

// startCrateSimulator starts the simulator in its own session, so that it outlives `up`, and
// appends it to the testbed pidfile, which `down` (StopPidfile) reads.
func startCrateSimulator(tb *testbed.Testbed, stateDir, bin, addrFile string) (int, error) {
	logFile, err := os.OpenFile(filepath.Join(tb.LogDir, "cratedb-simulator.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("open simulator log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin,
		"--kubeconfig", tb.KubeconfigPath,
		"--namespace", crateNamespace,
		"--cluster", crateCluster,
		"--state-dir", filepath.Join(stateDir, "cratedb"),
		"--debug-addr", "127.0.0.1:0",
		"--debug-addr-file", addrFile,
		"--kwok-wiring",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start CrateDB simulator: %w", err)
	}
	pid := cmd.Process.Pid
	// Not waited for: it belongs to the sandbox now. Release avoids keeping its handle.
	_ = cmd.Process.Release()
	if err := recordPid(tb, pid, "cratedb-simulator", bin); err != nil {
		return 0, err
	}
	return pid, nil
}

// waitCrateSimulator waits for the simulator to write its debug address, then polls the
// debug endpoint until want nodes run.
func waitCrateSimulator(ctx context.Context, addrFile string, want int) (string, []cratedbsim.NodeInfo, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		var nodes []cratedbsim.NodeInfo
		addr, err := os.ReadFile(addrFile)
		if err == nil {
			var resp *http.Response
			resp, err = client.Get("http://" + string(addr) + "/_sim/nodes")
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&nodes)
				resp.Body.Close()
			}
		}
		up := 0
		for _, n := range nodes {
			if n.Up && n.HTTPAddr != "" {
				up++
			}
		}
		if err == nil && up >= want {
			return string(addr), nodes, nil
		}
		last = fmt.Sprintf("%d of %d nodes up (%v)", up, want, err)
		select {
		case <-ctx.Done():
			return "", nil, fmt.Errorf("wait for the CrateDB simulator: %w; last: %s", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func crateSQL(ctx context.Context, addr string, stmt cratedbsim.SQLRequest) error {
	body, err := json.Marshal(stmt)
	if err != nil {
		return fmt.Errorf("encode statement: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/_sql", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("run demo statement: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e cratedbsim.SQLErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("demo statement failed: %s", e.Error.Message)
	}
	return nil
}

func randomPassword() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate password: %w", err)
	}
	return hex.EncodeToString(b), nil
}
