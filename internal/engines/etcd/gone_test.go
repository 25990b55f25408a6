package etcd

import (
	"context"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestStepsRefuseWhenTheirMemberIsGone: the promote step and the restart's wait after a pod
// came back read etcd's member list and refuse, in one line, when the member they wait for is
// not in it (removed by someone else, or a pod that never joined), instead of promoting
// another member or waiting until the timeout; nothing changes membership
// (hack/mutate/mutants.txt, "etcd, part 2").
func TestStepsRefuseWhenTheirMemberIsGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, fx *fixture, s *site) error
		want string
	}{
		{
			// promote/etcd-3's precheck: the learner added by the add step is gone.
			name: "promote step without its learner",
			run: func(ctx context.Context, fx *fixture, s *site) error {
				p := &ops.Plan{Operation: "scale", Cluster: "etcd", Namespace: testNS,
					Steps: []*ops.Step{fx.eng.promoteStep(s, "promote/etcd-3", 3, "http://127.0.3.4:2380")}}
				return (&ops.Executor{LockID: "test"}).Run(ctx, p)
			},
			want: "etcd has no member for etcd-3 (peer URL http://127.0.3.4:2380); run the scale again to add it",
		},
		{
			// The promote step's wait: the learner disappears while it waits to promote it.
			name: "learner gone while waiting to promote it",
			run: func(ctx context.Context, fx *fixture, s *site) error {
				return fx.eng.promoteWhenReady(ctx, nil, s, "etcd-3", "http://127.0.3.4:2380")
			},
			want: "etcd member for etcd-3 (peer URL http://127.0.3.4:2380) disappeared while waiting to promote it",
		},
		{
			// The restart's After: pod etcd-3 came back, but runs no member.
			name: "restarted pod runs no member",
			run: func(ctx context.Context, fx *fixture, s *site) error {
				g := &restartGate{e: fx.eng, s: s, batch: map[string][]string{}}
				return g.After(ctx, nil, ops.Pod{Name: "etcd-3"})
			},
			want: "pod etcd-3 came back but is no etcd member; repair it",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEtcd(3, 0)
			fx := newFixture(t, 4, f, nil)
			fx.eng.Options.PollInterval = 1 // nanosecond: the fake answers at once
			s, _, err := fx.eng.prepare(context.Background(), fx.c)
			if err != nil {
				t.Fatal(err)
			}
			fx.client.ClearActions()
			err = tc.run(testCtx(t), fx, s)
			if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v (exit %d), want a one-line exit %d refusal with %q", err, ops.ExitCode(err), ops.ExitPrecondition, tc.want)
			}
			if m := f.mutations(); len(m) != 0 {
				t.Errorf("refused step changed membership: %v", m)
			}
			if w := fakecluster.Writes(fx.client); len(w) != 0 {
				t.Errorf("refused step wrote %v", w)
			}
		})
	}
}
