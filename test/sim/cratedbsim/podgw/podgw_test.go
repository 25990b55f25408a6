package podgw

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

func TestHelloRoundTrip(t *testing.T) {
	h := Hello{Pod: "crate-data-hot-crate1-0", Service: ServicePSQL, Client: "127.0.0.1:43210"}
	var buf bytes.Buffer
	if err := Write(&buf, h); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("payload")
	r := bufio.NewReader(&buf)
	got, err := Read(r)
	if err != nil || got != h {
		t.Fatalf("Read = %+v, %v; want %+v", got, err, h)
	}
	rest, _ := r.ReadString(0)
	if rest != "payload" {
		t.Errorf("bytes after the hello = %q, want payload", rest)
	}
}

func TestHelloRejects(t *testing.T) {
	for _, tc := range []struct{ name, line string }{
		{"wrong magic", "CRATEDB-SIM/2 p http 127.0.0.1:1\n"},
		{"bad pod", "CRATEDB-SIM/1 Pod_X http 127.0.0.1:1\n"},
		{"unknown service", "CRATEDB-SIM/1 p transport 127.0.0.1:1\n"},
		{"client without port", "CRATEDB-SIM/1 p http 127.0.0.1\n"},
		{"client a name", "CRATEDB-SIM/1 p http localhost:1\n"},
		{"extra field", "CRATEDB-SIM/1 p http 127.0.0.1:1 x\n"},
		{"no newline", "CRATEDB-SIM/1 p http 127.0.0.1:1"},
		{"too long", "CRATEDB-SIM/1 " + strings.Repeat("a", 600) + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if h, err := Read(bufio.NewReader(strings.NewReader(tc.line))); err == nil {
				t.Fatalf("Read accepted %q as %+v", tc.line, h)
			}
		})
	}
	if err := Write(&bytes.Buffer{}, Hello{Pod: "p", Service: "ssh", Client: "127.0.0.1:1"}); err == nil {
		t.Error("Write accepted an unknown service")
	}
}
