// Command crash-shim stands in for CrateDB's crash CLI inside simulated pods. It is installed as
// `crash` on kwok's PATH (see test/sim/cratedbsim/bedwire) and is part of the CrateDB
// SIMULATOR, not a client for real clusters.
//
// It follows crash 0.32 (crate/crash, src/crate/crash/command.py) where procedures depend on
// it:
//   - options as crash's argparse parser takes them: --hosts (and unambiguous prefixes such as
//     --host), -c/--command, -U/--username, --verify-ssl <bool> (a value is required),
//     --ca-cert-file, --timeout; -c and --sysinfo exclude each other. The password comes from
//     $CRATEPW.
//   - statements from -c, or else from stdin when stdin is not a terminal. Crash reads ALL of
//     stdin (until EOF) before it runs anything; then it runs the lines in order, and a line
//     starting with a backslash is a client command (\q ends crash with the exit code so far).
//     So `\q` does not end crash before EOF: a caller must close stdin.
//   - every statement runs even after a failed one; the exit code is 1 if any failed.
//   - messages go to stderr: "CONNECT OK", "CREATE OK, 1 row affected (0.012 sec)",
//     "SELECT 2 rows in set (0.003 sec)", errors; result tables go to stdout.
//
// Under kwok the pod's localhost:4200 is the address in $CRATEDB_SIM_HTTP_ADDR (set by the exec
// mapping); in the simulator image on real nodes that variable is unset and crash connects to
// the host it was given, the pod's own port. The scheme (http or https) is the one crash was given, so http against a node
// with ssl.http.enabled fails as it does with CrateDB. Statements are never echoed: they may
// hold passwords.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"
)

// simAddrEnv names the address the pod's localhost:4200 maps to, set by the exec mapping.
const simAddrEnv = "CRATEDB_SIM_HTTP_ADDR"

func main() {
	stdinTTY := term.IsTerminal(int(os.Stdin.Fd()))
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, stdinTTY, os.Stdout, os.Stderr))
}

type options struct {
	hosts    []string
	username string
	command  string
	hasCmd   bool
	sysinfo  bool
	verify   bool
	caFile   string
	timeout  time.Duration
}

// longOptions are crash's long options and whether they take a value; argparse also accepts
// any unambiguous prefix of them.
var longOptions = map[string]bool{
	"--verbose": false, "--no-autocomplete": false, "--autocapitalize": false, "--username": true,
	"--password": false, "--schema": true, "--history": true, "--config": true, "--command": true,
	"--sysinfo": false, "--hosts": true, "--timeout": true, "--verify-ssl": true, "--cert-file": true,
	"--key-file": true, "--ca-cert-file": true, "--format": true, "--version": false, "--help": false,
}

var shortOptions = map[string]string{"-v": "--verbose", "-A": "--no-autocomplete", "-a": "--autocapitalize",
	"-U": "--username", "-W": "--password", "-c": "--command", "-h": "--help"}

// resolveOption maps an option as written to crash's long option name.
func resolveOption(name string) (string, error) {
	if long, ok := shortOptions[name]; ok {
		return long, nil
	}
	if _, ok := longOptions[name]; ok {
		return name, nil
	}
	var matches []string
	for o := range longOptions {
		if strings.HasPrefix(o, name) && strings.HasPrefix(name, "--") && len(name) > 2 {
			matches = append(matches, o)
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		return "", fmt.Errorf("unrecognized arguments: %s", redactArg(name))
	}
	return "", fmt.Errorf("ambiguous option: %s could match %s", name, strings.Join(matches, ", "))
}

// parseBool is crash's boolean() argument type.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "yes", "true", "t", "1":
		return true, nil
	case "no", "false", "f", "0":
		return false, nil
	}
	return false, fmt.Errorf("argument --verify-ssl: Invalid choice `%s`, expected one of: [yes, true, t, 1, no, false, f, 0]", v)
}

