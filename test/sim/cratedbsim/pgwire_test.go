package cratedbsim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// startStatic starts a simulator without Kubernetes: masters master-0..2 and data nodes
// data-hot-0..2, all up, with manual ticks.
func startStatic(t *testing.T) *Sim {
	t.Helper()
	var nodes []StaticNode
	for i := range 3 {
		nodes = append(nodes, StaticNode{Name: fmt.Sprintf("master-%d", i), Pod: fmt.Sprintf("crate-master-c-%d", i), Master: true, Settings: operatorHBA()})
	}
	for i := range 3 {
		nodes = append(nodes, StaticNode{Name: fmt.Sprintf("data-hot-%d", i), Pod: fmt.Sprintf("crate-data-hot-c-%d", i), Data: true, Settings: operatorHBA()})
	}
	sim, err := Start(t.Context(), Config{
		StaticNodes:  nodes,
		TickInterval: -1,
		Logf:         t.Logf,
	})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(sim.Close)
	return sim
}

// operatorHBA is the host-based authentication the CrateDB operator configures without TLS
// (crate-operator crate/operator/create.py): trust for crate from localhost, passwords else.
func operatorHBA() map[string]string {
	return map[string]string{
		"auth.host_based.enabled":          "true",
		"auth.host_based.config.0.user":    "crate",
		"auth.host_based.config.0.address": "_local_",
		"auth.host_based.config.0.method":  "trust",
		"auth.host_based.config.99.method": "password",
	}
}

