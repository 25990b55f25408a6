package fdbsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is the sandbox's layout: three zones, one storage, log and stateless process each,
// five coordinators.
func fixture(t *testing.T) (*Cluster, *ManualClock) {
	t.Helper()
	clock := NewManualClock(t0)
	var specs []ProcessSpec
	for i, z := range []string{"z1", "z2", "z3"} {
		n := string(rune('1' + i))
		specs = append(specs,
			ProcessSpec{ID: "storage-" + n, Address: "10.0.1." + n + ":4501", Class: ClassStorage, Zone: z},
			ProcessSpec{ID: "log-" + n, Address: "10.0.2." + n + ":4501", Class: ClassLog, Zone: z},
			ProcessSpec{ID: "stateless-" + n, Address: "10.0.3." + n + ":4501", Class: ClassStateless, Zone: z})
	}
	coords := []string{"10.0.1.1:4501", "10.0.1.2:4501", "10.0.1.3:4501", "10.0.2.1:4501", "10.0.2.2:4501"}
	c, err := New(clock, Config{}, specs, coords)
	if err != nil {
		t.Fatal(err)
	}
	return c, clock
}

type result struct {
	code           int
	stdout, stderr string
}

func run(c *Cluster, args ...string) result {
	var o, e bytes.Buffer
	code := c.Run(context.Background(), args, &o, &e)
	return result{code, o.String(), e.String()}
}

func status(t *testing.T, c *Cluster) map[string]any {
	t.Helper()
	r := run(c, "--exec", "status json", "--timeout", "10")
	if r.code != 0 {
		t.Fatalf("status json: %+v", r)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("status json: %v\n%s", err, r.stdout)
	}
	return m
}

// path reads a nested field of status json.
func path(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

func proc(m map[string]any, address string) map[string]any {
	procs, _ := path(m, "cluster", "processes").(map[string]any)
	for _, p := range procs {
		pm := p.(map[string]any)
		if pm["address"] == address {
			return pm
		}
	}
	return nil
}

func commands(c *Cluster) []string {
	var out []string
	for _, e := range c.Log() {
		out = append(out, e.Command)
	}
	return out
}

func TestOptionsRejectedAsFdbcliRejectsThem(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"timeout without exec", []string{"--timeout", "5"}, "ERROR: --timeout may only be specified with --exec\n"},
		{"invalid timeout", []string{"--exec", "status", "--timeout", "5s"}, "ERROR: invalid timeout 5s\n"},
		{"unknown option", []string{"--exec", "status", "--bogus"}, ""},
		{"missing value", []string{"--exec"}, ""},
		{"positional argument", []string{"status"}, "unexpected argument"},
		{"interactive", []string{"-C", "/etc/fdb.cluster"}, "interactive shell is not modelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := fixture(t)
			r := run(c, tt.args...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1: %+v", r.code, r)
			}
			if !strings.Contains(r.stderr, tt.wantStderr) {
				t.Fatalf("stderr %q, want %q", r.stderr, tt.wantStderr)
			}
			if len(c.Log()) != 0 {
				t.Fatalf("commands ran: %v", commands(c))
			}
		})
	}
}

func TestShellEchoAbortAndExitCodes(t *testing.T) {
	tests := []struct {
		name      string
		exec      string
		code      int
		stdout    []string // substrings in order
		notStdout []string
		stderr    string
		ran       []string
	}{
		{name: "one command is not echoed", exec: "status minimal", code: 0,
			stdout: []string{"The database is available.\n"}, notStdout: []string{">>>"}, ran: []string{"status minimal"}},
		{name: "several are echoed", exec: "status minimal; maintenance", code: 0,
			stdout: []string{">>> status minimal\n", "The database is available.\n", ">>> maintenance\n", "No ongoing maintenance.\n"},
			ran:    []string{"status minimal", "maintenance"}},
		{name: "trailing semicolon is a second, empty command", exec: "status minimal;", code: 0,
			stdout: []string{">>> status minimal\n"}, ran: []string{"status minimal"}},
		{name: "failure stops the rest", exec: "bogus; status minimal", code: 1,
			stdout:    []string{">>> bogus\n", "WARNING: the previous command failed, the remaining commands will not be executed.\n"},
			notStdout: []string{"database is available"}, stderr: "ERROR: Unknown command `bogus'. Try `help'?\n",
			ran: []string{"bogus"}},
		{name: "last command failing prints no warning", exec: "status minimal; maintenance on z1", code: 1,
			stdout: []string{"Usage: maintenance [on|off] [ZONEID] [SECONDS]\n"}, notStdout: []string{"WARNING"},
			ran: []string{"status minimal", "maintenance on z1"}},
		{name: "bad status argument", exec: "status everything", code: 1,
			stdout: []string{"Usage: status [minimal|details|json]\n"}, ran: []string{"status everything"}},
		{name: "unterminated quote", exec: `maintenance on "z1 10`, code: 1,
			stderr: "ERROR: Command failed to completely parse.\n"},
		{name: "quoted tokens", exec: `maintenance on "z1" 10; maintenance`, code: 0,
			stdout: []string{">>> maintenance on z1 10\n", "Maintenance for zone z1 will continue for 10 seconds.\n"},
			ran:    []string{"maintenance on z1 10", "maintenance"}},
		{name: "sleep needs a number", exec: "sleep soon", code: 1, stdout: []string{"Usage: sleep <SECONDS>\n"}},
		{name: "unmodelled known command fails", exec: "configure double", code: 1, stderr: "not modelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := fixture(t)
			r := run(c, "--exec", tt.exec)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d: %+v", r.code, tt.code, r)
			}
			rest := r.stdout
			for _, s := range tt.stdout {
				i := strings.Index(rest, s)
				if i < 0 {
					t.Fatalf("stdout lacks %q (in order):\n%s", s, r.stdout)
				}
				rest = rest[i+len(s):]
			}
			for _, s := range tt.notStdout {
				if strings.Contains(r.stdout, s) {
					t.Fatalf("stdout has %q:\n%s", s, r.stdout)
				}
			}
			if !strings.Contains(r.stderr, tt.stderr) {
				t.Fatalf("stderr %q, want %q", r.stderr, tt.stderr)
			}
			if tt.ran != nil && !slices.Equal(commands(c), tt.ran) {
				t.Fatalf("ran %q, want %q", commands(c), tt.ran)
			}
		})
	}
}

