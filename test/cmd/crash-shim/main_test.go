package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim"
)

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		name        string
		verb        string
		res         response
		wantTable   string
		wantSummary string
	}{
		{"ddl", "CREATE", response{RowCount: 1}, "", "CREATE OK, 1 row affected (0.012 sec)"},
		{"plural", "UPDATE", response{RowCount: 3}, "", "UPDATE OK, 3 rows affected (0.012 sec)"},
		{"table", "SELECT", response{Cols: []string{"name", "count(*)", "ok"}, Rows: [][]any{{"data-hot-0", 12.0, true}, {"b", 3.0, nil}}},
			"+------------+----------+------+\n" +
				"| name       | count(*) | ok   |\n" +
				"+------------+----------+------+\n" +
				"| data-hot-0 |       12 | TRUE |\n" +
				"| b          |        3 | NULL |\n" +
				"+------------+----------+------+\n",
			"SELECT 2 rows in set (0.012 sec)"},
		{"empty", "SELECT", response{Cols: []string{"name"}},
			"+------+\n| name |\n+------+\n", "SELECT 0 rows in set (0.012 sec)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, summary := format(tc.verb, &tc.res, 12*time.Millisecond)
			if table != tc.wantTable || summary != tc.wantSummary {
				t.Errorf("got\n%s%s\nwant\n%s%s", table, summary, tc.wantTable, tc.wantSummary)
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	opts, err := parseArgs([]string{"--verify-ssl=false", "--host", "http://localhost:4200", "-c", "SELECT 1;", "--username", "system"})
	if err != nil || opts.command != "SELECT 1;" || opts.username != "system" || opts.hosts[0] != "http://localhost:4200" || opts.verify {
		t.Fatalf("opts = %+v, %v", opts, err)
	}
	opts, err = parseArgs([]string{"--hosts", "a:4200", "b:4200", "--command=SELECT 1"})
	if err != nil || len(opts.hosts) != 2 || opts.command != "SELECT 1" || !opts.verify {
		t.Fatalf("opts = %+v, %v", opts, err)
	}
	for _, bad := range [][]string{
		{"--bogus"},
		{"--verify-ssl"},                // crash requires a value
		{"--verify-ssl", "maybe"},       // not a boolean
		{"--h", "x"},                    // ambiguous: --help, --history, --hosts
		{"-c", "SELECT 1", "--sysinfo"}, // mutually exclusive
	} {
		if _, err := parseArgs(bad); err == nil {
			t.Errorf("parseArgs(%q) accepted", bad)
		}
	}
}

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		host, want string
	}{
		{"localhost:4200", "http://127.0.0.1:9"},
		{"http://localhost:4200", "http://127.0.0.1:9"},
		{"https://localhost:4200", "https://127.0.0.1:9"},
		{":4200", "http://127.0.0.1:9"},
		{"localhost", "http://127.0.0.1:9"},
		{"http://localhost:4201", ""},
		{"http://crate-data-hot-x-0.crate:4200", ""},
	} {
		got, _, ok := target(tc.host, "127.0.0.1:9")
		if !ok {
			got = ""
		}
		if got != tc.want {
			t.Errorf("target(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
	// Without the kwok mapping (a real container) crash connects where it was told.
	for _, tc := range []struct {
		host, want string
	}{
		{"localhost:4200", "http://localhost:4200"},
		{"https://localhost:4200", "https://localhost:4200"},
		{"localhost", "http://localhost:4200"},
		{"http://crate-data-hot-x-0.crate:4201", "http://crate-data-hot-x-0.crate:4201"},
		{"ftp://localhost:4200", ""},
	} {
		got, _, ok := target(tc.host, "")
		if !ok {
			got = ""
		}
		if got != tc.want {
			t.Errorf("target(%q) without mapping = %q, want %q", tc.host, got, tc.want)
		}
	}
}

// startSim starts a one-node simulator of the given version with the CrateDB operator's
// host-based authentication (trust for crate from localhost, passwords else).
func startSim(t *testing.T, version string) (*cratedbsim.Sim, map[string]string) {
	t.Helper()
	sim, err := cratedbsim.Start(t.Context(), cratedbsim.Config{
		StaticNodes: []cratedbsim.StaticNode{{Name: "master-0", Pod: "crate-master-c-0", Master: true, Data: true, Settings: map[string]string{
			"auth.host_based.enabled":          "true",
			"auth.host_based.config.0.user":    "crate",
			"auth.host_based.config.0.address": "_local_",
			"auth.host_based.config.0.method":  "trust",
			"auth.host_based.config.99.method": "password",
		}}},
		Version:      version,
		TickInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	return sim, map[string]string{simAddrEnv: sim.Nodes()[0].HTTPAddr}
}

type crashRun struct {
	out, err string
	code     int
}

func crash(env map[string]string, stdin string, args ...string) crashRun {
	var out, errOut bytes.Buffer
	var in io.Reader = strings.NewReader(stdin)
	code := run(append([]string{"--verify-ssl=false", "--host", "http://localhost:4200"}, args...), func(k string) string { return env[k] }, in, false, &out, &errOut)
	return crashRun{out.String(), errOut.String(), code}
}

func TestAgainstSimulator(t *testing.T) {
	sim, env := startSim(t, "5.10.3")
	r := crash(env, "", "-c", `SET LICENSE 'secret-key';`)
	if r.code != 1 || !strings.Contains(r.err, "SQLParseException") {
		t.Fatalf("SET LICENSE on 5.10 must fail: %+v", r)
	}
	r = crash(env, "", "-c", `CREATE USER "system" WITH (password = 'pw');`)
	if r.code != 0 || r.out != "" || !strings.HasPrefix(r.err, "CONNECT OK\nCREATE OK, 1 row affected (") {
		t.Fatalf("create: %+v", r)
	}
	r = crash(env, "", "-c", `CREATE USER "system" WITH (password = 'pw');`)
	if r.code != 1 || r.out != "" || r.err != "CONNECT OK\nRoleAlreadyExistsException[Role 'system' already exists]\n" {
		t.Fatalf("duplicate: %+v", r)
	}
	// Like crash, a failed statement does not stop the next ones; the exit code says 1.
	r = crash(env, "", "-c", `CREATE USER "system" WITH (password = 'x'); ALTER USER "system" SET (password = 'pw2'); GRANT ALL PRIVILEGES TO "system";`)
	if r.code != 1 || !strings.Contains(r.err, "AlreadyExists") || !strings.Contains(r.err, "ALTER OK") || !strings.Contains(r.err, "GRANT OK") {
		t.Fatalf("continue after error: %+v", r)
	}
	r = crash(env, "", "-c", `SELECT name FROM sys.nodes`)
	if r.code != 0 || !strings.Contains(r.out, "| master-0 |") || !strings.Contains(r.err, "SELECT 1 row in set") {
		t.Fatalf("select: %+v", r)
	}
	// -U with $CRATEPW: password authentication.
	env["CRATEPW"] = "wrong"
	if r = crash(env, "", "-U", "system", "-c", "SELECT 1"); r.code != 1 || !strings.Contains(r.err, `password authentication failed for user "system"`) {
		t.Fatalf("wrong password: %+v", r)
	}
	env["CRATEPW"] = "pw2"
	if r = crash(env, "", "-U", "system", "-c", "SELECT 1"); r.code != 0 {
		t.Fatalf("right password: %+v", r)
	}
	delete(env, "CRATEPW")
	for _, st := range sim.Statements() {
		if strings.Contains(st.Statement, "secret-key") || strings.Contains(st.Statement, "pw") && !strings.Contains(st.Statement, "***") {
			t.Fatalf("secret in statement log: %q", st.Statement)
		}
	}
	// https against a plain HTTP node fails to connect, as it would with CrateDB.
	var out, errOut bytes.Buffer
	if code := run([]string{"--verify-ssl=false", "--hosts", "https://localhost:4200", "-c", "SELECT 1"}, func(k string) string { return env[k] }, strings.NewReader(""), false, &out, &errOut); code != 1 || !strings.HasPrefix(errOut.String(), "CONNECT ERROR") {
		t.Fatalf("https to http node: %d %q", code, errOut.String())
	}
	env[simAddrEnv] = "127.0.0.1:1"
	if r = crash(env, "", "-c", "SELECT 1"); r.code != 1 || !strings.HasPrefix(r.err, "CONNECT ERROR") {
		t.Fatalf("unreachable: %+v", r)
	}
}

func TestStdin(t *testing.T) {
	sim, env := startSim(t, "5.2.11")
	// Statements on stdin; the password never appears in the arguments.
	r := crash(env, "SET LICENSE 'k';\nCREATE USER \"system\"\n  WITH (password = 'pw');\n\\q\nCREATE USER never;\n")
	if r.code != 0 || !strings.Contains(r.err, "SET OK, 1 row affected") || !strings.Contains(r.err, "CREATE OK, 1 row affected") || !strings.HasSuffix(r.err, "Bye!\n") {
		t.Fatalf("stdin: %+v", r)
	}
	// \q ended the input: the statement after it did not run.
	if res, err := sim.Exec("test", "crate", "SELECT count(*) FROM sys.users WHERE name = 'never'"); err != nil || res.Rows[0][0] != int64(0) {
		t.Fatalf("statement after \\q ran: %v %v", res, err)
	}
	// 5.2 reports the pre-5.6 exception name.
	r = crash(env, "CREATE USER \"system\" WITH (password = 'pw');")
	if r.code != 1 || !strings.Contains(r.err, "UserAlreadyExistsException[User 'system' already exists]") {
		t.Fatalf("5.2 duplicate: %+v", r)
	}
	// -c wins over stdin, as in crash.
	r = crash(env, "CREATE USER other;", "-c", "SELECT 1")
	if res, _ := sim.Exec("test", "crate", "SELECT count(*) FROM sys.users WHERE name = 'other'"); r.code != 0 || res.Rows[0][0] != int64(0) {
		t.Fatalf("-c with stdin: %+v", r)
	}
	// A terminal on stdin and no -c would start crash's interactive shell.
	var out, errOut bytes.Buffer
	if code := run([]string{"--hosts", "localhost:4200"}, func(k string) string { return env[k] }, strings.NewReader(""), true, &out, &errOut); code != 1 {
		t.Fatalf("tty stdin: %d %q", code, errOut.String())
	}
}

// TestStdinRunsNothingBeforeEOF: crash reads all of stdin before it runs anything, so "\q"
// on an open stdin ends nothing; closing stdin runs it all.
func TestStdinRunsNothingBeforeEOF(t *testing.T) {
	sim, env := startSim(t, "5.10.3")
	pr, pw := io.Pipe()
	done := make(chan crashRun, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := run([]string{"--hosts", "localhost:4200"}, func(k string) string { return env[k] }, pr, false, &out, &errOut)
		done <- crashRun{out.String(), errOut.String(), code}
	}()
	// An io.Pipe write returns once the reader has taken all of it: when the second write
	// returns, crash has read past "\q" and is still reading (a crash that ended at "\q" or
	// ran statements as they came would not take the second write).
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(pw, "CREATE USER early;\n\\q\n")
		if err == nil {
			_, err = io.WriteString(pw, "SELECT 1;\n")
		}
		wrote <- err
	}()
	users := func() int64 {
		res, err := sim.Exec("test", "crate", "SELECT count(*) FROM sys.users WHERE name = 'early'")
		if err != nil {
			t.Fatal(err)
		}
		return res.Rows[0][0].(int64)
	}
	select {
	case r := <-done:
		t.Fatalf("crash ended before EOF: %+v", r)
	case err := <-wrote:
		if err != nil {
			t.Fatalf("write to crash's stdin: %v", err)
		}
	}
	if users() != 0 {
		t.Fatal("a statement ran before stdin ended")
	}
	_ = pw.Close()
	r := <-done
	if r.code != 0 || users() != 1 || !strings.HasSuffix(r.err, "Bye!\n") {
		t.Fatalf("after EOF: %+v", r)
	}
}
