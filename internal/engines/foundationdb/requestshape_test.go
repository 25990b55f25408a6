package foundationdb

import (
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestRequestShapeRefusals: the engine refuses a scale or replace request that does not fit the
// layout (the commands check the flags first; an engine used through another caller must not
// guess): exit 2 naming what fits, and no fdbcli command but status runs.
func TestRequestShapeRefusals(t *testing.T) {
	three := int32(3)
	for _, tc := range []struct {
		name    string
		sts     bool
		twoSets bool
		noCR    bool
		scale   *ops.ScaleRequest
		replace *ops.ReplaceRequest
		message string
	}{
		{name: "operator layout: --replicas", scale: &ops.ScaleRequest{Replicas: &three}, message: "scales by process class"},
		{name: "operator layout: nothing", scale: &ops.ScaleRequest{}, message: "nothing to scale"},
		{name: "operator layout: no FoundationDBCluster", noCR: true, scale: &ops.ScaleRequest{Processes: map[string]int32{"storage": 4}}, message: "needs a FoundationDBCluster"},
		{name: "StatefulSet: --remove", sts: true, scale: &ops.ScaleRequest{Replicas: &three, Remove: []string{"fdb-2"}}, message: "highest ordinals"},
		{name: "StatefulSet: --processes", sts: true, scale: &ops.ScaleRequest{Processes: map[string]int32{"storage": 4}}, message: "scales with --replicas N"},
		{name: "StatefulSet: two sets scaled", sts: true, twoSets: true, scale: &ops.ScaleRequest{Replicas: &three}, message: "scale --replicas needs one FoundationDB StatefulSet"},
		{name: "StatefulSet: --no-exclusion", sts: true, replace: &ops.ReplaceRequest{Pods: []string{"fdb-1"}, MaxConcurrent: 1, NoExclusion: true, Force: true}, message: "FoundationDBClusters only"},
		{name: "StatefulSet: two sets replaced", sts: true, twoSets: true, replace: &ops.ReplaceRequest{Pods: []string{"fdb-1"}, MaxConcurrent: 1}, message: "replace needs one FoundationDB StatefulSet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *ops.Cluster
			var e *Engine
			var log func() []string
			if tc.sts {
				cs, model, ex := stsSimCluster(t, 4, 0, 1, 2)
				c, e = cs, newEngine(t, ex)
				log = func() []string {
					var out []string
					for _, l := range model.Log() {
						out = append(out, l.Command)
					}
					return out
				}
				if tc.twoSets {
					g := *c.Groups[0]
					g.Name += "-b"
					c.Groups = append(c.Groups, &g)
				}
			} else {
				cs, model, eng := liveCluster(t, 3, 3)
				c, e = cs, eng
				log = func() []string { return mutations(model) }
				if tc.noCR {
					for _, g := range c.Groups {
						g.Owner = nil
					}
				}
			}
			var err error
			if tc.scale != nil {
				_, err = e.PlanScale(t.Context(), c, *tc.scale)
			} else {
				_, err = e.PlanReplacement(t.Context(), c, *tc.replace)
			}
			if ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err %v, want exit 2 naming %q", err, tc.message)
			}
			for _, cmd := range log() {
				if !strings.HasPrefix(cmd, "status") {
					t.Fatalf("planning ran %q", cmd)
				}
			}
		})
	}
}