func parseArgs(args []string) (options, error) {
	opts := options{verify: true, timeout: 5 * time.Second}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return opts, fmt.Errorf("unrecognized arguments: %s", redactArg(a))
		}
		written, value, hasValue := strings.Cut(a, "=")
		name, err := resolveOption(written)
		if err != nil {
			return opts, err
		}
		if !longOptions[name] {
			if hasValue {
				return opts, fmt.Errorf("argument %s: ignored explicit argument", written)
			}
			if name == "--sysinfo" {
				opts.sysinfo = true
			}
			continue
		}
		if !hasValue {
			// --hosts takes any number of values (nargs='*'); the others exactly one.
			if name == "--hosts" {
				opts.hosts = nil
				for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
					i++
					opts.hosts = append(opts.hosts, args[i])
				}
				continue
			}
			if i+1 >= len(args) || (strings.HasPrefix(args[i+1], "-") && name != "--command") {
				return opts, fmt.Errorf("argument %s: expected one argument", written)
			}
			i++
			value = args[i]
		}
		switch name {
		case "--hosts":
			opts.hosts = []string{value}
		case "--command":
			opts.command, opts.hasCmd = value, true
		case "--username":
			opts.username = value
		case "--verify-ssl":
			if opts.verify, err = parseBool(value); err != nil {
				return opts, err
			}
		case "--ca-cert-file":
			opts.caFile = value
		case "--timeout":
			// "<connect_sec>" or "<connect_sec>,<read_sec>"; the connect part bounds dialing.
			first, _, _ := strings.Cut(value, ",")
			if f, err := strconv.ParseFloat(first, 64); err == nil && f > 0 {
				opts.timeout = time.Duration(f * float64(time.Second))
			}
		}
	}
	if opts.hasCmd && opts.sysinfo {
		return opts, errors.New("argument --sysinfo: not allowed with argument -c/--command")
	}
	if len(opts.hosts) == 0 {
		opts.hosts = []string{"localhost:4200"}
	}
	return opts, nil
}

// redactArg keeps error messages free of statement text.
func redactArg(a string) string {
	if len(a) > 20 {
		return "<argument>"
	}
	return a
}

// target resolves crash's host argument ("localhost:4200", ":4200", "https://localhost:4200")
// to the URL of the simulated node behind the pod's loopback; ok false when the host is not
// the pod itself (nothing else is reachable from a simulated pod).
func target(host, simAddr string) (base, serverName string, ok bool) {
	scheme := "http"
	if s, rest, found := strings.Cut(host, "://"); found {
		scheme, host = s, rest
	}
	host = strings.TrimRight(host, "/")
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h, port = host, "4200"
	}
	if h == "" {
		h = "localhost"
	}
	if scheme != "http" && scheme != "https" {
		return "", "", false
	}
	if simAddr == "" {
		// In a container of the simulator image on a real node (test/testbed/images.go)
		// the pod's own ports serve its node: connect where crash was told, as crash does.
		return scheme + "://" + net.JoinHostPort(h, port), h, true
	}
	// Under kwok only the pod's localhost:4200 is mapped (to $CRATEDB_SIM_HTTP_ADDR).
	if port != "4200" || (h != "localhost" && h != "127.0.0.1" && h != "::1") {
		return "", "", false
	}
	return scheme + "://" + simAddr, h, true
}

func run(args []string, getenv func(string) string, stdin io.Reader, stdinTTY bool, stdout, stderr io.Writer) int {
	opts, err := parseArgs(args)
	if err != nil {
		// crash catches the parser's error, prints it and exits 1.
		fmt.Fprintln(stderr, err)
		return 1
	}
	if opts.sysinfo {
		fmt.Fprintln(stderr, "crash (CrateDB simulator shim): --sysinfo is not simulated")
		return 1
	}
	if !opts.hasCmd && stdinTTY {
		fmt.Fprintln(stderr, "crash (CrateDB simulator shim): the interactive shell is not simulated; use -c or stdin")
		return 1
	}
	// crash connects first, then reads its input.
	c, err := connect(opts, getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintln(stderr, "CONNECT OK")
	var lines []string
	if opts.hasCmd {
		lines = strings.Split(opts.command, "\n")
	} else {
		// Like crash: every line of stdin is read before anything runs.
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		if err := sc.Err(); err != nil {
			fmt.Fprintf(stderr, "read stdin: %v\n", err)
			return 1
		}
	}
	sh := &shell{client: c, stdout: stdout, stderr: stderr}
	if quit := sh.processLines(lines); quit {
		fmt.Fprintln(stderr, "Bye!")
	}
	return sh.exitCode
}

// connect checks the server as crash does on start: GET / (its version), then the session
// query. A 401 (host-based authentication, a wrong password) ends crash.
func connect(opts options, getenv func(string) string) (*client, error) {
	var tlsCfg *tls.Config
	base, serverName, ok := target(opts.hosts[0], getenv(simAddrEnv))
	if !ok {
		return nil, errors.New("CONNECT ERROR")
	}
	if strings.HasPrefix(base, "https://") {
		tlsCfg = &tls.Config{ServerName: serverName, InsecureSkipVerify: !opts.verify, MinVersion: tls.VersionTLS12} //nolint:gosec // --verify-ssl=false asks for it
		if opts.caFile != "" {
			pem, err := os.ReadFile(opts.caFile)
			if err != nil {
				return nil, fmt.Errorf("argument --ca-cert-file: %w", err)
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			tlsCfg.RootCAs = pool
		}
	}
	c := &client{base: base, user: opts.username, password: getenv("CRATEPW"),
		http: &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, DialContext: (&net.Dialer{Timeout: opts.timeout}).DialContext}}}
	ctx := context.Background()
	if _, err := c.do(ctx, http.MethodGet, "/", nil); err != nil {
		var se *sqlError
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, errors.New("CONNECT ERROR")
	}
	if _, err := c.sql(ctx, "SELECT current_user, current_schema, name FROM sys.cluster"); err != nil {
		var se *sqlError
		if errors.As(err, &se) && se.status == http.StatusUnauthorized {
			return nil, err
		}
		// crash only warns when it cannot load the session information.
		return c, nil
	}
	return c, nil
}

