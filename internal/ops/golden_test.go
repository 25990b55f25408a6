package ops

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// assertGolden compares got with testdata/name, or rewrites it with -update.
func assertGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden %s (run go test -update): %v", path, err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from golden (run go test -update after checking):\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}
