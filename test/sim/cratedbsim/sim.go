// Package cratedbsim is a CrateDB SIMULATOR for tests and the sandbox: it is not CrateDB.
//
// It follows the pods of a CrateDB cluster's StatefulSets through the Kubernetes API and plays
// one CrateDB node per pod: each running node listens on free loopback ports with the
// PostgreSQL wire protocol (what pgx speaks) and CrateDB's HTTP endpoint (what the crash shim
// calls); with a pod gateway (Config.PodGateway, podgateway.go) the pods of the simulator
// image on the test bed's real nodes serve their node on their own ports. It is modelled on CrateDB's documentation and source, not on this project's engine:
// a node's name, roles, gateway, TLS and host-based authentication settings come from its
// pod's command line (-C settings after Kubernetes' variable expansion), its version from the
// image tag; statements behave per version; cluster settings are validated and kept transient
// and persistent; the gateway recovers the cluster state only as recover_after_* allow;
// sys.node_checks has a row per node and check. It models shards and replicas, allocation
// and relocation that take time, health, users, and optional chaos (Chaos). Every statement
// run is kept in a log that tests can read.
package cratedbsim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Group names a StatefulSet whose pods are nodes of the cluster. Node names, roles and
// settings come from each pod's command line, never from the group.
type Group struct {
	StatefulSet string
}

// StaticNode is a node of a simulator that runs without Kubernetes (Config.Client nil).
type StaticNode struct {
	Name   string
	Pod    string
	Master bool
	Data   bool
	// Settings are the node's -C settings (gateway.*, ssl.*, auth.host_based.*).
	Settings map[string]string
}

// Config configures a simulator.
type Config struct {
	// Client reads the cluster's StatefulSets, pods and PVCs. When nil, StaticNodes are
	// the nodes and SetNodeUp changes them (unit tests).
	Client    kubernetes.Interface
	Namespace string
	// Cluster is the CrateDB cluster name: the nodes are the pods of the namespace's
	// StatefulSets whose crate container sets -Ccluster.name=<Cluster> (kube.go groupOf).
	Cluster string
	// Groups, when set, replaces that discovery by an explicit StatefulSet mapping.
	Groups      []Group
	StaticNodes []StaticNode

	// Version, when set, is the CrateDB version of every node ("5.2.11", "5.10.3"); otherwise
	// each node reports the version of its container image tag, else DefaultVersion.
	Version string
	// Chaos enables transient failures (off by default).
	Chaos Chaos
	// TLS is the server certificate nodes present when their pod enables ssl.http.enabled or
	// ssl.psql.enabled; a node asked for TLS without it does not start.
	TLS *tls.Config

	// ListenHost is the loopback address every node listens on (default 127.0.0.1). Each
	// listener gets a free port, kept across restarts of the node, so that simulators of
	// different test beds never share an address.
	ListenHost string
	// PodGateway, when set, is the host address (IP) of the pod gateway: one listener, on a
	// free port (Sim.PodGatewayAddr), where the proxies of the CrateDB simulator image
	// (test/cmd/cratedb-sim-pod) on the test bed's real nodes forward their pod's HTTP, PostgreSQL
	// and exporter ports (see podgateway.go). It must be a loopback address or an address of
	// PodGatewayInterface.
	PodGateway string
	// PodGatewayInterface names the network interface that holds PodGateway (the test bed's
	// pod bridge).
	PodGatewayInterface string
	// DebugAddr, when set, serves the debug endpoints (/_sim/statements, /_sim/nodes) on an
	// address that stays up whatever the nodes do.
	DebugAddr string
	// StateDir, when set, keeps users, license, settings and tables across simulator restarts.
	StateDir string

	// TickInterval paces shard recoveries (default 500ms). A negative value disables the
	// ticker: tests call Tick.
	TickInterval time.Duration
	// ShardsPerTick is how many shard copies finish recovering per tick (default 2).
	ShardsPerTick int
	// ShardSize, when positive, is the size in bytes of every shard copy, and copies recover
	// at the rate of indices.recovery.max_bytes_per_sec per node instead of ShardsPerTick
	// (recovery.go). Small sizes, or a raised rate (SET GLOBAL), keep tests fast.
	ShardSize int64
	// Logf receives diagnostics (never passwords); nil discards them.
	Logf func(format string, args ...any)
}

