// Package testbed runs a real, local Kubernetes control plane for end-to-end tests and the
// developer sandbox: etcd, kube-apiserver, kube-controller-manager and kube-scheduler, with
// kwok simulating nodes, pods and volumes. Everything listens on loopback only and lives in one
// folder; no containers are needed.
//
// The binaries come from hack/testbed/build.sh. Typical use in a test:
//
//	tb := testbed.StartT(t, testbed.Options{})
//	tb.Client.AppsV1().StatefulSets("default").Create(...)
package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	watchtools "k8s.io/client-go/tools/watch"
)

// Labels and annotations put on the fake nodes.
const (
	ZoneLabel          = "topology.kubernetes.io/zone"
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
)

// PodStartDelayAnnotation, set on a pod (or a pod template) to a Go duration such as "1s",
// makes a pod on a kwok node become Ready that long after kwok first sees it scheduled, as a
// container that takes time to start would (assets/stages/pod-ready.yaml). Pods without it are
// Ready at once.
const PodStartDelayAnnotation = "pod-ready.stage.kwok.x-k8s.io/delay"

// PodStartDelayAnnotationFor is PodStartDelayAnnotation for the pod named pod only: set on a
// StatefulSet's pod template, it gives that one pod its own start time (it wins over
// PodStartDelayAnnotation), as pods of one StatefulSet take different times to start.
func PodStartDelayAnnotationFor(pod string) string { return PodStartDelayAnnotation + "-" + pod }

// CrashLabel set to "true" on a Running, Ready pod makes kwok's
// pod-container-crash stage crash its containers about 1-2 s later
// (annotation CrashLabel+"/delay" overrides the delay): the pod stays
// Running with Ready False, as a crash-looping pod does. Pods without the
// label are not affected.
const CrashLabel = "pod-container-crash.stage.kwok.x-k8s.io"

// Options configure a testbed. The zero value is a working default.
type Options struct {
	// Dir holds PKI, data, logs, kubeconfig and pidfile. Default: a new temp dir, removed by
	// Stop unless KeepDir is set.
	Dir string
	// KeepDir keeps Dir after Stop (always true for a caller-provided Dir).
	KeepDir bool
	// BinDir holds the component binaries. Default: $DBOPS_TESTBED_BIN or the build.sh cache.
	BinDir string
	// NoBuild makes Start fail instead of running build.sh when binaries are missing.
	NoBuild bool
	// Nodes is the number of fake nodes (default 8), spread round-robin over Zones.
	Nodes int
	// Zones are the topology.kubernetes.io/zone values (default zone-a..zone-d). Four, one more
	// than the replicas of a triple-redundant database: a replacement scheduled while the pod it
	// replaces still runs then has a zone that holds no replica (FoundationDB builds a storage
	// team only from distinct zoneids, so with exactly three zones such a replacement can stall).
	Zones []string
	// RealNodes is the number of real nodes (kubelet + containerd, see realnode.go) started next
	// to the kwok nodes; 0 = none, negative = the default of 3. Needs root; see RealNodeSupport.
	RealNodes int
	// ExtraPath is appended to kwok's PATH after ShimDir: exec argv[0] is looked up there.
	ExtraPath []string
	// Timeout bounds start-up (default 2 minutes; typically it takes well under 30 s).
	Timeout time.Duration
	// Detached starts the components in their own sessions without tying them to this
	// process, so they outlive it (the sandbox). Stop still works, as does StopPidfile.
	Detached bool
	// NoSignalHandler disables stopping the components on SIGINT/SIGTERM of this process.
	NoSignalHandler bool
	// Logf receives progress messages; nil discards them.
	Logf func(format string, args ...any)
	// BuildOutput receives build.sh progress if a build is needed; nil discards it.
	BuildOutput io.Writer
}

