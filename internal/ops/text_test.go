package ops

import (
	"errors"
	"strings"
	"testing"
)

func TestPrintable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"alice@host:6443", "alice@host:6443"},
		{"INC-1234: investigating", "INC-1234: investigating"},
		{"grün ✓", "grün ✓"},
		{"a\x1b[2Jb", `a\x1b[2Jb`},
		{"x\r\n2026-11-22T07:20:01Z done: succeeded", `x\r\n2026-11-22T07:20:01Z done: succeeded`},
		{"tab\there", `tab\there`},
		{"del\x7f", `del\x7f`},
		{"c1\u009b31m", `c1\x9b31m`},
		{"bidi\u202eevil", `bidi\u202eevil`},
		{"zw\u200bsp", `zw\u200bsp`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"ls\u2028", `ls\u2028`},
	}
	for _, tt := range tests {
		got := Printable(tt.in)
		if got != tt.want {
			t.Errorf("Printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
		err := CheckPrintable("--reason", tt.in)
		if (err == nil) != (got == tt.in) {
			t.Errorf("CheckPrintable(%q) = %v, Printable changed it: %v", tt.in, err, got != tt.in)
		}
		if err != nil {
			if !errors.Is(err, ErrUsage) || !strings.HasPrefix(err.Error(), "--reason ") {
				t.Errorf("CheckPrintable(%q) = %v, want a usage error naming --reason", tt.in, err)
			}
			if strings.Contains(err.Error(), tt.in) || !isPrintable(err.Error()) {
				t.Errorf("CheckPrintable(%q) repeats the value or is not printable: %q", tt.in, err)
			}
		}
	}
}

func TestShellQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "''"},
		{"web", "web"},
		{"--data=hot=5", "--data=hot=5"},
		{"alice@api.example:6443", "alice@api.example:6443"},
		{"two words", "'two words'"},
		{"it's", `'it'\''s'`},
		{"$(rm -rf /)", "'$(rm -rf /)'"},
	}
	for _, tt := range tests {
		if got := ShellQuote(tt.in); got != tt.want {
			t.Errorf("ShellQuote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestJoinOneLine(t *testing.T) {
	if JoinOneLine(nil, nil) != nil {
		t.Error("no errors should join to nil")
	}
	one := errors.New("pod a: gone")
	if JoinOneLine(nil, one) != one {
		t.Error("a single error should be returned as is")
	}
	err := JoinOneLine(errors.New("pod a: refused\nretry later"), Preconditionf("pod b: not Ready"))
	if got := err.Error(); got != "2 failures: pod a: refused\nretry later; pod b: not Ready" {
		t.Errorf("message = %q", got)
	}
	if !errors.Is(err, ErrPrecondition) || ExitCode(err) != ExitPrecondition {
		t.Errorf("the kinds of the joined errors are lost: %v", err)
	}
	// The CLI prints it escaped: one line even when a cause has a newline.
	if strings.Contains(Printable(err.Error()), "\n") {
		t.Error("not one line once printed")
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"}, {5 << 20, "5.0 MiB"}, {3435973837, "3.2 GiB"}, {1 << 62, "4.0 EiB"}} {
		if got := FormatBytes(tc.n); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
