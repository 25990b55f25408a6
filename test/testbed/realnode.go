package testbed

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	watchtools "k8s.io/client-go/tools/watch"
)

// Real nodes: a kubelet and a containerd per node, next to the kwok nodes (see
// /work/shared/docs/realnode.md for the recipe this follows).
const (
	// RealNodeLabel (value "true") and the NoSchedule taint of the same key mark real nodes:
	// a pod runs there only if it selects the label and tolerates the taint (OnRealNodes).
	RealNodeLabel = "dbops.test/real-node"
	// RealNodeStorageClass provisions hostPath volumes for pods on real nodes (the
	// controller manager's host-path provisioner; folders under /tmp/hostpath_pv).
	RealNodeStorageClass = "realnode-hostpath"
	// realNodeStateFile, in the test bed folder, records the host resources to clean.
	realNodeStateFile = "realnode.json"
	// realNodeDefault is the number of real nodes when Options.RealNodes is negative.
	realNodeDefault = 3
)

var realNodeBinaries = []string{"kubelet", "coredns"}

// OnRealNodes makes a pod spec run on the test bed's real nodes only.
func OnRealNodes(spec *corev1.PodSpec) {
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	spec.NodeSelector[RealNodeLabel] = "true"
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
		Key: RealNodeLabel, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule,
	})
}

// realNodes is the running part of the real nodes.
type realNodes struct {
	st    realNodeState
	names []string
}

// RealNodeSupport tells whether this machine can run real nodes: nil, or an error whose text is
// the one-line reason (not root, no cgroup v1, packages missing). With install set, missing
// Debian packages are first installed by hack/testbed/realnode-deps.sh.
func RealNodeSupport(ctx context.Context, install bool) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("real nodes need Linux (this is %s)", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("real nodes need root (running as uid %d): kubelet and containerd manage mounts, cgroups and network links", os.Geteuid())
	}
	mps, err := cgroupV1Mounts()
	if err != nil {
		return fmt.Errorf("real nodes need cgroups: %w", err)
	}
	if !hasCgroupController(mps, "memory") || !hasCgroupController(mps, "cpu") || !hasCgroupController(mps, "pids") {
		return errors.New("real nodes need cgroup v1 hierarchies cpu, memory and pids (a cgroup v2-only machine is not supported by the test bed yet)")
	}
	if data, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(data), "overlay") {
		return errors.New("real nodes need the overlay filesystem (containerd's snapshotter)")
	}
	missing := missingHostTools()
	if len(missing) > 0 && install {
		if script, err := depsScript(); err == nil {
			cmd := exec.CommandContext(ctx, "bash", script)
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("real nodes: %s failed: %w: %s", script, err, lastLines(string(out), 5))
			}
			missing = missingHostTools()
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("real nodes need %s (Debian: containerd runc containernetworking-plugins busybox-static; hack/testbed/realnode-deps.sh installs them as root)", strings.Join(missing, ", "))
	}
	return nil
}

func hasCgroupController(mps []string, c string) bool {
	for _, mp := range mps {
		for _, part := range strings.Split(filepath.Base(mp), ",") {
			if part == c {
				return true
			}
		}
	}
	return false
}

func missingHostTools() []string {
	var missing []string
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "ip"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	for _, p := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback", busyboxPath} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	return missing
}

// sourceRoot is the repository root, found from this source file (tests and go run).
func sourceRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate source directory")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..")), nil
}

func depsScript() (string, error) {
	root, err := sourceRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "hack", "testbed", "realnode-deps.sh")
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// HasRealNodes reports whether the test bed in dir (running or left behind) claimed real
// nodes: it wrote their host resources down when it started them.
func HasRealNodes(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, realNodeStateFile))
	return err == nil
}

// StartRealNodes adds n real nodes (realnode-1..n, zones round-robin like the kwok nodes) to a
// running test bed: it claims host resources, builds and imports the images, and starts CoreDNS
// and per node a containerd and a kubelet; it returns once every real node is Ready and DNS
// answers. On an error, what was started is stopped. A test bed has at most one set.
func (tb *Testbed) StartRealNodes(ctx context.Context, n int) error {
	if n <= 0 {
		n = realNodeDefault
	}
	tb.mu.Lock()
	started := tb.real != nil
	tb.mu.Unlock()
	if started {
		return errors.New("real nodes already started")
	}
	if err := tb.startRealNodes(ctx, n); err != nil {
		if serr := tb.stopRealNodes(); serr != nil {
			return errors.Join(err, serr)
		}
		return err
	}
	return nil
}

