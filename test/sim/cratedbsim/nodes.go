package cratedbsim

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// nodeSpec is what the Kubernetes API (or StaticNodes) says about one pod and the CrateDB
// node its command line describes.
type nodeSpec struct {
	// name is the node name (-Cnode.name, or a generated one); master and data its roles.
	name    string
	pod     string
	ordinal int
	master  bool
	data    bool
	// member: the node's StatefulSet counts it (ordinal < replicas) or its pod exists.
	member bool
	// up: the pod is Running and Ready and not being deleted.
	up     bool
	podUID string
	// hasClaim: the pod mounts a PVC; pvcUID is "" when that claim does not exist.
	hasClaim bool
	pvcUID   string
	settings nodeSettings
	version  Version
	ip       string
	// terminating is when the pod started terminating (zero if it does not).
	terminating time.Time
}

// volume is what a pod's data volume holds: shard data and the node id CrateDB persists in
// its data path (a restart with the same volume keeps the id).
type volume struct {
	pvcUID string
	nodeID string
	shards map[shardKey]bool
}

// applyNodes brings the model in line with the observed pods, then starts or stops the
// nodes' listeners.
func (s *Sim) applyNodes(specs []nodeSpec) error {
	s.mu.Lock()
	seen := map[string]bool{}
	for _, sp := range specs {
		name := sp.name
		if !sp.up {
			// A pod that does not run keeps the identity it last ran under.
			name = s.podNode[sp.pod]
			if name == "" {
				continue
			}
		} else if other := s.m.nodes[name]; other != nil && other.up && other.pod != sp.pod {
			s.logf("cratedbsim: pod %s: node name %q is already used by pod %s; the node does not join", sp.pod, name, other.pod)
			continue
		}
		if prev := s.podNode[sp.pod]; sp.up && prev != "" && prev != name {
			// The pod came back under another name: the old node is gone for good.
			if old := s.m.nodes[prev]; old != nil {
				if old.up {
					s.recordNodeLocked(old, false)
				}
				s.m.setNodeUp(old, false)
				old.member = false
			}
		}
		s.podNode[sp.pod] = name
		seen[name] = true
		n := s.m.nodes[name]
		if n == nil {
			n = &simNode{name: name, disk: map[shardKey]bool{}}
			s.m.nodes[name] = n
		}
		n.pod, n.ordinal, n.member = sp.pod, sp.ordinal, sp.member
		if n.up && sp.podUID != "" && n.podUID != "" && sp.podUID != n.podUID {
			// A pod with a new UID is a restarted node, even if we missed it going down.
			s.m.setNodeUp(n, false)
			s.recordNodeLocked(n, false)
		}
		if sp.up && !n.up {
			vol := s.volumes[sp.pod]
			if vol == nil || (sp.hasClaim && (sp.pvcUID == "" || (vol.pvcUID != "" && vol.pvcUID != sp.pvcUID))) {
				if vol != nil {
					s.logf("cratedbsim: node %s starts with an empty volume", name)
				}
				vol = &volume{pvcUID: sp.pvcUID, nodeID: newNodeID(), shards: map[shardKey]bool{}}
				s.volumes[sp.pod] = vol
			}
			vol.pvcUID = sp.pvcUID
			n.disk, n.id = vol.shards, vol.nodeID
			n.podUID = sp.podUID
			n.master, n.data = sp.master, sp.data
			n.settings, n.version, n.ip, n.hostname = sp.settings, sp.version, sp.ip, sp.pod
			s.logf("cratedbsim: node %s (pod %s, CrateDB %s) is up", n.name, n.pod, n.version)
			s.recordNodeLocked(n, true)
		} else if !sp.up && n.up {
			s.logf("cratedbsim: node %s (pod %s) is down", n.name, n.pod)
			s.recordNodeLocked(n, false)
		}
		s.m.setNodeUp(n, sp.up)
	}
	for name, n := range s.m.nodes {
		if !seen[name] {
			n.member = false
			if n.up {
				s.recordNodeLocked(n, false)
			}
			s.m.setNodeUp(n, false)
		}
	}
	s.m.electMaster()
	s.m.allocate()
	s.mu.Unlock()
	return s.syncServers()
}

