//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

func TestNodesSpreadOverZones(t *testing.T) {
	// The kwok nodes only: real nodes (TestRealNode…) may have joined by now.
	nodes, err := bed.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	zones := map[string]int{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !testbed.NodeReady(n) {
			t.Errorf("node %s is not Ready", n.Name)
		}
		if n.Annotations[testbed.KwokNodeAnnotation] != "fake" {
			t.Errorf("node %s lacks the kwok annotation", n.Name)
		}
		zones[n.Labels[testbed.ZoneLabel]]++
	}
	if len(nodes.Items) != 8 || len(zones) != 4 {
		t.Fatalf("got %d nodes in zones %v, want 8 nodes in 4 zones", len(nodes.Items), zones)
	}
	t.Logf("testbed started in %s; nodes per zone: %v", bed.StartupDuration.Round(time.Millisecond), zones)
}

func TestStatefulSetWithVolumesInZones(t *testing.T) {
	ns := newNamespace(t)
	pods := createStatefulSet(t, ns, "web", 3)

	zones := map[string]string{}
	for _, p := range pods {
		node, err := bed.Client.CoreV1().Nodes().Get(t.Context(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get node of %s: %v", p.Name, err)
		}
		zone := node.Labels[testbed.ZoneLabel]
		if zone == "" {
			t.Fatalf("node %s of pod %s has no zone", node.Name, p.Name)
		}
		if other, dup := zones[zone]; dup {
			t.Errorf("pods %s and %s share zone %s despite the spread constraint", other, p.Name, zone)
		}
		zones[zone] = p.Name
	}

	claims := waitPVCsBound(t, ns, 3)
	for _, c := range claims {
		if c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != testbed.StorageClassName {
			t.Errorf("claim %s has storage class %v, want the default %s", c.Name, c.Spec.StorageClassName, testbed.StorageClassName)
		}
		if c.Spec.VolumeName == "" {
			t.Errorf("claim %s is Bound without a volume", c.Name)
		}
	}
	t.Logf("pods by zone: %v", zones)
}

func TestDeletedPodComesBackWithNewUID(t *testing.T) {
	ns := newNamespace(t)
	createStatefulSet(t, ns, "db", 3)

	const name = "db-1"
	old, err := bed.Client.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod: %v", err)
	}
	if err := bed.Client.CoreV1().Pods(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "db", "statefulset.kubernetes.io/pod-name": name})
	back := waitPods(t, ns, sel, 1, func(p *corev1.Pod) bool {
		return p.UID != old.UID && testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
	if back[0].Name != name {
		t.Fatalf("recreated pod is %s, want %s", back[0].Name, name)
	}
	t.Logf("pod %s: uid %s -> %s", name, old.UID, back[0].UID)
}

func TestExecRunsLocalProgram(t *testing.T) {
	ns := newNamespace(t)
	createStatefulSet(t, ns, "exec", 1)
	const pod = "exec-0"

	workDir := t.TempDir()
	script := filepath.Join(workDir, "probe.sh")
	writeFile(t, script, "#!/bin/sh\nprintf 'pod=%s dir=%s args=%s\\n' \"$DBOPS_POD\" \"$(pwd)\" \"$*\"\necho to-stderr >&2\n")
	failing := filepath.Join(workDir, "fail.sh")
	writeFile(t, failing, "#!/bin/sh\necho failing-on-purpose >&2\nexit 3\n")

	if err := bed.SetExec(t.Context(), ns, pod, testbed.ExecTarget{
		WorkDir: workDir,
		Env:     map[string]string{"DBOPS_POD": pod},
	}); err != nil {
		t.Fatalf("set exec mapping: %v", err)
	}

	stdout, stderr, err := kube.Exec(t.Context(), bed.RESTConfig, bed.Client, ns, pod, "db", []string{script, "a", "b"}, nil)
	if err != nil {
		t.Fatalf("exec: %v (stderr %q)", err, stderr)
	}
	want := fmt.Sprintf("pod=%s dir=%s args=a b\n", pod, workDir)
	if string(stdout) != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
	if strings.TrimSpace(string(stderr)) != "to-stderr" {
		t.Errorf("stderr = %q, want %q", stderr, "to-stderr\n")
	}

	// A program in the shim dir is found by its base name, like a client binary in an image.
	if _, err := bed.WriteShim("dbops-hello", []byte("#!/bin/sh\necho hello \"$DBOPS_POD\"\n")); err != nil {
		t.Fatalf("write shim: %v", err)
	}
	stdout, _, err = kube.Exec(t.Context(), bed.RESTConfig, bed.Client, ns, pod, "", []string{"dbops-hello"}, nil)
	if err != nil {
		t.Fatalf("exec shim: %v", err)
	}
	if got := strings.TrimSpace(string(stdout)); got != "hello "+pod {
		t.Errorf("shim stdout = %q, want %q", got, "hello "+pod)
	}

	const secret = "sup3r-s3cret-password"
	_, stderr, err = kube.Exec(t.Context(), bed.RESTConfig, bed.Client, ns, pod, "db", []string{failing, "--password=" + secret}, nil)
	var exitErr *kube.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("exec of failing program: got %T %v, want *kube.ExitError", err, err)
	}
	if exitErr.Code != 3 {
		t.Errorf("exit code = %d, want 3", exitErr.Code)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), failing) {
		t.Errorf("error text leaks argv: %q", err.Error())
	}
	if !strings.Contains(string(stderr), "failing-on-purpose") {
		t.Errorf("stderr = %q, want the program's stderr", stderr)
	}
	t.Logf("failing exec error: %v", err)
}