func (tb *Testbed) startRealNodes(ctx context.Context, n int) error {
	if err := RealNodeSupport(ctx, true); err != nil {
		return err
	}
	if missing := missingBinaries(tb.binDir, realNodeBinaries); len(missing) > 0 {
		// A test bed started without real nodes did not need kubelet and CoreDNS.
		opts := tb.opts
		opts.RealNodes = n
		if _, err := ensureBinaries(ctx, opts); err != nil {
			return err
		}
	}
	stateDir := filepath.Join(tb.Dir, "realnode")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", stateDir, err)
	}
	st, err := claimSlot(tb.Dir, stateDir, tb.Pidfile, n, tb.opts.logf)
	if err != nil {
		return err
	}
	tb.mu.Lock()
	tb.real = &realNodes{st: st}
	tb.mu.Unlock()
	if err := writeState(filepath.Join(tb.Dir, realNodeStateFile), st); err != nil {
		return err
	}
	if err := setupHost(st); err != nil {
		return fmt.Errorf("real nodes: host set-up: %w", err)
	}
	tb.opts.logf("testbed: real nodes use slot %d (nodes %s..%s, DNS %s, bridge %s, pods %s)",
		st.Slot, st.nodeIP(1), st.nodeIP(n), st.dnsIP(), st.bridge(), st.podSubnet())

	images, err := tb.realNodeImages(ctx, stateDir)
	if err != nil {
		return err
	}
	if err := tb.startCoreDNS(ctx, st); err != nil {
		return err
	}
	for i := 1; i <= n; i++ {
		if err := tb.startRealNode(ctx, st, i, images); err != nil {
			return fmt.Errorf("real node %s: %w", st.nodeName(i), err)
		}
		tb.real.names = append(tb.real.names, st.nodeName(i))
	}
	if err := tb.createRealNodeStorageClass(ctx); err != nil {
		return err
	}
	if err := tb.waitNamedNodesReady(ctx, tb.real.names); err != nil {
		return err
	}
	if err := tb.waitDNS(ctx, st); err != nil {
		return err
	}
	tb.mu.Lock()
	tb.RealNodes = append([]string(nil), tb.real.names...)
	tb.mu.Unlock()
	return nil
}

// realNodeImages builds the pause, crash shim and CrateDB pod proxy programs and the image tarball (cached next to the bin dir).
func (tb *Testbed) realNodeImages(ctx context.Context, stateDir string) (string, error) {
	root, err := sourceRoot()
	if err != nil {
		return "", err
	}
	// Static builds (no libc in the images); -trimpath keeps them byte-identical across
	// worktrees, so the image cache hits.
	progs := map[string]string{"pause": "./test/testbed/cmd/pause", "crash": "./test/cmd/crash-shim", "crate": "./test/cmd/cratedb-sim-pod"}
	built := map[string]string{}
	for name, pkg := range progs {
		out := filepath.Join(stateDir, name)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s: %w: %s", pkg, err, b)
		}
		built[name] = out
	}
	began := time.Now()
	path, err := buildImages(ctx, filepath.Join(filepath.Dir(tb.binDir), "images"), imageSources{
		pauseBin: built["pause"], busybox: busyboxPath,
		etcd: filepath.Join(tb.binDir, "etcd"), etcdctl: filepath.Join(tb.binDir, "etcdctl"),
		crashShim: built["crash"], cratePod: built["crate"],
	})
	if err != nil {
		return "", fmt.Errorf("build images: %w", err)
	}
	tb.opts.logf("testbed: images %s (%s)", path, time.Since(began).Round(time.Millisecond))
	return path, nil
}

// runExternal starts a component that is not in the bin dir (containerd) or needs its own log
// name (one kubelet per node), tracked like the others (Stop, pidfile).
func (tb *Testbed) runExternal(logName, binary string, args ...string) (*process, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.stopped {
		return nil, errors.New("testbed is stopping")
	}
	p, err := startProcess(tb.LogDir, logName, binary, args, os.Environ(), tb.opts.Detached)
	if err != nil {
		return nil, err
	}
	tb.procs = append(tb.procs, p)
	return p, writePidfile(tb.Pidfile, tb.procs)
}