func (o Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

func (o Options) buildLog() io.Writer {
	if o.BuildOutput != nil {
		return o.BuildOutput
	}
	return io.Discard
}

// Testbed is a running control plane.
type Testbed struct {
	// Dir is the testbed folder; LogDir holds one log file per component.
	Dir    string
	LogDir string
	// KubeconfigPath is an admin kubeconfig for the API server.
	KubeconfigPath string
	// Pidfile lists the component processes (see StopPidfile).
	Pidfile string
	// APIServerURL is https://127.0.0.1:<port>.
	APIServerURL string
	// RESTConfig is shared: copy it with rest.CopyConfig before changing it.
	RESTConfig *rest.Config
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface
	// Nodes are the fake node names, in creation order.
	Nodes []string
	// RealNodes are the real node names (realnode-1..N), empty without Options.RealNodes.
	RealNodes []string
	// StartupDuration is how long Start took once binaries were available.
	StartupDuration time.Duration

	opts    Options
	binDir  string
	shimDir string
	pki     *pki
	real    *realNodes

	mu       sync.Mutex
	procs    []*process
	stopped  bool
	stopOnce sync.Once
	stopErr  error
	// stopSignals ends the signal-handling goroutine.
	stopSignals chan struct{}
	// stopReaper ends RunReaper's informers (nil when detached).
	stopReaper context.CancelFunc
	// nodeListener is reserved for the node server (nodeserver.go) until it serves;
	// nodeServer is nil when detached (the sandbox runs it, RunNodeServer).
	nodeListener net.Listener
	nodeServer   *nodeServer
}

// StartT starts a testbed for a test and stops it in t.Cleanup. On failure of the test the
// tails of the component logs are logged.
func StartT(t testing.TB, opts Options) *Testbed {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	tb, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("start testbed: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testbed logs (%s):\n%s", tb.LogDir, tb.LogTails(20))
		}
		if err := tb.Stop(); err != nil {
			t.Errorf("stop testbed: %v", err)
		}
	})
	return tb
}

// Start builds nothing if binaries exist (see hack/testbed/build.sh), then starts all
// components, waits until the API server is ready and every fake node is Ready, and returns.
// ctx bounds start-up only; use Stop to end the testbed.
func Start(ctx context.Context, opts Options) (*Testbed, error) {
	if opts.Nodes <= 0 {
		opts.Nodes = 8
	}
	if len(opts.Zones) == 0 {
		opts.Zones = []string{"zone-a", "zone-b", "zone-c", "zone-d"}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.RealNodes < 0 {
		opts.RealNodes = realNodeDefault
	}
	binDir, err := ensureBinaries(ctx, opts)
	if err != nil {
		return nil, err
	}

	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	dir := opts.Dir
	if dir == "" {
		cleanStaleTempDirs(opts.logf)
		if dir, err = os.MkdirTemp("", tempDirPattern); err != nil {
			return nil, fmt.Errorf("create testbed dir: %w", err)
		}
	} else {
		opts.KeepDir = true
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create testbed dir: %w", err)
		}
	}
	tb := &Testbed{
		Dir:            dir,
		LogDir:         filepath.Join(dir, "logs"),
		KubeconfigPath: filepath.Join(dir, "kubeconfig"),
		Pidfile:        filepath.Join(dir, "testbed.pid"),
		opts:           opts,
		binDir:         binDir,
		shimDir:        filepath.Join(dir, "shims"),
		stopSignals:    make(chan struct{}),
	}
	if !opts.NoSignalHandler {
		tb.handleSignals()
	}
	if err := tb.start(ctx); err != nil {
		tails := tb.LogTails(15)
		_ = tb.Stop()
		return nil, fmt.Errorf("%w\ncomponent logs in %s:\n%s", err, tb.LogDir, tails)
	}
	tb.StartupDuration = time.Since(began)
	opts.logf("testbed: ready in %s (kubeconfig %s)", tb.StartupDuration.Round(100*time.Millisecond), tb.KubeconfigPath)
	return tb, nil
}

