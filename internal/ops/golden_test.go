package ops

import (
	"github.com/kubectl-dbops/kubectl-dbops/internal/golden"
	"testing"
)

// assertGolden compares got with testdata/name, or rewrites it with -update.
func assertGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Assert(t, name, got)
}