func (tb *Testbed) startCoreDNS(ctx context.Context, st realNodeState) error {
	corefile := filepath.Join(st.StateDir, "Corefile")
	conf := fmt.Sprintf(`.:53 {
    bind %s
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s testbed
        pods insecure
        ttl 5
        fallthrough in-addr.arpa ip6.arpa
    }
}
`, st.dnsIP(), tb.KubeconfigPath)
	if err := os.WriteFile(corefile, []byte(conf), 0o600); err != nil {
		return fmt.Errorf("write Corefile: %w", err)
	}
	_, err := tb.runExternal("coredns", filepath.Join(tb.binDir, "coredns"), "-conf", corefile)
	return err
}

// waitDNS waits until CoreDNS answers for the kubernetes Service.
func (tb *Testbed) waitDNS(ctx context.Context, st realNodeState) error {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(st.dnsIP(), "53"))
	}}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := tb.checkAlive(); err != nil {
			return false, err
		}
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, last = r.LookupHost(qctx, "kubernetes.default.svc.cluster.local")
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for CoreDNS on %s: %w (last: %v)", st.dnsIP(), err, last)
	}
	return nil
}

func (tb *Testbed) startRealNode(ctx context.Context, st realNodeState, i int, images string) error {
	dir := st.nodeDir(i)
	for _, d := range []string{"containerd/root", "containerd/state", "containerd/opt", "cni/net.d", "cni/ipam", "kubelet", "pki", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	name, ip := st.nodeName(i), st.nodeIP(i)

	// containerd
	sock := st.containerdSock(i)
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  # No CAP_SYS_RESOURCE in CI's VMs: without this every sandbox fails to start.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[6]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[7]q
`, filepath.Join(dir, "containerd/root"), filepath.Join(dir, "containerd/state"), sock, sock+".ttrpc",
		ImagePause, filepath.Join(dir, "cni/net.d"), filepath.Join(dir, "containerd/opt"))
	cfgPath := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("write containerd config: %w", err)
	}
	// One bridge for all nodes of this test bed, a disjoint address range per node: pods of
	// different nodes share one L2 segment, as on a flat pod network.
	cni := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "dbops-realnode", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": false, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local",
     "ranges": [[{"subnet": %q, "rangeStart": "%s.2", "rangeEnd": "%s.254", "gateway": %q}]],
     "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
  {"type": "loopback"}]}
`, st.bridge(), st.podSubnet(), st.podRange(i), st.podRange(i), st.gateway(), filepath.Join(dir, "cni/ipam"))
	if err := os.WriteFile(filepath.Join(dir, "cni/net.d/10-dbops.conflist"), []byte(cni), 0o600); err != nil {
		return fmt.Errorf("write CNI config: %w", err)
	}
	containerd, err := exec.LookPath("containerd")
	if err != nil {
		return err
	}
	if _, err := tb.runExternal(fmt.Sprintf("containerd-%d", i), containerd, "--config", cfgPath); err != nil {
		return err
	}
	if err := tb.waitUnixSocket(ctx, sock); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	imp := exec.CommandContext(ctx, "ctr", "--address", sock, "-n", "k8s.io", "images", "import", images)
	if out, err := imp.CombinedOutput(); err != nil {
		return fmt.Errorf("import images: %w: %s", err, lastLines(string(out), 5))
	}

	// kubelet
	pkiDir := filepath.Join(dir, "pki")
	if err := tb.writeKubeletPKI(pkiDir, name, ip); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubelet.kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testbed"] = &clientcmdapi.Cluster{Server: tb.APIServerURL, CertificateAuthority: tb.pki.CACert}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: filepath.Join(pkiDir, "client.crt"), ClientKey: filepath.Join(pkiDir, "client.key")}
	kc.Contexts["testbed"] = &clientcmdapi.Context{Cluster: "testbed", AuthInfo: name}
	kc.CurrentContext = "testbed"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return fmt.Errorf("write kubelet kubeconfig: %w", err)
	}
	kcfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzPort: 0
