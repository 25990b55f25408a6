// Command sandbox runs a local kubectl-dbops playground: a real control plane (see
// test/testbed) with demo database clusters, left running in the background.
//
//	go run ./hack/sandbox up      # start (or show) the sandbox, print the KUBECONFIG export
//	go run ./hack/sandbox up --real-nodes  # also 3 real kubelet nodes and an etcd cluster on them (root)
//	go run ./hack/sandbox status  # tell whether it runs
//	go run ./hack/sandbox down    # stop every process and remove the state
//	go run ./hack/sandbox etcd    # run the demo etcd cluster's members in the foreground
//
// State lives in $DBOPS_SANDBOX_DIR or ${XDG_STATE_HOME:-$HOME/.local/state}/kubectl-dbops/sandbox.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

const usage = `usage: sandbox up [--real-nodes]|down|status|etcd|fdb

  up      start the sandbox in the background (or reuse it) and print the KUBECONFIG export;
          --real-nodes adds 3 real nodes (kubelet + containerd, needs root) and a real etcd
          cluster in containers on them (namespace rn-etcd)
  down    stop every sandbox process and delete its state
  status  report whether the sandbox runs
  etcd    run the demo etcd cluster (real etcd members) until Ctrl-C
  fdb     run the demo FoundationDB clusters demo/myfdb, demo/fdb-sample (the operator's
          sample), demo/fdb-dns (DNS cluster file) and demo/fdb-tls (TLS) (FDB simulator and a
          stand-in for the FoundationDB operator) until Ctrl-C; up starts them in the background
`