func (tb *Testbed) start(ctx context.Context) error {
	for _, d := range []string{tb.LogDir, tb.shimDir, filepath.Join(tb.Dir, "etcd"), filepath.Join(tb.Dir, "kwok-home")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	var err error
	if tb.pki, err = writePKI(filepath.Join(tb.Dir, "pki")); err != nil {
		return err
	}
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer, apiPort, kwokPort := ports[0], ports[1], ports[2], ports[3]
	// The kubelet API port the nodes announce is the node server's, held from here on.
	if tb.nodeListener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return fmt.Errorf("node server port: %w", err)
	}
	nodePort := tb.nodeListener.Addr().(*net.TCPAddr).Port
	nodeCfg := nodeServerConfig{
		Listen: tb.nodeListener.Addr().String(),
		Kwok:   "127.0.0.1:" + strconv.Itoa(kwokPort),
		Path:   tb.kwokPath(),
		Home:   filepath.Join(tb.Dir, "kwok-home"),
	}
	tb.APIServerURL = "https://127.0.0.1:" + strconv.Itoa(apiPort)
	if err := tb.writeKubeconfig(); err != nil {
		return err
	}

	// etcd
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	if err := tb.run("etcd",
		"--name=testbed",
		"--data-dir="+filepath.Join(tb.Dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=testbed="+peerURL,
		"--initial-cluster-state=new",
		// Throw-away data: skipping fsync makes every API write much cheaper on slow disks.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	); err != nil {
		return err
	}
	if err := tb.waitHTTP(ctx, "etcd", etcdURL+"/health", http.DefaultClient); err != nil {
		return err
	}

	// kube-apiserver
	auditFlags, err := tb.auditFlags()
	if err != nil {
		return err
	}
	if err := tb.run("kube-apiserver", append(auditFlags,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(apiPort),
		"--cert-dir="+filepath.Join(tb.Dir, "pki", "apiserver"),
		"--tls-cert-file="+tb.pki.Cert,
		"--tls-private-key-file="+tb.pki.Key,
		"--client-ca-file="+tb.pki.CACert,
		"--service-account-key-file="+tb.pki.SAPub,
		"--service-account-signing-key-file="+tb.pki.SAKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--authorization-mode=Node,RBAC",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		// kwok serves the kubelet API with our certificate, so the API server can verify it.
		"--kubelet-certificate-authority="+tb.pki.CACert,
		"--kubelet-client-certificate="+tb.pki.Cert,
		"--kubelet-client-key="+tb.pki.Key,
	)...); err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", tb.KubeconfigPath)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	// Tests create many objects quickly; client-side throttling would only slow them down.
	rc.QPS, rc.Burst = 200, 400
	tb.RESTConfig = rc
	if tb.Client, err = kubernetes.NewForConfig(rc); err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	if tb.Dynamic, err = dynamic.NewForConfig(rc); err != nil {
		return fmt.Errorf("create dynamic client: %w", err)
	}
	readyzClient, err := rest.HTTPClientFor(rc)
	if err != nil {
		return fmt.Errorf("create readyz client: %w", err)
	}
	if err := tb.waitHTTP(ctx, "kube-apiserver", tb.APIServerURL+"/readyz", readyzClient); err != nil {
		return err
	}

	// kwok lists its CRDs at start-up, so they must be served before it starts.
	if err := tb.installKwokResources(ctx); err != nil {
		return err
	}
	if err := tb.createNodes(ctx); err != nil {
		return err
	}
	if err := tb.startNodeServer(ctx, nodeCfg); err != nil {
		return err
	}

	commonKube := []string{
		"--kubeconfig=" + tb.KubeconfigPath,
		"--authentication-kubeconfig=" + tb.KubeconfigPath,
		"--authorization-kubeconfig=" + tb.KubeconfigPath,
		"--secure-port=0",
		"--leader-elect=false",
	}
	if err := tb.run("kube-controller-manager", append(commonKube,
		"--root-ca-file="+tb.pki.CACert,
		"--service-account-private-key-file="+tb.pki.SAKey,
		// No real pod network: node IPAM would wait for CIDRs nobody needs.
		"--controllers=*,-nodeipam",
		// Volumes of the real nodes' storage class (realnode.go); kwok's class is unaffected.
		"--enable-hostpath-provisioner=true",
	)...); err != nil {
		return err
	}
	if err := tb.run("kube-scheduler", commonKube...); err != nil {
		return err
	}

	configPath := filepath.Join(tb.Dir, "kwok.yaml")
	cfg, err := kwokConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(configPath, cfg, 0o600); err != nil {
		return fmt.Errorf("write kwok config: %w", err)
	}
	if err := tb.run("kwok",
		"--kubeconfig="+tb.KubeconfigPath,
		"--config="+configPath,
		// Only the fake nodes: on a real node kwok would overwrite the kubelet's status.
		"--manage-nodes-with-annotation-selector="+KwokNodeAnnotation+"=fake",
		"--node-ip=127.0.0.1",
		"--node-name=localhost",
		// The nodes announce the node server's port; kwok serves behind it.
		"--node-port="+strconv.Itoa(nodePort),
		"--server-address=127.0.0.1:"+strconv.Itoa(kwokPort),
		"--tls-cert-file="+tb.pki.Cert,
		"--tls-private-key-file="+tb.pki.Key,
		"--node-lease-duration-seconds="+strconv.Itoa(int(nodeLeaseDuration/time.Second)),
		"--cidr=10.244.0.0/16",
		"--enable-crds="+strings.Join(kwokCRDKinds, ","),
	); err != nil {
		return err
	}

	if err := tb.waitNodesReady(ctx); err != nil {
		return err
	}
	// kwok has no pod-delete stage (see reaper.go); a detached testbed outlives this
	// process, so its owner runs the reaper in a process of its own (hack/sandbox).
	if !tb.opts.Detached {
		reaperCtx, stopReaper := context.WithCancel(context.Background())
		tb.stopReaper = stopReaper
		if err := RunReaper(reaperCtx, tb.Client, tb.opts.logf); err != nil {
			return err
		}
	}
	// The service account controller creating "default" proves the controller manager runs;
	// pods are rejected by admission until their namespace has that account.
	if err := tb.waitDefaultServiceAccount(ctx, metav1.NamespaceDefault); err != nil {
		return err
	}
	if tb.opts.RealNodes > 0 {
		if err := tb.startRealNodes(ctx, tb.opts.RealNodes); err != nil {
			return err
		}
	}
	return tb.checkAlive()
}

// nodeLeaseDuration is the kwok nodes' lease duration; kwok renews a lease every quarter of
// it, as a kubelet does with its own.
const nodeLeaseDuration = 40 * time.Second

// freePorts reserves n distinct free loopback ports. They are released before the components
// bind them; holding all listeners until the end at least keeps them distinct.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (tb *Testbed) run(name string, args ...string) error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.stopped {
		return errors.New("testbed is stopping")
	}
	p, err := startProcess(tb.LogDir, name, filepath.Join(tb.binDir, name), args, tb.env(name), tb.opts.Detached)
	if err != nil {
		return err
	}
	tb.procs = append(tb.procs, p)
	return writePidfile(tb.Pidfile, tb.procs)
}

