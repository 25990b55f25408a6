package etcd

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// countingExec answers every etcdctl with "{}" and records the command lines.
type countingExec struct{ calls []string }

func (c *countingExec) Exec(_ context.Context, _, pod, _ string, argv []string, _ io.Reader) ([]byte, []byte, error) {
	c.calls = append(c.calls, pod+": "+strings.Join(argv, " "))
	return []byte("{}"), nil, nil
}

// TestMembershipChangesStopWhenLockLost: a run that lost its lock (the executor's write guard
// refuses) runs no etcdctl member add, remove, promote or move-leader, and says why; reads
// still run.
func TestMembershipChangesStopWhenLockLost(t *testing.T) {
	lost := errors.New("lost the lock on cluster prod/etcd: denied")
	ctx := kube.WithWriteGuard(t.Context(), func() error { return lost })
	for _, tc := range []struct {
		op      string
		args    []string
		changes bool
	}{
		{"member add", []string{"member", "add", "etcd-3", "--peer-urls=https://etcd-3.etcd:2380", "--learner"}, true},
		{"member remove", []string{"member", "remove", "8e9e05c52164694d"}, true},
		{"member promote", []string{"member", "promote", "8e9e05c52164694d"}, true},
		{"move-leader", []string{"move-leader", "8e9e05c52164694d"}, true},
		{"member list", []string{"member", "list", "-w", "json"}, false},
	} {
		ex := &countingExec{}
		c := &ctl{exec: ex, namespace: "prod", container: "etcd", spec: &clientConn{}}
		_, err := c.run(ctx, "etcd-0", tc.op, tc.args...)
		switch {
		case tc.changes && (!errors.Is(err, lost) || len(ex.calls) != 0):
			t.Errorf("%s with the lock lost: err %v, ran %q; want the lock error and no etcdctl", tc.op, err, ex.calls)
		case !tc.changes && (err != nil || len(ex.calls) != 1):
			t.Errorf("%s (a read) with the lock lost: err %v, ran %q; want it run", tc.op, err, ex.calls)
		}
	}
}
