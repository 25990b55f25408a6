package replicated

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestNoSecondaryWithoutAPrimary: a secondary is started only with a running primary to
// follow: with none, a restart (giving a secondary its role back) and a scale-up (adding a
// secondary) stop with a refusal (exit 5) and run no secondary command.
func TestNoSecondaryWithoutAPrimary(t *testing.T) {
	roles := map[string]string{"db-0": RoleSecondary, "db-1": RoleSecondary}
	for _, tt := range []struct {
		name string
		plan func(f *fixture) (*ops.Plan, error)
		want string
	}{
		{"restart", func(f *fixture) (*ops.Plan, error) {
			return f.eng.PlanRestart(context.Background(), f.cluster(), ops.RestartOptions{})
		}, "no running primary to start secondary db-"},
		{"scale up after the primary went", func(f *fixture) (*ops.Plan, error) {
			// Planned with db-0 the primary; it loses its role before the run.
			setRole(t, f, "db-0", RolePrimary)
			p, err := f.eng.PlanScale(context.Background(), f.cluster(), ops.ScaleRequest{Replicas: ptr.To[int32](3), Primaries: ptr.To[int32](1)})
			setRole(t, f, "db-0", RoleFailed)
			return p, err
		}, "no running primary to start secondaries against; run bootstrap first"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 2, roles, testConfig)
			f.app.seq = map[string]string{"db-0": "1", "db-1": "1", "db-2": "0"}
			p, err := tt.plan(f)
			if err == nil {
				err = f.run(p)
			}
			if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v (exit %d), want a refusal with %q", err, ops.ExitCode(err), tt.want)
			}
			for _, m := range f.app.mutations() {
				if tt.name != "restart" && strings.HasPrefix(m, "db-0") {
					continue // db-0 was the primary when planned
				}
				if strings.Contains(m, ": secondary") || strings.Contains(m, ": primary") {
					t.Errorf("ran %q without a primary", m)
				}
			}
		})
	}
}

// setRole labels pod with role, as a role command's success does.
func setRole(t *testing.T, f *fixture, pod, role string) {
	t.Helper()
	p, err := f.client.CoreV1().Pods("prod").Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels[LabelRole] = role
	if _, err := f.client.CoreV1().Pods("prod").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
