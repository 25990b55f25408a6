package etcd

import (
	"context"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestBatchRestartRefusedWithoutQuorum: two of three members down together
// would lose quorum, though each alone would not; nothing is deleted.
func TestBatchRestartRefusedWithoutQuorum(t *testing.T) {
	for _, opts := range []ops.RestartOptions{
		{Mode: ops.ModeAll},
		{Pods: []string{"etcd-1", "etcd-2"}, BatchSize: 2},
	} {
		f := newFakeEtcd(3, 0)
		fx := newFixture(t, 3, f, nil)
		p, err := fx.eng.PlanRestart(context.Background(), fx.c, opts)
		if err != nil {
			t.Fatal(err)
		}
		err = (&ops.Executor{LockID: "test"}).Run(testCtx(t), p)
		if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), "below quorum 2") {
			t.Fatalf("%+v: got %v, want a quorum refusal", opts, err)
		}
		for _, w := range fakecluster.Writes(fx.client) {
			if strings.HasPrefix(w, "delete") {
				t.Errorf("refused restart deleted something: %v", fakecluster.Writes(fx.client))
			}
		}
	}
}