// newNodeID is a random node id shaped like CrateDB's (22 URL-safe base64 characters).
func newNodeID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// syncServers starts listeners of running nodes and stops those of stopped ones, so that a
// node that is down refuses connections.
func (s *Sim) syncServers() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	var start, stop []*nodeServer
	for _, n := range s.m.sortedNodes() {
		ns := s.servers[n.name]
		if ns == nil && n.up {
			ns = &nodeServer{sim: s, name: n.name, host: s.cfg.ListenHost}
			s.servers[n.name] = ns
		}
		if ns == nil {
			continue
		}
		if n.up {
			start = append(start, ns)
		} else {
			stop = append(stop, ns)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, ns := range stop {
		ns.stop()
	}
	for _, ns := range start {
		if err := ns.start(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// nodeServer holds the listeners of one node. Its address and ports stay the same across
// restarts of the node so that port-forward mappings stay valid.
type nodeServer struct {
	sim  *Sim
	name string
	host string

	mu       sync.Mutex
	pgPort   int
	httpPort int
	httpsOn  bool
	pgTLS    bool
	running  bool
	// closed is set once by the simulator's shutdown: a resync that raced it must not start
	// listeners again that nothing would stop.
	closed  bool
	pgL     net.Listener
	httpSrv *http.Server
	// pgGW, httpGW and expGW receive the pod gateway's connections (nil without one);
	// expSrv serves the exporter's readiness endpoint.
	pgGW, httpGW, expGW *chanListener
	expSrv              *http.Server
	conns               map[net.Conn]struct{}
	wg                  sync.WaitGroup
}

func (ns *nodeServer) start() error {
	// Read before taking ns.mu: Nodes holds Sim.mu while it takes ns.mu.
	settings := ns.sim.nodeSettingsOf(ns.name)
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.running || ns.closed {
		return nil
	}
	pgL, err := net.Listen("tcp", net.JoinHostPort(ns.host, strconv.Itoa(ns.pgPort)))
	if err != nil {
		return fmt.Errorf("cratedbsim: node %s: listen: %w", ns.name, err)
	}
	httpL, err := net.Listen("tcp", net.JoinHostPort(ns.host, strconv.Itoa(ns.httpPort)))
	if err != nil {
		_ = pgL.Close()
		return fmt.Errorf("cratedbsim: node %s: listen: %w", ns.name, err)
	}
	// Keep ephemeral ports for the next start: port-forward mappings point at them.
	ns.pgPort = pgL.Addr().(*net.TCPAddr).Port
	ns.httpPort = httpL.Addr().(*net.TCPAddr).Port
	// With ssl.http.enabled the HTTP port speaks HTTPS only.
	ns.httpsOn = settings.bool("ssl.http.enabled", false) && ns.sim.cfg.TLS != nil
	ns.pgTLS = settings.bool("ssl.psql.enabled", false) && ns.sim.cfg.TLS != nil
	if ns.httpsOn {
		httpL = newTLSOnlyListener(httpL, ns.sim.cfg.TLS)
	}
	ns.pgL = pgL
	ns.conns = map[net.Conn]struct{}{}
	ns.httpSrv = &http.Server{Handler: ns.sim.httpHandler(ns.name), ReadHeaderTimeout: 10 * time.Second}
	ns.running = true
	srv := ns.httpSrv
	ns.wg.Add(2)
	go func() {
		defer ns.wg.Done()
		_ = srv.Serve(httpL)
	}()
	go func() {
		defer ns.wg.Done()
		ns.acceptLoop(pgL)
	}()
	if gw := ns.sim.podGW; gw != nil {
		// The pod's own ports, through the pod gateway: the same endpoints, TLS included.
		ns.pgGW, ns.httpGW, ns.expGW = newChanListener(gw.Addr()), newChanListener(gw.Addr()), newChanListener(gw.Addr())
		var httpGW net.Listener = ns.httpGW
		if ns.httpsOn {
			httpGW = newTLSOnlyListener(httpGW, ns.sim.cfg.TLS)
		}
		ns.expSrv = &http.Server{Handler: ns.sim.exporterHandler(ns.name), ReadHeaderTimeout: 10 * time.Second}
		expSrv, pgGW, expGW := ns.expSrv, ns.pgGW, ns.expGW
		ns.wg.Add(3)
		go func() {
			defer ns.wg.Done()
			_ = srv.Serve(httpGW)
		}()
		go func() {
			defer ns.wg.Done()
			ns.acceptLoop(pgGW)
		}()
		go func() {
			defer ns.wg.Done()
			_ = expSrv.Serve(expGW)
		}()
	}
	return nil
}

func (ns *nodeServer) acceptLoop(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		ns.mu.Lock()
		if !ns.running {
			ns.mu.Unlock()
			_ = conn.Close()
			return
		}
		ns.conns[conn] = struct{}{}
		ns.wg.Add(1)
		ns.mu.Unlock()
		go func() {
			defer ns.wg.Done()
			defer func() {
				ns.mu.Lock()
				delete(ns.conns, conn)
				ns.mu.Unlock()
				_ = conn.Close()
			}()
			ns.sim.servePG(ns.name, conn)
		}()
	}
}

// stop closes the listeners and every open connection, as a stopped node would.
func (ns *nodeServer) stop() { ns.halt(false) }

// close stops the node for good: the simulator shuts down.
func (ns *nodeServer) close() { ns.halt(true) }

func (ns *nodeServer) halt(final bool) {
	ns.mu.Lock()
	if final {
		ns.closed = true
	}
	if !ns.running {
		ns.mu.Unlock()
		return
	}
	ns.running = false
	_ = ns.pgL.Close()
	_ = ns.httpSrv.Close()
	if ns.pgGW != nil {
		_ = ns.pgGW.Close()
		_ = ns.httpGW.Close()
		_ = ns.expSrv.Close()
		ns.pgGW, ns.httpGW, ns.expGW, ns.expSrv = nil, nil, nil, nil
	}
	for c := range ns.conns {
		_ = c.Close()
	}
	ns.mu.Unlock()
	ns.wg.Wait()
}

// summary is a one-line state description for logs.
func (m *model) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nodes=%d severity=%d", len(m.upNodes()), m.maxSeverity())
	counts := m.shardCounts()
	for _, n := range m.sortedNodes() {
		if n.up && n.data {
			fmt.Fprintf(&b, " %s:%d", n.name, counts[n.name])
		}
	}
	return b.String()
}

// tlsOnlyListener completes the TLS handshake before handing a connection to the HTTP
// server and drops connections that do not speak TLS without answering, as CrateDB's HTTPS
// port does (its Netty pipeline starts with the SSL handler): a plain HTTP client sees the
// connection closed, not an HTTP error.
type tlsOnlyListener struct {
	net.Listener
	cfg   *tls.Config
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newTLSOnlyListener(l net.Listener, cfg *tls.Config) *tlsOnlyListener {
	tl := &tlsOnlyListener{Listener: l, cfg: cfg, conns: make(chan net.Conn), done: make(chan struct{})}
	go tl.loop()
	return tl
}

func (tl *tlsOnlyListener) loop() {
	for {
		c, err := tl.Listener.Accept()
		if err != nil {
			tl.once.Do(func() { close(tl.done) })
			return
		}
		go func() {
			tc := tls.Server(c, tl.cfg)
			_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
			if err := tc.Handshake(); err != nil {
				_ = c.Close()
				return
			}
			_ = tc.SetDeadline(time.Time{})
			select {
			case tl.conns <- tc:
			case <-tl.done:
				_ = tc.Close()
			}
		}()
	}
}

func (tl *tlsOnlyListener) Accept() (net.Conn, error) {
	select {
	case c := <-tl.conns:
		return c, nil
	case <-tl.done:
		return nil, net.ErrClosed
	}
}

func (tl *tlsOnlyListener) Close() error {
	err := tl.Listener.Close()
	tl.once.Do(func() { close(tl.done) })
	return err
}
