package etcd

import (
	"context"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestExplain: the restart preflight's two questions as lines: quorum and every member
// healthy; a member down fails "members" with the replace command, two fail quorum too.
func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		down    []int
		failing []string
		fix     string
	}{
		{name: "all healthy"},
		{name: "one down", down: []int{2}, failing: []string{"members"}, fix: "kubectl dbops replace"},
		{name: "two down", down: []int{1, 2}, failing: []string{"quorum", "members"}, fix: "majority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEtcd(3, 0)
			for _, o := range tc.down {
				f.members[o].healthy = false
			}
			fx := newFixture(t, 3, f, nil)
			checks, err := fx.eng.Explain(context.Background(), fx.c, "restart")
			if err != nil {
				t.Fatal(err)
			}
			var failed []string
			for _, ch := range checks {
				if !ch.OK {
					failed = append(failed, ch.Name)
					if ch.Fix == "" {
						t.Errorf("%s has no fix", ch.Name)
					}
				}
			}
			if strings.Join(failed, ",") != strings.Join(tc.failing, ",") {
				t.Errorf("failed %v, want %v: %+v", failed, tc.failing, checks)
			}
			if tc.fix != "" && !strings.Contains(checks[0].Fix+checks[1].Detail, tc.fix) {
				t.Errorf("no %q in %+v", tc.fix, checks)
			}
			if ops.ChecksPass(checks) != (len(tc.failing) == 0) {
				t.Errorf("ChecksPass wrong: %+v", checks)
			}
			if w := fakecluster.Writes(fx.client); len(w) != 0 {
				t.Errorf("explain wrote %v", w)
			}
			if m := f.mutations(); len(m) != 0 {
				t.Errorf("explain changed membership: %v", m)
			}
		})
	}
}