func TestKillNeedsAPriorKillInTheSession(t *testing.T) {
	c, clock := fixture(t)
	clock.Advance(time.Minute)
	r := run(c, "--exec", "kill 10.0.1.1:4501")
	if r.code != 1 || r.stderr != "ERROR: process `10.0.1.1:4501' not recognized.\n" {
		t.Fatalf("%+v", r)
	}
	// The list of a previous session does not count either.
	run(c, "--exec", "kill")
	r = run(c, "--exec", "kill 10.0.1.1:4501")
	if r.code != 1 {
		t.Fatalf("kill without kill in the same session: %+v", r)
	}
	r = run(c, "--exec", "kill all")
	if r.code != 1 || !strings.Contains(r.stderr, "You must run the `kill’ command before running `kill all’.") {
		t.Fatalf("%+v", r)
	}
	m := status(t, c)
	if up := proc(m, "10.0.1.1:4501")["uptime_seconds"].(float64); up < 60 {
		t.Fatalf("process restarted by a refused kill: uptime %v", up)
	}
	// A :tls-less address of a TLS process, or an address not in the list, is not recognized.
	r = run(c, "--exec", "kill; kill 10.0.9.9:4501")
	if r.code != 1 || !strings.Contains(r.stderr, "process `10.0.9.9:4501' not recognized") ||
		!strings.Contains(r.stdout, "The following 9 addresses can be killed:\n") {
		t.Fatalf("%+v", r)
	}
}

func TestKillRestartsProcessesAndRecovers(t *testing.T) {
	c, clock := fixture(t)
	clock.Advance(time.Minute)
	before := status(t, c)
	gen := path(before, "cluster", "generation").(float64)
	var master, masterAddr string
	for _, p := range c.Processes() {
		if slices.Contains(p.Roles, "master") {
			master, masterAddr = p.ID, p.Address
		}
	}
	if master == "" {
		t.Fatal("no master")
	}
	start := clock.Now()
	r := run(c, "--exec", "kill; kill 10.0.1.1:4501 "+masterAddr)
	if r.code != 0 || !strings.Contains(r.stdout, ">>> kill 10.0.1.1:4501 "+masterAddr+"\n") ||
		!strings.HasSuffix(r.stdout, "Attempted to kill 2 processes\n") {
		t.Fatalf("%+v", r)
	}
	// fdbcli waited 3 s after sending the kills; the processes are back after RestartDelay (2 s)
	// and recovery runs from the kill.
	if d := clock.Now().Sub(start); d != 3*time.Second {
		t.Fatalf("kill took %v, want 3s", d)
	}
	m := status(t, c)
	if p := proc(m, "10.0.1.1:4501"); p == nil || p["uptime_seconds"].(float64) >= 3 {
		t.Fatalf("killed storage process: %v", p)
	}
	if got := path(m, "cluster", "generation").(float64); got <= gen {
		t.Fatalf("generation %v, want > %v", got, gen)
	}
	// Recovery states pass in order; active generations are 2 until fully recovered.
	c2, clock2 := fixture(t)
	clock2.Advance(time.Minute)
	var masterAddr2 string
	for _, p := range c2.Processes() {
		if slices.Contains(p.Roles, "master") {
			masterAddr2 = p.Address
		}
	}
	c2.mu.Lock()
	c2.kill([]string{masterAddr2})
	c2.mu.Unlock()
	var seen []string
	sawUnavailable, sawTwoGens := false, false
	for range 40 {
		m := status(t, c2)
		name := path(m, "cluster", "recovery_state", "name").(string)
		if len(seen) == 0 || seen[len(seen)-1] != name {
			seen = append(seen, name)
		}
		if path(m, "client", "database_status", "available") == false {
			sawUnavailable = true
		}
		if path(m, "cluster", "recovery_state", "active_generations").(float64) == 2 {
			sawTwoGens = true
			if path(m, "cluster", "bounce_impact", "can_clean_bounce") != false {
				t.Fatal("can_clean_bounce during recovery")
			}
		}
		clock2.Advance(100 * time.Millisecond)
	}
	prev := -1
	for _, s := range seen {
		i := slices.Index(recoveryStates, s)
		if i <= prev {
			t.Fatalf("states out of order: %v", seen)
		}
		prev = i
	}
	if seen[len(seen)-1] != "fully_recovered" || len(seen) < 5 || !sawUnavailable || !sawTwoGens {
		t.Fatalf("states %v unavailable %v two generations %v", seen, sawUnavailable, sawTwoGens)
	}
	for _, p := range c2.Processes() {
		if slices.Contains(p.Roles, "master") && p.Address == masterAddr2 && p.Started.Before(t0.Add(time.Minute)) {
			t.Fatal("master role stayed on the killed process's old incarnation")
		}
	}
}