type shell struct {
	client   *client
	stdout   io.Writer
	stderr   io.Writer
	exitCode int
}

// processLines is crash's _process_lines: SQL lines accumulate until a backslash command,
// which first runs the SQL before it. It reports whether \q ended the shell.
func (sh *shell) processLines(lines []string) bool {
	var sqlLines []string
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, `\`) {
			sh.processSQL(strings.Join(sqlLines, "\n"))
			sqlLines = nil
			cmd, _, _ := strings.Cut(strings.TrimPrefix(line, `\`), " ")
			switch strings.TrimRight(strings.ToLower(cmd), ";") {
			case "q":
				return true
			case "":
			default:
				fmt.Fprintf(sh.stderr, "crash (CrateDB simulator shim): command \\%s is not simulated\n", cmd)
				sh.exitCode = 1
			}
			continue
		}
		sqlLines = append(sqlLines, line)
	}
	sh.processSQL(strings.Join(sqlLines, "\n"))
	return false
}

func (sh *shell) processSQL(text string) {
	for _, stmt := range splitStatements(text) {
		began := time.Now()
		res, err := sh.client.sql(context.Background(), stmt)
		if err != nil {
			var se *sqlError
			if errors.As(err, &se) {
				fmt.Fprintln(sh.stderr, se.Message)
			} else {
				// crash: a lost connection is a warning, and the statement failed.
				fmt.Fprintln(sh.stderr, "Use \\connect <server> to connect to one or more servers first.")
			}
			sh.exitCode = 1
			continue
		}
		table, summary := format(verb(stmt), res, time.Since(began))
		fmt.Fprint(sh.stdout, table)
		fmt.Fprintln(sh.stderr, summary)
	}
}

type response struct {
	Cols     []string `json:"cols"`
	Rows     [][]any  `json:"rows"`
	RowCount int64    `json:"rowcount"`
	Duration float64  `json:"duration"`
}

type sqlError struct {
	Message string `json:"message"`
	Code    int    `json:"code"`
	status  int
}

func (e *sqlError) Error() string { return e.Message }

type client struct {
	base, user, password string
	http                 *http.Client
}

func (c *client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("server at %s is not available", c.base)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error sqlError `json:"error"`
		}
		if json.Unmarshal(data, &e) != nil || e.Error.Message == "" {
			// 401 answers are plain text.
			msg := strings.TrimSpace(string(data))
			if msg == "" {
				msg = resp.Status
			}
			return nil, &sqlError{Message: msg, status: resp.StatusCode}
		}
		e.Error.status = resp.StatusCode
		return nil, &e.Error
	}
	return data, nil
}

func (c *client) sql(ctx context.Context, stmt string) (*response, error) {
	body, err := json.Marshal(map[string]any{"stmt": stmt})
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	data, err := c.do(ctx, http.MethodPost, "/_sql", body)
	if err != nil {
		return nil, err
	}
	var out response
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	return &out, nil
}

// verb is crash's command word: the statement's first word, upper-cased.
func verb(stmt string) string {
	f := strings.Fields(stmt)
	if len(f) == 0 {
		return ""
	}
	return strings.ToUpper(strings.TrimRight(f[0], ";("))
}

// splitStatements splits on semicolons outside quotes and comments, dropping empty pieces.
func splitStatements(sql string) []string {
	var out []string
	start := 0
	var quote byte
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == ';':
			if s := strings.TrimSpace(sql[start:i]); s != "" {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	if s := strings.TrimSpace(sql[start:]); s != "" {
		out = append(out, s)
	}
	return out
}