func main() {
	realNodes := len(os.Args) == 3 && os.Args[1] == "up" && os.Args[2] == "--real-nodes"
	detachedFDB := len(os.Args) == 3 && os.Args[1] == "fdb" && os.Args[2] == "--detached"
	if len(os.Args) != 2 && !realNodes && !detachedFDB {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch os.Args[1] {
	case "up":
		err = up(ctx, realNodes)
	case "down":
		err = down()
	case "status":
		err = status()
	case "etcd":
		err = runEtcd(ctx)
	case "fdb":
		if detachedFDB {
			// Started by up: fd 3 is the pipe on which up waits for "ready".
			err = serveFDB(ctx, os.NewFile(3, "ready"))
		} else {
			err = runFDB(ctx)
		}
	case "reaper": // started by up, next to the detached test bed
		err = runReaper(ctx)
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		os.Exit(1)
	}
}

func stateDir() (string, error) {
	if d := os.Getenv("DBOPS_SANDBOX_DIR"); d != "" {
		return d, nil
	}
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("locate state dir: %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "kubectl-dbops", "sandbox"), nil
}

// paths of the files the testbed writes into its folder.
func pidfile(dir string) string    { return filepath.Join(dir, "testbed.pid") }
func kubeconfig(dir string) string { return filepath.Join(dir, "kubeconfig") }

func up(ctx context.Context, realNodes bool) error {
	dir, err := stateDir()
	if err != nil {
		return err
	}
	alive, err := testbed.PidfileAlive(pidfile(dir))
	if err != nil {
		return err
	}
	if alive {
		if _, err := os.Stat(kubeconfig(dir)); err != nil {
			return fmt.Errorf("sandbox processes run but the kubeconfig is missing (%w); run `go run ./hack/sandbox down` first", err)
		}
		if realNodes && !testbed.HasRealNodes(dir) {
			// Reusing it would print a KUBECONFIG without the real nodes and the rn-etcd
			// cluster that were asked for (make demo REAL=1 would then fail on them).
			return errors.New("the running sandbox has no real nodes; stop it first (go run ./hack/sandbox down, or make sandbox-down), then run up --real-nodes")
		}
		fmt.Printf("export KUBECONFIG=%s\n", kubeconfig(dir))
		return nil
	}
	// Leftovers of a crashed or half-stopped sandbox: clear them for a fresh start.
	if err := testbed.StopPidfile(pidfile(dir)); err != nil {
		return fmt.Errorf("clean stale sandbox: %w", err)
	}
	if err := testbed.CleanupRealNodes(ctx, dir); err != nil {
		return fmt.Errorf("clean stale sandbox: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clean stale sandbox: %w", err)
	}

	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Minute) // includes a first-time build
	defer cancel()
	opts := testbed.Options{
		Dir:         dir,
		Detached:    true,
		Logf:        logf,
		BuildOutput: os.Stderr,
	}
	if realNodes {
		if err := testbed.RealNodeSupport(ctx, true); err != nil {
			return fmt.Errorf("--real-nodes: %w", err)
		}
		opts.RealNodes = 3
	}
	tb, err := testbed.Start(startCtx, opts)
	if err != nil {
		return err
	}
	// From here on a failure must not leave half a sandbox behind.
	ok := false
	defer func() {
		if !ok {
			_ = tb.Stop()
			_ = os.RemoveAll(dir)
		}
	}()

	if err := startReaper(ctx, tb, dir); err != nil {
		return err
	}

	fixCtx, cancelFix := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelFix()
	var hints []string
	for _, f := range demoFixtures() {
		logf("sandbox: creating demo %s cluster %s/%s", f.Engine, f.Namespace, f.Name)
		if err := f.install(fixCtx, tb, dir); err != nil {
			return fmt.Errorf("demo cluster %s/%s: %w", f.Namespace, f.Name, err)
		}
		hints = append(hints, f.Hints...)
	}
	logf("sandbox: creating demo cratedb cluster %s/%s (CrateDB simulator)", crateNamespace, crateCluster)
	crateHints, err := installCrateDemo(ctx, tb, dir, logf)
	if err != nil {
		return fmt.Errorf("demo cluster %s/%s: %w", crateNamespace, crateCluster, err)
	}
	hints = append(hints, crateHints...)
	logf("sandbox: creating demo foundationdb cluster %s/%s (FDB simulator and a stand-in FoundationDB operator)", fdbDemoNamespace, fdbDemoName)
	if err := startFDBDemo(ctx, tb, dir); err != nil {
		return fmt.Errorf("demo cluster %s/%s: %w", fdbDemoNamespace, fdbDemoName, err)
	}
	hints = append(hints, fdbDemoHints()...)
	if realNodes {
		logf("sandbox: creating etcd cluster %s/%s on the real nodes %v", realEtcdNamespace, realEtcdName, tb.RealNodes)
		rnHints, err := installRealEtcd(fixCtx, tb)
		if err != nil {
			return fmt.Errorf("real-node etcd cluster: %w", err)
		}
		hints = append(hints, rnHints...)
	}
	ok = true

	fmt.Printf("# sandbox up in %s (logs in %s); stop it with: go run ./hack/sandbox down\n", tb.StartupDuration.Round(time.Millisecond), tb.LogDir)
	fmt.Println("# try:")
	for _, h := range hints {
		fmt.Printf("#   %s\n", h)
	}
	fmt.Printf("export KUBECONFIG=%s\n", kubeconfig(dir))
	return nil
}

func down() error {
	dir, err := stateDir()
	if err != nil {
		return err
	}
	// Real nodes: pods first (the kubelets stop their containers), host resources last.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := testbed.DrainRealNodes(ctx, dir); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: %v (continuing)\n", err)
	}
	if err := testbed.StopPidfile(pidfile(dir)); err != nil {
		return err
	}
	if err := testbed.CleanupRealNodes(ctx, dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove sandbox state: %w", err)
	}
	fmt.Fprintln(os.Stderr, "sandbox: stopped")
	return nil
}

func status() error {
	dir, err := stateDir()
	if err != nil {
		return err
	}
	alive, err := testbed.PidfileAlive(pidfile(dir))
	if err != nil {
		return err
	}
	if !alive {
		return errors.New("not running; start it with: go run ./hack/sandbox up")
	}
	fmt.Printf("running; export KUBECONFIG=%s\n", kubeconfig(dir))
	return nil
}
