package cratedbsim

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/podgw"
)

// The pod gateway: on the test bed's real nodes every CrateDB pod runs the simulator image,
// whose main process (test/cmd/cratedb-sim-pod) forwards the pod's ports here with a hello line
// (package podgw). The simulator checks that the connection comes from the pod's current IP
// (read from the API, never taken from the hello line), that the pod's node runs, and hands
// the connection to that node's HTTP, PostgreSQL or exporter endpoint, with the client address
// the pod saw (so host-based authentication sees localhost for `kubectl exec` and
// port-forwards, the pod network for others, as a real node would).

// checkPodGateway accepts a loopback address, or an address of the named interface. The
// simulator otherwise listens on loopback only (tests share the machine and must not be
// reachable from outside it); pods on real nodes cannot reach the host's loopback, so the
// test bed names the bridge it created for them. That bridge is host-only (the test bed never
// enables forwarding, test/testbed/realnode_host.go), so only this machine and its pods
// reach the listener.
func checkPodGateway(host, iface string) error {
	ip := net.ParseIP(host)
	if ip == nil {
		return fmt.Errorf("cratedbsim: pod gateway %q is not an IP address", host)
	}
	if ip.IsLoopback() {
		return nil
	}
	if iface == "" {
		return fmt.Errorf("cratedbsim: pod gateway %s is not a loopback address and no interface is named", host)
	}
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return fmt.Errorf("cratedbsim: pod gateway interface %s: %w", iface, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return fmt.Errorf("cratedbsim: pod gateway interface %s: %w", iface, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return nil
		}
	}
	return fmt.Errorf("cratedbsim: pod gateway %s is not an address of interface %s", host, iface)
}

// PodGatewayAddr is the pod gateway's host:port ("" without Config.PodGateway): the value of
// $CRATEDB_SIM_GATEWAY in the simulator image's pods.
func (s *Sim) PodGatewayAddr() string {
	if s.podGW == nil {
		return ""
	}
	return s.podGW.Addr().String()
}

func (s *Sim) servePodGateway(l net.Listener) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.podGatewayConn(c); err != nil {
				s.logf("cratedbsim: pod gateway: connection from %s refused: %v", c.RemoteAddr(), err)
				_ = c.Close()
			}
		}()
	}
}

// podGatewayConn reads the hello line and hands c to the node's endpoint.
func (s *Sim) podGatewayConn(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	h, err := podgw.Read(br)
	if err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Time{})
	client, err := net.ResolveTCPAddr("tcp", h.Client)
	if err != nil {
		return fmt.Errorf("client address: %w", err)
	}
	from := remoteIP(c.RemoteAddr().String())
	s.mu.Lock()
	podIP := s.podIPs[h.Pod]
	name := s.podNode[h.Pod]
	n := s.m.nodes[name]
	ns := s.servers[name]
	up := n != nil && n.up && n.pod == h.Pod
	s.mu.Unlock()
	switch {
	case podIP == "":
		return fmt.Errorf("pod %s: no such pod with an IP", h.Pod)
	case !net.ParseIP(podIP).Equal(from):
		return fmt.Errorf("pod %s has IP %s, the connection comes from %s", h.Pod, podIP, from)
	case !up || ns == nil:
		// CrateDB is not running in the pod: its port refuses.
		return fmt.Errorf("pod %s: its node does not run", h.Pod)
	}
	return ns.handoff(h.Service, &gatewayConn{Conn: c, r: br, remote: client})
}

// gatewayConn is a forwarded connection: reads continue after the hello line, and the peer is
// the client the pod saw.
type gatewayConn struct {
	net.Conn
	r      *bufio.Reader
	remote net.Addr
}

func (g *gatewayConn) Read(p []byte) (int, error) { return g.r.Read(p) }
func (g *gatewayConn) RemoteAddr() net.Addr       { return g.remote }

// chanListener is a listener whose connections are handed over by the pod gateway.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// put hands c to the listener's server; an error when the listener is closed.
func (l *chanListener) put(c net.Conn) error {
	select {
	case l.conns <- c:
		return nil
	case <-l.done:
		return errors.New("node stopped")
	}
}

// handoff gives a pod gateway connection to the node's endpoint for service.
func (ns *nodeServer) handoff(service string, c net.Conn) error {
	ns.mu.Lock()
	running := ns.running
	var l *chanListener
	switch service {
	case podgw.ServiceHTTP:
		l = ns.httpGW
	case podgw.ServicePSQL:
		l = ns.pgGW
	case podgw.ServiceExporter:
		l = ns.expGW
	}
	ns.mu.Unlock()
	if !running || l == nil {
		return fmt.Errorf("node %s: %s is not served", ns.name, service)
	}
	return l.put(c)
}

// exporterHandler serves what the CrateDB operator's readiness probe asks of the
// crate-jmx-exporter agent: GET /ready, 200 once the node has joined a cluster that has an
// elected master, 503 before.
func (s *Sim) exporterHandler(node string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		n := s.m.nodes[node]
		ready := n != nil && n.up && s.m.master != ""
		s.mu.Unlock()
		if !ready {
			http.Error(w, "node not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}
