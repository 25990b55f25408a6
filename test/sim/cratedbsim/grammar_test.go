package cratedbsim

import (
	"fmt"
	"strings"
	"testing"
)

// TestGrammar: user management, SET/RESET GLOBAL, CREATE TABLE and SELECTs over the system
// tables are parsed by CrateDB's grammar and evaluated from the model, not matched against a
// list of statement shapes. Before, every case marked "new" failed: the simulator answered
// only the exact shapes the engine sends (a dotted unquoted setting name, two assignments,
// OR/NOT/IN/!=/IS NULL, GROUP BY on any column, CLUSTERED BY were "statement not supported",
// an unknown column was a parse error rather than ColumnUnknownException, and
// "WITH (password 'x')" without '=' was accepted although CrateDB's genericProperty needs it).
func TestGrammar(t *testing.T) {
	sim := startVersion(t, "5.10.3", nil)
	run := func(user, stmt string, args ...any) (string, error) {
		res, err := sim.Exec("master-0", user, stmt, args...)
		if err != nil {
			return "", err
		}
		if res.Columns == nil {
			return fmt.Sprint(res.RowCount), nil
		}
		var rows []string
		for _, r := range res.Rows {
			rows = append(rows, strings.TrimSpace(fmt.Sprintln(r...)))
		}
		return strings.Join(rows, "|"), nil
	}
	for _, tc := range []struct {
		user, stmt string
		args       []any
		want       string // result, or "error: <substring>"
	}{
		// Users.
		{"crate", `CREATE USER riley WITH (password = 'x')`, nil, "1"},
		{"crate", `create user "Kala"`, nil, "1"},                                                                 // new: quoted, keeps case
		{"crate", `CREATE USER jo WITH (password = $1)`, []any{"s3cret"}, "1"},                                    // new
		{"crate", `CREATE USER ann WITH (password 'x')`, nil, "error: SQLParseException"},                         // new: '=' is required
		{"crate", `CREATE USER ann WITH (passwort = 'x')`, nil, `error: "passwort" is not a valid user property`}, // new
		{"crate", `CREATE USER riley`, nil, "error: RoleAlreadyExistsException[Role 'riley' already exists]"},
		{"crate", `ALTER USER riley SET (password = NULL)`, nil, "1"},
		{"crate", `ALTER USER nobody SET (password = 'y')`, nil, "error: RoleUnknownException[Role 'nobody' does not exist]"},
		{"crate", `ALTER USER riley SET password = 'y'`, nil, "error: SQLParseException"},
		{"crate", `DROP USER IF EXISTS nobody`, nil, "0"},
		{"crate", `DROP USER "Kala"`, nil, "1"},
		{"crate", `DROP USER nobody`, nil, "error: RoleUnknownException"},
		{"crate", `DROP USER IF riley`, nil, "error: SQLParseException"},
		{"crate", `DROP USER crate`, nil, "error: cannot drop a superuser"},
		// Cluster settings.
		{"crate", `SET GLOBAL TRANSIENT cluster.routing.allocation.enable = 'primaries'`, nil, "1"},                                                    // new: unquoted dotted name
		{"crate", `SET GLOBAL PERSISTENT "cluster.routing.rebalance.enable" TO 'none', "cluster.routing.allocation.exclude._name" = 'a, b'`, nil, "1"}, // new: two assignments
		{"crate", `SELECT settings['cluster']['routing']['allocation']['enable'], settings['cluster']['routing']['rebalance']['enable'], settings['cluster']['routing']['allocation']['exclude']['_name'] FROM sys.cluster`, nil, "primaries none a,b"},
		{"crate", `SELECT settings['cluster']['routing']['allocation']['enabled'] FROM sys.cluster`, nil, "error: ColumnUnknownException[Column settings['cluster']['routing']['allocation']['enabled'] unknown]"}, // new: was NULL
		{"crate", `SET GLOBAL TRANSIENT gateway.recover_after_time = '5m'`, nil, "error: UnsupportedOperationException[Setting 'gateway.recover_after_time' cannot be set/reset at runtime]"},
		{"crate", `SET GLOBAL TRANSIENT cluster.routing.allocation.enable = 'all', no.such = 1`, nil, "error: IllegalArgumentException[Setting 'no.such' is not supported]"}, // new
		{"crate", `SET GLOBAL TRANSIENT cluster.routing.allocation.enable 'all'`, nil, "error: SQLParseException"},
		{"crate", `SET GLOBAL LOCAL cluster.routing.allocation.enable = 'all'`, nil, "error: SQLParseException"},
		{"crate", `RESET GLOBAL cluster.routing.allocation.enable, cluster.routing.rebalance.enable`, nil, "1"}, // new: a list
		{"crate", `SELECT settings['cluster']['routing']['allocation']['enable'], settings['cluster']['routing']['rebalance']['enable'] FROM sys.cluster`, nil, "all all"},
		{"crate", `RESET GLOBAL gateway.recover_after_nodes`, nil, "error: cannot be set/reset at runtime"},
		// Tables.
		{"crate", `CREATE TABLE doc.t1 (id INT, name TEXT) CLUSTERED BY (id) INTO 2 SHARDS WITH (number_of_replicas = 0)`, nil, "1"}, // new: CLUSTERED BY
		{"crate", `CREATE TABLE IF NOT EXISTS t1 (id INT)`, nil, "0"},
		{"crate", `CREATE TABLE t1 (id INT)`, nil, "error: RelationAlreadyExists[Relation 'doc.t1' already exists.]"},
		{"crate", `CREATE TABLE t2 (id INT, day TEXT) PARTITIONED BY (day) CLUSTERED INTO 1 SHARDS`, nil, "1"}, // new: order of clauses
		{"crate", `CREATE TABLE t3 (id INT) PARTITIONED BY (day)`, nil, "error: ColumnUnknownException[Column day unknown]"},
		{"crate", `CREATE TABLE t3 (id INT) CLUSTERED INTO 0 SHARDS`, nil, "error: number of shards"},
		{"crate", `CREATE TABLE t3 (id INT) WITH (number_of_replicas = '2-1')`, nil, "error: minReplicas"},
		{"crate", `CREATE TABLE t3 (id INT) CLUSTERED 2 SHARDS`, nil, "error: SQLParseException"},
		{"crate", `CREATE TABLE t3 ()`, nil, "error: SQLParseException"},
		// Other table statements.
		{"crate", `ALTER TABLE t1 SET (number_of_replicas = 1, "routing.allocation.exclude._name" = 'x')`, nil, "-1"}, // new: two properties
		{"crate", `SELECT number_of_replicas, settings['routing']['allocation']['exclude'] FROM information_schema.tables WHERE table_name = 't1'`, nil, "1 map[_name:x]"},
		{"crate", `INSERT INTO t2 (id, day) VALUES (1, 'mon'), (2, $1)`, []any{"tue"}, "2"}, // new: rows, columns, a parameter
		{"crate", `SELECT count(*) FROM information_schema.table_partitions WHERE table_name = 't2'`, nil, "2"},
		{"crate", `ALTER TABLE t2 PARTITION (day = 'mon') SET (number_of_replicas = 0)`, nil, "-1"},
		{"crate", `ALTER TABLE t2 PARTITION (day = 'sun') SET (number_of_replicas = 0)`, nil, "error: PartitionUnknownException"},
		{"crate", `ALTER TABLE ONLY t2 PARTITION (day = 'mon') SET (number_of_replicas = 0)`, nil, "error: SQLParseException"},
		{"crate", `DROP TABLE IF EXISTS nope`, nil, "0"},
		{"crate", `DROP TABLE nope`, nil, "error: RelationUnknown[Relation 'doc.nope' unknown]"},
		{"crate", `DROP TABLE t1 CASCADE`, nil, "error: SQLParseException"},
		{"crate", `BEGIN TRANSACTION`, nil, "0"},    // new
		{"crate", `END`, nil, "0"},                  // new
		{"crate", `REFRESH TABLE t1, t2`, nil, "1"}, // new
		{"crate", `SET LICENSE 'k'`, nil, "error: SQLParseException[line 1:5: mismatched input 'LICENSE'"},
		// SELECT over the system tables.
		{"crate", `SELECT table_name, id, routing_state FROM sys.shards WHERE table_name = 't1' ORDER BY id`, nil, "t1 0 STARTED|t1 1 STARTED"},
		{"crate", `SELECT node['name'], count(*) FROM sys.shards WHERE node['name'] = ANY($1) AND table_name = 't1' GROUP BY 1`, []any{[]string{"master-0"}}, "master-0 2"},
		{"crate", `SELECT routing_state, count(*) AS n FROM sys.shards WHERE table_name = 't1' GROUP BY routing_state ORDER BY n DESC`, nil, "STARTED 2"}, // new
		{"crate", `SELECT count(*) FROM sys.shards WHERE routing_state IN ('INITIALIZING', 'RELOCATING')`, nil, "0"},
		{"crate", `SELECT count(*), sum(recovery['size']['used']), sum(recovery['size']['recovered']) FROM sys.shards WHERE routing_state IN ('INITIALIZING', 'RELOCATING')`, nil, "0 <nil> <nil>"}, // new: recovery columns
		{"crate", `SELECT count(*) FROM sys.shards WHERE routing_state NOT IN ('INITIALIZING') AND (id = 0 OR id = 1) AND NOT primary = false AND table_name = 't1'`, nil, "2"},                     // new
		{"crate", `SELECT name FROM sys.users WHERE name != 'crate' AND name <> 'jo' ORDER BY name`, nil, "riley"},                                                                                  // new
		{"crate", `SELECT name, superuser FROM sys.users WHERE name = 'nobody' OR superuser`, nil, "crate true"},                                                                                    // new
		{"crate", `SELECT count(*) FROM sys.cluster WHERE master_node IS NULL`, nil, "0"},                                                                                                           // new
		{"crate", `SELECT node FROM sys.shards WHERE id = 0 AND table_name = 't1'`, nil, "map[id:" + sim.m.upNodes()[0].id + " name:master-0]"},                                                     // new: an object column
		{"crate", `SELECT version['number'] FROM sys.nodes`, nil, "5.10.3"},
		{"crate", `SELECT current_user, current_schema, name FROM sys.cluster`, nil, "crate doc crate"},
		{"crate", `SELECT 1`, nil, "1"},
		{"crate", `SELECT max(severity) FROM sys.health WHERE table_name = 'none'`, nil, "<nil>"},
		{"crate", `SELECT nme FROM sys.nodes`, nil, "error: ColumnUnknownException[Column nme unknown]"},                  // new
		{"crate", `SELECT name FROM sys.nodes WHERE nme = 'x'`, nil, "error: ColumnUnknownException[Column nme unknown]"}, // new
		{"crate", `SELECT name FROM sys.nope`, nil, "error: RelationUnknown[Relation 'sys.nope' unknown]"},                // new
		{"crate", `SELECT name FROM nope.nodes`, nil, "error: SchemaUnknownException[Schema 'nope' unknown]"},             // new
		{"crate", `SELECT name, count(*) FROM sys.nodes`, nil, "error: 'name' must appear in the GROUP BY clause"},        // new
		{"crate", `SELECT nope(name) FROM sys.nodes`, nil, "error: UnsupportedFunctionException[Unknown function: nope(name)]"},
		// UPDATE of sys.node_checks, its WHERE evaluated over the rows (one per node and check).
		{"crate", `UPDATE sys.node_checks SET acknowledged = TRUE WHERE id = 1`, nil, "1"},
		{"crate", `UPDATE sys.node_checks SET acknowledged = $1 WHERE id IN (2, 3) AND (passed OR NOT passed)`, []any{true}, "2"}, // new
		{"crate", `SELECT id FROM sys.node_checks WHERE acknowledged ORDER BY id`, nil, "1|2|3"},
		{"crate", `UPDATE sys.node_checks SET acknowledged = TRUE WHERE nope = 1`, nil, "error: ColumnUnknownException[Column nope unknown]"}, // new
		{"crate", `UPDATE sys.nodes SET name = 'x'`, nil, "error: UPDATE of sys.nodes"},                                                       // new
		{"crate", `UPDATE sys.node_checks acknowledged = TRUE`, nil, "error: SQLParseException"},
		{"crate", `SELECT name FROM sys.nodes WHERE`, nil, "error: SQLParseException"},
		{"crate", `SELECT name sys.nodes`, nil, "error: SQLParseException"},
	} {
		got, err := run(tc.user, tc.stmt, tc.args...)
		if err != nil {
			got = "error: " + err.Error()
		}
		if want, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
			if err == nil || !strings.Contains(got, want) {
				t.Errorf("%s as %s: got %q, want an error with %q", tc.stmt, tc.user, got, want)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("%s as %s: got %q, want %q", tc.stmt, tc.user, got, tc.want)
		}
	}
}
