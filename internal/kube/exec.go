// Package kube wraps client-go's streaming APIs (exec, port-forward) in the small, typed
// helpers that kubectl-dbops needs. It deliberately has no test-only dependencies so that the
// CLI can import it.
package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

// ExitError reports that a command ran in a container and exited with a non-zero code.
// It never carries the command line, because argv may hold credentials.
type ExitError struct {
	Namespace string
	Pod       string
	Container string
	// Code is the process exit code.
	Code int
	// Stderr is what the command wrote to standard error (also returned separately by Exec).
	Stderr []byte
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("command in pod %s/%s%s exited with code %d", e.Namespace, e.Pod, containerSuffix(e.Container), e.Code)
}

func containerSuffix(container string) string {
	if container == "" {
		return ""
	}
	return " container " + container
}

// shouldFallbackToSPDY mirrors kubectl: only a failed websocket upgrade (old API server or
// kubelet) or an HTTPS proxy that cannot tunnel websockets justify retrying with SPDY.
func shouldFallbackToSPDY(err error) bool {
	return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
}

// Exec runs argv in a container of a pod and returns its standard output and error.
//
// container may be empty when the pod has a single container. stdin may be nil. A command that
// exits non-zero yields an *ExitError (use errors.As); other failures are returned wrapped, with
// any occurrence of argv removed from the text.
func Exec(ctx context.Context, restConfig *rest.Config, client kubernetes.Interface, namespace, pod, container string, argv []string, stdin io.Reader) (stdout, stderr []byte, err error) {
	if len(argv) == 0 {
		return nil, nil, fmt.Errorf("exec in pod %s/%s%s: empty command", namespace, pod, containerSuffix(container))
	}
	req := client.CoreV1().RESTClient().Post().
		Resource("pods").
		Namespace(namespace).
		Name(pod).
		SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   argv,
			Stdin:     stdin != nil,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)

	// Locked buffers: when ctx ends, the stream returns while client-go's copy goroutines may
	// still write (the race detector caught it in the e2e TestRealNodeReplicatedPrimaryHang).
	var outBuf, errBuf lockedBuffer
	streamErr := stream(ctx, restConfig, req.URL(), remotecommand.StreamOptions{
		Stdin:  stdin,
		Stdout: &outBuf,
		Stderr: &errBuf,
	})
	stdout, stderr = outBuf.Bytes(), errBuf.Bytes()
	if streamErr == nil {
		return stdout, stderr, nil
	}
	if code, ok := exitCode(streamErr); ok {
		return stdout, stderr, &ExitError{Namespace: namespace, Pod: pod, Container: container, Code: code, Stderr: stderr}
	}
	return stdout, stderr, &redactedError{
		msg: fmt.Sprintf("exec in pod %s/%s%s: %s", namespace, pod, containerSuffix(container), redact(streamErr.Error(), argv)),
		err: streamErr,
	}
}

