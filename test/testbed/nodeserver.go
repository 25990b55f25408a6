package testbed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// The kwok nodes' kubelet API, as the API server reaches it, is served by the test bed's node
// server rather than by kwok: kwok announces the node server's port in each node's
// status.daemonEndpoints (kwok --node-port) while it listens on a port of its own
// (--server-address). The node server runs `exec` itself and passes everything else (port
// forwarding, logs, attach, a terminal exec) through to kwok.
//
// Why: kwok v0.8.0 copies an exec's stdin into the command's stdin pipe and never closes that
// pipe when the stream ends (sigs.k8s.io/kwok pkg/utils/exec/exec.go, Command with PipeStdin),
// so a program that reads its stdin to EOF (crash with statements on stdin, which is how every
// secret reaches a pod) never gets it. A kubelet does deliver it: the client ends stdin (SPDY:
// it closes the stdin stream; websocket v5: the CLOSE signal, which the API server turns into
// that stream's close toward the kubelet), the kubelet's streaming server (k8s.io/cri-streaming
// remotecommand, the package served here too) reads EOF from the stream, and the container
// runtime closes the process's stdin. The node server does the same with the process's pipe.
//
// As with a kubelet, a process is not ended when its client goes away (an exec'd process
// outlives its stream; kube.TimeoutArgv exists for that); the node server ends what still runs
// when it stops.

// nodeServerFile, in the test bed folder, says where the node server listens and what it
// needs, for a node server run by another process than Start's (a detached test bed: the
// sandbox runs it beside the pod reaper, RunNodeServer).
const nodeServerFile = "nodeserver.json"

// nodeServerConfig is the content of nodeServerFile.
type nodeServerConfig struct {
	// Listen is the address the API server reaches the kwok nodes' kubelet API on.
	Listen string `json:"listen"`
	// Kwok is the address kwok serves the kubelet API on.
	Kwok string `json:"kwok"`
	// Path and Home are kwok's PATH and HOME (Testbed.env), so that an exec finds the same
	// programs and sees the same home as under kwok.
	Path string `json:"path"`
	Home string `json:"home"`
}

// nodeServer is one running node server.
type nodeServer struct {
	cfg   nodeServerConfig
	env   []string
	proxy *httputil.ReverseProxy
	srv   *http.Server
	logf  func(string, ...any)

	execs, clusterExecs cache.Store
	stopInformers       context.CancelFunc

	mu      sync.Mutex
	procs   map[*exec.Cmd]struct{}
	stopped bool
	served  chan struct{}
}

// startNodeServer serves the kubelet API on l (TLS with the test bed's certificate, client
// certificates checked against its CA, as the API server presents one) until stop.
func startNodeServer(ctx context.Context, l net.Listener, cfg nodeServerConfig, p *pki, dyn dynamic.Interface, logf func(string, ...any)) (*nodeServer, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	cert, err := tls.LoadX509KeyPair(p.Cert, p.Key)
	if err != nil {
		return nil, fmt.Errorf("node server: %w", err)
	}
	caPEM, err := os.ReadFile(p.CACert)
	if err != nil {
		return nil, fmt.Errorf("node server: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("node server: no CA certificate in " + p.CACert)
	}
	ns := &nodeServer{cfg: cfg, logf: logf, procs: map[*exec.Cmd]struct{}{}, served: make(chan struct{})}
	ns.env = kwokEnv(os.Environ(), cfg.Path, cfg.Home)

	kwokURL := &url.URL{Scheme: "https", Host: cfg.Kwok}
	ns.proxy = httputil.NewSingleHostReverseProxy(kwokURL)
	ns.proxy.Transport = &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		// Upgraded connections (SPDY port forwarding) need HTTP/1.1.
		ForceAttemptHTTP2: false,
	}

	informerCtx, stopInformers := context.WithCancel(context.Background())
	ns.stopInformers = stopInformers
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	execInf := factory.ForResource(gvrExec).Informer()
	clusterInf := factory.ForResource(gvrClusterExec).Informer()
	ns.execs, ns.clusterExecs = execInf.GetStore(), clusterInf.GetStore()
	factory.Start(informerCtx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			stopInformers()
			return nil, fmt.Errorf("node server: %v informer did not sync: %w", typ, context.Cause(ctx))
		}
	}

	ns.srv = &http.Server{
		Handler: http.HandlerFunc(ns.serveHTTP),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
			// SPDY upgrades need HTTP/1.1; the API server asks for it anyway.
			NextProtos: []string{"http/1.1"},
		},
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() {
		defer close(ns.served)
		if err := ns.srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logf("testbed: node server: %v", err)
		}
	}()
	return ns, nil
}

