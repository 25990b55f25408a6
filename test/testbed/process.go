package testbed

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a component gets to exit after SIGTERM before it is killed.
const stopGrace = 5 * time.Second

// process is one component started by the testbed.
type process struct {
	name    string
	binary  string
	cmd     *exec.Cmd
	logPath string
	// exited is closed once cmd.Wait returned; waitErr is set before.
	exited  chan struct{}
	waitErr error
}

// startProcess starts binary with args, output appended to dir/logs/<name>.log, in its own
// process group so that Stop can signal the component together with anything it forked.
//
// When detached is false the child also gets SIGKILL from the kernel if the starting thread
// dies, which covers a test binary killed by `go test -timeout` (no cleanup runs then).
func startProcess(logDir, name, binary string, args, env []string, detached bool) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	defer logFile.Close() // the child keeps its own descriptor

	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = env
	if detached {
		// A new session survives the terminal (and process group) of the program that
		// started it, which is what `sandbox up` needs.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, binary: binary, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// running reports whether the process has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitError describes an unexpected exit, with the tail of the component log.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited early (%v); last log lines:\n%s", p.name, p.waitErr, tailFile(p.logPath, 30))
}

// stop sends SIGTERM to the process group, then SIGKILL after stopGrace.
func (p *process) stop() {
	if !p.running() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.exited
	}
	// Children of the component (none of ours fork, but be thorough) share the group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// tailFile returns up to n last lines of a file, for error messages.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  | " + strings.Join(lines, "\n  | ")
}

// Pidfile lines are "<pid> <name> <binary path>". The binary path lets a later cleanup make
// sure a PID still belongs to our component and was not recycled by an unrelated program.
func writePidfile(path string, procs []*process) error {
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "%d %s %s\n", p.cmd.Process.Pid, p.name, p.binary)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("write pidfile: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write pidfile: %w", err)
	}
	return nil
}

type pidEntry struct {
	pid    int
	name   string
	binary string
}

func readPidfile(path string) ([]pidEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var entries []pidEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.SplitN(strings.TrimSpace(sc.Text()), " ", 3)
		if len(fields) != 3 {
			continue
		}
		pid, err := strconv.Atoi(fields[0])
		if err != nil || pid <= 1 {
			continue
		}
		entries = append(entries, pidEntry{pid: pid, name: fields[1], binary: fields[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read pidfile %s: %w", path, err)
	}
	return entries, nil
}

// alive reports whether pid runs the recorded binary. Checking the command line guards
// against killing an unrelated process that reused the PID after a reboot or long pause.
func (e pidEntry) alive() bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", e.pid))
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return string(argv0) == e.binary
}

// PidfileAlive reports whether any component listed in a testbed pidfile is still running.
func PidfileAlive(pidfile string) (bool, error) {
	entries, err := readPidfile(pidfile)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	for _, e := range entries {
		if e.alive() {
			return true, nil
		}
	}
	return false, nil
}

// StopPidfile stops every component recorded in a testbed pidfile (SIGTERM to its process
// group, SIGKILL after a grace period) and removes the pidfile. It is how a detached sandbox
// or a testbed left behind by a killed test run is cleaned up. A missing pidfile is not an
// error.
func StopPidfile(pidfile string) error {
	entries, err := readPidfile(pidfile)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	// Reverse start order, one at a time: the API server stops in about a second while etcd
	// still runs but waits out its whole grace period once etcd is gone.
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if !e.alive() {
			continue
		}
		_ = syscall.Kill(-e.pid, syscall.SIGTERM)
		_ = syscall.Kill(e.pid, syscall.SIGTERM)
		// These are not our children, so poll /proc instead of waiting on them.
		deadline := time.Now().Add(stopGrace)
		for e.alive() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if e.alive() {
			_ = syscall.Kill(-e.pid, syscall.SIGKILL)
			_ = syscall.Kill(e.pid, syscall.SIGKILL)
			for j := 0; j < 100 && e.alive(); j++ {
				time.Sleep(20 * time.Millisecond)
			}
		}
		if e.alive() {
			errs = append(errs, fmt.Errorf("%s (pid %d) is still running after SIGKILL", e.name, e.pid))
		}
	}
	if err := os.Remove(pidfile); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove pidfile: %w", err))
	}
	return errors.Join(errs...)
}

// tempDirPattern names the folders of testbeds started without Options.Dir.
const tempDirPattern = "dbops-testbed-"

// staleAge is how old a temp testbed folder without a pidfile must be before it counts as
// abandoned; younger ones may belong to a testbed that is starting right now.
const staleAge = 10 * time.Minute

// cleanStaleTempDirs removes temp testbed folders whose components are all gone, e.g. after a
// test binary was killed by `go test -timeout` (the kernel kills the components then, through
// Pdeathsig, but nothing removes the folder). Folders of running testbeds are left alone.
func cleanStaleTempDirs(logf func(string, ...any)) {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), tempDirPattern+"*"))
	if err != nil {
		return
	}
	for _, dir := range dirs {
		pidfile := filepath.Join(dir, "testbed.pid")
		if _, err := os.Stat(pidfile); err != nil {
			st, err := os.Stat(dir)
			if err != nil || time.Since(st.ModTime()) < staleAge {
				continue
			}
		} else if alive, err := PidfileAlive(pidfile); err != nil || alive {
			continue
		}
		if err := StopPidfile(pidfile); err == nil {
			// Real nodes leave addresses, cgroups and mounts (which RemoveAll must not cross).
			if err := CleanupRealNodes(context.Background(), dir); err != nil {
				if logf != nil {
					logf("testbed: stale %s: %v", dir, err)
				}
				continue
			}
			if err := os.RemoveAll(dir); err == nil && logf != nil {
				logf("testbed: removed stale %s", dir)
			}
		}
	}
}
