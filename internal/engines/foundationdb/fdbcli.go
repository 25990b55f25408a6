package foundationdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// Container is the container of an operator pod that has fdbcli, the cluster file
// ($FDB_CLUSTER_FILE) and the TLS environment.
const Container = "foundationdb"

// DefaultTimeout is fdbcli's --timeout in seconds: fdbcli otherwise waits forever for an
// unreachable cluster. 40 s is what the FDB operator gives status json, kill and exclude and what
// kubectl-fdb gives status json (see docs/procedures.md); --fdb-timeout overrides it.
const DefaultTimeout = 40

// envTraceEnable makes the FDB client write trace files into the directory it names. The
// operator sets it in its pods' main container, and fdbcli reads it whatever its flags, so each
// run would leave a client trace file in the pod's log volume: fdbcli runs under `env -u` of
// it, and never with --log (docs/procedures.md; modelled in test/sim/fdbsim/trace.go).
const envTraceEnable = "FDB_NETWORK_OPTION_TRACE_ENABLE"

// CLI runs fdbcli in pods through the exec seam. It never passes a cluster file or TLS flag:
// the pod's own environment names them, as the operator's pods set it.
type CLI struct {
	Exec kube.Executor
	// Timeout is fdbcli's --timeout in seconds (0: DefaultTimeout).
	Timeout int
	// Calls counts the fdbcli runs, for the done event.
	Calls int
}

// Run runs `env -u FDB_NETWORK_OPTION_TRACE_ENABLE fdbcli --exec CMDS --timeout N` in pod. A non-zero exit is an error carrying
// fdbcli's output.
func (c *CLI) Run(ctx context.Context, namespace, pod, cmds string) (string, error) {
	out, _, err := c.RunBoth(ctx, namespace, pod, cmds)
	return out, err
}

// RunBoth is Run that also returns fdbcli's stderr, where it prints its warnings (an
// exclusion still in progress, a coordinator being excluded).
func (c *CLI) RunBoth(ctx context.Context, namespace, pod, cmds string) (string, string, error) {
	if writes(cmds) {
		// A run that lost its lock starts no change of the database (a kill, maintenance,
		// an exclusion): every fdbcli line goes through here, so none can skip the check.
		if err := kube.CheckWriteGuard(ctx); err != nil {
			return "", "", fmt.Errorf("not running fdbcli --exec %q in pod %s/%s: %w", cmds, namespace, pod, err)
		}
	}
	return c.runBoth(ctx, namespace, pod, cmds)
}

// runLock is Run without the write guard, for the operator's lock key alone (fdblock.go): the
// guard asks whether that lock is still ours, so taking, extending and releasing it cannot wait
// for the guard's leave.
func (c *CLI) runLock(ctx context.Context, namespace, pod, cmds string) (string, error) {
	out, _, err := c.runBoth(ctx, namespace, pod, cmds)
	return out, err
}

func (c *CLI) runBoth(ctx context.Context, namespace, pod, cmds string) (string, string, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	c.Calls++
	argv := []string{"env", "-u", envTraceEnable, "fdbcli", "--exec", cmds, "--timeout", strconv.Itoa(timeout)}
	out, errOut, err := c.Exec.Exec(ctx, namespace, pod, Container, argv, nil)
	if err != nil {
		msg := strings.TrimSpace(string(errOut))
		if msg == "" {
			msg = lastLine(string(out))
		}
		return string(out), string(errOut), fmt.Errorf("fdbcli --exec %q in pod %s/%s: %w: %s", cmds, namespace, pod, err, msg)
	}
	return string(out), string(errOut), nil
}

// readOnly are the fdbcli commands that change nothing whatever their arguments; option and
// writemode only set up the transaction of the lines after them.
var readOnly = map[string]bool{"status": true, "get": true, "getrange": true, "getrangekeys": true, "help": true, "option": true, "writemode": true}

// listWithoutArgs are the fdbcli commands that only list when given no argument (kill and
// exclude list addresses, maintenance and coordinators print the current state).
var listWithoutArgs = map[string]bool{"kill": true, "exclude": true, "maintenance": true, "coordinators": true, "setclass": true}

// writes reports whether any of the ';'-separated fdbcli commands in cmds may change the
// cluster. A command it does not know counts as a write, so a new one is guarded by default.
func writes(cmds string) bool {
	for _, cmd := range strings.Split(cmds, ";") {
		f := strings.Fields(cmd)
		if len(f) == 0 {
			continue
		}
		verb := strings.ToLower(f[0])
		if readOnly[verb] || (len(f) == 1 && listWithoutArgs[verb]) {
			continue
		}
		return true
	}
	return false
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Status runs `status json` in pod and parses it.
func (c *CLI) Status(ctx context.Context, namespace, pod string) (*Status, error) {
	out, err := c.Run(ctx, namespace, pod, "status json")
	if err != nil {
		return nil, err
	}
	st, err := ParseStatus([]byte(out))
	if err != nil {
		return nil, fmt.Errorf("status json from pod %s/%s: %w", namespace, pod, err)
	}
	return st, nil
}

// ParseStatus parses the output of `fdbcli --exec 'status json'`. fdbcli may print lines before
// the document (the long-delay warning and the minimal status after it; fdbcli.actor.cpp
// checkStatus), so the document starts at the first line that begins with "{".
func ParseStatus(out []byte) (*Status, error) {
	start := -1
	for off := 0; off < len(out); {
		line := out[off:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		if bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte("{")) {
			start = off
			break
		}
		off += len(line) + 1
	}
	if start < 0 {
		return nil, errors.New("no JSON document in the output")
	}
	var st Status
	dec := json.NewDecoder(bytes.NewReader(out[start:]))
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return &st, nil
}