func TestTimeoutExitsAndWorkGoesOn(t *testing.T) {
	c, clock := fixture(t)
	clock.Advance(time.Minute)
	start := clock.Now()
	r := run(c, "--exec", "kill; kill 10.0.1.2:4501", "--timeout", "1")
	if r.code != 1 || !strings.HasSuffix(r.stderr, "Specified timeout reached -- exiting...\n") ||
		strings.Contains(r.stdout, "Attempted to kill") {
		t.Fatalf("%+v", r)
	}
	if d := clock.Now().Sub(start); d != time.Second {
		t.Fatalf("ran %v, want the 1 s timeout", d)
	}
	// The kill was sent before the timeout: the process restarted.
	m := status(t, c)
	if p := proc(m, "10.0.1.2:4501"); p != nil && p["uptime_seconds"].(float64) > 5 {
		t.Fatalf("process not restarted: %v", p)
	}
	// --timeout 0 means no timeout (fdbcli: exit_timeout 0), and is allowed without --exec? No:
	// only a non-zero timeout needs --exec.
	if r := run(c, "--exec", "sleep 2", "--timeout", "0"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestLongDelayWarningPrecedesOutput(t *testing.T) {
	c, _ := fixture(t)
	r := run(c, "--exec", "sleep 6; status json")
	if r.code != 0 || !strings.Contains(r.stderr, "\nWARNING: Long delay (Ctrl-C to interrupt)\n") {
		t.Fatalf("%+v", r)
	}
	i := strings.Index(r.stdout, "The database is available.")
	j := strings.Index(r.stdout, "{")
	if i < 0 || j < i {
		t.Fatalf("minimal status should precede the JSON:\n%s", r.stdout)
	}
}

func TestMaintenanceZone(t *testing.T) {
	c, clock := fixture(t)
	clock.Advance(time.Minute)
	ft := func(m map[string]any) (float64, float64) {
		return path(m, "cluster", "fault_tolerance", "max_zone_failures_without_losing_data").(float64),
			path(m, "cluster", "fault_tolerance", "max_zone_failures_without_losing_availability").(float64)
	}
	m := status(t, c)
	d0, a0 := ft(m)
	// Double replication over 3 zones: one zone can fail without losing data, and the log
	// system has one spare zone (3 log zones for 2 replicas).
	if d0 != 1 || a0 != 1 {
		t.Fatalf("fault tolerance data %v availability %v, want 1 and 1", d0, a0)
	}
	if r := run(c, "--exec", "maintenance on z1 60"); r.code != 0 || r.stdout != "" {
		t.Fatalf("%+v", r)
	}
	m = status(t, c)
	if path(m, "cluster", "maintenance_zone") != "z1" || path(m, "cluster", "maintenance_seconds_remaining").(float64) > 60 {
		t.Fatalf("maintenance: %v %v", path(m, "cluster", "maintenance_zone"), path(m, "cluster", "maintenance_seconds_remaining"))
	}
	if proc(m, "10.0.1.1:4501")["under_maintenance"] != true || proc(m, "10.0.1.2:4501")["under_maintenance"] != nil {
		t.Fatal("under_maintenance is set on the zone's processes only")
	}
	d1, a1 := ft(m)
	if d1 != d0-1 || a1 != max(a0-1, -1) {
		t.Fatalf("fault tolerance under maintenance %v/%v, before %v/%v", d1, a1, d0, a0)
	}
	r := run(c, "--exec", "maintenance")
	if !strings.HasPrefix(r.stdout, "Maintenance for zone z1 will continue for ") {
		t.Fatalf("%+v", r)
	}
	// One zone at a time: a new `on` replaces it.
	run(c, "--exec", "maintenance on z2 30")
	if z, _ := c.MaintenanceZone(); z != "z2" {
		t.Fatalf("zone %q", z)
	}
	// Expiry.
	clock.Advance(31 * time.Second)
	if r := run(c, "--exec", "maintenance"); r.stdout != "No ongoing maintenance.\n" {
		t.Fatalf("%+v", r)
	}
	if m := status(t, c); path(m, "cluster", "maintenance_zone") != nil {
		t.Fatal("expired zone still in status")
	}
	// off
	run(c, "--exec", "maintenance on z3 600")
	if r := run(c, "--exec", "maintenance off; maintenance"); r.code != 0 || !strings.HasSuffix(r.stdout, "No ongoing maintenance.\n") {
		t.Fatalf("%+v", r)
	}
	for _, bad := range []string{"maintenance on z1", "maintenance on z1 10s", "maintenance off now", "maintenance start z1 10"} {
		if r := run(c, "--exec", bad); r.code != 1 || !strings.Contains(r.stdout, "Usage: maintenance") {
			t.Fatalf("%s: %+v", bad, r)
		}
	}
}

func TestStorageFailuresAndMaintenance(t *testing.T) {
	c, clock := fixture(t)
	clock.Advance(time.Minute)
	run(c, "--exec", "maintenance on z1 600")
	// Killing the storage process of the maintenance zone keeps the data healthy.
	run(c, "--exec", "kill; kill 10.0.1.1:4501", "--timeout", "1")
	m := status(t, c)
	if proc(m, "10.0.1.1:4501") != nil {
		t.Fatal("killed process still reported while down")
	}
	if path(m, "cluster", "data", "state", "healthy") != true || path(m, "cluster", "data", "state", "min_replicas_remaining").(float64) != 2 {
		t.Fatalf("data under maintenance: %v", path(m, "cluster", "data", "state"))
	}
	clock.Advance(5 * time.Second)
	// A storage failure in another zone ends the maintenance and the data loses a replica.
	if err := c.Stop("storage-2"); err != nil {
		t.Fatal(err)
	}
	m = status(t, c)
	if path(m, "cluster", "maintenance_zone") != nil {
		t.Fatal("maintenance survived a storage failure in another zone")
	}
	if path(m, "cluster", "data", "state", "healthy") != false || path(m, "cluster", "data", "state", "min_replicas_remaining").(float64) != 1 ||
		path(m, "cluster", "data", "state", "name") != "healing" {
		t.Fatalf("data: %v", path(m, "cluster", "data", "state"))
	}
	if err := c.Start("storage-2", "10.0.1.20:4501"); err != nil {
		t.Fatal(err)
	}
	m = status(t, c)
	if p := proc(m, "10.0.1.20:4501"); p == nil || path(m, "cluster", "data", "state", "healthy") != true {
		t.Fatalf("restarted process %v data %v", p, path(m, "cluster", "data", "state"))
	}
	// A new pod may get the IP a stopped process had: that process gets its own when it starts.
	if err := c.Stop("storage-3"); err != nil {
		t.Fatal(err)
	}
	if err := c.Start("log-1", "10.0.1.3:4501"); err != nil {
		t.Fatalf("taking a stopped process's address: %v", err)
	}
	if err := c.Start("storage-1", "10.0.1.20:4501"); err == nil {
		t.Fatal("took the address of a running process")
	}
	if err := c.Start("storage-3", "10.0.1.30:4501"); err != nil {
		t.Fatal(err)
	}
	m = status(t, c)
	if p := proc(m, "10.0.1.3:4501"); p == nil || p["class_type"] != "log" {
		t.Fatalf("process at the reused address: %v", p)
	}
	// The coordinator stays at the old address: it is now unreachable.
	for _, co := range path(m, "client", "coordinators", "coordinators").([]any) {
		cm := co.(map[string]any)
		if cm["address"] == "10.0.1.2:4501" && cm["reachable"] != false {
			t.Fatal("coordinator at a vanished address is reachable")
		}
	}
}

func TestUnavailableWithoutQuorum(t *testing.T) {
	c, clock := fixture(t)
	clock.Advance(time.Minute)
	for _, id := range []string{"storage-1", "storage-2", "storage-3"} {
		if err := c.Stop(id); err != nil {
			t.Fatal(err)
		}
	}
	r := run(c, "--exec", "status json", "--timeout", "10")
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatal(err)
	}
	if path(m, "client", "database_status", "available") != false || path(m, "client", "coordinators", "quorum_reachable") != false ||
		path(m, "cluster", "processes") != nil {
		t.Fatalf("partial status: %s", r.stdout)
	}
	// A transaction waits; the timeout ends the session with nothing set.
	r = run(c, "--exec", "maintenance on z1 60", "--timeout", "3")
	if r.code != 1 || !strings.Contains(r.stderr, "Specified timeout reached") {
		t.Fatalf("%+v", r)
	}
	if z, _ := c.MaintenanceZone(); z != "" {
		t.Fatal("maintenance set while unavailable")
	}
	// Bringing one coordinator back restores the quorum and a recovery runs.
	if err := c.Start("storage-1", ""); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	m = status(t, c)
	if path(m, "client", "database_status", "available") != true || path(m, "cluster", "recovery_state", "name") != "fully_recovered" {
		t.Fatalf("after quorum is back: %v %v", path(m, "client", "database_status"), path(m, "cluster", "recovery_state"))
	}
}

func TestExcludeInclude(t *testing.T) {
	c, clock := fixture(t)
	clock.Advance(time.Minute)
	r := run(c, "--exec", "exclude 10.0.1.3:4501")
	if r.code != 0 || !strings.Contains(r.stdout, "Waiting for state to be removed from all excluded servers.") ||
		!strings.Contains(r.stdout, "  10.0.1.3:4501  ---- Successfully excluded. It is now safe to remove this process from the cluster.\n") ||
		!strings.Contains(r.stderr, "WARNING: 10.0.1.3:4501 is a coordinator!\n") {
		t.Fatalf("%+v", r)
	}
	m := status(t, c)
	p := proc(m, "10.0.1.3:4501")
	if p["excluded"] != true {
		t.Fatal("not excluded")
	}
	for _, role := range p["roles"].([]any) {
		if role.(map[string]any)["role"] == "storage" {
			t.Fatal("storage role kept after the data moved")
		}
	}
	if ex := path(m, "cluster", "configuration", "excluded_servers").([]any); len(ex) != 1 || ex[0].(map[string]any)["address"] != "10.0.1.3:4501" {
		t.Fatalf("excluded_servers %v", ex)
	}
	// no_wait returns at once, with the exclusion in progress.
	r = run(c, "--exec", "exclude no_wait 10.0.1.2")
	if r.code != 0 || !strings.Contains(r.stderr, "10.0.1.2(Whole machine)  ---- WARNING: Exclusion in progress!") {
		t.Fatalf("%+v", r)
	}
	// With storage-3 gone and storage-2 excluded, only z1 is left to build double's teams of two
	// zoneids: the data cannot move, and the teams holding storage-2 stay unhealthy.
	if m := status(t, c); path(m, "cluster", "data", "state", "name") != "healing" || path(m, "cluster", "data", "state", "healthy") != false {
		t.Fatalf("data state %v", path(m, "cluster", "data", "state"))
	}
	// Excluding the last storage server is refused (free space check).
	r = run(c, "--exec", "exclude 10.0.1.1:4501; status")
	if r.code != 1 || !strings.Contains(r.stderr, "ERROR: This exclude may cause the total available space in the cluster to drop below 10%.\n"+
		"Type `exclude FORCE failed <ADDRESS...>' to exclude without performing safety checks.\n") ||
		!strings.Contains(r.stdout, "WARNING: the previous command failed") {
		t.Fatalf("%+v", r)
	}
	// An invalid address is an error line, yet the command succeeds.
	if r := run(c, "--exec", "exclude 10.0.1.1:4501:tls"); r.code != 0 ||
		!strings.Contains(r.stderr, "ERROR: '10.0.1.1:4501:tls' is neither a valid network endpoint address nor a locality\n") ||
		!strings.Contains(r.stdout, "Do not include the `:tls' suffix") {
		t.Fatalf("%+v", r)
	}
	if r := run(c, "--exec", "exclude FORCE"); r.code != 1 || !strings.Contains(r.stderr, "At least one valid network endpoint") {
		t.Fatalf("%+v", r)
	}
	r = run(c, "--exec", "exclude")
	if !strings.Contains(r.stdout, "There are currently 2 servers or localities being excluded from the database:\n  10.0.1.3:4501\n  10.0.1.2\n") {
		t.Fatalf("%+v", r)
	}
	// include of a whole IP clears its ip:port entries too; include needs an argument.
	if r := run(c, "--exec", "include"); r.code != 1 || !strings.HasPrefix(r.stdout, "Usage: include all|") {
		t.Fatalf("%+v", r)
	}
	run(c, "--exec", "include 10.0.1.3 10.0.1.2")
	m = status(t, c)
	if ex := path(m, "cluster", "configuration", "excluded_servers").([]any); len(ex) != 0 {
		t.Fatalf("excluded_servers after include %v", ex)
	}
	if p := proc(m, "10.0.1.3:4501"); p["excluded"] != false || len(p["roles"].([]any)) == 0 {
		t.Fatalf("included process %v", p)
	}
}

func TestCoordinators(t *testing.T) {
	c, _ := fixture(t)
	r := run(c, "--exec", "coordinators")
	if r.stdout != "Cluster description: sim\nCluster coordinators (5): 10.0.1.1:4501,10.0.1.2:4501,10.0.1.3:4501,10.0.2.1:4501,10.0.2.2:4501\n"+
		"Type `help coordinators' to learn how to change this information.\n" {
		t.Fatalf("%+v", r)
	}
	tests := []struct {
		exec, stdout, stderr string
		code                 int
	}{
		{"coordinators 10.0.2.2:4501 10.0.2.1:4501 10.0.1.3:4501 10.0.1.2:4501 10.0.1.1:4501", "No change (existing configuration satisfies request)\n", "", 0},
		{"coordinators 10.0.9.1:4501 10.0.1.1:4501 10.0.1.2:4501", "", "ERROR: Coordination servers are not running on the specified network addresses\n", 1},
		{"coordinators 10.0.1.1:4501 10.0.1.1:4501", "", "ERROR: passed redundant coordinators: `10.0.1.1:4501'\n", 0},
		{"coordinators 10.0.1.1", "", "ERROR: '10.0.1.1' is not a valid network endpoint address\n", 0},
		{"coordinators 10.0.1.1:4501 10.0.2.1:4501 10.0.3.1:4501", "Coordination state changed\n", "", 0},
	}
	for _, tt := range tests {
		r := run(c, "--exec", tt.exec)
		if r.code != tt.code || r.stdout != tt.stdout || r.stderr != tt.stderr {
			t.Fatalf("%s: %+v", tt.exec, r)
		}
	}
	if got := c.Coordinators(); !slices.Equal(got, []string{"10.0.1.1:4501", "10.0.2.1:4501", "10.0.3.1:4501"}) {
		t.Fatalf("coordinators %v", got)
	}
	if !strings.HasSuffix(c.ConnectionString(), "@10.0.1.1:4501,10.0.2.1:4501,10.0.3.1:4501") {
		t.Fatal(c.ConnectionString())
	}
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		line               string
		want               [][]string
		malformed, partial bool
	}{
		{"status", [][]string{{"status"}}, false, false},
		{"  kill;  kill 1.2.3.4:4501  ", [][]string{{"kill"}, {"kill", "1.2.3.4:4501"}}, false, false},
		{"status;", [][]string{{"status"}, nil}, false, false},
		{`set "a b" c`, [][]string{{"set", "a b", "c"}}, false, false},
		{`set "" c`, [][]string{{"set", "", "c"}}, false, false},
		{`set a\;b c`, [][]string{{"set", "a;b", "c"}}, false, false},
		{`set "a;b" c`, [][]string{{"set", "a;b", "c"}}, false, false},
		{`set \x41\x42 c`, [][]string{{"set", "AB", "c"}}, false, false},
		{`set \u0041 c`, [][]string{{"set", "A", "c"}}, false, false},
		{`set \u0141 c`, [][]string{{"set"}}, true, false},
		{`set \q`, [][]string{{"set"}}, true, false},
		{`set a\`, [][]string{{"set"}}, true, false},
		{`set "a`, [][]string{{"set", "a"}}, false, true},
		{"a\tb", [][]string{{"a", "b"}}, false, false},
		{"", [][]string{nil}, false, false},
	}
	for _, tt := range tests {
		got, m, p := parseLine(tt.line)
		if m != tt.malformed || p != tt.partial || len(got) != len(tt.want) {
			t.Fatalf("%q: %q %v %v", tt.line, got, m, p)
		}
		for i := range got {
			if !slices.Equal(got[i], tt.want[i]) {
				t.Fatalf("%q: %q, want %q", tt.line, got, tt.want)
			}
		}
	}
	if got := formatToken("a b\"\\\x01"); got != `a\x20b\"\\\x01` {
		t.Fatal(got)
	}
}

func TestNewRejectsBadLayouts(t *testing.T) {
	clock := NewManualClock(t0)
	ok := ProcessSpec{ID: "s", Address: "10.0.0.1:4501", Class: ClassStorage, Zone: "z"}
	tests := []struct {
		name   string
		specs  []ProcessSpec
		coords []string
	}{
		{"bad address", []ProcessSpec{{ID: "s", Address: "host:4501", Class: ClassStorage, Zone: "z"}}, []string{"host:4501"}},
		{"bad class", []ProcessSpec{{ID: "s", Address: "10.0.0.1:4501", Class: "proxy", Zone: "z"}}, []string{"10.0.0.1:4501"}},
		{"no zone", []ProcessSpec{{ID: "s", Address: "10.0.0.1:4501", Class: ClassStorage}}, []string{"10.0.0.1:4501"}},
		{"duplicate", []ProcessSpec{ok, ok}, []string{"10.0.0.1:4501"}},
		{"coordinator not a process", []ProcessSpec{ok}, []string{"10.0.0.2:4501"}},
		{"no coordinators", []ProcessSpec{ok}, nil},
	}
	for _, tt := range tests {
		if _, err := New(clock, Config{}, tt.specs, tt.coords); err == nil {
			t.Fatalf("%s: accepted", tt.name)
		}
	}
}

// TestStorageOnlyClusterRecruitsOnStorage: FoundationDB's Kubernetes sample runs every process
// as storage class; the transaction roles go to storage processes (worst fit, still a fit) and
// the database is available.
func TestStorageOnlyClusterRecruitsOnStorage(t *testing.T) {
	clock := NewManualClock(time.Unix(1_700_000_000, 0))
	var specs []ProcessSpec
	for i := range 5 {
		specs = append(specs, ProcessSpec{ID: fmt.Sprintf("fdb-%d", i), Address: fmt.Sprintf("10.0.0.%d:4501", i+1), Class: ClassStorage, Zone: fmt.Sprintf("fdb-%d", i)})
	}
	c, err := New(clock, Config{}, specs, []string{"10.0.0.1:4501", "10.0.0.2:4501", "10.0.0.3:4501"})
	if err != nil {
		t.Fatal(err)
	}
	st := status(t, c)
	if path(st, "client", "database_status", "available") != true {
		t.Fatalf("not available: %v", path(st, "client", "messages"))
	}
	roles := map[string]bool{}
	for _, p := range c.Processes() {
		for _, r := range p.Roles {
			roles[r] = true
		}
	}
	for _, want := range []string{"cluster_controller", "master", "log", "commit_proxy", "storage"} {
		if !roles[want] {
			t.Errorf("no process holds %s: %v", want, roles)
		}
	}
}

// TestExcludeLocality: fdbcli resolves a locality to the addresses of the workers that have it
// (ExcludeCommand.actor.cpp getAddressesByLocality) and prints one line per address, warns about
// a coordinator among them, and only warns about a locality no running worker has.
func TestExcludeLocality(t *testing.T) {
	c, clock := fixture(t)
	clock.Advance(time.Minute)
	// no_wait: the storage process still holds data.
	r := run(c, "--exec", "exclude no_wait locality_instance_id:storage-3")
	if r.code != 0 || r.stdout != "Type `help coordinators' for information on how to change the\ncluster's coordination servers before removing them.\n" ||
		r.stderr != "  10.0.1.3:4501  ---- WARNING: Exclusion in progress! It is not safe to remove this process from the cluster\n"+
			"WARNING: 10.0.1.3:4501 is a coordinator!\n" {
		t.Fatalf("%+v", r)
	}
	// Waiting: once the data has moved, the locality's address is reported excluded.
	r = run(c, "--exec", "exclude locality_instance_id:storage-3")
	if r.code != 0 || !strings.Contains(r.stdout, "  10.0.1.3:4501  ---- Successfully excluded. It is now safe to remove this process from the cluster.\n") ||
		!strings.Contains(r.stderr, "WARNING: 10.0.1.3:4501 is a coordinator!\n") {
		t.Fatalf("%+v", r)
	}
	// A zone resolves to every worker in it, one line each, ordered by IP.
	r = run(c, "--exec", "exclude locality_zoneid:z3")
	if r.code != 0 || !strings.Contains(r.stdout, "  10.0.1.3:4501  ---- Successfully excluded.") ||
		!strings.Contains(r.stdout, "  10.0.2.3:4501  ---- Successfully excluded.") ||
		!strings.Contains(r.stdout, "  10.0.3.3:4501  ---- Successfully excluded.") ||
		strings.Index(r.stdout, "10.0.1.3") > strings.Index(r.stdout, "10.0.3.3") {
		t.Fatalf("%+v", r)
	}
	// A locality without a running worker: recorded, warned about, nothing to confirm.
	if err := c.Stop("stateless-2"); err != nil {
		t.Fatal(err)
	}
	r = run(c, "--exec", "exclude no_wait locality_instance_id:stateless-2")
	if r.code != 0 || strings.Contains(r.stdout, "Successfully") ||
		r.stderr != "  locality_instance_id:stateless-2  ---- WARNING: Currently no servers found with this locality match! Be sure that you excluded the correct locality.\n" {
		t.Fatalf("%+v", r)
	}
	if r = run(c, "--exec", "exclude"); !strings.Contains(r.stdout, "  locality_instance_id:stateless-2\n") {
		t.Fatalf("locality not recorded: %+v", r)
	}
}

// TestMovingDataAfterARestart: a storage process bounced outside a maintenance zone leaves
// relocations in flight after it returns (data distribution marked it failed); inside its
// zone's maintenance nothing moves. A workload's background relocation and QoS show as set.
func TestMovingDataAfterARestart(t *testing.T) {
	for _, tt := range []struct {
		name      string
		maint     bool
		wantMoved bool
	}{
		{"outside maintenance", false, true},
		{"inside its zone's maintenance", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, clock := fixture(t)
			if tt.maint {
				runOK(t, c, "maintenance on z1 600")
			}
			// fdbcli's wait after the kills (3 s) outlasts the restart delay (2 s): back now.
			runOK(t, c, "kill; kill 10.0.1.1:4501")
			st := status(t, c)
			if up := path(proc(st, "10.0.1.1:4501"), "uptime_seconds"); up == nil {
				t.Fatalf("storage process not back: %v", proc(st, "10.0.1.1:4501"))
			}
			moving, _ := path(st, "cluster", "data", "moving_data", "in_flight_bytes").(float64)
			if (moving > 0) != tt.wantMoved {
				t.Fatalf("in_flight_bytes %v after the restart, want moving %v", moving, tt.wantMoved)
			}
			clock.Advance(c.cfg.DataMove)
			if moving := path(status(t, c), "cluster", "data", "moving_data", "in_flight_bytes"); moving != float64(0) {
				t.Fatalf("in_flight_bytes %v once the relocations ended", moving)
			}
		})
	}
	c, _ := fixture(t)
	c.SetLoad(Load{InFlightBytes: 5 << 20, DataLag: 90 * time.Second, LogQueueBytes: 300 << 20})
	st := status(t, c)
	if v := path(st, "cluster", "data", "moving_data", "in_flight_bytes"); v != float64(5<<20) {
		t.Fatalf("in_flight_bytes %v", v)
	}
	if v := path(st, "cluster", "qos", "worst_data_lag_storage_server", "seconds"); v != float64(90) {
		t.Fatalf("worst data lag %v", v)
	}
	if v := path(st, "cluster", "qos", "worst_queue_bytes_log_server"); v != float64(300<<20) {
		t.Fatalf("worst log queue %v", v)
	}
}