// Statement is one entry of the statement log. Literals after PASSWORD and LICENSE are
// redacted.
type Statement struct {
	Seq       int       `json:"seq"`
	Time      time.Time `json:"time"`
	Node      string    `json:"node"`
	User      string    `json:"user"`
	Protocol  string    `json:"protocol"` // "pg" or "http"
	Statement string    `json:"statement"`
	Error     string    `json:"error,omitempty"`
	// Injected marks an error the simulator made up (Chaos), not one the statement earned,
	// so tests can tell that their chaos happened.
	Injected bool `json:"injected,omitempty"`
}

// NodeInfo describes one simulated node.
type NodeInfo struct {
	Name   string `json:"name"`
	Pod    string `json:"pod"`
	ID     string `json:"id"`
	Up     bool   `json:"up"`
	Master bool   `json:"master"`
	Data   bool   `json:"data"`
	// Host is the loopback IP of the node's listeners, PGAddr and HTTPAddr their host:port
	// (set once the node was first seen up).
	Host     string `json:"host"`
	PGAddr   string `json:"pgAddr"`
	HTTPAddr string `json:"httpAddr"`
	// HTTPS and PGTLS tell whether the node's pod enables ssl.http / ssl.psql.
	HTTPS   bool   `json:"https"`
	PGTLS   bool   `json:"pgTLS"`
	Version string `json:"version"`
	Shards  int    `json:"shards"`
}

// NodeEvent records a node starting or stopping, so that tests can see transitions too
// quick to catch by polling (kwok restarts a pod in well under a second).
type NodeEvent struct {
	Seq  int       `json:"seq"`
	Time time.Time `json:"time"`
	Node string    `json:"node"`
	Pod  string    `json:"pod"`
	Up   bool      `json:"up"`
	// ID is the CrateDB node id; a restarted node gets a new one.
	ID string `json:"id"`
}

// maxLog bounds the statement log.
const maxLog = 10000

// Sim is a running simulator.
type Sim struct {
	cfg   Config
	stmts *statements

	mu      sync.Mutex
	m       *model
	servers map[string]*nodeServer
	// podNode is the node name each pod last ran under; volumes the pods' data volumes.
	podNode map[string]string
	volumes map[string]*volume
	version Version // Config.Version parsed; zero when unset
	log     []Statement
	seq     int
	events  []NodeEvent
	closed  bool

	debug  *http.Server
	debugL net.Listener
	// podGW is the pod gateway listener (nil without Config.PodGateway); podIPs the IP each
	// pod has now, which a pod gateway connection must come from.
	podGW  net.Listener
	podIPs map[string]string
	// discoveryWhy is the last logged reason a StatefulSet's nodes find no cluster (kube.go).
	discoveryWhy map[string]string
	cancel       context.CancelFunc
	wg           sync.WaitGroup
}

