package cratedbsim

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// nodeSpec is what the Kubernetes API (or StaticNodes) says about one node.
type nodeSpec struct {
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
}

// applyNodes brings the model in line with the observed nodes, then starts or stops the
// nodes' listeners.
func (s *Sim) applyNodes(specs []nodeSpec, expected int, expectedData bool) error {
	s.mu.Lock()
	seen := map[string]bool{}
	for _, sp := range specs {
		seen[sp.name] = true
		n := s.m.nodes[sp.name]
		if n == nil {
			n = &simNode{name: sp.name, disk: map[shardKey]bool{}}
			s.m.nodes[sp.name] = n
		}
		n.pod, n.ordinal, n.master, n.data, n.member = sp.pod, sp.ordinal, sp.master, sp.data, sp.member
		if n.up && sp.podUID != "" && n.podUID != "" && sp.podUID != n.podUID {
			// A pod with a new UID is a restarted node, even if we missed it going down.
			s.m.setNodeUp(n, false)
			s.recordNodeLocked(n, false)
		}
		if sp.up && !n.up {
			if sp.hasClaim && (sp.pvcUID == "" || (n.pvcUID != "" && n.pvcUID != sp.pvcUID)) {
				s.logf("cratedbsim: node %s starts with an empty volume", n.name)
				s.m.wipeDisk(n)
			}
			n.pvcUID = sp.pvcUID
			n.podUID = sp.podUID
			n.id = nodeID(n.name, n.podUID)
			s.logf("cratedbsim: node %s (pod %s) is up", n.name, n.pod)
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
	s.m.expected, s.m.expectedData = expected, expectedData
	s.m.electMaster()
	s.m.allocate()
	s.mu.Unlock()
	return s.syncServers()
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
			ns = &nodeServer{sim: s, name: n.name, host: s.cfg.AddrBase + "." + strconv.Itoa(s.nextHost)}
			if !s.cfg.EphemeralPorts {
				ns.pgPort, ns.httpPort = s.cfg.PGPort, s.cfg.HTTPPort
			}
			s.nextHost++
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
	running  bool
	pgL      net.Listener
	httpSrv  *http.Server
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

func (ns *nodeServer) start() error {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.running {
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
func (ns *nodeServer) stop() {
	ns.mu.Lock()
	if !ns.running {
		ns.mu.Unlock()
		return
	}
	ns.running = false
	_ = ns.pgL.Close()
	_ = ns.httpSrv.Close()
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
