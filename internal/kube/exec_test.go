package kube

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	utilexec "k8s.io/client-go/util/exec"
)

func TestParseExitStatus(t *testing.T) {
	tests := []struct {
		name     string
		msg      string
		wantCode int
		wantOK   bool
	}{
		{"kwok internal error", "Internal error occurred: error executing command in container: cmd wait: sh -c exit 3: exit status 3", 3, true},
		{"trailing newline", "cmd wait: x: exit status 42\n", 42, true},
		{"bare", "exit status 1", 1, true},
		{"max", "exit status 255", 255, true},
		{"zero is not a failure", "exit status 0", 0, false},
		{"out of range", "exit status 256", 0, false},
		{"not at end", "exit status 3: something else", 0, false},
		{"glued word", "noexit status 3", 0, false},
		{"signal", "signal: killed", 0, false},
		{"empty", "", 0, false},
		{"unrelated", "pods \"x\" not found", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, ok := parseExitStatus(tt.msg)
			if code != tt.wantCode || ok != tt.wantOK {
				t.Fatalf("parseExitStatus(%q) = (%d, %v), want (%d, %v)", tt.msg, code, ok, tt.wantCode, tt.wantOK)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantCode int
		wantOK   bool
	}{
		{"structured kubelet code", utilexec.CodeExitError{Err: errors.New("command terminated with non-zero exit code"), Code: 7}, 7, true},
		{"wrapped structured code", fmt.Errorf("stream: %w", utilexec.CodeExitError{Err: errors.New("x"), Code: 2}), 2, true},
		{"structured code wins over text", utilexec.CodeExitError{Err: errors.New("exit status 9"), Code: 4}, 4, true},
		{"kwok text", errors.New("Internal error occurred: error executing command in container: cmd wait: a: exit status 3"), 3, true},
		{"nil", nil, 0, false},
		{"other", errors.New("connection refused"), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, ok := exitCode(tt.err)
			if code != tt.wantCode || ok != tt.wantOK {
				t.Fatalf("exitCode(%v) = (%d, %v), want (%d, %v)", tt.err, code, ok, tt.wantCode, tt.wantOK)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	argv := []string{"psql", "-c", "ALTER USER x PASSWORD 's3cr3t'"}
	tests := []struct {
		name string
		msg  string
	}{
		{"verbatim command line", "cmd wait: psql -c ALTER USER x PASSWORD 's3cr3t': exit status 1"},
		{"query escaped", `Post "https://127.0.0.1:6443/api/v1/namespaces/d/pods/p/exec?command=psql&command=-c&command=ALTER+USER+x+PASSWORD+%27s3cr3t%27": dial tcp: refused`},
		{"path escaped", "error: ALTER%20USER%20x%20PASSWORD%20%27s3cr3t%27"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := redact(tt.msg, argv)
			if strings.Contains(got, "s3cr3t") {
				t.Fatalf("redact left the secret in %q", got)
			}
			if !strings.Contains(got, "[redacted]") {
				t.Fatalf("redact did not mark the removal in %q", got)
			}
		})
	}
}

func TestExitErrorText(t *testing.T) {
	err := &ExitError{Namespace: "demo", Pod: "web-0", Container: "db", Code: 3, Stderr: []byte("boom")}
	want := "command in pod demo/web-0 container db exited with code 3"
	if err.Error() != want {
		t.Fatalf("Error() = %q, want %q", err.Error(), want)
	}
	var target *ExitError
	if !errors.As(fmt.Errorf("wrapped: %w", err), &target) || target.Code != 3 {
		t.Fatalf("errors.As did not find the ExitError")
	}
}

func TestTimeoutArgv(t *testing.T) {
	tests := []struct {
		timeout time.Duration
		want    []string
	}{
		{3 * time.Second, []string{"timeout", "-s", "KILL", "3", "sh", "-c", "x"}},
		{1500 * time.Millisecond, []string{"timeout", "-s", "KILL", "2", "sh", "-c", "x"}},
		{time.Millisecond, []string{"timeout", "-s", "KILL", "1", "sh", "-c", "x"}},
	}
	for _, tt := range tests {
		if got := TimeoutArgv([]string{"sh", "-c", "x"}, tt.timeout); !slices.Equal(got, tt.want) {
			t.Errorf("TimeoutArgv(%s) = %q, want %q", tt.timeout, got, tt.want)
		}
	}
}

// TestLockedBufferConcurrentWriteAndRead: a write racing a read (an exec whose context ended
// while client-go still copies its output) is safe under -race, and Bytes is a copy.
func TestLockedBufferConcurrentWriteAndRead(t *testing.T) {
	var b lockedBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			_, _ = b.Write([]byte("x"))
		}
	}()
	for range 100 {
		_ = b.Bytes()
	}
	<-done
	got := b.Bytes()
	if len(got) != 1000 {
		t.Fatalf("%d bytes, want 1000", len(got))
	}
	got[0] = 'y'
	if b.Bytes()[0] != 'x' {
		t.Fatal("Bytes is not a copy")
	}
}
