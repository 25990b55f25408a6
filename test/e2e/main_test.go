//go:build e2e

// Package e2e runs end-to-end tests against a local control plane started by
// test/testbed. Run with: go test -tags e2e ./test/e2e/ -v -count=1
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// bed is shared by all tests of the package: starting a control plane takes seconds, and the
// tests isolate themselves by namespace. It is set once in TestMain before any test runs.
var bed *testbed.Testbed

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The first run may build the binaries (several minutes); later runs start in seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	tb, err := testbed.Start(ctx, testbed.Options{
		Logf:        func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
		BuildOutput: os.Stderr,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start testbed: %v\n", err)
		return 1
	}
	bed = tb
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "testbed logs (%s):\n%s", tb.LogDir, tb.LogTails(20))
	}
	// The second control plane (fleet tests) runs only if a test asked for it.
	if err := bedB.stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop second testbed: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	if err := tb.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop testbed: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
