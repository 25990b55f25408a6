package fdbsim

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestTransactions(t *testing.T) {
	tests := []struct {
		name           string
		line           string
		code           int
		stdout, stderr []string
		notStdout      string
		key, want      string // after the line: key holds want ("" = absent)
	}{
		{name: "begin set commit", line: `writemode on; option on ACCESS_SYSTEM_KEYS; begin; get \xff\x02/g; set \xff\x02/g v; commit`,
			stdout: []string{"Transaction started", "`\\xff\\x02/g': not found", ">>> commit", "Committed ("}, key: "\xff\x02/g", want: "v"},
		{name: "set in a transaction is not committed before commit", line: "writemode on; begin; set a b; rollback; get a",
			stdout: []string{"Transaction rolled back", "`a': not found"}, notStdout: "Committed", key: "a"},
		{name: "read your writes", line: "writemode on; begin; set a b; get a; commit",
			stdout: []string{"`a' is `b'", "Committed ("}, key: "a", want: "b"},
		{name: "a transaction left open is not committed", line: "writemode on; begin; set a b",
			stdout: []string{"Transaction started"}, notStdout: "Committed", key: "a"},
		{name: "a range read inside a transaction", line: "writemode on; set p/a 1; begin; set p/b 2; getrange p/; commit",
			stdout: []string{"`p/a' is `1'", "`p/b' is `2'", "Committed ("}, key: "p/b", want: "2"},
		{name: "read-only commit", line: "begin; get a; commit", stdout: []string{"Nothing to commit"}},
		{name: "begin twice", line: "begin; begin", code: 1, stderr: []string{"ERROR: Already in transaction"}},
		{name: "commit without begin", line: "commit", code: 1, stderr: []string{"ERROR: No active transaction"}},
		{name: "rollback without begin", line: "rollback", code: 1, stderr: []string{"ERROR: No active transaction"}},
		{name: "option inside a transaction stays in it", line: `writemode on; begin; option on ACCESS_SYSTEM_KEYS; set \xff\x02/g v; commit; set \xff\x02/h v`,
			code: 1, stdout: []string{"Committed ("}, stderr: []string{"ERROR: Key outside legal range (2004)"}, key: "\xff\x02/h"},
		{name: "error rolls the transaction back", line: `writemode on; begin; set a b; set \xff\x02/g v; commit`, code: 1,
			stdout: []string{"Rolling back current transaction"}, stderr: []string{"ERROR: Key outside legal range (2004)"}, notStdout: ">>> commit", key: "a"},
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
			if tt.key != "" {
				got := c.KV(tt.key)[tt.key]
				if string(got) != tt.want {
					t.Fatalf("%q = %q, want %q", tt.key, got, tt.want)
				}
			}
		})
	}
}

// TestTransactionConflict: a transaction whose read key was written by another transaction
// after its read fails its commit with not_committed (1020) and writes nothing; one whose key
// nobody wrote commits.
func TestTransactionConflict(t *testing.T) {
	for _, tt := range []struct {
		read, other string
		conflict    bool
	}{
		{`get \xff\x02/g`, "", false},
		{`get \xff\x02/g`, "g", true},
		{`get \xff\x02/g`, "unrelated", false},
		{`getrange \xff\x02/a \xff\x02/z`, "m", true},
		{`getrange \xff\x02/a \xff\x02/h`, "m", false},
	} {
		other := tt.other
		t.Run(tt.read+" other writes "+other, func(t *testing.T) {
			c, _ := fixture(t)
			var out, errb bytes.Buffer
			s := &session{c: c, ctx: context.Background(), stdout: &out, stderr: &errb}
			if code, err := s.runLine(`writemode on; option on ACCESS_SYSTEM_KEYS; begin; ` + tt.read); code != 0 || err != nil {
				t.Fatalf("begin: %d %v %s", code, err, errb.String())
			}
			if other != "" {
				if err := c.Transact("operator", func(tx *Tx) error { tx.Set("\xff\x02/"+other, []byte("theirs")); return nil }); err != nil {
					t.Fatal(err)
				}
			}
			out.Reset()
			code, _ := s.runLine(`set \xff\x02/g ours; commit`)
			conflict := tt.conflict
			if conflict != (code == 1) {
				t.Fatalf("exit %d (conflict %t)\nstdout:\n%s\nstderr:\n%s", code, conflict, out.String(), errb.String())
			}
			want := "ours"
			if conflict {
				want = map[bool]string{true: "theirs", false: ""}[other == "g"]
				inOrder(t, "stderr", errb.String(), []string{"ERROR: Transaction not committed due to conflict with another transaction (1020)"})
				inOrder(t, "stdout", out.String(), []string{"Rolling back current transaction"})
			}
			if got := string(c.KV("\xff\x02/g")["\xff\x02/g"]); got != want {
				t.Fatalf("key = %q, want %q", got, want)
			}
		})
	}
}
