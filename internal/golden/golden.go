// Package golden compares test output with files under testdata/ and
// rewrites them when the tests run with -update. Test support only.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update is the -update test flag. Flags are process-wide by nature; this
// registers it once for every test binary that uses golden files.
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Assert compares got with testdata/name, or rewrites that file with
// -update (check the diff before committing it).
func Assert(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file %s (go test -update creates it): %v", path, err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it after checking):\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}