func TestPortForwardReachesLocalServer(t *testing.T) {
	ns := newNamespace(t)
	createStatefulSet(t, ns, "pf", 1)
	const pod = "pf-0"

	// A distinct loopback address, as a per-pod database process would use.
	ln, err := net.Listen("tcp", "127.0.1.21:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go serveEcho(ln, "hello from "+pod)
	addr := ln.Addr().(*net.TCPAddr)

	if err := bed.SetPortForward(t.Context(), ns, pod, testbed.PortTarget{
		Ports:   []int32{5432},
		Address: addr.IP.String(),
		Port:    int32(addr.Port),
	}); err != nil {
		t.Fatalf("set port-forward mapping: %v", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	fw, err := kube.PortForward(ctx, bed.RESTConfig, ns, pod, 5432)
	if err != nil {
		t.Fatalf("port-forward: %v", err)
	}
	defer fw.Close()
	if !strings.HasPrefix(fw.LocalAddr(), "127.0.0.1:") {
		t.Errorf("local address %s is not on 127.0.0.1", fw.LocalAddr())
	}

	conn, err := net.DialTimeout("tcp", fw.LocalAddr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial forward: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	greeting, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read greeting: %v", err)
	}
	if greeting != "hello from "+pod+"\n" {
		t.Errorf("greeting = %q", greeting)
	}
	if _, err := io.WriteString(conn, "ping\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	echo, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read echo: %v", err)
	}
	if echo != "ping\n" {
		t.Errorf("echo = %q, want %q", echo, "ping\n")
	}
	if err := fw.Close(); err != nil {
		t.Errorf("close forward: %v", err)
	}
	select {
	case <-fw.Done():
	default:
		t.Errorf("forward not done after Close")
	}
}

// serveEcho greets every connection with a line and then echoes what it reads.
func serveEcho(ln net.Listener, greeting string) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			if _, err := io.WriteString(conn, greeting+"\n"); err != nil {
				return
			}
			_, _ = io.Copy(conn, conn)
		}()
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// TestExecEndsStdin: an exec on a kwok pod delivers its stdin and then its end, as a kubelet
// does, over both of client-go's protocols (websocket v5, whose CLOSE signal the API server
// turns into the end of the kubelet's stdin stream, and SPDY, which closes that stream), so a
// program that reads stdin to EOF (cat, crash) finishes; its exit code arrives structured.
// Before the test bed's node server (test/testbed/nodeserver.go) kwok never ended the
// process's stdin and every case here hung until its deadline.
func TestExecEndsStdin(t *testing.T) {
	ns := newNamespace(t)
	createStatefulSet(t, ns, "stdin", 1)
	const pod = "stdin-0"
	if err := bed.SetExec(t.Context(), ns, pod, testbed.ExecTarget{}); err != nil {
		t.Fatalf("set exec mapping: %v", err)
	}
	const input = "first line\nsecond line\n"
	for _, tc := range []struct {
		name     string
		argv     []string
		stdout   string
		exitCode int
	}{
		{"cat", []string{"cat"}, input, 0},
		{"count after EOF", []string{"sh", "-c", "wc -l; exit 3"}, "2\n", 3},
	} {
		for _, proto := range []string{"websocket", "spdy"} {
			t.Run(tc.name+"/"+proto, func(t *testing.T) {
				// Bounded: without the end of stdin the command never finishes.
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				req := bed.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
					VersionedParams(&corev1.PodExecOptions{Command: tc.argv, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
				var ex remotecommand.Executor
				var err error
				if proto == "websocket" {
					ex, err = remotecommand.NewWebSocketExecutor(bed.RESTConfig, "GET", req.URL().String())
				} else {
					ex, err = remotecommand.NewSPDYExecutor(bed.RESTConfig, "POST", req.URL())
				}
				if err != nil {
					t.Fatal(err)
				}
				var out, errOut strings.Builder
				err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader(input), Stdout: &out, Stderr: &errOut})
				var code utilexec.ExitError
				switch {
				case tc.exitCode == 0 && err != nil:
					t.Fatalf("exec: %v (stderr %q)", err, errOut.String())
				case tc.exitCode != 0 && (!errors.As(err, &code) || code.ExitStatus() != tc.exitCode):
					t.Fatalf("exec: %v, want a structured exit code %d", err, tc.exitCode)
				}
				if strings.TrimSpace(out.String()) != strings.TrimSpace(tc.stdout) {
					t.Errorf("stdout = %q, want %q", out.String(), tc.stdout)
				}
			})
		}
	}
}

func TestClusterWideMappings(t *testing.T) {
	ns := newNamespace(t)
	createStatefulSet(t, ns, "cw", 2)

	// Cluster-wide exec: both pods get the env, and a per-pod mapping overrides it for one.
	name := "e2e-" + ns
	if err := bed.SetClusterExec(t.Context(), name, testbed.Selector{Namespaces: []string{ns}}, testbed.ExecTarget{
		Env: map[string]string{"DBOPS_ROLE": "cluster-wide"},
	}); err != nil {
		t.Fatalf("set cluster exec: %v", err)
	}
	t.Cleanup(func() { _ = bed.DeleteClusterExec(context.Background(), name) })
	if err := bed.SetExec(t.Context(), ns, "cw-1", testbed.ExecTarget{Env: map[string]string{"DBOPS_ROLE": "per-pod"}}); err != nil {
		t.Fatalf("set exec: %v", err)
	}
	for pod, want := range map[string]string{"cw-0": "cluster-wide", "cw-1": "per-pod"} {
		out, _, err := kube.Exec(t.Context(), bed.RESTConfig, bed.Client, ns, pod, "", []string{"sh", "-c", `printf %s "$DBOPS_ROLE"`}, nil)
		if err != nil {
			t.Fatalf("exec in %s: %v", pod, err)
		}
		if string(out) != want {
			t.Errorf("%s: DBOPS_ROLE = %q, want %q", pod, out, want)
		}
	}

	// Cluster-wide port-forward: a catch-all target for every port of the namespace's pods.
	ln, err := net.Listen("tcp", "127.0.1.22:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go serveEcho(ln, "cluster-wide")
	addr := ln.Addr().(*net.TCPAddr)
	if err := bed.SetClusterPortForward(t.Context(), name, testbed.Selector{Namespaces: []string{ns}}, testbed.PortTarget{
		Address: addr.IP.String(), Port: int32(addr.Port),
	}); err != nil {
		t.Fatalf("set cluster port-forward: %v", err)
	}
	t.Cleanup(func() { _ = bed.DeleteClusterPortForward(context.Background(), name) })
	fw, err := kube.PortForward(t.Context(), bed.RESTConfig, ns, "cw-1", 9999)
	if err != nil {
		t.Fatalf("port-forward: %v", err)
	}
	defer fw.Close()
	conn, err := net.DialTimeout("tcp", fw.LocalAddr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	greeting, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || greeting != "cluster-wide\n" {
		t.Fatalf("greeting = %q, %v", greeting, err)
	}
}
