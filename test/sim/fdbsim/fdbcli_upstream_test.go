package fdbsim

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFdbcliAsFDBsOwnTestsExpect holds the model's fdbcli to what FoundationDB's own fdbcli
// tests assert of the real fdbcli (apple/foundationdb fdbcli/tests/fdbcli_tests.py at 7.3.63:
// maintenance, kill, coordinators, exclude), on stdout and stderr stripped as that script's
// run_fdbcli_command and run_fdbcli_command_and_get_error strip them.
func TestFdbcliAsFDBsOwnTestsExpect(t *testing.T) {
	out := func(t *testing.T, c *Cluster, cmd string) string {
		t.Helper()
		return strings.TrimSpace(run(c, "--exec", cmd, "--timeout", "10").stdout)
	}
	errOut := func(t *testing.T, c *Cluster, cmd string) string {
		t.Helper()
		return strings.TrimSpace(run(c, "--exec", cmd, "--timeout", "10").stderr)
	}

	t.Run("maintenance", func(t *testing.T) {
		c, clock := fixture(t)
		if got := out(t, c, "maintenance"); got != "No ongoing maintenance." {
			t.Fatalf("maintenance: %q", got)
		}
		out(t, c, "maintenance on fake_zone_id 10")
		clock.Advance(1500 * time.Millisecond)
		items := strings.Split(out(t, c, "maintenance"), " ")
		found := false
		for _, it := range items {
			found = found || it == "fake_zone_id"
		}
		n, err := strconv.Atoi(items[len(items)-2])
		if !found || err != nil || n <= 0 || n >= 10 {
			t.Fatalf("maintenance status %q: want the zone and 0 < seconds < 10", items)
		}
		out(t, c, "maintenance off")
		if got := out(t, c, "maintenance"); got != "No ongoing maintenance." {
			t.Fatalf("maintenance after off: %q", got)
		}
	})

	t.Run("kill", func(t *testing.T) {
		c, clock := fixture(t)
		lines := strings.Split(out(t, c, "kill"), "\n")
		if len(lines) != 1+9 {
			t.Fatalf("kill lists %d lines, want a header and one address per process (9): %q", len(lines), lines)
		}
		if !strings.HasPrefix(lines[1], "10.0.") {
			t.Fatalf("kill: %q", lines)
		}
		// FoundationDB's test kills the only process of a one-process cluster, which holds
		// every role; here a process with the log role, whose loss recovers the transaction
		// system just the same (a new generation).
		st := status(t, c)
		addr := ""
		for _, p := range path(st, "cluster", "processes").(map[string]any) {
			for _, r := range p.(map[string]any)["roles"].([]any) {
				if r.(map[string]any)["role"] == "log" {
					addr = p.(map[string]any)["address"].(string)
				}
			}
		}
		old := path(st, "cluster", "generation").(float64)
		run(c, "--exec", "kill; kill "+addr, "--timeout", "10")
		clock.Advance(time.Minute)
		if now := path(status(t, c), "cluster", "generation").(float64); now <= old {
			t.Fatalf("generation %v after killing %s, want more than %v", now, addr, old)
		}
	})

	t.Run("coordinators", func(t *testing.T) {
		c, _ := fixture(t)
		lines := strings.Split(out(t, c, "coordinators"), "\n")
		if len(lines) <= 2 {
			t.Fatalf("coordinators: %q", lines)
		}
		desc := lines[0][strings.LastIndex(lines[0], ": ")+2:]
		st := status(t, c)
		if cs := path(st, "cluster", "connection_string").(string); !strings.HasPrefix(cs, desc+":") {
			t.Fatalf("description %q, connection string %q", desc, cs)
		}
		var addrs []string
		for _, co := range path(st, "client", "coordinators", "coordinators").([]any) {
			addrs = append(addrs, co.(map[string]any)["address"].(string))
		}
		if want := "Cluster coordinators (5): " + strings.Join(addrs, ","); lines[1] != want {
			t.Fatalf("coordinators line %q, want %q", lines[1], want)
		}
	})

	t.Run("exclude", func(t *testing.T) {
		c, _ := fixture(t)
		none := "There are currently no servers or localities excluded from the database."
		if got := out(t, c, "exclude"); !strings.Contains(got, none) {
			t.Fatalf("exclude: %q", got)
		}
		coord := "10.0.1.1:4501"
		if got := errOut(t, c, "exclude "+coord); got != "WARNING: "+coord+" is a coordinator!" {
			t.Fatalf("exclude of a coordinator, stderr %q", got)
		}
		got := out(t, c, "exclude")
		if !strings.Contains(got, "There are currently 1 servers or localities being excluded from the database") || !strings.Contains(got, coord) {
			t.Fatalf("exclude listing: %q", got)
		}
		out(t, c, "include "+coord)
		if got := out(t, c, "exclude"); !strings.Contains(got, none) {
			t.Fatalf("exclude after include: %q", got)
		}
	})
}
