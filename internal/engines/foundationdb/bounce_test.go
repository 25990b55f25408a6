package foundationdb

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// TestRestartBounceRechecksBeforeKill: what changes between a bounce step's gate (its
// precheck) and its kill is read again by the action, which refuses with nothing sent: a
// process of the batch that stopped meanwhile (the batch is not all running), or a
// maintenance zone someone else set meanwhile (never taken over).
func TestRestartBounceRechecksBeforeKill(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, m *fdbsim.Cluster, s *ops.Step, c *ops.Cluster)
		want   string
	}{
		{"a process of the batch stopped", func(t *testing.T, m *fdbsim.Cluster, s *ops.Step, c *ops.Cluster) {
			_, p := c.Pod(s.Pods[0])
			if err := m.Stop(p.Member); err != nil {
				t.Fatal(err)
			}
		}, "report no process; refusing to bounce a batch that is not all running"},
		{"someone else set a maintenance zone", func(t *testing.T, m *fdbsim.Cluster, _ *ops.Step, _ *ops.Cluster) {
			runFdbcli(t, m, "maintenance on zone-x 300")
		}, "zone zone-x is in maintenance, set by someone else"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, model, e := liveCluster(t, 3, 3)
			p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
			if err != nil {
				t.Fatal(err)
			}
			s := p.Steps[0]
			if s.Precheck == nil || len(s.Pods) == 0 {
				t.Fatalf("step %s is not a bounce", s.ID)
			}
			pre := s.Precheck
			s.Precheck = func(ctx context.Context, sc *ops.StepContext) (bool, error) {
				done, err := pre(ctx, sc)
				if err == nil {
					tt.change(t, model, s, c)
				}
				return done, err
			}
			before := len(mutations(model))
			// The timeout only bounds a run that kills anyway (the stopped process never comes
			// back); the refusal comes at once.
			err = (&ops.Executor{LockID: "test", Timeout: 20 * time.Second}).Run(context.Background(), p)
			if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run = %v (exit %d), want a refusal with %q", err, ops.ExitCode(err), tt.want)
			}
			for _, m := range mutations(model)[before:] {
				if !strings.HasPrefix(m, "maintenance on zone-x") {
					t.Fatalf("the refused bounce ran %q", m)
				}
			}
		})
	}
}
