package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/cratedbsim"
)

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		verb string
		res  response
		want string
	}{
		{"ddl", "CREATE", response{RowCount: 1}, "CREATE OK, 1 row affected  (0.012 sec)\n"},
		{"plural", "UPDATE", response{RowCount: 3}, "UPDATE OK, 3 rows affected  (0.012 sec)\n"},
		{"table", "SELECT", response{Cols: []string{"name", "count(*)", "ok"}, Rows: [][]any{{"data-hot-0", 12.0, true}, {"b", 3.0, nil}}},
			"+------------+----------+------+\n" +
				"| name       | count(*) | ok   |\n" +
				"+------------+----------+------+\n" +
				"| data-hot-0 |       12 | TRUE |\n" +
				"| b          |        3 | NULL |\n" +
				"+------------+----------+------+\n" +
				"SELECT 2 rows in set (0.012 sec)\n"},
		{"empty", "SELECT", response{Cols: []string{"name"}},
			"+------+\n| name |\n+------+\nSELECT 0 rows in set (0.012 sec)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := format(tc.verb, &tc.res, 12*time.Millisecond); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	opts, err := parseArgs([]string{"--verify-ssl=false", "--host", "http://localhost:4200", "-c", "SELECT 1;", "--username", "system"})
	if err != nil || opts.command != "SELECT 1;" || opts.username != "system" || opts.hosts[0] != "http://localhost:4200" || opts.verify != "false" {
		t.Fatalf("opts = %+v, %v", opts, err)
	}
	opts, err = parseArgs([]string{"--hosts", "a:4200", "b:4200", "--command=SELECT 1"})
	if err != nil || len(opts.hosts) != 2 || opts.command != "SELECT 1" {
		t.Fatalf("opts = %+v, %v", opts, err)
	}
	if _, err := parseArgs([]string{"--bogus"}); err == nil {
		t.Fatal("unknown flag accepted")
	}
}

func TestAgainstSimulator(t *testing.T) {
	sim, err := cratedbsim.Start(t.Context(), cratedbsim.Config{
		StaticNodes:    []cratedbsim.StaticNode{{Name: "master-0", Pod: "crate-master-c-0", Master: true, Data: true}},
		AddrBase:       "127.0.3",
		EphemeralPorts: true,
		TickInterval:   -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	env := map[string]string{simURLEnv: "http://" + sim.Nodes()[0].HTTPAddr}
	crash := func(stmt string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := run([]string{"--verify-ssl=false", "--host", "http://localhost:4200", "-c", stmt}, func(k string) string { return env[k] }, &out, &errOut)
		return out.String(), errOut.String(), code
	}

	out, _, code := crash(`SET LICENSE 'secret-key';`)
	if code != 0 || !strings.HasPrefix(out, "SET OK, 1 row affected") {
		t.Fatalf("license: %d %q", code, out)
	}
	out, _, code = crash(`CREATE USER "system" WITH (password = 'pw');`)
	if code != 0 || !strings.HasPrefix(out, "CREATE OK, 1 row affected") {
		t.Fatalf("create: %d %q", code, out)
	}
	out, errOut, code := crash(`CREATE USER "system" WITH (password = 'pw');`)
	if code != 1 || out != "" || strings.TrimSpace(errOut) != "RoleAlreadyExistsException[Role 'system' already exists]" {
		t.Fatalf("duplicate: %d %q %q", code, out, errOut)
	}
	out, _, code = crash(`ALTER USER "system" SET (password = 'pw2'); GRANT ALL PRIVILEGES TO "system";`)
	if code != 0 || !strings.Contains(out, "ALTER OK") || !strings.Contains(out, "GRANT OK") {
		t.Fatalf("alter+grant: %d %q", code, out)
	}
	out, _, code = crash(`SELECT name FROM sys.nodes`)
	if code != 0 || !strings.Contains(out, "| master-0 |") || !strings.Contains(out, "SELECT 1 row in set") {
		t.Fatalf("select: %d %q", code, out)
	}
	for _, st := range sim.Statements() {
		if strings.Contains(st.Statement, "secret-key") || strings.Contains(st.Statement, "pw") && !strings.Contains(st.Statement, "***") {
			t.Fatalf("secret in statement log: %q", st.Statement)
		}
	}
	env[simURLEnv] = "http://127.0.0.1:1"
	if _, errOut, code := crash("SELECT 1"); code != 1 || !strings.HasPrefix(errOut, "CONNECT ERROR") {
		t.Fatalf("unreachable: %d %q", code, errOut)
	}
}
