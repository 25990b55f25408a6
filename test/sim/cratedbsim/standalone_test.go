package cratedbsim

import (
	"fmt"
	"strings"
	"testing"
)

// TestStandalone: Query and ParseCommand, for callers with their own state, parse and
// evaluate as the simulator does.
func TestStandalone(t *testing.T) {
	nodes := Table{Columns: []string{"name", "version['number']", "attributes"}, Rows: [][]any{
		{"n1", "5.10.1", map[string]any{"zone": "a"}}, {"n2", "5.10.1", map[string]any{"zone": "b"}},
	}}
	tables := func(name string) (Table, bool) {
		if name == "sys.nodes" {
			return nodes, true
		}
		return Table{}, false
	}
	for _, tc := range []struct {
		stmt string
		args []any
		want string
	}{
		{`SELECT name, attributes['zone'] FROM sys.nodes WHERE name = ANY($1) ORDER BY name DESC`, []any{[]string{"n1", "n2"}}, "[name attributes['zone']] [[n2 b] [n1 a]]"},
		{`SELECT count(*), version FROM sys.nodes GROUP BY 2`, nil, "[count(*) version] [[2 map[number:5.10.1]]]"},
		{`SELECT current_user`, nil, "[current_user] [[u]]"},
		{`SELECT name FROM sys.shards`, nil, "error: RelationUnknown[Relation 'sys.shards' unknown]"},
		{`SELECT zone FROM sys.nodes`, nil, "error: ColumnUnknownException[Column zone unknown]"},
		{`SELECT 1; SELECT 2`, nil, "error: SQLParseException[expected exactly one statement"},
	} {
		cols, rows, err := Query(tc.stmt, "u", tc.args, tables)
		got := fmt.Sprint(cols, " ", rows)
		if err != nil {
			got = "error: " + err.Error()
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.stmt, got, tc.want)
		}
	}
	for _, tc := range []struct {
		stmt string
		args []any
		want string
	}{
		{`CREATE USER "app" WITH (password = $1);`, []any{"pw"}, "CREATE USER app pw"},
		{`ALTER USER app SET (password = NULL)`, nil, "ALTER USER app <nil>"},
		{`SET GLOBAL TRANSIENT cluster.routing.allocation.enable = 'PRIMARIES'`, nil, "SET GLOBAL [{cluster.routing.allocation.enable primaries}] false"},
		{`SET GLOBAL "cluster.routing.allocation.awareness.attributes" = 'zone'`, nil, "error: UnsupportedOperationException"},
		{`RESET GLOBAL "cluster.routing.allocation.exclude._name"`, nil, "RESET GLOBAL [cluster.routing.allocation.exclude._name]"},
		{`GRANT ALL PRIVILEGES TO "app"`, nil, "GRANT [AL DDL DML DQL] CLUSTER [] [app]"},
		{`GRANT NOPE TO "app"`, nil, "error: IllegalArgumentException[Unknown privilege type 'NOPE']"},
		{`SET LICENSE 'k'`, nil, "SET LICENSE k"},
		{`UPDATE sys.node_checks SET acknowledged = TRUE WHERE id = 2`, nil, "UPDATE sys.node_checks map[acknowledged:true] true false"},
		{`DELETE FROM sys.nodes`, nil, "error: SQLParseException"},
	} {
		c, err := ParseCommand(tc.stmt, "crate", tc.args)
		var got string
		switch {
		case err != nil:
			got = "error: " + err.Error()
		case c.Verb == "CREATE USER" || c.Verb == "ALTER USER":
			pw := "<nil>"
			if c.Password != nil {
				pw = *c.Password
			}
			got = c.Verb + " " + c.User + " " + pw
		case c.Verb == "SET GLOBAL":
			got = fmt.Sprint(c.Verb, " ", c.Settings, " ", c.Persistent)
		case c.Verb == "RESET GLOBAL":
			got = fmt.Sprint(c.Verb, " ", c.Reset)
		case c.Verb == "GRANT":
			got = fmt.Sprint(c.Verb, " ", c.Privileges, " ", c.Class, " ", c.Idents[:0], " ", c.Grantees)
		case c.Verb == "SET LICENSE":
			got = c.Verb + " " + c.License
		case c.Verb == "UPDATE":
			checks := Table{Columns: []string{"id"}}
			yes, _ := c.Where(checks, []any{int32(2)})
			no, _ := c.Where(checks, []any{int32(1)})
			got = fmt.Sprint(c.Verb, " ", c.Table, " ", c.Values, " ", yes, " ", no)
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.stmt, got, tc.want)
		}
	}
}
