package cratedbtest

import (
	"fmt"
	"strings"
	"testing"
)

// TestFakeAnswersFromState: the fake parses each statement by CrateDB's grammar and answers
// from its state, whatever the statement's spelling. Before, it matched the engine's exact
// SQL texts and answered any "SELECT count(DISTINCT type) FROM sys.privileges..." with a
// hard-coded 4 once GRANT ALL PRIVILEGES had run: every case marked "new" failed (a DENY or a
// differently written statement was unsupported, the privileges count ignored its WHERE).
func TestFakeAnswersFromState(t *testing.T) {
	d := New("n1", "n2")
	d.Users["crate"] = ""
	d.Shards["n1"], d.Shards["n2"] = 3, 1
	d.ShardBytes = 10
	d.DrainPerPoll = 0
	c := &conn{d: d, pod: "n1"}
	const grants = `SELECT count(DISTINCT type) FROM sys.privileges WHERE grantee = $1 AND class = 'CLUSTER' AND state = 'GRANT'`
	for _, tc := range []struct {
		stmt string
		args []any
		want string // rows, "ok" for a write, or "error: <substring>"
	}{
		{`CREATE USER "app" WITH (password = $1)`, []any{"pw"}, "ok"},
		{`create user app with (password = 'x')`, nil, "error: RoleAlreadyExistsException[Role 'app' already exists]"}, // new
		{`GRANT ALL PRIVILEGES TO "app"`, nil, "ok"},
		{grants, []any{"app"}, "[[4]]"},
		{`DENY AL TO app`, nil, "ok"},   // new
		{grants, []any{"app"}, "[[3]]"}, // new: was 4
		{grants, []any{"nobody"}, "[[0]]"},
		{`SELECT count(DISTINCT type) FROM sys.privileges WHERE grantee = $1 AND state = 'DENY'`, []any{"app"}, "[[1]]"}, // new: was 4
		{`REVOKE ALL FROM app`, nil, "ok"}, // new
		{grants, []any{"app"}, "[[0]]"},    // new: was 4
		{`GRANT DQL TO nobody`, nil, "error: RoleUnknownException"},
		{`SET GLOBAL TRANSIENT cluster.routing.allocation.exclude._name = 'n1'`, nil, "ok"}, // new: unquoted
		{`SELECT settings['cluster']['routing']['allocation']['exclude']['_name'] FROM sys.cluster`, nil, "[[n1]]"},
		{`SET GLOBAL PERSISTENT "cluster.routing.allocation.enable" TO 'none'`, nil, "ok"}, // new: PERSISTENT, TO
		{`SELECT settings['cluster']['routing']['allocation']['enable'] FROM sys.cluster`, nil, "[[none]]"},
		{`RESET GLOBAL "cluster.routing.allocation"`, nil, "ok"}, // new: a prefix
		{`SELECT settings['cluster']['routing']['allocation']['enable'], settings['cluster']['routing']['allocation']['exclude']['_name'] FROM sys.cluster`, nil, "[[all ]]"},
		{`SET GLOBAL "gateway.expected_data_nodes" = 3`, nil, "error: cannot be set/reset at runtime"},                                                                        // new
		{`SELECT node['name'], count(*) FROM sys.shards WHERE node['name'] = ANY($1) GROUP BY 1 ORDER BY 2 DESC`, []any{[]string{"n1", "n2"}}, "[[n1 3] [n2 1]]"},             // new: ORDER BY
		{`SELECT node['name'], count(*), sum(size) FROM sys.shards WHERE node['name'] = ANY($1) GROUP BY 1 ORDER BY 1`, []any{[]string{"n1", "n2"}}, "[[n1 3 30] [n2 1 10]]"}, // new: sizes
		{`SELECT count(*) FROM sys.shards WHERE node['name'] IN ('n2')`, nil, "[[1]]"},                                                                                        // new
		{`SELECT name FROM sys.nodes WHERE name <> 'n1'`, nil, "[[n2]]"},                                                                                                      // new
		{`SELECT nam FROM sys.nodes`, nil, "error: ColumnUnknownException[Column nam unknown]"},                                                                               // new
		{`UPDATE sys.node_checks SET acknowledged = TRUE WHERE id IN (1, 2)`, nil, "ok"},                                                                                      // new
		{`SELECT id FROM sys.node_checks WHERE acknowledged ORDER BY id`, nil, "[[1] [2]]"},
	} {
		rows, err := c.Query(t.Context(), tc.stmt, tc.args...)
		got := "ok"
		switch {
		case err != nil:
			got = "error: " + err.Error()
		case rows != nil || strings.HasPrefix(strings.ToUpper(tc.stmt), "SELECT"):
			got = fmt.Sprint(rows)
		}
		if want, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
			if err == nil || !strings.Contains(got, want) {
				t.Errorf("%s: got %q, want an error with %q", tc.stmt, got, want)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.stmt, got, tc.want)
		}
	}
	if !d.Acked || !d.AckedRecover {
		t.Error("UPDATE sys.node_checks did not acknowledge both checks")
	}
}