func runOK(t *testing.T, c *Cluster, cmds string) {
	t.Helper()
	if r := run(c, "--exec", cmds); r.code != 0 {
		t.Fatalf("%s: %+v", cmds, r)
	}
}

// tlsFixture is fixture with every process listening with TLS (addresses ip:4500:tls, as the
// operator's cluster with spec.mainContainer.enableTls) and the given version.
func tlsFixture(t *testing.T, version string) (*Cluster, *ManualClock) {
	t.Helper()
	clock := NewManualClock(t0)
	var specs []ProcessSpec
	for i, z := range []string{"z1", "z2", "z3"} {
		n := string(rune('1' + i))
		specs = append(specs,
			ProcessSpec{ID: "storage-" + n, Address: "10.0.1." + n + ":4500:tls", Class: ClassStorage, Zone: z},
			ProcessSpec{ID: "log-" + n, Address: "10.0.2." + n + ":4500:tls", Class: ClassLog, Zone: z},
			ProcessSpec{ID: "stateless-" + n, Address: "10.0.3." + n + ":4500:tls", Class: ClassStateless, Zone: z})
	}
	coords := []string{"10.0.1.1:4500:tls", "10.0.1.2:4500:tls", "10.0.1.3:4500:tls"}
	c, err := New(clock, Config{Version: version}, specs, coords)
	if err != nil {
		t.Fatal(err)
	}
	return c, clock
}