func stream(ctx context.Context, restConfig *rest.Config, u *url.URL, opts remotecommand.StreamOptions) error {
	spdyExec, err := remotecommand.NewSPDYExecutor(restConfig, "POST", u)
	if err != nil {
		return fmt.Errorf("create SPDY executor: %w", err)
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(restConfig, "GET", u.String())
	if err != nil {
		return fmt.Errorf("create websocket executor: %w", err)
	}
	executor, err := remotecommand.NewFallbackExecutor(wsExec, spdyExec, shouldFallbackToSPDY)
	if err != nil {
		return fmt.Errorf("create executor: %w", err)
	}
	return executor.StreamWithContext(ctx, opts)
}

// kwokExitStatus matches the tail of the error text produced when the exec target is not a
// real kubelet but kwok's own exec server, which runs the command locally and only reports
// Go's "exit status N" as an internal error instead of a structured exit code.
var kwokExitStatus = regexp.MustCompile(`(?:^|\W)exit status (\d+)$`)

// exitCode extracts a process exit code from a streaming error. Real kubelets send a
// structured NonZeroExitCode status that client-go turns into a utilexec.ExitError; the text
// form is only a fallback.
func exitCode(err error) (int, bool) {
	if err == nil {
		return 0, false
	}
	var codeErr utilexec.ExitError
	if errors.As(err, &codeErr) && codeErr.Exited() {
		return codeErr.ExitStatus(), true
	}
	return parseExitStatus(err.Error())
}

// parseExitStatus parses text that ends in "exit status N".
func parseExitStatus(msg string) (int, bool) {
	m := kwokExitStatus.FindStringSubmatch(strings.TrimSpace(msg))
	if m == nil {
		return 0, false
	}
	code, err := strconv.Atoi(m[1])
	if err != nil || code <= 0 || code > 255 {
		return 0, false
	}
	return code, true
}

// redactedError keeps the original error for errors.Is/As (e.g. context.Canceled) while its
// text has argv removed.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// minRedactLen avoids mangling messages by replacing very short argv words such as "-c".
const minRedactLen = 3

// redact removes argv from msg. The server and transport errors may echo the command line
// verbatim (kwok does) or query-escaped inside a URL (net/url errors do).
func redact(msg string, argv []string) string {
	const mask = "[redacted]"
	candidates := []string{strings.Join(argv, " ")}
	for _, a := range argv {
		if len(a) >= minRedactLen {
			candidates = append(candidates, a)
		}
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		msg = strings.ReplaceAll(msg, c, mask)
		msg = strings.ReplaceAll(msg, url.QueryEscape(c), mask)
		msg = strings.ReplaceAll(msg, url.PathEscape(c), mask)
	}
	return msg
}

// TimeoutError reports that a command run by ExecWithTimeout did not finish within its timeout
// and was ended (SIGKILL) inside the container.
type TimeoutError struct {
	Namespace string
	Pod       string
	Container string
	Timeout   time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("command in pod %s/%s%s did not finish within %s and was killed in the container",
		e.Namespace, e.Pod, containerSuffix(e.Container), e.Timeout)
}

// killedExitCodes are the statuses of a command ended by `timeout -s KILL`: 128+SIGKILL
// (busybox, and coreutils when the signal is KILL) or coreutils' 124.
var killedExitCodes = map[int]bool{137: true, 124: true}

// timeoutClientGrace is how much longer than the in-container timeout the client waits for
// the exit status before it gives up on the stream.
const timeoutClientGrace = 15 * time.Second

// TimeoutArgv wraps argv so that the container itself ends the command after timeout, with
// the `timeout` program of the image (busybox or coreutils): a command whose exec client
// gives up (or dies) otherwise keeps running in the container, because neither the kubelet nor
// the container runtime ends an exec'd process when its stream closes.
func TimeoutArgv(argv []string, timeout time.Duration) []string {
	secs := int64((timeout + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return append([]string{"timeout", "-s", "KILL", strconv.FormatInt(secs, 10)}, argv...)
}

// ExecWithTimeout is Exec for a command that must not outlive timeout inside the container: it
// runs argv under the image's `timeout` program (TimeoutArgv) and returns a *TimeoutError when
// that ended it. The container must have `timeout` on its PATH (busybox and coreutils do); a
// missing one fails with an error that says so. ctx still bounds the client, which waits a
// little longer than timeout for the status so that the end in the container is observed.
func ExecWithTimeout(ctx context.Context, restConfig *rest.Config, client kubernetes.Interface, namespace, pod, container string, argv []string, stdin io.Reader, timeout time.Duration) (stdout, stderr []byte, err error) {
	if timeout <= 0 {
		return nil, nil, fmt.Errorf("exec in pod %s/%s%s: timeout must be positive", namespace, pod, containerSuffix(container))
	}
	cctx, cancel := context.WithTimeout(ctx, timeout+timeoutClientGrace)
	defer cancel()
	began := time.Now()
	stdout, stderr, err = Exec(cctx, restConfig, client, namespace, pod, container, TimeoutArgv(argv, timeout), stdin)
	var xe *ExitError
	switch {
	case err == nil:
		return stdout, stderr, nil
	case errors.As(err, &xe) && killedExitCodes[xe.Code] && time.Since(began) >= timeout:
		return stdout, stderr, &TimeoutError{Namespace: namespace, Pod: pod, Container: container, Timeout: timeout}
	case errors.As(err, &xe) && (xe.Code == 126 || xe.Code == 127) && bytes.Contains(stderr, []byte("timeout")):
		return stdout, stderr, fmt.Errorf("exec in pod %s/%s%s: the container has no `timeout` program to bound the command: %w", namespace, pod, containerSuffix(container), err)
	}
	return stdout, stderr, err
}

// Executor runs argv in a container of a pod, as Exec does: every engine that runs commands
// in pods (crash, etcdctl, a replicated app's role commands) takes one, so tests can inject a
// fake. stdin, when not nil, is the command's standard input — the only way a secret may reach
// the pod, since API-server audit logs record exec arguments. A non-zero exit is an *ExitError
// (stdout is still returned).
type Executor interface {
	Exec(ctx context.Context, namespace, pod, container string, argv []string, stdin io.Reader) (stdout, stderr []byte, err error)
}

// APIExecutor is the Executor that runs commands through the API server's exec subresource.
type APIExecutor struct {
	Config *rest.Config
	Client kubernetes.Interface
}

// Exec implements Executor.
func (k APIExecutor) Exec(ctx context.Context, namespace, pod, container string, argv []string, stdin io.Reader) ([]byte, []byte, error) {
	return Exec(ctx, k.Config, k.Client, namespace, pod, container, argv, stdin)
}

// lockedBuffer is a bytes.Buffer safe for one writer and a concurrent reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes is a copy of what was written so far.
func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
