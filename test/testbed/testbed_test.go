package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestKwokConfigHasAllStages(t *testing.T) {
	cfg, err := kwokConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"node-initialize", "node-heartbeat-with-lease", "pod-ready", "pod-complete", "pvc-provision", "pv-bind", "pv-delete", "pvc-delete", "pod-container-crash", "pod-ready-resync"} {
		if !strings.Contains(string(cfg), "name: "+name+"\n") {
			t.Errorf("stage %s missing from kwok config", name)
		}
	}
	if got := strings.Count(string(cfg), "kind: Stage\n"); got != 10 {
		t.Errorf("config has %d Stage documents, want 10", got)
	}
	// Deletion is the reaper's (reaper.go): kwok's stage deletes by name, without a UID.
	if strings.Contains(string(cfg), "name: pod-delete\n") {
		t.Error("kwok config still has the pod-delete stage")
	}
}

func TestPortTargetsValidation(t *testing.T) {
	tests := []struct {
		name    string
		targets []PortTarget
		wantErr string
	}{
		{"ok", []PortTarget{{Ports: []int32{5432}, Address: "127.0.1.5", Port: 5432}}, ""},
		{"catch-all", []PortTarget{{Address: "127.0.0.1", Port: 80}}, ""},
		{"none", nil, "at least one"},
		{"not loopback", []PortTarget{{Address: "10.1.2.3", Port: 1}}, "not a loopback"},
		{"hostname", []PortTarget{{Address: "localhost", Port: 1}}, "not a loopback"},
		{"bad port", []PortTarget{{Address: "127.0.0.1", Port: 0}}, "invalid"},
		{"reserved", []PortTarget{{Ports: []int32{ProbePort}, Address: "127.0.0.1", Port: 1}}, "reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := portTargetsObject(tt.targets, "tok")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The probe entry comes first so a catch-all target cannot shadow it.
			first := obj[0].(map[string]any)
			if first["ports"].([]any)[0] != int64(ProbePort) {
				t.Fatalf("first forward is %v, want the probe", first)
			}
		})
	}
}

func TestExecTargetsReservedEnv(t *testing.T) {
	if _, err := execTargetsObject([]ExecTarget{{Env: map[string]string{probeEnv: "x"}}}, "t"); err == nil {
		t.Fatal("reserved env accepted")
	}
	obj, err := execTargetsObject([]ExecTarget{{Containers: []string{"db"}, WorkDir: "/w", Env: map[string]string{"B": "2", "A": "1"}}}, "tok")
	if err != nil {
		t.Fatal(err)
	}
	local := obj[0].(map[string]any)["local"].(map[string]any)
	envs := local["envs"].([]any)
	var names []string
	for _, e := range envs {
		names = append(names, e.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != probeEnv+",A,B" {
		t.Fatalf("env order = %v", names)
	}
}

func TestStopPidfile(t *testing.T) {
	dir := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	p, err := startProcess(dir, "sleeper", sleep, []string{"60"}, os.Environ(), true)
	if err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(dir, "testbed.pid")
	if err := writePidfile(pidfile, []*process{p}); err != nil {
		t.Fatal(err)
	}
	// The child may not have exec'd sleep yet (a loaded machine): wait for it to look alive.
	deadline := time.Now().Add(5 * time.Second)
	for {
		alive, err := PidfileAlive(pidfile)
		if err == nil && alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PidfileAlive = %v, %v; want true", alive, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := StopPidfile(pidfile); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("process still running after StopPidfile")
	}
	if _, err := os.Stat(pidfile); !os.IsNotExist(err) {
		t.Fatalf("pidfile not removed: %v", err)
	}
	if alive, err := PidfileAlive(pidfile); err != nil || alive {
		t.Fatalf("PidfileAlive after stop = %v, %v", alive, err)
	}
}

func TestPidfileIgnoresRecycledPID(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "testbed.pid")
	// Our own PID with a binary path that is not ours stands for a recycled PID.
	line := []byte(strings.Join([]string{strconv.Itoa(os.Getpid()), "etcd", "/nonexistent/etcd"}, " ") + "\n")
	if err := os.WriteFile(pidfile, line, 0o600); err != nil {
		t.Fatal(err)
	}
	if alive, _ := PidfileAlive(pidfile); alive {
		t.Fatal("recycled PID reported alive")
	}
	if err := StopPidfile(pidfile); err != nil {
		t.Fatal(err)
	}
}
