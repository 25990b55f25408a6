// Package cratedbtest fakes a CrateDB cluster at the level the cratedb
// engine talks to it: SQL over a DB connection and crash through exec.
// Statements are parsed by CrateDB's grammar (the simulator's parser,
// cratedbsim.Query and ParseCommand) and answered from the fake's state,
// so that any spelling CrateDB accepts works and what it refuses fails.
// Test support only.
package cratedbtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/cratedb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim"
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
	// ShardBytes is the size column of every started copy in sys.shards (Shards and
	// Copies); 0 leaves it NULL, a size CrateDB does not know.
	ShardBytes int64
	// Replicas are the number_of_replicas values of information_schema.tables.
	Replicas []string
	// Copies are the started shard copies of sys.shards: schema, table,
	// partition_ident, shard id, node name.
	Copies [][]any
	Users  map[string]string // name -> password
	// Privileges are each user's cluster privileges: type (AL, DDL, DML, DQL) -> GRANT or
	// DENY, as sys.privileges lists them.
	Privileges map[string]map[string]string
	// Settings are the cluster settings set other than allocation.enable (Allocation) and
	// allocation.exclude._name (Exclusions).
	Settings map[string]string
	License  string
	Acked    bool
	// AckedRecover is the recover-after node check's acknowledgement.
	AckedRecover bool
	// SeverityScript is consumed, one value per health read, before Severity.
	SeverityScript []any
	// Busy is the number of shard copies INITIALIZING or RELOCATING in sys.shards;
	// BusyScript is consumed, one value per read, before it.
	Busy       int64
	BusyScript []int64
	// BusyBytes is each busy copy's recovery['size']['used'] (the shard's bytes) and
	// BusyRecovered its recovery['size']['recovered'] (NULL both while BusyBytes is 0);
	// each read of sys.shards adds RecoverPerPoll to BusyRecovered, and the busy copies
	// start (Busy drops to 0) once it reaches BusyBytes.
	BusyBytes, BusyRecovered, RecoverPerPoll int64
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
	// Require are tables' routing.allocation.require settings, by table name (t0, t1, ...
	// of Replicas): attribute -> value, e.g. "_name" -> "data-hot-1,data-hot-2".
	Require map[string]map[string]any
	// Allocations are sys.allocations' rows: table_schema, table_name, partition_ident,
	// shard_id, node_id, primary, current_state, explanation, decisions.
	Allocations [][]any
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
		Users: map[string]string{}, Privileges: map[string]map[string]string{}, Settings: map[string]string{}, Absent: map[string]int{}, dead: map[string]bool{},
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
	_, rows, err := d.statement(sql, "crate", args)
	return rows, err
}

// statement runs one statement, parsed by CrateDB's grammar (cratedbsim's parser): a SELECT
// is evaluated over tables built from the fake's state, a write changes the state. It
// returns the result's columns and rows (none for a write). d.mu is held.
func (d *DB) statement(sql, user string, args []any) ([]string, [][]any, error) {
	if t, _, _ := strings.Cut(strings.TrimSpace(sql), " "); strings.EqualFold(t, "SELECT") {
		return cratedbsim.Query(sql, user, args, d.table)
	}
	cmd, err := cratedbsim.ParseCommand(sql, user, args)
	if err != nil {
		return nil, nil, err
	}
	return nil, nil, d.apply(cmd)
}

