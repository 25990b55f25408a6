package fdbsim

import (
	"strings"
	"testing"
	"time"
)

func TestKeyValueCommands(t *testing.T) {
	tests := []struct {
		name           string
		line           string
		code           int
		stdout, stderr []string // substrings, in order
		notStdout      string
	}{
		{name: "set needs writemode", line: "set a b", code: 1,
			stderr: []string{"ERROR: writemode must be enabled to set or clear keys in the database."}},
		{name: "set and get", line: "writemode on; set a b; get a", code: 0,
			stdout: []string{">>> writemode on", ">>> set a b", "Committed (", ">>> get a", "`a' is `b'"}},
		{name: "get missing", line: "get nothing", code: 0, stdout: []string{"`nothing': not found"}},
		{name: "system key without option", line: `writemode on; set \xff\x02/k v; get a`, code: 1,
			stderr: []string{"ERROR: Key outside legal range (2004)"}, notStdout: ">>> get a"},
		{name: "system key read needs READ_SYSTEM_KEYS", line: `get \xff\x02/k`, code: 1,
			stderr: []string{"ERROR: Key outside legal range (2004)"}},
		{name: "system key with ACCESS_SYSTEM_KEYS", line: `option on ACCESS_SYSTEM_KEYS; writemode on; set \xff\x02/k \x01\x00; get \xff\x02/k`, code: 0,
			stdout: []string{"Option enabled for all transactions", "Committed (", "`\\xff\\x02/k' is `\\x01\\x00'"}},
		{name: "invalid option", line: "option on NO_SUCH_OPTION", code: 1,
			stderr: []string{"ERROR: invalid option 'NO_SUCH_OPTION'", "ERROR: Option not valid in this context (2007)"}},
		{name: "bad option state", line: "option maybe ACCESS_SYSTEM_KEYS", code: 1,
			stderr: []string{"ERROR: Invalid option state `maybe'"}},
		{name: "set usage", line: "writemode on; set onlykey", code: 1, stdout: []string{"Usage: set <KEY> <VALUE>"}},
		{name: "writemode usage", line: "writemode maybe", code: 1, stdout: []string{"Usage: writemode <on|off>"}},
		{name: "clear and getrange", line: "writemode on; set p/a 1; set p/b 2; set q 3; clear p/a; getrange p/", code: 0,
			stdout: []string{"Range limited to 25 keys", "`p/b' is `2'"}, notStdout: "`q' is"},
		{name: "bad limit", line: "getrange a b x", code: 1, stderr: []string{"ERROR: bad limit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := fixture(t)
			r := run(c, "--exec", tt.line, "--timeout", "10")
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.code, r.stdout, r.stderr)
			}
			inOrder(t, "stdout", r.stdout, tt.stdout)
			inOrder(t, "stderr", r.stderr, tt.stderr)
			if tt.notStdout != "" && strings.Contains(r.stdout, tt.notStdout) {
				t.Fatalf("stdout has %q:\n%s", tt.notStdout, r.stdout)
			}
			if strings.Contains(r.stdout, "WARNING: the previous command failed") && strings.Contains(r.stderr, "(2004)") {
				t.Fatalf("a thrown FDB error ends the line without the warning:\n%s", r.stdout)
			}
		})
	}
}

func inOrder(t *testing.T, what, got string, want []string) {
	t.Helper()
	rest := got
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("%s lacks %q (in order):\n%s", what, w, got)
		}
		rest = rest[i+len(w):]
	}
}

func TestDegradedStorageRecordsUnprotectedFailures(t *testing.T) {
	c, clock := fixture(t)
	// Inside its zone's maintenance a bounce is protected.
	run(c, "--exec", "maintenance on z1 600; kill; kill 10.0.1.1:4501", "--timeout", "20")
	clock.Advance(5 * time.Second)
	run(c, "--exec", "maintenance off", "--timeout", "10")
	if d := c.DegradedStorage(); len(d) != 0 {
		t.Fatalf("protected bounce recorded: %v", d)
	}
	// Maintenance ended while the process is still down.
	if err := c.Stop("storage-2"); err != nil {
		t.Fatal(err)
	}
	if d := c.DegradedStorage(); len(d) != 1 || !strings.Contains(d[0], "storage-2") {
		t.Fatalf("unprotected failure not recorded: %v", d)
	}
	if err := c.Start("storage-2", ""); err != nil {
		t.Fatal(err)
	}
	run(c, "--exec", "maintenance on z3 600", "--timeout", "10")
	if err := c.Stop("storage-3"); err != nil {
		t.Fatal(err)
	}
	run(c, "--exec", "maintenance off", "--timeout", "10")
	if d := c.DegradedStorage(); len(d) != 2 || !strings.Contains(d[1], "maintenance of zone z3 ended while storage process storage-3 was down") {
		t.Fatalf("maintenance ended under a down process not recorded: %v", d)
	}
}