// env gives kwok a private HOME (so a developer's ~/.kwok config is not merged in) and the
// shim folder first on PATH, so exec argv[0] finds test programs.
func (tb *Testbed) env(name string) []string {
	env := os.Environ()
	if name != "kwok" {
		return env
	}
	return kwokEnv(env, tb.kwokPath(), filepath.Join(tb.Dir, "kwok-home"))
}

// kwokPath is the PATH of kwok and of the programs the node server execs.
func (tb *Testbed) kwokPath() string {
	pathParts := append([]string{tb.shimDir}, tb.opts.ExtraPath...)
	pathParts = append(pathParts, os.Getenv("PATH"))
	return strings.Join(pathParts, string(os.PathListSeparator))
}

// startNodeServer serves the nodes' kubelet API in this process, or, for a detached test bed,
// records what RunNodeServer needs and frees the port for it.
func (tb *Testbed) startNodeServer(ctx context.Context, cfg nodeServerConfig) error {
	if err := writeNodeServerConfig(tb.Dir, cfg); err != nil {
		return err
	}
	if tb.opts.Detached {
		err := tb.nodeListener.Close()
		tb.nodeListener = nil
		if err != nil {
			return fmt.Errorf("node server port: %w", err)
		}
		return nil
	}
	ns, err := startNodeServer(ctx, tb.nodeListener, cfg, tb.pki, tb.Dynamic, tb.opts.logf)
	if err != nil {
		return err
	}
	tb.mu.Lock()
	tb.nodeServer, tb.nodeListener = ns, nil
	tb.mu.Unlock()
	return nil
}

func (tb *Testbed) checkAlive() error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, p := range tb.procs {
		if !p.running() {
			return p.exitError()
		}
	}
	return nil
}

// waitHTTP polls url until it answers 200, failing fast if a component died.
func (tb *Testbed) waitHTTP(ctx context.Context, name, url string, client *http.Client) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := tb.checkAlive(); err != nil {
			return false, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("HTTP %d", resp.StatusCode)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("wait for %s to be ready: %w (last: %w)", name, err, last)
		}
		return fmt.Errorf("wait for %s to be ready: %w", name, err)
	}
	return nil
}

func (tb *Testbed) writeKubeconfig() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testbed"] = &clientcmdapi.Cluster{Server: tb.APIServerURL, CertificateAuthorityData: tb.pki.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: tb.pki.certPEM, ClientKeyData: tb.pki.key}
	cfg.Contexts["testbed"] = &clientcmdapi.Context{Cluster: "testbed", AuthInfo: "admin", Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = "testbed"
	if err := clientcmd.WriteToFile(*cfg, tb.KubeconfigPath); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

func (tb *Testbed) createNodes(ctx context.Context) error {
	for i := range tb.opts.Nodes {
		zone := tb.opts.Zones[i%len(tb.opts.Zones)]
		name := fmt.Sprintf("kwok-node-%d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{KwokNodeAnnotation: "fake"},
				Labels: map[string]string{
					"kubernetes.io/hostname":        name,
					"kubernetes.io/os":              "linux",
					"kubernetes.io/arch":            "amd64",
					"type":                          "kwok",
					ZoneLabel:                       zone,
					"topology.kubernetes.io/region": "local",
				},
			},
		}
		if _, err := tb.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		tb.Nodes = append(tb.Nodes, name)
	}
	return nil
}