// table builds a system table from the state, as a read of it sees it: reads consume the
// scripted values (SeverityScript, BusyScript, Absent) and a read of sys.shards moves
// DrainPerPoll shards off every excluded node while allocation is enabled.
func (d *DB) table(name string) (cratedbsim.Table, bool) {
	switch name {
	case "sys.nodes":
		t := cratedbsim.Table{Columns: []string{"id", "name", "hostname", "rest_url", "version['number']", "attributes"}}
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
			attrs := map[string]any{}
			for k, v := range d.Attrs[n] {
				attrs[k] = v
			}
			t.Rows = append(t.Rows, []any{id, n, d.Hosts[n], rest, d.Version, attrs})
		}
		return t, true
	case "sys.cluster":
		t := cratedbsim.Table{Columns: []string{"id", "name", "master_node"}}
		var master any
		if d.Master != "" {
			master = d.Master
		}
		row := []any{"fake-cluster", "crate", master}
		for _, k := range slices.Sorted(maps.Keys(cratedbsim.RuntimeSettings())) {
			t.Columns = append(t.Columns, cratedbsim.SettingColumn(k))
			row = append(row, d.setting(k))
		}
		t.Rows = [][]any{row}
		return t, true
	case "sys.health":
		// One table whose severity is the cluster's; none when Severity is nil (max is NULL).
		t := cratedbsim.Table{Columns: []string{"table_schema", "table_name", "health", "severity"}}
		sev := d.Severity
		if len(d.SeverityScript) > 0 {
			sev, d.SeverityScript = d.SeverityScript[0], d.SeverityScript[1:]
		}
		if sev != nil {
			t.Rows = [][]any{{"doc", "t", "", sev}}
		}
		return t, true
	case "sys.shards":
		return d.shards(), true
	case "sys.allocations":
		return cratedbsim.Table{Columns: []string{"table_schema", "table_name", "partition_ident", "shard_id", "node_id", "primary",
			"current_state", "explanation", "decisions"}, Rows: slices.Clone(d.Allocations)}, true
	case "sys.users":
		t := cratedbsim.Table{Columns: []string{"name", "superuser"}}
		for _, n := range slices.Sorted(maps.Keys(d.Users)) {
			t.Rows = append(t.Rows, []any{n, n == "crate"})
		}
		return t, true
	case "sys.privileges":
		t := cratedbsim.Table{Columns: []string{"class", "grantee", "grantor", "ident", "state", "type"}}
		for _, u := range slices.Sorted(maps.Keys(d.Privileges)) {
			for _, typ := range slices.Sorted(maps.Keys(d.Privileges[u])) {
				t.Rows = append(t.Rows, []any{"CLUSTER", u, "crate", nil, d.Privileges[u][typ], typ})
			}
		}
		return t, true
	case "sys.node_checks":
		t := cratedbsim.Table{Columns: []string{"id", "node_id", "acknowledged"}}
		t.Rows = [][]any{{int32(1), "fake-node", d.Acked}, {int32(2), "fake-node", d.AckedRecover}}
		return t, true
	case "information_schema.tables":
		// One table per Replicas value, with its require filter (Require).
		t := cratedbsim.Table{Columns: []string{"table_schema", "table_name", "number_of_shards", "number_of_replicas", "partitioned_by",
			"settings['routing']['allocation']['require']", "settings['routing']['allocation']['include']", "settings['routing']['allocation']['exclude']"}}
		for i, r := range d.Replicas {
			name := fmt.Sprintf("t%d", i)
			require := map[string]any{}
			for k, v := range d.Require[name] {
				require[k] = v
			}
			t.Rows = append(t.Rows, []any{"doc", name, int32(4), r, nil, require, map[string]any{}, map[string]any{}})
		}
		return t, true
	case "information_schema.table_partitions":
		return cratedbsim.Table{Columns: []string{"table_schema", "table_name", "partition_ident", "number_of_shards", "number_of_replicas",
			"settings['routing']['allocation']['require']", "settings['routing']['allocation']['include']", "settings['routing']['allocation']['exclude']"}}, true
	}
	return cratedbsim.Table{}, false
}