tlsCertFile: %[2]s/serving.crt
tlsPrivateKeyFile: %[2]s/serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[3]s}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://%[4]s
cgroupDriver: cgroupfs
cgroupRoot: /%[5]s
failSwapOn: false
# v1.36 refuses cgroup v1 unless told otherwise.
failCgroupV1: false
clusterDomain: cluster.local
clusterDNS: [%[6]s]
resolvConf: ""
# The imported images cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
podLogsDir: %[7]s
maxPods: 50
registerWithTaints:
- {key: %[8]s, value: "true", effect: NoSchedule}
`, ip, pkiDir, tb.pki.CACert, sock, st.cgroupName(i), st.dnsIP(), filepath.Join(dir, "pod-logs"), RealNodeLabel)
	kcfgPath := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(kcfgPath, []byte(kcfg), 0o600); err != nil {
		return fmt.Errorf("write kubelet config: %w", err)
	}
	zone := tb.opts.Zones[(i-1)%len(tb.opts.Zones)]
	_, err = tb.runExternal(fmt.Sprintf("kubelet-%d", i), filepath.Join(tb.binDir, "kubelet"),
		"--config="+kcfgPath,
		"--kubeconfig="+kubeconfig,
		"--hostname-override="+name,
		"--node-ip="+ip,
		"--node-labels="+strings.Join([]string{RealNodeLabel + "=true", ZoneLabel + "=" + zone, "topology.kubernetes.io/region=local", "type=real"}, ","),
		"--root-dir="+filepath.Join(dir, "kubelet"),
		"--cert-dir="+pkiDir,
		"-v=2",
	)
	return err
}

func (tb *Testbed) waitUnixSocket(ctx context.Context, path string) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := tb.checkAlive(); err != nil {
			return false, err
		}
		c, err := net.Dial("unix", path)
		if err != nil {
			return false, nil
		}
		_ = c.Close()
		return true, nil
	})
}

// writeKubeletPKI writes the kubelet's client certificate (system:node:<name>, for the Node
// authorizer) and serving certificate (IP SAN = node IP: the API server verifies it for exec
// and logs), both signed by the test bed CA.
func (tb *Testbed) writeKubeletPKI(dir, name, ip string) error {
	caPEM, err := os.ReadFile(tb.pki.CACert)
	if err != nil {
		return fmt.Errorf("read CA: %w", err)
	}
	caKeyPEM, err := os.ReadFile(tb.pki.CAKey)
	if err != nil {
		return fmt.Errorf("read CA key: %w", err)
	}
	cb, _ := pem.Decode(caPEM)
	kb, _ := pem.Decode(caKeyPEM)
	if cb == nil || kb == nil {
		return errors.New("decode test bed CA")
	}
	caCert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return fmt.Errorf("parse CA: %w", err)
	}
	caKey, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return fmt.Errorf("parse CA key: %w", err)
	}
	now := time.Now()
	certs := []struct {
		file string
		tmpl *x509.Certificate
	}{
		{"client", &x509.Certificate{
			Subject:     pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
		{"serving", &x509.Certificate{
			Subject:     pkix.Name{CommonName: name},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames:    []string{name},
			IPAddresses: []net.IP{net.ParseIP(ip)},
		}},
	}
	for _, c := range certs {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
		if err != nil {
			return err
		}
		c.tmpl.SerialNumber = serial
		c.tmpl.NotBefore, c.tmpl.NotAfter = now.Add(-time.Hour), now.Add(10*365*24*time.Hour)
		c.tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		der, err := x509.CreateCertificate(rand.Reader, c.tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("sign %s certificate: %w", c.file, err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, c.file+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, c.file+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (tb *Testbed) createRealNodeStorageClass(ctx context.Context) error {
	bind := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: RealNodeStorageClass},
		Provisioner:       "kubernetes.io/host-path",
		ReclaimPolicy:     &reclaim,
		VolumeBindingMode: &bind,
	}
	if _, err := tb.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create storage class %s: %w", RealNodeStorageClass, err)
	}
	return nil
}

func (tb *Testbed) waitNamedNodesReady(ctx context.Context, names []string) error {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (kruntime.Object, error) {
			return tb.Client.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return tb.Client.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	var store cache.Store
	check := func() (bool, error) {
		if err := tb.checkAlive(); err != nil {
			return false, err
		}
		ready := 0
		for _, o := range store.List() {
			if n, ok := o.(*corev1.Node); ok && want[n.Name] && NodeReady(n) {
				ready++
			}
		}
		return ready == len(want), nil
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err := watchtools.UntilWithSync(wctx, lw, &corev1.Node{},
		func(s cache.Store) (bool, error) { store = s; return check() },
		func(watch.Event) (bool, error) { return check() })
	if err != nil {
		return fmt.Errorf("wait for real nodes %s to be Ready: %w", strings.Join(names, ", "), err)
	}
	return nil
}

// stopRealNodes ends the real nodes in the order that leaves nothing behind: no new pods
// (cordon), pods deleted through the API and gone (the kubelets stop their containers), then
// the kubelets, containerds and CoreDNS, then the host resources.
func (tb *Testbed) stopRealNodes() error {
	tb.mu.Lock()
	rn := tb.real
	tb.real = nil
	tb.mu.Unlock()
	if rn == nil {
		return nil
	}
	var errs []error
	if tb.Client != nil && len(rn.names) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		if err := drainRealNodes(ctx, tb.Client, rn.names); err != nil {
			errs = append(errs, err)
		}
		removeRealNodeVolumes(ctx, tb.Client)
		cancel()
	}
	tb.mu.Lock()
	var procs []*process
	for _, p := range tb.procs {
		if strings.HasPrefix(p.name, "kubelet-") || strings.HasPrefix(p.name, "containerd-") || p.name == "coredns" {
			procs = append(procs, p)
		}
	}
	tb.mu.Unlock()
	// Kubelets first (they would restart what containerd stops), then containerds, CoreDNS.
	for _, prefix := range []string{"kubelet-", "containerd-", "coredns"} {
		for _, p := range procs {
			if strings.HasPrefix(p.name, prefix) {
				p.stop()
			}
		}
	}
	if err := cleanupHost(rn.st); err != nil {
		errs = append(errs, fmt.Errorf("real nodes: clean host: %w", err))
	}
	if err := releaseSlot(rn.st); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// DrainRealNodes deletes the pods of the real nodes of the test bed in dir (through its
// kubeconfig) and waits until they are gone, so that the kubelets stop their containers; call
// it before StopPidfile for a test bed that is not stopped through Stop (a detached sandbox).
// Without real nodes, or when the API server no longer answers, it does nothing.
func DrainRealNodes(ctx context.Context, dir string) error {
	st, err := readState(filepath.Join(dir, realNodeStateFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return nil //nolint:nilerr // no kubeconfig: nothing to drain through
	}
	rc.Timeout = 10 * time.Second
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("client for %s: %w", dir, err)
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		return nil //nolint:nilerr // API server gone: cleanupHost kills what is left
	}
	names := make([]string, 0, st.Nodes)
	for i := 1; i <= st.Nodes; i++ {
		names = append(names, st.nodeName(i))
	}
	if err := drainRealNodes(ctx, client, names); err != nil {
		return err
	}
	removeRealNodeVolumes(ctx, client)
	return nil
}

// drainRealNodes cordons the nodes and deletes their pods, waiting until they are gone.
func drainRealNodes(ctx context.Context, client kubernetes.Interface, names []string) error {
	on := map[string]bool{}
	for _, n := range names {
		on[n] = true
		patch := []byte(`{"spec":{"unschedulable":true}}`)
		if _, err := client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cordon %s: %w", n, err)
		}
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	grace := int64(1)
	for _, p := range pods.Items {
		if !on[p.Spec.NodeName] {
			continue
		}
		err := client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (kruntime.Object, error) {
			return client.CoreV1().Pods("").List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Pods("").Watch(ctx, o)
		},
	}
	var store cache.Store
	gone := func() (bool, error) {
		for _, o := range store.List() {
			if p, ok := o.(*corev1.Pod); ok && on[p.Spec.NodeName] {
				return false, nil
			}
		}
		return true, nil
	}
	_, err = watchtools.UntilWithSync(ctx, lw, &corev1.Pod{},
		func(s cache.Store) (bool, error) { store = s; return gone() },
		func(watch.Event) (bool, error) { return gone() })
	if err != nil {
		return fmt.Errorf("wait for the pods of the real nodes to be deleted: %w", err)
	}
	return nil
}

// removeRealNodeVolumes deletes the host folders of the hostPath volumes provisioned for the
// real nodes (the controller manager would only do it when their claims are deleted).
func removeRealNodeVolumes(ctx context.Context, client kubernetes.Interface) {
	pvs, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, pv := range pvs.Items {
		if pv.Spec.StorageClassName != RealNodeStorageClass || pv.Spec.HostPath == nil {
			continue
		}
		// The provisioner only makes folders under /tmp/hostpath_pv; never touch anything else.
		if p := filepath.Clean(pv.Spec.HostPath.Path); strings.HasPrefix(p, "/tmp/hostpath_pv/") {
			_ = os.RemoveAll(p)
		}
	}
}

// RealNodePodGateway is the host's address on the real nodes' pod bridge and the bridge's
// name: the one host address pods on real nodes reach (they cannot reach the host's
// loopback). Test doubles that pods must call (the CrateDB simulator's pod gateway) listen
// there, on a free port. An error when no real nodes run.
func (tb *Testbed) RealNodePodGateway() (ip, iface string, err error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.real == nil || len(tb.real.names) == 0 {
		return "", "", errors.New("no real nodes run")
	}
	return tb.real.st.gateway(), tb.real.st.bridge(), nil
}
