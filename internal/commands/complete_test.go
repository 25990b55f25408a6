package commands

import (
	"slices"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
)

// TestCompletion runs cobra's hidden __complete command, as the shell
// scripts in completions/ do, against the fake cluster.
func TestCompletion(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"clusters for status", []string{"status", ""}, []string{"db"}},
		{"clusters for replace", []string{"replace", ""}, []string{"db"}},
		{"pods for replace", []string{"replace", "db", ""}, []string{"db-master-0", "db-master-1", "db-master-2", "db-hot-0", "db-hot-1", "db-cold-0"}},
		{"pods for replace, named ones left out", []string{"replace", "db", "db-hot-0", "db-master-1", ""},
			[]string{"db-master-0", "db-master-2", "db-hot-1", "db-cold-0"}},
		{"clusters for deny allow", []string{"deny", "allow", ""}, []string{"db"}},
		{"denied IDs for deny allow", []string{"deny", "allow", "db", ""}, []string{"ci@test", "eve@test"}},
		{"nothing after the ID", []string{"deny", "allow", "db", "ci@test", ""}, nil},
		{"contexts", []string{"status", "db", "--context", ""}, []string{"prod", "staging"}},
		{"fleet contexts", []string{"restart", "db", "--contexts", ""}, []string{"prod", "staging"}},
		{"fleet contexts of list", []string{"list", "--contexts", ""}, []string{"prod", "staging"}},
		{"holder for deny add", []string{"deny", "add", "db", ""}, []string{"bob@test"}},
		// Over a fleet with -l the first argument is the ID: no cluster names (they were offered).
		{"no clusters for deny add -l", []string{"deny", "add", "--contexts", "prod", "-l", "tier=db", ""}, nil},
		{"no clusters for deny allow -l", []string{"deny", "allow", "--contexts", "prod", "-l", "tier=db", ""}, nil},
		{"nothing after the ID with -l", []string{"deny", "allow", "ci@test", "--contexts", "prod", "-l", "tier=db", ""}, nil},
		{"holder for lock release --id", []string{"lock", "release", "db", "--id", ""}, []string{"bob@test"}},
		{"groups", []string{"restart", "db", "--group", ""}, []string{"master", "hot", "cold"}},
		{"output of a document command", []string{"status", "db", "-o", ""}, documentFormats()},
		{"output of an operation", []string{"restart", "db", "-o", ""}, outputFormats},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
			if r := h.run("lock", "acquire", "db", "--id", "bob@test"); r.code != 0 {
				t.Fatalf("lock acquire: %s", r.err)
			}
			for _, id := range []string{"ci@test", "eve@test"} {
				if r := h.run("deny", "add", "db", id); r.code != 0 {
					t.Fatalf("deny add: %s", r.err)
				}
			}
			h.client.ClearActions()
			r := h.run(append([]string{"__complete"}, tt.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			lines := strings.Split(strings.TrimSpace(r.out), "\n")
			directive := lines[len(lines)-1]
			got := lines[:len(lines)-1]
			if len(got) == 0 {
				got = nil
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("completions %q, want %q", got, tt.want)
			}
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("completion wrote: %v", w)
			}
			if directive != ":4" {
				t.Errorf("directive %s, want :4 (no file completion); stderr %s", directive, r.err)
			}
		})
	}
}