// stop closes the listener and connections and ends the processes still running.
func (ns *nodeServer) stop() {
	_ = ns.srv.Close()
	<-ns.served
	ns.stopInformers()
	ns.mu.Lock()
	ns.stopped = true
	for cmd := range ns.procs {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	ns.mu.Unlock()
}

// serveHTTP runs a non-terminal exec, passes the rest to kwok. The kubelet's exec paths are
// /exec/{namespace}/{pod}/{container} and /exec/{namespace}/{pod}/{uid}/{container}.
func (ns *nodeServer) serveHTTP(w http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if parts[0] != "exec" || (len(parts) != 4 && len(parts) != 5) || req.FormValue(remotecommand.ExecTTYParam) == "1" {
		// A terminal exec needs a pty, which kwok has and this server does not; no engine
		// uses one, and kwok ends a terminal's stdin itself (closing the pty).
		ns.proxy.ServeHTTP(w, req)
		return
	}
	namespace, pod, container := parts[1], parts[2], parts[len(parts)-1]
	uid := ""
	if len(parts) == 5 {
		uid = parts[3]
	}
	opts, err := remotecommand.NewOptions(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The kubelet's own defaults: --streaming-connection-idle-timeout 4h, and the streaming
	// server's stream creation timeout.
	remotecommand.ServeExec(w, req, ns, namespace+"/"+pod, uid, container, req.URL.Query()["command"],
		opts, 4*time.Hour, remotecommand.DefaultStreamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// ExecInContainer implements remotecommand.Executor: the command of kwok's Exec or ClusterExec
// mapping for the pod's container, as a local process.
func (ns *nodeServer) ExecInContainer(ctx context.Context, name, _, container string, argv []string, in io.Reader, out, errOut io.WriteCloser, tty bool, _ <-chan remotecommand.TerminalSize, _ time.Duration) error {
	if tty {
		return errors.New("the test bed's node server runs no terminal exec")
	}
	if len(argv) == 0 {
		return errors.New("no command")
	}
	namespace, pod, _ := strings.Cut(name, "/")
	target, err := ns.target(namespace, pod, container)
	if err != nil {
		return err
	}
	if _, ok := target["securityContext"]; ok {
		return fmt.Errorf("exec mapping for pod %s/%s: securityContext is not supported by the test bed", namespace, pod)
	}
	env := slices.Clone(ns.env)
	envs, _, _ := unstructured.NestedSlice(target, "envs")
	for _, e := range envs {
		m, _ := e.(map[string]any)
		n, _ := m["name"].(string)
		v, _ := m["value"].(string)
		env = append(env, n+"="+v)
	}
	bin, err := lookPath(argv[0], ns.cfg.Path)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
	cmd.Dir, _, _ = unstructured.NestedString(target, "workDir")
	cmd.Stdout, cmd.Stderr = out, errOut
	// Its own process group, so that stop ends whatever it started too; killed with the test
	// process if that dies without stopping the test bed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stdin io.WriteCloser
	if in != nil {
		if stdin, err = cmd.StdinPipe(); err != nil {
			return fmt.Errorf("stdin pipe: %w", err)
		}
	}
	ns.mu.Lock()
	if ns.stopped {
		ns.mu.Unlock()
		return errors.New("the test bed's node server is stopping")
	}
	if err := cmd.Start(); err != nil {
		ns.mu.Unlock()
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	ns.procs[cmd] = struct{}{}
	ns.mu.Unlock()
	if stdin != nil {
		go func() {
			// The end of the exec's stdin stream is the end of the process's stdin.
			_, _ = io.Copy(stdin, in)
			_ = stdin.Close()
		}()
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		ns.mu.Lock()
		delete(ns.procs, cmd)
		ns.mu.Unlock()
		done <- err
	}()
	select {
	case err := <-done:
		var xe *exec.ExitError
		if errors.As(err, &xe) && xe.Exited() {
			// The structured exit code a kubelet sends (NonZeroExitCode), not kwok's text.
			return utilexec.CodeExitError{Err: err, Code: xe.ExitCode()}
		}
		return err
	case <-ctx.Done():
		// The client went away; like a container runtime, leave the process running.
		return ctx.Err()
	}
}

// target finds the exec target of namespace/pod's container as kwok does
// (sigs.k8s.io/kwok pkg/kwok/server/debugging_exec.go getExecTarget): the pod's own Exec if
// any, else the first ClusterExec whose selector matches; within one, the target listing the
// container, else the first without containers.
func (ns *nodeServer) target(namespace, pod, container string) (map[string]any, error) {
	if obj, ok, _ := ns.execs.GetByKey(namespace + "/" + pod); ok {
		if t, found := containerTarget(obj, container); found {
			return t, nil
		}
		return nil, fmt.Errorf("exec target not found for container %q in pod %s/%s", container, namespace, pod)
	}
	list := ns.clusterExecs.List()
	sort.Slice(list, func(i, j int) bool {
		return list[i].(*unstructured.Unstructured).GetName() < list[j].(*unstructured.Unstructured).GetName()
	})
	for _, obj := range list {
		u := obj.(*unstructured.Unstructured)
		names, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "selector", "matchNames")
		nss, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "selector", "matchNamespaces")
		if (len(nss) != 0 && !slices.Contains(nss, namespace)) || (len(names) != 0 && !slices.Contains(names, pod)) {
			continue
		}
		if t, found := containerTarget(obj, container); found {
			return t, nil
		}
	}
	return nil, fmt.Errorf("no exec found for container %q in pod %s/%s", container, namespace, pod)
}

func containerTarget(obj any, container string) (map[string]any, bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false
	}
	execs, _, _ := unstructured.NestedSlice(u.Object, "spec", "execs")
	var fallback map[string]any
	for _, e := range execs {
		m, _ := e.(map[string]any)
		local, _ := m["local"].(map[string]any)
		if local == nil {
			continue
		}
		containers, _, _ := unstructured.NestedStringSlice(m, "containers")
		if len(containers) == 0 {
			if fallback == nil {
				fallback = local
			}
			continue
		}
		if slices.Contains(containers, container) {
			return local, true
		}
	}
	return fallback, fallback != nil
}

// lookPath finds name on path (kwok's PATH, not this process's).
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
}

// kwokEnv is env with PATH and HOME replaced.
func kwokEnv(env []string, path, home string) []string {
	out := make([]string, 0, len(env)+2)
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") || strings.HasPrefix(e, "HOME=") {
			continue
		}
		out = append(out, e)
	}
	return append(out, "PATH="+path, "HOME="+home)
}