// fdbcli/Util.actor.cpp addInterfacesFromKVs keys the kill list by the address without ":tls":
// the list prints bare addresses, `kill ip:port:tls` is not recognised and kills nothing, and
// `kill ip:port` bounces the TLS process.
func TestKillListOfATLSClusterHasNoTLSSuffix(t *testing.T) {
	c, clock := tlsFixture(t, "")
	clock.Advance(time.Minute)
	r := run(c, "--exec", "kill; kill 10.0.1.1:4500:tls")
	if r.code != 1 || r.stderr != "ERROR: process `10.0.1.1:4500:tls' not recognized.\n" ||
		!strings.Contains(r.stdout, "killed:\n10.0.1.1:4500\n10.0.1.2:4500\n") {
		t.Fatalf("%+v", r)
	}
	if up := proc(status(t, c), "10.0.1.1:4500:tls")["uptime_seconds"].(float64); up < 60 {
		t.Fatalf("kill of an unrecognised address restarted the process: uptime %v", up)
	}
	r = run(c, "--exec", "kill; kill 10.0.1.1:4500")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "Attempted to kill 1 processes\n") {
		t.Fatalf("%+v", r)
	}
	if up := proc(status(t, c), "10.0.1.1:4500:tls")["uptime_seconds"].(float64); up >= 60 {
		t.Fatalf("kill of the bare address did not restart the TLS process: uptime %v", up)
	}
}