// shards is sys.shards: the started Copies, Shards[n] started copies on each node n, and
// Busy copies being built (on no node the engine asks about).
func (d *DB) shards() cratedbsim.Table {
	t := cratedbsim.Table{Columns: []string{"schema_name", "table_name", "partition_ident", "id", "routing_state", "state", "node['name']", "size",
		"recovery['size']['used']", "recovery['size']['recovered']"}}
	var size any
	if d.ShardBytes > 0 {
		size = d.ShardBytes
	}
	// A started copy's recovery is done: all its bytes recovered.
	for _, c := range d.Copies {
		t.Rows = append(t.Rows, []any{c[0], c[1], c[2], c[3], "STARTED", "STARTED", c[4], size, size, size})
	}
	for _, n := range slices.Sorted(maps.Keys(d.Shards)) {
		for i := range d.Shards[n] {
			t.Rows = append(t.Rows, []any{"doc", "t", "", int32(i), "STARTED", "STARTED", n, size, size, size})
		}
	}
	busy := d.Busy
	if len(d.BusyScript) > 0 {
		busy, d.BusyScript = d.BusyScript[0], d.BusyScript[1:]
	}
	var used, recovered any
	if d.BusyBytes > 0 {
		used, recovered = d.BusyBytes, min(d.BusyRecovered, d.BusyBytes)
	}
	for i := range busy {
		t.Rows = append(t.Rows, []any{"doc", "t", "", int32(i), "INITIALIZING", "RECOVERING", nil, int64(0), used, recovered})
	}
	// Busy copies recover between reads.
	if d.BusyBytes > 0 && d.Busy > 0 {
		if d.BusyRecovered += d.RecoverPerPoll; d.BusyRecovered >= d.BusyBytes {
			d.Busy = 0
		}
	}
	// Shards move between reads, off excluded nodes only, while allocation is enabled.
	excl := strings.Split(d.Exclusions, ",")
	for n := range d.Shards {
		if slices.Contains(excl, n) && (d.Allocation == "" || d.Allocation == "all") {
			d.Shards[n] = max(0, d.Shards[n]-d.DrainPerPoll)
		}
	}
	return t
}

// Settings the fake keeps in fields of its own.
const (
	settingEnable  = "cluster.routing.allocation.enable"
	settingExclude = "cluster.routing.allocation.exclude._name"
)

// setting is a cluster setting's effective value.
func (d *DB) setting(key string) string {
	switch key {
	case settingEnable:
		if d.Allocation != "" {
			return d.Allocation
		}
	case settingExclude:
		return d.Exclusions
	default:
		if v, ok := d.Settings[key]; ok {
			return v
		}
	}
	return cratedbsim.RuntimeSettings()[key]
}

func (d *DB) setSetting(key, v string, reset bool) {
	switch key {
	case settingEnable:
		d.Allocation = v
	case settingExclude:
		d.Exclusions = v
		if !reset && d.AllocationOnExclude != "" {
			d.Allocation = d.AllocationOnExclude
		}
	default:
		if reset {
			delete(d.Settings, key)
		} else {
			d.Settings[key] = v
		}
	}
}

// apply runs a write statement on the state, refusing as CrateDB does what the fake models.
func (d *DB) apply(c *cratedbsim.Command) error {
	exists := "UserAlreadyExistsException[User '%s' already exists]"
	unknown := "UserUnknownException[User '%s' does not exist]"
	if d.versionAtLeast(5, 6) {
		exists = "RoleAlreadyExistsException[Role '%s' already exists]"
		unknown = "RoleUnknownException[Role '%s' does not exist]"
	}
	switch c.Verb {
	case "CREATE USER":
		if _, ok := d.Users[c.User]; ok {
			return fmt.Errorf(exists, c.User)
		}
		d.Users[c.User] = ""
		if c.Password != nil {
			d.Users[c.User] = *c.Password
		}
	case "ALTER USER":
		if _, ok := d.Users[c.User]; !ok {
			return fmt.Errorf(unknown, c.User)
		}
		d.Users[c.User] = ""
		if c.Password != nil {
			d.Users[c.User] = *c.Password
		}
	case "DROP USER":
		if _, ok := d.Users[c.User]; !ok && !c.IfExists {
			return fmt.Errorf(unknown, c.User)
		}
		delete(d.Users, c.User)
		delete(d.Privileges, c.User)
	case "SET GLOBAL":
		// The fake keeps one value per setting: transient and persistent alike.
		for _, s := range c.Settings {
			d.setSetting(s.Name, s.Value, false)
		}
	case "RESET GLOBAL":
		for _, n := range c.Reset {
			d.setSetting(n, "", true)
		}
	case "GRANT", "DENY", "REVOKE":
		if c.Class != "CLUSTER" {
			return fmt.Errorf("fake CrateDB: privileges on a %s are not modelled", c.Class)
		}
		for _, u := range c.Grantees {
			if _, ok := d.Users[u]; !ok {
				return fmt.Errorf(unknown, u)
			}
			if d.Privileges[u] == nil {
				d.Privileges[u] = map[string]string{}
			}
			for _, typ := range c.Privileges {
				if c.Verb == "REVOKE" {
					delete(d.Privileges[u], typ)
				} else {
					d.Privileges[u][typ] = c.Verb
				}
			}
		}
	case "UPDATE":
		t, ok := d.table(c.Table)
		if !ok || c.Table != "sys.node_checks" {
			return fmt.Errorf("fake CrateDB: UPDATE of %s is not modelled", c.Table)
		}
		ack, ok := c.Values["acknowledged"].(bool)
		if !ok || len(c.Values) != 1 {
			return fmt.Errorf("fake CrateDB: UPDATE of sys.node_checks sets acknowledged to a boolean only")
		}
		for _, r := range t.Rows {
			match, err := c.Where(t, r)
			if err != nil {
				return err
			}
			switch {
			case match && r[0] == int32(1):
				d.Acked = ack
			case match && r[0] == int32(2):
				d.AckedRecover = ack
			}
		}
	case "SET LICENSE":
		if d.versionAtLeast(5, 3) {
			// Removed in 5.3: the parser no longer knows the statement.
			return errors.New("SQLParseException[line 1:5: mismatched input 'LICENSE' expecting {'SESSION', 'LOCAL', 'GLOBAL', 'TRANSACTION', 'SESSION_CHARACTERISTICS', 'TIME'}]")
		}
		d.License = c.License
	default:
		return fmt.Errorf("fake CrateDB: %s is not modelled", c.Verb)
	}
	return nil
}

