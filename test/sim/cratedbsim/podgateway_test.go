package cratedbsim

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/podgw"
)

// setPod gives a pod an IP and the state of its crate container.
func (f *fakeCluster) setPod(name, ip string, running bool) {
	ctx := context.Background()
	p, err := f.client.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	p.Status.PodIP = ip
	st := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	if running {
		st = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "crate", State: st}}
	if _, err := f.client.CoreV1().Pods(testNS).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// gatewayGet sends an HTTP request through the pod gateway as the pod's proxy would and
// returns the status line, or the error when the gateway closes the connection.
func gatewayGet(t *testing.T, gw string, h podgw.Hello, path string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", gw, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := podgw.Write(c, h); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(line), nil
}

func TestPodGateway(t *testing.T) {
	f := newFakeCluster(t)
	f.sts("crate-data-hot-c", 2, "-Cnode.name=$(POD_NAME)", "-Cgateway.expected_data_nodes=2", "-Cgateway.recover_after_data_nodes=2",
		"-Cauth.host_based.enabled=true", "-Cauth.host_based.config.0.user=crate", "-Cauth.host_based.config.0.address=_local_",
		"-Cauth.host_based.config.0.method=trust", "-Cauth.host_based.config.99.method=password")
	for _, p := range []string{"crate-data-hot-c-0", "crate-data-hot-c-1"} {
		f.pvc(p)
		// Not Ready: on a real kubelet the probe passes only once the node answers it.
		f.pod(p, false)
		f.setPod(p, "127.0.0.1", true)
	}
	sim, err := Start(t.Context(), Config{Client: f.client, Namespace: testNS, Cluster: "c", TickInterval: -1, Logf: t.Logf, PodGateway: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	f.waitWatches()
	waitFor(t, "2 nodes run before their pods are Ready", func() bool { _, n := sim.Health(); return n == 2 })
	gw := sim.PodGatewayAddr()
	local := "127.0.0.1:40000"
	hello := func(pod, svc, client string) podgw.Hello { return podgw.Hello{Pod: pod, Service: svc, Client: client} }

	if line, err := gatewayGet(t, gw, hello("crate-data-hot-c-0", podgw.ServiceExporter, "10.0.0.1:1"), "/ready"); err != nil || !strings.Contains(line, " 200 ") {
		t.Errorf("exporter /ready = %q, %v; want 200", line, err)
	}
	// HTTP: host-based authentication sees the client the pod saw. From localhost, crate is
	// trusted; from elsewhere it needs a password.
	if line, err := gatewayGet(t, gw, hello("crate-data-hot-c-1", podgw.ServiceHTTP, local), "/"); err != nil || !strings.Contains(line, " 200 ") {
		t.Errorf("GET / from the pod's localhost = %q, %v; want 200", line, err)
	}
	if line, err := gatewayGet(t, gw, hello("crate-data-hot-c-1", podgw.ServiceHTTP, "10.1.2.3:5000"), "/"); err != nil || !strings.Contains(line, " 401 ") {
		t.Errorf("GET / from another address = %q, %v; want 401", line, err)
	}
	// PostgreSQL: the node answers an SSLRequest ('N': no TLS on this node).
	c, err := net.Dial("tcp", gw)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := podgw.Write(c, hello("crate-data-hot-c-0", podgw.ServicePSQL, local)); err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f})
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 'N' {
		t.Errorf("SSLRequest through the gateway: %q, %v; want N", b, err)
	}
	_ = c.Close()

	// Refused: an unknown pod, a connection not from the pod's IP, a pod whose container
	// does not run.
	if line, err := gatewayGet(t, gw, hello("nope-0", podgw.ServiceHTTP, local), "/"); err == nil {
		t.Errorf("unknown pod answered %q", line)
	}
	f.setPod("crate-data-hot-c-0", "10.9.9.9", true)
	waitFor(t, "the new pod IP", func() bool {
		_, err := gatewayGet(t, gw, hello("crate-data-hot-c-0", podgw.ServiceExporter, local), "/ready")
		return err != nil
	})
	f.setPod("crate-data-hot-c-0", "127.0.0.1", false)
	waitFor(t, "node 0 down", func() bool { _, n := sim.Health(); return n == 1 })
	if line, err := gatewayGet(t, gw, hello("crate-data-hot-c-0", podgw.ServiceExporter, local), "/ready"); err == nil {
		t.Errorf("a stopped node answered %q", line)
	}
	// The remaining node runs but, one of two master-eligible nodes, elects no master: the
	// exporter reports it not ready.
	if line, err := gatewayGet(t, gw, hello("crate-data-hot-c-1", podgw.ServiceExporter, local), "/ready"); err != nil || !strings.Contains(line, " 503 ") {
		t.Errorf("node 1 alone: /ready = %q, %v; want 503", line, err)
	}
}

func TestCheckPodGateway(t *testing.T) {
	for _, tc := range []struct {
		host, iface string
		ok          bool
	}{
		{"127.0.0.1", "", true},
		{"::1", "", true},
		{"127.0.0.1", "lo", true},
		{"not-an-ip", "", false},
		{"10.250.250.250", "", false},
		{"10.250.250.250", "lo", false},
		{"10.250.250.250", "no-such-interface0", false},
	} {
		if err := checkPodGateway(tc.host, tc.iface); (err == nil) != tc.ok {
			t.Errorf("checkPodGateway(%q, %q) = %v, want ok %v", tc.host, tc.iface, err, tc.ok)
		}
	}
}
