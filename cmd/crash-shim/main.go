// Command crash-shim stands in for CrateDB's crash CLI inside simulated pods. It is installed as
// `crash` on kwok's PATH (see internal/sim/cratedbsim/bedwire) and is part of the CrateDB
// SIMULATOR, not a client for real clusters.
//
// It accepts the arguments procedures pass to crash, e.g.
//
//	crash --verify-ssl=false --host http://localhost:4200 -c "CREATE USER ...;"
//
// ignores the host (inside a real pod it is the pod's own node) and sends each statement to
// the simulated node of its pod, named by $CRATEDB_SIM_URL, through CrateDB's HTTP endpoint
// POST /_sql. Output mimics crash: "CREATE OK, 1 row affected  (0.012 sec)", a table for
// queries, and the CrateDB error message on stderr with exit code 1. Statements are never
// echoed, as they may hold passwords.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// simURLEnv names the simulated node's HTTP endpoint, set per pod by the kwok exec mapping.
const simURLEnv = "CRATEDB_SIM_URL"

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

type options struct {
	hosts    []string
	username string
	command  string
	verify   string
}

// isValueFlag tells the crash options that take a value, as "--flag=value" or "--flag value".
func isValueFlag(name string) bool {
	switch name {
	case "--hosts", "--host", "-c", "--command", "-U", "--username", "--format", "--schema", "--timeout",
		"--config", "--history", "--cert-file", "--key-file", "--ca-cert-file", "--verify-ssl":
		return true
	}
	return false
}

// isSwitch tells the crash options without a value.
func isSwitch(name string) bool {
	switch name {
	case "-v", "--verbose", "-A", "--no-autocomplete", "-W", "--password", "--no-color", "--version",
		"-h", "--help", "--sysinfo":
		return true
	}
	return false
}

func parseArgs(args []string) (options, error) {
	opts := options{username: "crate"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(a, "=")
		if !strings.HasPrefix(a, "-") {
			return opts, fmt.Errorf("unrecognized arguments: %s", redactArg(a))
		}
		if isSwitch(a) {
			continue
		}
		if !isValueFlag(name) {
			return opts, fmt.Errorf("unrecognized arguments: %s", name)
		}
		if !hasValue {
			if i+1 >= len(args) {
				if name == "--verify-ssl" {
					continue
				}
				return opts, fmt.Errorf("argument %s: expected one argument", name)
			}
			i++
			value = args[i]
		}
		switch name {
		case "--hosts", "--host":
			opts.hosts = append(opts.hosts, value)
			// --hosts takes several values until the next flag.
			for name == "--hosts" && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				opts.hosts = append(opts.hosts, args[i])
			}
		case "-c", "--command":
			opts.command = value
		case "-U", "--username":
			opts.username = value
		case "--verify-ssl":
			opts.verify = value
		}
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

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	opts, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "crash: error: %v\n", err)
		return 2
	}
	if opts.command == "" {
		fmt.Fprintln(stderr, "crash (CrateDB simulator shim): only -c/--command is supported")
		return 2
	}
	base := getenv(simURLEnv)
	if base == "" && len(opts.hosts) > 0 {
		base = opts.hosts[0]
	}
	if base == "" {
		fmt.Fprintf(stderr, "CONNECT ERROR: %s is not set\n", simURLEnv)
		return 1
	}
	client := &client{base: strings.TrimRight(base, "/"), user: opts.username, password: getenv("CRATEPW"), http: &http.Client{Timeout: 30 * time.Second}}
	for _, stmt := range splitStatements(opts.command) {
		began := time.Now()
		res, err := client.sql(context.Background(), stmt)
		if err != nil {
			var se *sqlError
			if errors.As(err, &se) {
				fmt.Fprintln(stderr, se.Message)
			} else {
				fmt.Fprintf(stderr, "CONNECT ERROR: %v\n", err)
			}
			return 1
		}
		fmt.Fprint(stdout, format(verb(stmt), res, time.Since(began)))
	}
	return 0
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
}

func (e *sqlError) Error() string { return e.Message }

type client struct {
	base, user, password string
	http                 *http.Client
}

func (c *client) sql(ctx context.Context, stmt string) (*response, error) {
	body, err := json.Marshal(map[string]any{"stmt": stmt})
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/_sql", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth(c.user, c.password)
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
			return nil, &sqlError{Message: fmt.Sprintf("HTTP %d", resp.StatusCode)}
		}
		return nil, &e.Error
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
	return strings.ToUpper(f[0])
}

// splitStatements splits on semicolons outside quotes, like crash does for -c.
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