// GrantAll grants every privilege on the cluster to user, as GRANT ALL PRIVILEGES does.
func (d *DB) GrantAll(user string) {
	d.Privileges[user] = map[string]string{"AL": "GRANT", "DDL": "GRANT", "DML": "GRANT", "DQL": "GRANT"}
}

// HasAll reports whether user holds every cluster privilege, none denied.
func (d *DB) HasAll(user string) bool {
	for _, typ := range []string{"AL", "DDL", "DML", "DQL"} {
		if d.Privileges[user][typ] != "GRANT" {
			return false
		}
	}
	return true
}

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

// crashStatement runs one statement as crash does and returns what crash prints: a table
// for a SELECT, "<VERB> OK, n row(s) affected" for a write, the error otherwise; d.mu is held.
func (d *DB) crashStatement(stmt string) (string, bool) {
	verb, _, _ := strings.Cut(strings.TrimSpace(stmt), " ")
	verb = strings.ToUpper(verb)
	cols, rows, err := d.statement(stmt, "crate", nil)
	if err != nil {
		return err.Error(), false
	}
	if verb != "SELECT" {
		return fmt.Sprintf("%s OK, 1 row affected  (0.010 sec)", verb), true
	}
	return crashTable(cols, rows), true
}

// crashTable renders rows as crash's tabular format does.
func crashTable(cols []string, rows [][]any) string {
	widths := make([]int, len(cols))
	cells := make([][]string, len(rows))
	for i, c := range cols {
		widths[i] = len(c)
	}
	for r, row := range rows {
		for i, v := range row {
			s := fmt.Sprint(v)
			if v == nil {
				s = "NULL"
			}
			cells[r] = append(cells[r], s)
			widths[i] = max(widths[i], len(s))
		}
	}
	var b strings.Builder
	sep := "+"
	for _, w := range widths {
		sep += strings.Repeat("-", w+2) + "+"
	}
	line := func(vals []string) {
		b.WriteString("|")
		for i, v := range vals {
			fmt.Fprintf(&b, " %-*s |", widths[i], v)
		}
		b.WriteString("\n")
	}
	b.WriteString(sep + "\n")
	line(cols)
	b.WriteString(sep + "\n")
	for _, c := range cells {
		line(c)
	}
	fmt.Fprintf(&b, "%s\nSELECT %d rows in set (0.001 sec)", sep, len(rows))
	return b.String()
}
