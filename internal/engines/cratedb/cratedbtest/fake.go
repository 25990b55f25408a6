// Package cratedbtest fakes a CrateDB cluster at the level the cratedb
// engine talks to it: SQL over a DB connection and crash through exec.
// Test support only.
package cratedbtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/cratedb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Call is one statement the fake received.
type Call struct {
	Pod  string // pod the connection went through
	SQL  string
	Args []any
}

// DB is the fake cluster's state. Zero value plus New's defaults is a
// green cluster; tests change fields under Lock or with the helpers.
type DB struct {
	mu sync.Mutex

	Nodes      []string
	Severity   any // int32 or nil
	Master     string
	Exclusions string
	Allocation string
	// Shards per node; each shards poll moves DrainPerPoll shards off every
	// excluded node.
	Shards       map[string]int
	DrainPerPoll int
	// Replicas are the number_of_replicas values of information_schema.tables.
	Replicas []string
	// Copies are the started shard copies of sys.shards: schema, table,
	// partition_ident, shard id, node name.
	Copies  [][]any
	Users   map[string]string // name -> password
	Granted map[string]bool
	License string
	Acked   bool
	// AckedRecover is the recover-after node check's acknowledgement.
	AckedRecover bool
	// SeverityScript is consumed, one value per health read, before Severity.
	SeverityScript []any
	// Busy is the number of shard copies INITIALIZING or RELOCATING in sys.shards;
	// BusyScript is consumed, one value per read, before it.
	Busy       int64
	BusyScript []int64
	// Absent counts polls for which a node still misses from sys.nodes.
	Absent map[string]int
	// Hosts, IPs and IDs are sys.nodes' hostname, the host of rest_url
	// and id per node name (unset: empty, empty, "id-<name>").
	Hosts, IPs, IDs map[string]string
	// Version is every node's version['number'] (default 5.10.1).
	Version string
	// Failures makes that many next statements (those starting with
	// FailOn, when set) fail like a master election does (transient).
	Failures int
	FailOn   string
	// Attrs are each node's sys.nodes.attributes.
	Attrs map[string]map[string]string
	// AllocationOnExclude, when set, is what allocation.enable becomes as the
	// exclusion is set: someone holds allocation while a drain runs.
	AllocationOnExclude string

	calls    []Call
	connects []string
	dead     map[string]bool // pods whose connections dropped
	execs    []Exec
}

// New returns a green fake with the given nodes, master the first.
func New(nodes ...string) *DB {
	d := &DB{Nodes: slices.Clone(nodes), Severity: int32(1), Shards: map[string]int{}, DrainPerPoll: 2,
		Users: map[string]string{}, Granted: map[string]bool{}, Absent: map[string]int{}, dead: map[string]bool{},
		Hosts: map[string]string{}, IPs: map[string]string{}, IDs: map[string]string{}, Version: "5.10.1"}
	if len(nodes) > 0 {
		d.Master = nodes[0]
	}
	return d
}

// Do runs f with the state locked.
func (d *DB) Do(f func(d *DB)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

// Calls returns the statements so far.
func (d *DB) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// Statements returns the SQL texts so far, optionally only those that
// change something (no SELECT).
func (d *DB) Statements(writesOnly bool) []string {
	var out []string
	for _, c := range d.Calls() {
		if writesOnly && strings.HasPrefix(c.SQL, "SELECT") {
			continue
		}
		out = append(out, c.SQL)
	}
	return out
}

// Connects lists the pods connections were opened through.
func (d *DB) Connects() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.connects)
}

// Execs lists the crash runs.
func (d *DB) Execs() []Exec {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.execs)
}

// Drop makes connections through pod fail, as when the pod goes away.
func (d *DB) Drop(pod string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead[pod] = true
}

// AddNodes and RemoveNodes change sys.nodes.
func (d *DB) AddNodes(names ...string) {
	d.Do(func(d *DB) {
		for _, n := range names {
			if !slices.Contains(d.Nodes, n) {
				d.Nodes = append(d.Nodes, n)
			}
		}
	})
}

// NodeOf returns the node whose hostname is pod ("" when none).
func (d *DB) NodeOf(pod string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range d.Nodes {
		if d.Hosts[n] == pod {
			return n
		}
	}
	for n, h := range d.Hosts {
		if h == pod {
			return n
		}
	}
	return ""
}