func nodeInfo(t *testing.T, sim *Sim, name string) NodeInfo {
	t.Helper()
	for _, n := range sim.Nodes() {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("node %s not found", name)
	return NodeInfo{}
}

func connect(t *testing.T, sim *Sim, node, user, password string, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	info := nodeInfo(t, sim, node)
	host, port, _ := strings.Cut(info.PGAddr, ":")
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s user=%s dbname=doc connect_timeout=5", host, port, user))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Password = password
	cfg.DefaultQueryExecMode = mode
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

var modes = []pgx.QueryExecMode{
	pgx.QueryExecModeCacheStatement,
	pgx.QueryExecModeCacheDescribe,
	pgx.QueryExecModeDescribeExec,
	pgx.QueryExecModeExec,
	pgx.QueryExecModeSimpleProtocol,
}

func TestPGXProcedureStatements(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			sim := startStatic(t)
			ctx := t.Context()
			conn := connect(t, sim, "master-0", "crate", "", mode)

			var one int
			if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("SELECT 1 = %d, %v", one, err)
			}
			var count int64
			if err := conn.QueryRow(ctx, "select COUNT(*)\n  from sys.nodes").Scan(&count); err != nil || count != 6 {
				t.Fatalf("count(sys.nodes) = %d, %v", count, err)
			}
			rows, _ := conn.Query(ctx, "SELECT id, name FROM sys.nodes ORDER BY name")
			names, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
				var id, name string
				err := r.Scan(&id, &name)
				return name, err
			})
			if err != nil || len(names) != 6 || names[0] != "data-hot-0" {
				t.Fatalf("names = %v, %v", names, err)
			}
			var severity *int
			if err := conn.QueryRow(ctx, "SELECT max(severity) FROM sys.health").Scan(&severity); err != nil || severity != nil {
				t.Fatalf("max(severity) with no tables = %v, %v", severity, err)
			}
			var master *string
			if err := conn.QueryRow(ctx, "SELECT master_node FROM sys.cluster").Scan(&master); err != nil || master == nil || *master != nodeInfo(t, sim, "master-0").ID {
				t.Fatalf("master_node = %v, %v", master, err)
			}

			if _, err := conn.Exec(ctx, `CREATE TABLE t1 (id INT) CLUSTERED INTO 6 SHARDS WITH (number_of_replicas = '1')`); err != nil {
				t.Fatalf("create table: %v", err)
			}
			if _, err := conn.Exec(ctx, `create table doc.t2 (id int, "x" text) with (number_of_replicas = '0-1')`); err != nil {
				t.Fatalf("create table: %v", err)
			}
			for range 20 {
				sim.Tick()
			}
			if err := conn.QueryRow(ctx, "SELECT max(severity) FROM sys.health").Scan(&severity); err != nil || severity == nil || *severity != 1 {
				t.Fatalf("max(severity) = %v, %v", severity, err)
			}
			rows, _ = conn.Query(ctx, "SELECT DISTINCT number_of_replicas FROM information_schema.tables WHERE number_of_shards IS NOT NULL")
			reps, err := pgx.CollectRows(rows, pgx.RowTo[string])
			slices.Sort(reps) // no ORDER BY: CrateDB promises no order
			if err != nil || strings.Join(reps, ",") != "0-1,1" {
				t.Fatalf("replicas = %v, %v", reps, err)
			}

			tag, err := conn.Exec(ctx, `SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = 'primaries'`)
			if err != nil || !strings.HasPrefix(tag.String(), "SET") {
				t.Fatalf("set allocation: %v, %v", tag, err)
			}
			var enable string
			if err := conn.QueryRow(ctx, `SELECT settings['cluster']['routing']['allocation']['enable'] FROM sys.cluster`).Scan(&enable); err != nil || enable != "primaries" {
				t.Fatalf("enable = %q, %v", enable, err)
			}
			if _, err := conn.Exec(ctx, `RESET GLOBAL "cluster.routing.allocation.enable"`); err != nil {
				t.Fatalf("reset: %v", err)
			}
			var excl *string
			if err := conn.QueryRow(ctx, `SELECT settings['cluster']['routing']['allocation']['exclude']['_name'] FROM sys.cluster`).Scan(&excl); err != nil || excl == nil || *excl != "" {
				t.Fatalf("exclude = %v, %v", excl, err)
			}

			// text[] parameter in ANY($1).
			rows, _ = conn.Query(ctx, `SELECT node['name'], count(*) FROM sys.shards WHERE node['name'] = ANY($1) GROUP BY 1`, []string{"data-hot-2", "nope"})
			type nc struct {
				Name  string
				Count int64
			}
			counts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[nc])
			if err != nil || len(counts) != 1 || counts[0].Name != "data-hot-2" || counts[0].Count == 0 {
				t.Fatalf("shard counts = %v, %v", counts, err)
			}

			// One row per node and check: the update acknowledges check 1 on all 6 nodes.
			if tag, err := conn.Exec(ctx, `UPDATE sys.node_checks SET acknowledged = TRUE WHERE id = 1`); err != nil || tag.String() != "UPDATE 6" {
				t.Fatalf("ack: %v, %v", tag, err)
			}
			var acked int64
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM sys.node_checks WHERE id = 1 AND acknowledged = TRUE`).Scan(&acked); err != nil || acked != 6 {
				t.Fatalf("acknowledged check rows = %d, %v", acked, err)
			}

			// Users, with the password as a parameter.
			var exists bool
			if err := conn.QueryRow(ctx, `SELECT count(*) = 1 FROM sys.users WHERE name = $1`, "app").Scan(&exists); err != nil || exists {
				t.Fatalf("exists = %v, %v", exists, err)
			}
			if tag, err := conn.Exec(ctx, `CREATE USER "app" WITH (password = $1)`, "s3cret"); err != nil || !strings.HasPrefix(tag.String(), "CREATE") {
				t.Fatalf("create user: %v, %v", tag, err)
			}
			if err := conn.QueryRow(ctx, `SELECT count(*) = 1 FROM sys.users WHERE name = $1`, "app").Scan(&exists); err != nil || !exists {
				t.Fatalf("exists = %v, %v", exists, err)
			}
			_, err = conn.Exec(ctx, `CREATE USER "app" WITH (password = $1)`, "other")
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "42710" || pgErr.Message != "RoleAlreadyExistsException[Role 'app' already exists]" {
				t.Fatalf("duplicate user error = %v", err)
			}
			var privs int64
			const privSQL = `SELECT count(DISTINCT type) FROM sys.privileges WHERE grantee = $1 AND class = 'CLUSTER' AND state = 'GRANT'`
			if err := conn.QueryRow(ctx, privSQL, "app").Scan(&privs); err != nil || privs != 0 {
				t.Fatalf("privileges before grant = %d, %v", privs, err)
			}
			if _, err := conn.Exec(ctx, `GRANT ALL PRIVILEGES TO "app"`); err != nil {
				t.Fatalf("grant: %v", err)
			}
			if err := conn.QueryRow(ctx, privSQL, "app").Scan(&privs); err != nil || privs != 4 {
				t.Fatalf("privileges after grant = %d, %v", privs, err)
			}
			// The connection still works after an error.
			if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				t.Fatalf("after error: %v", err)
			}
			_, err = conn.Exec(ctx, `SELEKT 1`)
			if !errors.As(err, &pgErr) || pgErr.Code != "42601" || !strings.HasPrefix(pgErr.Message, "SQLParseException[") {
				t.Fatalf("parse error = %v", err)
			}

			app := connect(t, sim, "data-hot-1", "app", "s3cret", mode)
			if err := app.QueryRow(ctx, "SELECT count(*) FROM sys.nodes").Scan(&count); err != nil || count != 6 {
				t.Fatalf("as app: %d, %v", count, err)
			}
			for _, st := range sim.Statements() {
				if strings.Contains(st.Statement, "s3cret") {
					t.Fatalf("password logged: %+v", st)
				}
			}
		})
	}
}

func TestPGXAuthentication(t *testing.T) {
	sim := startStatic(t)
	ctx := t.Context()
	if _, err := sim.Exec("test", "crate", `CREATE USER system WITH (password = 'pw1')`); err != nil {
		t.Fatal(err)
	}
	info := nodeInfo(t, sim, "master-1")
	host, port, _ := strings.Cut(info.PGAddr, ":")
	for _, tc := range []struct {
		user, password string
		ok             bool
	}{
		{"system", "pw1", true},
		{"system", "wrong", false},
		{"system", "", false},
		{"nobody", "x", false},
		{"crate", "", true},
	} {
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s@%s:%s/doc?connect_timeout=5", tc.user, tc.password, host, port))
		if (err == nil) != tc.ok {
			t.Errorf("connect %s/%q: err=%v, want ok=%v", tc.user, tc.password, err, tc.ok)
		}
		if err == nil {
			_ = conn.Close(ctx)
		} else if !strings.Contains(err.Error(), "28P01") {
			t.Errorf("connect %s: want SQLSTATE 28P01, got %v", tc.user, err)
		}
	}
	// A user without privileges cannot run administrative statements.
	if _, err := sim.Exec("test", "crate", `ALTER USER "system" SET (password = 'pw2')`); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, sim, "master-1", "system", "pw2", pgx.QueryExecModeCacheStatement)
	_, err := conn.Exec(ctx, `SET GLOBAL "stats.enabled" = false`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("want missing privilege, got %v", err)
	}
}

func TestNodeDownRefusesConnections(t *testing.T) {
	sim := startStatic(t)
	conn := connect(t, sim, "data-hot-0", "crate", "", pgx.QueryExecModeCacheStatement)
	if err := sim.SetNodeUp("data-hot-0", false); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM sys.nodes").Scan(&n); err == nil {
		t.Fatalf("query on a stopped node succeeded")
	}
	info := nodeInfo(t, sim, "data-hot-0")
	_, err := pgx.Connect(t.Context(), "postgres://crate@"+info.PGAddr+"/doc?connect_timeout=2")
	if err == nil {
		t.Fatalf("connect to a stopped node succeeded")
	}
	if err := sim.SetNodeUp("data-hot-0", true); err != nil {
		t.Fatal(err)
	}
	conn = connect(t, sim, "data-hot-0", "crate", "", pgx.QueryExecModeCacheStatement)
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM sys.nodes").Scan(&n); err != nil || n != 6 {
		t.Fatalf("after restart: %d, %v", n, err)
	}
}

// TestPGXTypedParameters: a parameter takes its type from the column it is compared with or
// assigned to, so that a client sends Go integers and booleans as it would to CrateDB.
// Before, every parameter of a SELECT was text and pgx could not encode an int64 for it.
func TestPGXTypedParameters(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			sim := startStatic(t)
			ctx := t.Context()
			conn := connect(t, sim, "master-0", "crate", "", mode)
			tag, err := conn.Exec(ctx, "UPDATE sys.node_checks SET acknowledged = $1 WHERE id = $2", true, int64(1))
			if err != nil || tag.RowsAffected() != 6 {
				t.Fatalf("update: %v, %v", tag, err)
			}
			var n int64
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM sys.node_checks WHERE acknowledged = $1 AND id IN ($2, $3)", true, int64(1), int64(2)).Scan(&n); err != nil || n != 6 {
				t.Fatalf("count = %d, %v", n, err)
			}
		})
	}
}

// TestClosedSimStartsNoListener: a resync that raced the simulator's shutdown (the Kubernetes
// loop starting a node while Close stops them all) must not leave a node listening that
// nothing would ever stop. Before nodeServer.closed, the late start listened again.
func TestClosedSimStartsNoListener(t *testing.T) {
	sim := startStatic(t)
	info := nodeInfo(t, sim, "data-hot-0")
	sim.Close()
	sim.mu.Lock()
	ns := sim.servers["data-hot-0"]
	sim.mu.Unlock()
	if err := ns.start(); err != nil {
		t.Fatalf("late start: %v", err)
	}
	if c, err := net.DialTimeout("tcp", info.PGAddr, 2*time.Second); err == nil {
		_ = c.Close()
		ns.stop()
		t.Fatalf("node data-hot-0 listens on %s after Close", info.PGAddr)
	}
}
