// Package racebuild tells whether this binary was built with the race detector, so the test
// harnesses build the programs they run (the kubectl-dbops CLI, the fdbcli and crash shims)
// the same way: a race in a child process then fails the e2e test as one in the test would.
package racebuild

import (
	"os"
	"slices"
	"strings"
)

// ChildrenEnv lists (comma-separated; "all" for every one) the programs the harnesses build
// with the race detector even when the test binary itself has none. make test runs the e2e
// test binary without -race but the kubectl-dbops CLI and the crash shim with it (the
// Makefile's e2e target says why: a race-built fdbcli shim, started for every fdbcli exec,
// and race-built simulators triple the FoundationDB e2e time).
const ChildrenEnv = "DBOPS_E2E_RACE_CHILDREN"

// The programs the harnesses build, as named in ChildrenEnv.
const (
	CLI       = "kubectl-dbops"
	FDBShim   = "fdbcli-shim"
	CrashShim = "crash-shim"
)

// BuildFlags are the `go build` flags for program: the race detector when this binary has
// it, or when ChildrenEnv names program (or "all"); none otherwise.
func BuildFlags(program string) []string {
	if Enabled {
		return []string{"-race"}
	}
	names := strings.Split(os.Getenv(ChildrenEnv), ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	if slices.Contains(names, program) || slices.Contains(names, "all") {
		return []string{"-race"}
	}
	return nil
}