// RemoveNodes drops nodes from sys.nodes (and their shards).
func (d *DB) RemoveNodes(names ...string) {
	d.Do(func(d *DB) {
		d.Nodes = slices.DeleteFunc(d.Nodes, func(n string) bool { return slices.Contains(names, n) })
		for _, n := range names {
			delete(d.Shards, n)
		}
	})
}

// Connector returns a cratedb.Connector that opens connections to d
// through the first Ready-looking pod (by the cluster model) not avoided,
// master-eligible groups first. Wrong credentials fail like a server.
func (d *DB) Connector() cratedb.Connector { return connector{d} }

type connector struct{ d *DB }

func (c connector) Connect(_ context.Context, cl *ops.Cluster, creds cratedb.Credentials, avoid []string) (cratedb.DB, string, error) {
	d := c.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if pw, ok := d.Users[creds.User]; !ok || pw != creds.Password {
		return nil, "", fmt.Errorf("password authentication failed for user %q", creds.User)
	}
	var pods []string
	for _, eligible := range []bool{true, false} {
		for _, g := range cl.Groups {
			if (g.MasterEligible || g.Role == ops.RoleMaster) != eligible {
				continue
			}
			for _, p := range g.Pods {
				if !slices.Contains(avoid, p.Name) {
					pods = append(pods, p.Name)
				}
			}
		}
	}
	if len(pods) == 0 {
		return nil, "", errors.New("no pod to connect to")
	}
	pod := pods[0]
	delete(d.dead, pod)
	d.connects = append(d.connects, pod)
	return &conn{d: d, pod: pod}, pod, nil
}

type conn struct {
	d      *DB
	pod    string
	closed bool
}

func (c *conn) Alive() bool {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	return !c.closed && !c.d.dead[c.pod]
}

func (c *conn) Close(context.Context) error { c.closed = true; return nil }

func (c *conn) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := c.Query(ctx, sql, args...)
	return err
}

var (
	reSetExcl    = regexp.MustCompile(`^SET GLOBAL "cluster\.routing\.allocation\.exclude\._name" = '(.*)'$`)
	reCreateUser = regexp.MustCompile(`^CREATE USER "([^"]+)" WITH \(password = \$1\)$`)
	reGrant      = regexp.MustCompile(`^GRANT ALL PRIVILEGES TO "([^"]+)"$`)
)

