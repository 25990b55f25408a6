package tui

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

func TestConfirm(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    bool
		prompts int
	}{
		{"yes", "y\n", true, 1},
		{"YES", "YES\n", true, 1},
		{"spaces", "  yes \r\n", true, 1},
		{"no", "n\n", false, 1},
		{"empty is no", "\n", false, 1},
		{"end of input is no", "", false, 1},
		{"unknown asks again", "maybe\ny\n", true, 2},
		{"unknown then end of input", "maybe", false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			got, err := Confirm(strings.NewReader(tt.input), &out, "Restart 3 pods?")
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Confirm = %v, want %v", got, tt.want)
			}
			if n := strings.Count(out.String(), "Restart 3 pods? [y/N]: "); n != tt.prompts {
				t.Errorf("asked %d times, want %d:\n%s", n, tt.prompts, out.String())
			}
		})
	}
}

// TestConfirmReadsOneLine: the rest of stdin belongs to whoever reads next.
func TestConfirmReadsOneLine(t *testing.T) {
	in := strings.NewReader("y\nrest")
	if ok, err := Confirm(in, io.Discard, "?"); !ok || err != nil {
		t.Fatalf("Confirm = %v, %v", ok, err)
	}
	rest, _ := io.ReadAll(in)
	if string(rest) != "rest" {
		t.Errorf("Confirm consumed %q past its line", "rest"[:4-len(rest)])
	}
}

func TestConfirmTooLong(t *testing.T) {
	if _, err := Confirm(strings.NewReader(strings.Repeat("x", 10000)+"\n"), io.Discard, "?"); err == nil {
		t.Error("no error for an endless answer")
	}
}

func TestIsTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, f := range map[string]any{"pipe": r, "buffer": &bytes.Buffer{}, "nil": nil} {
		if IsTerminal(f) {
			t.Errorf("IsTerminal(%s) = true", name)
		}
	}
}