// 7.1's kill returns as soon as it has queued the requests (release-7.1
// fdbcli/KillCommand.actor.cpp has no delay after rebootWorker): a session that ends right after
// kills nothing; one that goes on (`; sleep 5`, as the operator's getKillCommand appends) does.
// 7.3 waits before returning.
func TestKillOf71DeliversOnlyWhenTheSessionGoesOn(t *testing.T) {
	for _, tt := range []struct {
		version, cmd string
		killed       bool
	}{
		{"7.1.57", "kill; kill 10.0.1.1:4500", false},
		{"7.1.57", "kill; kill 10.0.1.1:4500; sleep 5", true},
		{"7.3.63", "kill; kill 10.0.1.1:4500", true},
	} {
		t.Run(tt.version+" "+tt.cmd, func(t *testing.T) {
			c, clock := tlsFixture(t, tt.version)
			clock.Advance(time.Minute)
			r := run(c, "--exec", tt.cmd)
			if r.code != 0 || !strings.Contains(r.stdout, "Attempted to kill 1 processes\n") {
				t.Fatalf("%+v", r)
			}
			m := status(t, c)
			if v := proc(m, "10.0.1.1:4500:tls")["version"]; v != tt.version {
				t.Fatalf("status json version %v, want %s", v, tt.version)
			}
			up := proc(m, "10.0.1.1:4500:tls")["uptime_seconds"].(float64)
			if killed := up < 60; killed != tt.killed {
				t.Fatalf("killed %v (uptime %v), want %v", killed, up, tt.killed)
			}
		})
	}
}