// NodeReady reports whether a node has condition Ready=True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodReady reports whether a pod has condition Ready=True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (tb *Testbed) waitNodesReady(ctx context.Context) error {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return tb.Client.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return tb.Client.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	var store cache.Store
	want := len(tb.Nodes)
	allReady := func() (bool, error) {
		if err := tb.checkAlive(); err != nil {
			return false, err
		}
		ready := 0
		for _, o := range store.List() {
			if n, ok := o.(*corev1.Node); ok && NodeReady(n) {
				ready++
			}
		}
		return ready >= want, nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Node{},
		func(s cache.Store) (bool, error) { store = s; return allReady() },
		func(watch.Event) (bool, error) { return allReady() })
	if err != nil {
		return fmt.Errorf("wait for %d nodes to be Ready: %w", want, err)
	}
	return nil
}

func (tb *Testbed) waitDefaultServiceAccount(ctx context.Context, namespace string) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := tb.checkAlive(); err != nil {
			return false, err
		}
		_, err := tb.Client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the default service account in %s: %w", namespace, err)
	}
	return nil
}

// LogTails returns the last n lines of every component log, for diagnostics.
func (tb *Testbed) LogTails(n int) string {
	tb.mu.Lock()
	procs := append([]*process(nil), tb.procs...)
	tb.mu.Unlock()
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.name, p.logPath, tailFile(p.logPath, n))
	}
	return b.String()
}

// handleSignals stops the components when this process gets SIGINT or SIGTERM, then
// re-raises the signal so that the process still ends as it would have.
func (tb *Testbed) handleSignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		defer signal.Stop(ch)
		select {
		case sig := <-ch:
			_ = tb.Stop()
			signal.Stop(ch)
			if s, ok := sig.(syscall.Signal); ok {
				_ = syscall.Kill(os.Getpid(), s)
			}
		case <-tb.stopSignals:
		}
	}()
}

// Stop stops every component (SIGTERM to each process group, SIGKILL after a grace period),
// removes the pidfile and, unless kept, the testbed folder. Safe to call more than once.
func (tb *Testbed) Stop() error {
	tb.stopOnce.Do(func() {
		tb.mu.Lock()
		tb.stopped = true
		procs := append([]*process(nil), tb.procs...)
		tb.mu.Unlock()
		close(tb.stopSignals)
		var errs []error
		// Pods first, then kubelets and containerds, while the API server still runs (and
		// the reaper still finishes kwok pods' deletions).
		if err := tb.stopRealNodes(); err != nil {
			errs = append(errs, err)
		}
		if tb.stopReaper != nil {
			tb.stopReaper()
		}
		tb.mu.Lock()
		ns, nl := tb.nodeServer, tb.nodeListener
		tb.mu.Unlock()
		if ns != nil {
			ns.stop()
		}
		if nl != nil {
			_ = nl.Close()
		}

		// Reverse start order: the API server shuts down in about a second while etcd is up,
		// but waits out its full grace period once etcd is gone.
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop()
		}
		if err := os.Remove(tb.Pidfile); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove pidfile: %w", err))
		}
		if !tb.opts.KeepDir {
			if err := os.RemoveAll(tb.Dir); err != nil {
				errs = append(errs, fmt.Errorf("remove testbed dir: %w", err))
			}
		}
		tb.stopErr = errors.Join(errs...)
	})
	return tb.stopErr
}

// Kubectl is the path of the kubectl built with the control plane (same version), for tests
// that run the plugin the way users do, through kubectl's plugin lookup.
func (tb *Testbed) Kubectl() string { return filepath.Join(tb.binDir, "kubectl") }

// WaitPodsReady watches the pods of namespace matching selector (label selector syntax) until
// at least n of them are Ready and not terminating.
func (tb *Testbed) WaitPodsReady(ctx context.Context, namespace, selector string, n int) error {
	pods := tb.Client.CoreV1().Pods(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return pods.Watch(ctx, o)
		},
	}
	var store cache.Store
	check := func() (bool, error) {
		ready := 0
		for _, o := range store.List() {
			if p, ok := o.(*corev1.Pod); ok && PodReady(p) && p.DeletionTimestamp == nil {
				ready++
			}
		}
		return ready >= n, nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{},
		func(s cache.Store) (bool, error) { store = s; return check() },
		func(watch.Event) (bool, error) { return check() })
	if err != nil {
		return fmt.Errorf("wait for %d Ready pods matching %q in %s: %w", n, selector, namespace, err)
	}
	return nil
}
