// Package racebuild tells whether this binary was built with the race detector, so the test
// harnesses build the programs they run (the kubectl-dbops CLI, the fdbcli and crash shims)
// the same way: a race in a child process then fails the e2e test as one in the test would.
package racebuild

// BuildFlags are the `go build` flags that give a child program the race detector when this
// binary has it, and none otherwise.
func BuildFlags() []string {
	if Enabled {
		return []string{"-race"}
	}
	return nil
}
