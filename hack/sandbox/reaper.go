package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// startReaper runs `sandbox reaper` in its own session next to the detached test bed (whose
// kwok leaves pod deletion to testbed.RunReaper, and whose nodes' exec is served by
// testbed.RunNodeServer) and records it in the pidfile for `down`.
func startReaper(ctx context.Context, tb *testbed.Testbed, stateDir string) error {
	bin := filepath.Join(stateDir, "bin", "sandbox")
	if b, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/kubectl-dbops/kubectl-dbops/hack/sandbox").CombinedOutput(); err != nil {
		return fmt.Errorf("build the sandbox's pod reaper: %w\n%s", err, b)
	}
	logFile, err := os.OpenFile(filepath.Join(tb.LogDir, "reaper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open reaper log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "reaper")
	cmd.Env = append(os.Environ(), "DBOPS_SANDBOX_DIR="+stateDir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the pod reaper: %w", err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release() // it belongs to the sandbox now
	return recordPid(tb, pid, "reaper", bin)
}

// recordPid adds a process started in its own session to the test bed's pidfile, for `down`;
// if that fails the process is stopped, so that nothing runs unrecorded.
func recordPid(tb *testbed.Testbed, pid int, name, bin string) error {
	f, err := os.OpenFile(tb.Pidfile, os.O_APPEND|os.O_WRONLY, 0o600)
	if err == nil {
		_, err = fmt.Fprintf(f, "%d %s %s\n", pid, name, bin)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		return fmt.Errorf("record %s pid: %w", name, err)
	}
	return nil
}

// runReaper is `sandbox reaper`: testbed.RunReaper and testbed.RunNodeServer against the
// sandbox until a signal.
func runReaper(ctx context.Context) error {
	dir, err := stateDir()
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig(dir))
	if err != nil {
		return fmt.Errorf("reaper: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("reaper: %w", err)
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	if err := testbed.RunReaper(ctx, client, logf); err != nil {
		return err
	}
	return testbed.RunNodeServer(ctx, dir, logf)
}