func (c *conn) Query(_ context.Context, sql string, args ...any) ([][]any, error) {
	d := c.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.closed || d.dead[c.pod] {
		return nil, errors.New("conn closed")
	}
	d.calls = append(d.calls, Call{Pod: c.pod, SQL: sql, Args: args})
	if d.Failures > 0 && strings.HasPrefix(sql, d.FailOn) {
		d.Failures--
		return nil, errors.New("ERROR: NotMasterException[no master elected yet] (transient)")
	}
	names := func() []string {
		if len(args) == 0 {
			return nil
		}
		s, _ := args[0].([]string)
		return s
	}
	switch {
	case sql == `SELECT count(*) FROM sys.nodes`:
		return [][]any{{int64(len(d.Nodes))}}, nil
	case sql == `SELECT max(severity) FROM sys.health`:
		sev := d.Severity
		if len(d.SeverityScript) > 0 {
			sev, d.SeverityScript = d.SeverityScript[0], d.SeverityScript[1:]
		}
		return [][]any{{sev}}, nil
	case sql == `SELECT master_node FROM sys.cluster`:
		if d.Master == "" {
			return [][]any{{nil}}, nil
		}
		return [][]any{{d.Master}}, nil
	case sql == `SELECT settings['cluster']['routing']['allocation']['exclude']['_name'] FROM sys.cluster`:
		return [][]any{{d.Exclusions}}, nil
	case sql == `SELECT settings['cluster']['routing']['allocation']['enable'] FROM sys.cluster`:
		// CrateDB's default is all; a transient setting overrides it.
		if d.Allocation == "" {
			return [][]any{{"all"}}, nil
		}
		return [][]any{{d.Allocation}}, nil
	case sql == `SELECT id, name, hostname, rest_url, version['number'] FROM sys.nodes`:
		var rows [][]any
		for _, n := range d.Nodes {
			if d.Absent[n] > 0 {
				d.Absent[n]--
				continue
			}
			id := d.IDs[n]
			if id == "" {
				id = "id-" + n
			}
			var rest any
			if ip := d.IPs[n]; ip != "" {
				rest = ip + ":4200"
			}
			rows = append(rows, []any{id, n, d.Hosts[n], rest, d.Version})
		}
		return rows, nil
	case sql == `SELECT DISTINCT number_of_replicas FROM information_schema.tables WHERE number_of_shards IS NOT NULL`:
		var rows [][]any
		for _, r := range d.Replicas {
			rows = append(rows, []any{r})
		}
		return rows, nil
	case sql == `SELECT name, attributes FROM sys.nodes`:
		var rows [][]any
		for _, n := range d.Nodes {
			attrs := map[string]any{}
			for k, v := range d.Attrs[n] {
				attrs[k] = v
			}
			rows = append(rows, []any{n, attrs})
		}
		return rows, nil
	case strings.HasPrefix(sql, `SELECT table_schema, table_name, number_of_shards, number_of_replicas, settings['routing']['allocation']['require']`):
		// One table per Replicas value, without allocation filters.
		var rows [][]any
		for i, r := range d.Replicas {
			rows = append(rows, []any{"doc", fmt.Sprintf("t%d", i), int32(4), r, map[string]any{}, map[string]any{}, map[string]any{}})
		}
		return rows, nil
	case strings.HasPrefix(sql, `SELECT table_schema, table_name, partition_ident, number_of_replicas, settings['routing']['allocation']['require']`):
		return nil, nil
	case sql == `SELECT node['name'], count(*) FROM sys.shards WHERE node['name'] = ANY($1) GROUP BY 1`:
		var rows [][]any
		excl := strings.Split(d.Exclusions, ",")
		for _, n := range names() {
			if d.Shards[n] > 0 {
				rows = append(rows, []any{n, int64(d.Shards[n])})
			}
		}
		// Shards move between polls, off excluded nodes only, while allocation is enabled.
		for n := range d.Shards {
			if slices.Contains(excl, n) && (d.Allocation == "" || d.Allocation == "all") {
				d.Shards[n] = max(0, d.Shards[n]-d.DrainPerPoll)
			}
		}
		return rows, nil
	case sql == `SELECT count(*) FROM sys.shards WHERE routing_state IN ('INITIALIZING', 'RELOCATING')`:
		busy := d.Busy
		if len(d.BusyScript) > 0 {
			busy, d.BusyScript = d.BusyScript[0], d.BusyScript[1:]
		}
		return [][]any{{busy}}, nil
	case sql == `SELECT schema_name, table_name, partition_ident, id, node['name'] FROM sys.shards WHERE routing_state IN ('STARTED', 'RELOCATING')`:
		return slices.Clone(d.Copies), nil
	case sql == `SELECT count(*) = 1 FROM sys.users WHERE name = $1`:
		_, ok := d.Users[fmt.Sprint(args[0])]
		return [][]any{{ok}}, nil
	case strings.HasPrefix(sql, `SELECT count(DISTINCT type) FROM sys.privileges`):
		if d.Granted[fmt.Sprint(args[0])] {
			return [][]any{{int64(4)}}, nil
		}
		return [][]any{{int64(0)}}, nil
	case sql == `SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = 'primaries'`:
		d.Allocation = "primaries"
		return nil, nil
	case sql == `RESET GLOBAL "cluster.routing.allocation.enable"`:
		d.Allocation = ""
		return nil, nil
	case sql == `RESET GLOBAL "cluster.routing.allocation.exclude._name"`:
		d.Exclusions = ""
		return nil, nil
	case sql == `UPDATE sys.node_checks SET acknowledged = TRUE WHERE id = 1`:
		d.Acked = true
		return nil, nil
	case sql == `UPDATE sys.node_checks SET acknowledged = TRUE WHERE id = 2`:
		d.AckedRecover = true
		return nil, nil
	}
	if m := reSetExcl.FindStringSubmatch(sql); m != nil {
		d.Exclusions = m[1]
		if d.AllocationOnExclude != "" {
			d.Allocation = d.AllocationOnExclude
		}
		return nil, nil
	}
	if m := reCreateUser.FindStringSubmatch(sql); m != nil {
		if _, ok := d.Users[m[1]]; ok {
			return nil, fmt.Errorf("RoleAlreadyExistsException[Role '%s' already exists]", m[1])
		}
		d.Users[m[1]] = fmt.Sprint(args[0])
		return nil, nil
	}
	if m := reGrant.FindStringSubmatch(sql); m != nil {
		d.Granted[m[1]] = true
		return nil, nil
	}
	return nil, fmt.Errorf("fake CrateDB: unsupported statement %q", sql)
}