// Start starts a simulator. ctx bounds its life as Close does.
func Start(ctx context.Context, cfg Config) (*Sim, error) {
	if cfg.ListenHost == "" {
		cfg.ListenHost = "127.0.0.1"
	}
	if ip := net.ParseIP(cfg.ListenHost); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("cratedbsim: listen host %q is not a loopback address", cfg.ListenHost)
	}
	var version Version
	if cfg.Version != "" {
		v, err := ParseVersion(cfg.Version)
		if err != nil {
			return nil, fmt.Errorf("cratedbsim: %w", err)
		}
		version = v
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = 500 * time.Millisecond
	}
	if cfg.Client != nil && (cfg.Namespace == "" || (cfg.Cluster == "" && len(cfg.Groups) == 0)) {
		return nil, errors.New("cratedbsim: Namespace and Cluster (or Groups) are required with a Kubernetes client")
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Sim{
		cfg:          cfg,
		stmts:        newStatements(),
		m:            newModelSized(cfg.ShardsPerTick, cfg.ShardSize),
		servers:      map[string]*nodeServer{},
		podNode:      map[string]string{},
		volumes:      map[string]*volume{},
		version:      version,
		podIPs:       map[string]string{},
		discoveryWhy: map[string]string{},
		cancel:       cancel,
	}
	s.m.chaos = cfg.Chaos
	if err := s.loadState(); err != nil {
		cancel()
		return nil, err
	}
	if cfg.DebugAddr != "" {
		l, err := net.Listen("tcp", cfg.DebugAddr)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("cratedbsim: debug listener: %w", err)
		}
		s.debugL = l
		s.debug = &http.Server{Handler: s.httpHandler(""), ReadHeaderTimeout: 10 * time.Second}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_ = s.debug.Serve(l)
		}()
	}
	if cfg.PodGateway != "" {
		if err := checkPodGateway(cfg.PodGateway, cfg.PodGatewayInterface); err != nil {
			s.Close()
			return nil, err
		}
		l, err := net.Listen("tcp", net.JoinHostPort(cfg.PodGateway, "0"))
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("cratedbsim: pod gateway listener: %w", err)
		}
		s.podGW = l
		s.wg.Add(2)
		go func() {
			defer s.wg.Done()
			s.servePodGateway(l)
		}()
		go func() {
			defer s.wg.Done()
			<-ctx.Done()
			_ = l.Close()
		}()
	}
	if cfg.Client == nil {
		var specs []nodeSpec
		for i, n := range cfg.StaticNodes {
			specs = append(specs, nodeSpec{name: n.Name, pod: n.Pod, ordinal: i, master: n.Master, data: n.Data, member: true, up: true,
				podUID: "static", settings: nodeSettings(n.Settings), version: s.nodeVersion(""), ip: "10.244.0." + strconv.Itoa(i+10)})
		}
		if err := s.applyNodes(specs); err != nil {
			s.Close()
			return nil, err
		}
	} else if err := s.followKube(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if cfg.TickInterval > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTicker(cfg.TickInterval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					s.Tick()
				}
			}
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-ctx.Done()
		s.shutdown()
	}()
	return s, nil
}

func (s *Sim) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// Close stops every listener and the Kubernetes watch.
func (s *Sim) Close() {
	s.cancel()
	s.wg.Wait()
	s.shutdown()
}

func (s *Sim) shutdown() {
	s.mu.Lock()
	s.closed = true
	servers := s.servers
	s.mu.Unlock()
	for _, ns := range servers {
		ns.close()
	}
	if s.debug != nil {
		_ = s.debug.Close()
	}
	if s.podGW != nil {
		_ = s.podGW.Close()
	}
}

// Tick advances shard recoveries by one step (see Config.ShardsPerTick).
func (s *Sim) Tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m.tick() {
		s.logf("cratedbsim: tick: %s", s.m.summary())
	}
}

// Statements returns a copy of the statement log, oldest first.
func (s *Sim) Statements() []Statement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// NodeEvents returns every node start and stop seen, oldest first.
func (s *Sim) NodeEvents() []NodeEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

func (s *Sim) recordNodeLocked(n *simNode, up bool) {
	s.seq++
	s.events = append(s.events, NodeEvent{Seq: s.seq, Time: time.Now().UTC(), Node: n.name, Pod: n.pod, Up: up, ID: n.id})
	if len(s.events) > maxLog {
		s.events = slices.Delete(s.events, 0, len(s.events)-maxLog)
	}
}

// DebugAddr is the address of the debug listener, "" if none.
func (s *Sim) DebugAddr() string {
	if s.debugL == nil {
		return ""
	}
	return s.debugL.Addr().String()
}

