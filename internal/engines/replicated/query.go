package replicated

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// queryGrace is how much longer than a query command's timeout the exec may take: the
// in-pod timeout(1) ends the command first and its exit status comes back.
const queryGrace = 10 * time.Second

// timeoutArgv runs argv under timeout(1) in the pod (GNU coreutils and BusyBox both take
// "timeout -s SIG SECS PROG ARGS"): the API server and the kubelet do not end an exec'd process
// when its client gives up, so a hung sequence or status command would otherwise run on.
func timeoutArgv(d time.Duration, argv []string) []string {
	secs := max(1, int(math.Ceil(d.Seconds())))
	return append([]string{"timeout", "-s", "KILL", strconv.Itoa(secs)}, argv...)
}

// noTimeoutCommand recognises the container runtime's answer when the image has no timeout
// binary ("exec: \"timeout\": executable file not found in $PATH"), or a shell's "not found".
func noTimeoutCommand(err error, stderr []byte) bool {
	text := string(stderr)
	if err != nil {
		text += " " + err.Error()
	}
	if !strings.Contains(text, "timeout") {
		return false
	}
	var ee *kube.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.Code
	}
	return strings.Contains(text, "executable file not found") || strings.Contains(text, "no such file or directory") ||
		((code == 126 || code == 127) && strings.Contains(text, "not found"))
}

// runQuery runs a command that reads state (sequence, status) under timeout(1), so one that
// times out is ended in the pod; in a container without timeout(1) it runs as configured and
// a timeout is reported as possibly still running (docs/procedures.md, Replicated applications).
func (e *Engine) runQuery(ctx context.Context, s *site, cfg *Config, c *Command, name, pod string, argv []string) ([]byte, []byte, error) {
	wrapped := !s.noTimeout.Load()
	run := argv
	limit := c.Timeout
	if wrapped {
		run = timeoutArgv(c.Timeout, argv)
		limit += queryGrace
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	began := time.Now()
	stdout, stderr, err := e.Exec.Exec(cctx, s.ns, pod, cfg.Container, run, nil)
	if err != nil && wrapped && noTimeoutCommand(err, stderr) {
		s.noTimeout.Store(true)
		return e.runQuery(ctx, s, cfg, c, name, pod, argv)
	}
	if err == nil {
		return stdout, stderr, nil
	}
	ce := &CommandError{Name: name, Pod: pod, Stderr: lastLine(stderr), Err: err}
	var ee *kube.ExitError
	switch {
	case errors.As(err, &ee) && wrapped && (ee.Code == 137 || ee.Code == 124) && time.Since(began) >= c.Timeout:
		// timeout(1) killed it: GNU reports 128+9 for KILL, BusyBox the killed child's status.
		ce.Timeout, ce.Ended = c.Timeout, true
	case errors.As(err, &ee):
		ce.Code = ee.Code
	case cctx.Err() != nil && ctx.Err() == nil:
		ce.Timeout = c.Timeout
		ce.MayRun = !wrapped
		ce.Ended = wrapped
	}
	return stdout, stderr, ce
}