// TestRecoveriesCountBounces: a kill of a storage-only process starts no recovery; a kill of a
// log starts one; one kill of every stateless process (master, cluster controller and proxies
// among them) starts one, not one per process (KillCommand.actor.cpp sends them in one round).
func TestRecoveriesCountBounces(t *testing.T) {
	c, clock := fixture(t)
	clock.Advance(time.Minute)
	roles := map[string][]string{}
	for _, p := range c.Processes() {
		roles[p.Address] = p.Roles
	}
	if slices.ContainsFunc(roles["10.0.1.3:4501"], func(r string) bool { return r != "storage" && r != "coordinator" }) {
		t.Fatalf("storage-3 holds %q, want storage only", roles["10.0.1.3:4501"])
	}
	for _, tt := range []struct {
		kill string
		want int
	}{
		{"10.0.1.3:4501", 0},
		{"10.0.2.3:4501", 1},
		{"10.0.3.1:4501 10.0.3.2:4501 10.0.3.3:4501", 2},
	} {
		if r := run(c, "--exec", "kill; kill "+tt.kill); r.code != 0 {
			t.Fatalf("kill %s: %+v", tt.kill, r)
		}
		clock.Advance(time.Minute)
		if got := c.Recoveries(); got != tt.want {
			t.Fatalf("after kill %s: %d recoveries, want %d", tt.kill, got, tt.want)
		}
	}
}