var (
	reCrashCreate = regexp.MustCompile(`^CREATE USER "([^"]+)" WITH \(password = '((?:[^']|'')*)'\);$`)
	reCrashAlter  = regexp.MustCompile(`^ALTER USER "([^"]+)" SET \(password = '((?:[^']|'')*)'\);$`)
	reCrashGrant  = regexp.MustCompile(`^GRANT ALL PRIVILEGES TO "([^"]+)";$`)
	reCrashLic    = regexp.MustCompile(`^SET LICENSE '((?:[^']|'')*)';$`)
)

// Exec is one crash run the fake saw.
type Exec struct {
	Argv  []string
	Stdin string
}

// Execer returns a kube.Executor that runs crash against d, printing
// what crash prints: statements from -c, else from stdin.
func (d *DB) Execer() kube.Executor { return execer{d} }

type execer struct{ d *DB }

// versionAtLeast compares d.Version's major.minor.
func (d *DB) versionAtLeast(major, minor int) bool {
	var ma, mi int
	_, _ = fmt.Sscanf(d.Version, "%d.%d", &ma, &mi)
	return ma > major || ma == major && mi >= minor
}

func (x execer) Exec(_ context.Context, ns, pod, container string, argv []string, stdin io.Reader) ([]byte, []byte, error) {
	d := x.d
	var in string
	if stdin != nil {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, nil, err
		}
		in = string(b)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.execs = append(d.execs, Exec{Argv: slices.Clone(argv), Stdin: in})
	if container != "crate" || len(argv) < 4 || argv[0] != "crash" || argv[2] != "--host" {
		return nil, []byte("unexpected command"), &kube.ExitError{Namespace: ns, Pod: pod, Container: container, Code: 2}
	}
	var stmts []string
	if i := slices.Index(argv, "-c"); i >= 0 && i+1 < len(argv) {
		stmts = []string{argv[i+1]}
	} else {
		for _, l := range strings.Split(in, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				stmts = append(stmts, l)
			}
		}
	}
	var out bytes.Buffer
	for _, stmt := range stmts {
		msg, ok := d.crashStatement(stmt)
		out.WriteString(msg + "\n")
		if !ok {
			return out.Bytes(), nil, &kube.ExitError{Namespace: ns, Pod: pod, Container: container, Code: 1}
		}
	}
	return out.Bytes(), nil, nil
}

// crashStatement runs one statement; d.mu is held.
func (d *DB) crashStatement(stmt string) (string, bool) {
	unq := func(s string) string { return strings.ReplaceAll(s, "''", "'") }
	if stmt == `SELECT version['number'] FROM sys.nodes;` {
		var b strings.Builder
		b.WriteString("+-------------------+\n| version['number'] |\n+-------------------+\n")
		for range d.Nodes {
			fmt.Fprintf(&b, "| %-17s |\n", d.Version)
		}
		fmt.Fprintf(&b, "+-------------------+\nSELECT %d rows in set (0.001 sec)", len(d.Nodes))
		return b.String(), true
	}
	exists := "UserAlreadyExistsException[User '%s' already exists]"
	if d.versionAtLeast(5, 6) {
		exists = "RoleAlreadyExistsException[Role '%s' already exists]"
	}
	if m := reCrashCreate.FindStringSubmatch(stmt); m != nil {
		if _, ok := d.Users[m[1]]; ok {
			return fmt.Sprintf(exists, m[1]), false
		}
		d.Users[m[1]] = unq(m[2])
		return "CREATE OK, 1 row affected  (0.050 sec)", true
	}
	if m := reCrashAlter.FindStringSubmatch(stmt); m != nil {
		d.Users[m[1]] = unq(m[2])
		return "ALTER OK, 1 row affected  (0.020 sec)", true
	}
	if m := reCrashGrant.FindStringSubmatch(stmt); m != nil {
		d.Granted[m[1]] = true
		return "GRANT OK, 4 rows affected  (0.020 sec)", true
	}
	if m := reCrashLic.FindStringSubmatch(stmt); m != nil && !d.versionAtLeast(5, 3) {
		d.License = unq(m[1])
		return "SET OK, 1 row affected  (0.010 sec)", true
	}
	return "SQLParseException[line 1: mismatched input]", false
}