// Nodes describes every node the simulator knows, sorted by name.
func (s *Sim) Nodes() []NodeInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := s.m.shardCounts()
	var out []NodeInfo
	for _, n := range s.m.sortedNodes() {
		if !n.member && !n.up {
			continue
		}
		info := NodeInfo{Name: n.name, Pod: n.pod, ID: n.id, Up: n.up, Master: n.master, Data: n.data, Shards: counts[n.name], Version: n.version.String()}
		if ns := s.servers[n.name]; ns != nil {
			ns.mu.Lock()
			info.Host = ns.host
			info.PGAddr = net.JoinHostPort(ns.host, strconv.Itoa(ns.pgPort))
			info.HTTPAddr = net.JoinHostPort(ns.host, strconv.Itoa(ns.httpPort))
			info.HTTPS, info.PGTLS = ns.httpsOn, ns.pgTLS
			ns.mu.Unlock()
		}
		out = append(out, info)
	}
	return out
}

// ShardCopy is one copy of a shard assigned to a running node.
type ShardCopy struct {
	Table   string `json:"table"` // schema.name
	Shard   int    `json:"shard"`
	Node    string `json:"node"`
	Primary bool   `json:"primary"`
	// Started is false while the copy recovers or relocates to Node.
	Started bool `json:"started"`
}