// writeNodeServerConfig records cfg in the test bed folder.
func writeNodeServerConfig(dir string, cfg nodeServerConfig) error {
	data, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("node server config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, nodeServerFile), data, 0o600); err != nil {
		return fmt.Errorf("node server config: %w", err)
	}
	return nil
}

// RunNodeServer serves the kwok nodes' kubelet API (exec that ends stdin, see nodeserver.go)
// of the detached test bed in dir until ctx ends: the sandbox runs it in a process of its
// own, since the process that started the test bed exits.
func RunNodeServer(ctx context.Context, dir string, logf func(string, ...any)) error {
	data, err := os.ReadFile(filepath.Join(dir, nodeServerFile))
	if err != nil {
		return fmt.Errorf("node server: %w", err)
	}
	var cfg nodeServerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("node server: %s: %w", nodeServerFile, err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return fmt.Errorf("node server: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("node server: %w", err)
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("node server: %w", err)
	}
	pkiDir := filepath.Join(dir, "pki")
	p := &pki{CACert: filepath.Join(pkiDir, "ca.crt"), Cert: filepath.Join(pkiDir, "admin.crt"), Key: filepath.Join(pkiDir, "admin.key")}
	ns, err := startNodeServer(ctx, l, cfg, p, dyn, logf)
	if err != nil {
		_ = l.Close()
		return err
	}
	<-ctx.Done()
	ns.stop()
	return nil
}
