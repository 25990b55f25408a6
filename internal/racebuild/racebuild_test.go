package racebuild

import (
	"slices"
	"testing"
)

func TestBuildFlags(t *testing.T) {
	for _, tc := range []struct {
		env, program string
		want         bool
	}{
		{"", CLI, Enabled},
		{"kubectl-dbops,crash-shim", CLI, true},
		{"kubectl-dbops, crash-shim", CrashShim, true},
		{"kubectl-dbops,crash-shim", FDBShim, Enabled},
		{"all", FDBShim, true},
	} {
		t.Setenv(ChildrenEnv, tc.env)
		if got := slices.Contains(BuildFlags(tc.program), "-race"); got != tc.want {
			t.Errorf("%s=%q, BuildFlags(%q) race=%v, want %v", ChildrenEnv, tc.env, tc.program, got, tc.want)
		}
	}
}
