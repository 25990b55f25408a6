package ops

import (
	"strings"
	"testing"
)

// The confirmation's summary counts steps per node group; steps that belong to no one group
// (zone or batch mode: a batch spans the groups) are named as such, not "(no group)".
func TestWritePlanSummary(t *testing.T) {
	for _, tt := range []struct {
		name  string
		steps []StepView
		want  string
	}{
		{"per group", []StepView{{Index: 1, Group: "hot", Target: "db-hot-0", Preconditions: []string{"green"}}, {Index: 2, Group: "hot", Target: "db-hot-1", Preconditions: []string{"green"}}},
			"  hot: 2 step(s) 1-2, db-hot-0 .. db-hot-1\n      requires: green\n"},
		{"zones", []StepView{{Index: 1, Target: "zone-a"}, {Index: 2, Target: "zone-b"}, {Index: 3, Target: "zone-c"}},
			"  across groups: 3 step(s) 1-3, zone-a .. zone-c\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := WritePlanSummary(&b, &PlanView{Operation: "restart", Namespace: "prod", Cluster: "db", Engine: "foundationdb", Steps: tt.steps}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tt.want) || strings.Contains(b.String(), "(no group)") {
				t.Errorf("summary:\n%s\nwant it to contain:\n%s", b.String(), tt.want)
			}
		})
	}
}