// Shards lists every assigned shard copy, sorted by table, shard and node (what
// sys.shards would list), for tests that compare tables before and after a procedure.
func (s *Sim) Shards() []ShardCopy {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ShardCopy
	for _, t := range s.m.sortedTables() {
		for id, copies := range t.copies {
			for _, c := range copies {
				out = append(out, ShardCopy{Table: t.name, Shard: id, Node: c.node, Primary: c.primary, Started: c.started})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b ShardCopy) int {
		if a.Table != b.Table {
			return strings.Compare(a.Table, b.Table)
		}
		if a.Shard != b.Shard {
			return a.Shard - b.Shard
		}
		return strings.Compare(a.Node, b.Node)
	})
	return out
}

// Health returns max(severity) of sys.health (0 when there are no tables) and the number of
// rows of sys.nodes.
func (s *Sim) Health() (severity, nodes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.maxSeverity(), len(s.m.upNodes())
}

// SetNodeUp starts or stops a node of a simulator without Kubernetes.
func (s *Sim) SetNodeUp(name string, up bool) error {
	if s.cfg.Client != nil {
		return errors.New("cratedbsim: nodes follow Kubernetes pods; delete the pod instead")
	}
	s.mu.Lock()
	n := s.m.nodes[name]
	if n == nil {
		s.mu.Unlock()
		return fmt.Errorf("cratedbsim: unknown node %q", name)
	}
	if n.up != up {
		s.recordNodeLocked(n, up)
	}
	s.m.setNodeUp(n, up)
	s.mu.Unlock()
	return s.syncServers()
}

// Result is the outcome of Sim.Exec.
type Result struct {
	Columns  []string
	Rows     [][]any
	RowCount int64
}

// Exec runs a statement as user on behalf of node (any name; used in the log), as the
// network endpoints do. Errors are *SQLError for SQL-level failures.
func (s *Sim) Exec(node, user, stmt string, args ...any) (*Result, error) {
	p, err := s.stmts.prepare(stmt)
	if err != nil {
		s.record(node, user, "api", stmt, err)
		return nil, err
	}
	res, err := s.execute(node, user, "api", stmt, p, args)
	if err != nil {
		return nil, err
	}
	out := &Result{Rows: res.rows, RowCount: res.rowcount}
	if res.verb == "SELECT" {
		out.RowCount = int64(len(res.rows))
	}
	for _, c := range res.cols {
		out.Columns = append(out.Columns, c.name)
	}
	return out, nil
}

// nodeVersion is the CrateDB version of a node running image.
func (s *Sim) nodeVersion(image string) Version {
	if s.version != (Version{}) {
		return s.version
	}
	if v, ok := imageVersion(image); ok {
		return v
	}
	return defaultVersion()
}

// versionOfLocked is the version of the node that runs a statement; for statements run
// through Exec on no particular node, the lowest version in the cluster.
func (s *Sim) versionOfLocked(node string) Version {
	if n := s.m.nodes[node]; n != nil && n.version != (Version{}) {
		return n.version
	}
	var low Version
	for _, n := range s.m.upNodes() {
		if low == (Version{}) || versionLess(n.version, low) {
			low = n.version
		}
	}
	if low == (Version{}) {
		return s.nodeVersion("")
	}
	return low
}

func versionLess(a, b Version) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// execute runs a prepared statement against the model and logs it.
func (s *Sim) execute(node, user, proto, stmt string, p *plan, args []any) (*result, error) {
	s.mu.Lock()
	x := &execCtx{m: s.m, user: user, args: args, version: s.versionOfLocked(node)}
	var res *result
	var err error
	injected := false
	switch {
	case s.m.electionErrors > 0 && !p.stateless:
		// Chaos: the cluster is electing a master.
		s.m.electionErrors--
		err, injected = errNoMaster(), true
	case s.m.master == "" && !p.stateless:
		err = errNoMaster()
	case !s.m.recovered && !p.stateless:
		err = errStateNotRecovered()
	default:
		res, err = p.run(x)
	}
	s.recordEntryLocked(node, user, proto, stmt, err, injected)
	var saveErr error
	if err == nil && x.mutated {
		saveErr = s.saveStateLocked()
	}
	s.mu.Unlock()
	if saveErr != nil {
		s.logf("cratedbsim: save state: %v", saveErr)
	}
	return res, err
}

func (s *Sim) record(node, user, proto, stmt string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recordLocked(node, user, proto, stmt, err)
}

func (s *Sim) recordLocked(node, user, proto, stmt string, err error) {
	s.recordEntryLocked(node, user, proto, stmt, err, false)
}

// recordEntryLocked logs a statement; injected marks a chaos error.
func (s *Sim) recordEntryLocked(node, user, proto, stmt string, err error, injected bool) {
	s.seq++
	e := Statement{Seq: s.seq, Time: time.Now().UTC(), Node: node, User: user, Protocol: proto, Statement: strings.Join(strings.Fields(Redact(stmt)), " "), Injected: injected}
	if err != nil {
		e.Error = err.Error()
	}
	s.log = append(s.log, e)
	if len(s.log) > maxLog {
		s.log = slices.Delete(s.log, 0, len(s.log)-maxLog)
	}
	switch {
	case injected:
		s.logf("cratedbsim: %s %s@%s: %s -> %v (chaos)", proto, user, node, e.Statement, err)
	case err != nil:
		s.logf("cratedbsim: %s %s@%s: %s -> %v", proto, user, node, e.Statement, err)
	default:
		s.logf("cratedbsim: %s %s@%s: %s", proto, user, node, e.Statement)
	}
}

// CrateDB's ports inside a pod, which port-forward mappings send to a node's listeners.
const (
	PodPGPort   = 5432
	PodHTTPPort = 4200
)

// Environment variables of the exec mapping of a pod, read by the crash shim.
const (
	// EnvHTTPAddr is where the pod's localhost:4200 is, e.g. 127.0.0.1:40123. The shim
	// keeps the scheme crash was given (--host https://localhost:4200).
	EnvHTTPAddr = "CRATEDB_SIM_HTTP_ADDR"
	// EnvNode is the CrateDB node name of the pod.
	EnvNode = "CRATEDB_SIM_NODE"
)

// ExecEnv is the environment a pod's exec mapping sets so that the crash shim reaches the
// pod's node; nil until the node has listened once.
func (n NodeInfo) ExecEnv() map[string]string {
	if n.HTTPAddr == "" {
		return nil
	}
	return map[string]string{EnvHTTPAddr: n.HTTPAddr, EnvNode: n.Name}
}

// versionString is the version of node as CrateDB reports it.
func (s *Sim) versionString(node string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versionOfLocked(node).String()
}
