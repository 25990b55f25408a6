package etcd

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

type guardExec struct{ argvs [][]string }

func (g *guardExec) Exec(_ context.Context, _, _, _ string, argv []string, _ io.Reader) ([]byte, []byte, error) {
	g.argvs = append(g.argvs, argv)
	return []byte("{}"), nil, nil
}

// TestMembershipChangesPassTheWriteGuard: a run that lost its lock (the executor's write
// guard refuses) runs no etcdctl command that changes membership or leadership, as the steps
// send them (steps.go, scale.go, restart.go), nor one whose label names something else; reads
// still run.
func TestMembershipChangesPassTheWriteGuard(t *testing.T) {
	lost := errors.New("lock lost")
	ctx := kube.WithWriteGuard(context.Background(), func() error { return lost })
	tests := []struct {
		op    string
		args  []string
		write bool
	}{
		{"member add", []string{"member", "add", "etcd-3", "--peer-urls=https://etcd-3.etcd:2380", "--learner", "-w", "json"}, true},
		{"member remove", []string{"member", "remove", "8e9e05c52164694d"}, true},
		{"member promote", []string{"member", "promote", "8e9e05c52164694d"}, true},
		{"move-leader", []string{"move-leader", "8e9e05c52164694d"}, true},
		{"cleanup", []string{"member", "remove", "8e9e05c52164694d"}, true},
		{"member list", []string{"member", "list", "-w", "json"}, false},
		{"endpoint status", []string{"endpoint", "status", "-w", "json"}, false},
	}
	for _, tt := range tests {
		ex := &guardExec{}
		c := &ctl{exec: ex, namespace: "db", container: "etcd"}
		_, err := c.run(ctx, "etcd-0", tt.op, tt.args...)
		if tt.write {
			if !errors.Is(err, lost) || len(ex.argvs) != 0 {
				t.Errorf("%s with the lock lost: err %v, %d exec(s); want the guard's error and no exec", tt.op, err, len(ex.argvs))
			}
		} else if err != nil || len(ex.argvs) != 1 {
			t.Errorf("%s (a read) with the lock lost: err %v, %d exec(s); want it run", tt.op, err, len(ex.argvs))
		}
	}
}
