package cratedbsim

import (
	"fmt"
	"strings"
	"testing"
)

// TestPrivileges: GRANT, DENY and REVOKE change sys.privileges as CrateDB's
// docs/admin/privileges.rst shows (one row per class, ident and type, with state and grantor;
// the row count is what changed), queries over sys.privileges are evaluated from those rows
// (any WHERE on its columns, count(DISTINCT type)), and AL on the cluster is what user
// management needs, DENY winning. Before, the simulator answered one hard-coded query shape
// with 4 and knew only GRANT ALL PRIVILEGES TO.
func TestPrivileges(t *testing.T) {
	sim := startVersion(t, "5.10.3", nil)
	run := func(user, stmt string) (string, error) {
		res, err := sim.Exec("master-0", user, stmt)
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
	must := func(user, stmt string) string {
		t.Helper()
		out, err := run(user, stmt)
		if err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		return out
	}
	must("crate", `CREATE USER riley WITH (password = 'x')`)
	must("crate", `CREATE USER will WITH (password = 'x')`)
	must("crate", `CREATE TABLE doc.books (id INT)`)
	for _, tc := range []struct {
		user, stmt string
		want       string // result, or "error: <substring>"
	}{
		{"crate", `GRANT ALL PRIVILEGES TO will`, "4"},
		{"crate", `GRANT ALL TO will`, "0"},
		{"crate", `DENY DDL TO will`, "1"},
		{"crate", `DENY ALL TO will`, "3"},
		{"crate", `REVOKE ALL FROM will`, "4"},
		{"crate", `GRANT DQL ON SCHEMA doc TO riley`, "1"},
		{"crate", `DENY DQL ON TABLE books TO riley`, "1"},
		{"crate", `GRANT DML, DDL ON TABLE doc.books TO riley, will`, "4"},
		{"crate", `SELECT class, grantee, grantor, ident, state, type FROM sys.privileges WHERE grantee = 'riley' ORDER BY type`,
			"TABLE riley crate doc.books GRANT DDL|TABLE riley crate doc.books GRANT DML|SCHEMA riley crate doc GRANT DQL|TABLE riley crate doc.books DENY DQL"},
		{"crate", `SELECT count(DISTINCT type) FROM sys.privileges WHERE grantee = 'riley' AND class = 'TABLE'`, "3"},
		{"crate", `SELECT count(DISTINCT type) FROM sys.privileges WHERE grantee = 'riley' AND class = 'CLUSTER' AND state = 'GRANT'`, "0"},
		{"crate", `SELECT count(*) FROM sys.privileges WHERE grantee = 'will' AND ident = 'doc.books'`, "2"},
		// sys.users through the same evaluation: count(*) = N is a boolean, with or without parentheses.
		{"crate", `SELECT (count(*) = 1) FROM sys.users WHERE name = 'riley'`, "true"},
		{"crate", `SELECT count(*) = 0 FROM sys.users WHERE name = 'nobody'`, "true"},
		{"crate", `SELECT count(*) = 1 FROM sys.users WHERE name = 'nobody'`, "false"},
		// Without AL on the cluster a user manages nobody; DENY wins over a GRANT.
		{"riley", `CREATE USER kala`, "error: MissingPrivilegeException"},
		{"crate", `GRANT AL TO riley`, "1"},
		{"riley", `CREATE USER kala`, "1"},
		{"crate", `DENY AL TO riley`, "1"},
		{"riley", `DROP USER kala`, "error: MissingPrivilegeException"},
		// What CrateDB refuses.
		{"crate", `GRANT DQL TO layla`, "error: RoleUnknownException[Role 'layla' does not exist]"},
		{"crate", `GRANT DQL TO crate`, "error: Cannot alter privileges for superuser"},
		{"crate", `GRANT DQL ON TABLE doc.nope TO will`, "error: RelationUnknown"},
		{"crate", `GRANT DQL ON DATABASE x TO will`, "error: SQLParseException"},
		{"crate", `GRANT DQL will`, "error: SQLParseException"},
		{"crate", `REVOKE DQL TO will`, "error: SQLParseException"},
		{"crate", `GRANT ALL PRIVILEGES TO will;`, "4"},
	} {
		got, err := run(tc.user, tc.stmt)
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
