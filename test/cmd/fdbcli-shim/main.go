// Command fdbcli-shim stands in for FoundationDB's fdbcli inside simulated pods. It is installed
// as `fdbcli` on kwok's PATH (see test/sim/fdbsim/fdbwire) and is part of the FoundationDB
// SIMULATOR, not a client for real clusters: it sends its arguments and its pod's name to the
// simulator host (test/sim/fdbsim, Host.Handler) and prints what the modelled fdbcli
// printed, exiting with its code. The exec mapping of the pod sets FDBSIM_ADDR (the host's
// URL) and FDBSIM_POD (namespace/name). Being killed cancels the run on the host, as killing
// fdbcli does; work already sent to the cluster stays done.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// run runs fdbcli with args in the environment environ (NAME=VALUE entries): the simulator
// gets its FDB_NETWORK_OPTION_* variables, which the FDB client reads (client trace files).
func run(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer) int {
	env := map[string]string{}
	fdbEnv := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
		if strings.HasPrefix(k, "FDB_NETWORK_OPTION_") {
			fdbEnv[k] = v
		}
	}
	addr, pod := env["FDBSIM_ADDR"], env["FDBSIM_POD"]
	if addr == "" || pod == "" {
		fmt.Fprintln(stderr, "fdbcli-shim: FDBSIM_ADDR and FDBSIM_POD must be set (this is the FoundationDB simulator's fdbcli)")
		return 1
	}
	if args == nil {
		args = []string{}
	}
	body, err := json.Marshal(fdbsim.ExecRequest{Pod: pod, Args: args, Env: fdbEnv})
	if err != nil {
		fmt.Fprintf(stderr, "fdbcli-shim: %v\n", err)
		return 1
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, addr+fdbsim.ExecPath, bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "fdbcli-shim: %v\n", err)
		return 1
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "fdbcli-shim: simulator unreachable: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		fmt.Fprintf(stderr, "fdbcli-shim: simulator answered %s: %s\n", resp.Status, bytes.TrimSpace(b))
		return 1
	}
	var out fdbsim.ExecResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		fmt.Fprintf(stderr, "fdbcli-shim: bad answer from the simulator: %v\n", err)
		return 1
	}
	_, _ = io.WriteString(stdout, out.Stdout)
	_, _ = io.WriteString(stderr, out.Stderr)
	return out.Code
}
