package foundationdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// recordExec records the argv of every exec and answers with nothing.
type recordExec struct{ argvs [][]string }

func (r *recordExec) Exec(_ context.Context, _, _, _ string, argv []string, _ io.Reader) ([]byte, []byte, error) {
	r.argvs = append(r.argvs, argv)
	return []byte("{}"), nil, nil
}

// TestFDBCLIWritesPassTheWriteGuard: a run that lost its lock (the executor's write guard
// refuses) runs no fdbcli line that changes the cluster, whichever step sends it; reads still
// run, and the operator's lock key (runLock) is not held back by the guard that asks about it.
func TestFDBCLIWritesPassTheWriteGuard(t *testing.T) {
	lost := errors.New("lock lost")
	ctx := kube.WithWriteGuard(context.Background(), func() error { return lost })
	k := checker{}
	tests := []struct {
		cmds  string
		write bool
	}{
		{"kill; kill 10.1.0.1:4501 10.1.0.2:4501", true},
		{"maintenance on zone-a 600", true},
		{"maintenance off", true},
		{k.maintenanceOn("zone-a", nil, time.Time{}), true},
		{k.maintenanceOff(nil), true},
		{"exclude locality_instance_id:storage-1", true},
		{"exclude no_wait 10.1.0.1:4501", true},
		{"include locality_instance_id:storage-1", true},
		{"coordinators 10.1.0.1:4501 10.1.0.2:4501 10.1.0.3:4501", true},
		{"option on ACCESS_SYSTEM_KEYS; writemode on; set \\xff\\x02/k v", true},
		{"writemode on; clear k", true},
		{"configure triple", true},
		{"some_future_command", true},
		{"status json", false},
		{"status", false},
		{"option on READ_SYSTEM_KEYS; get k; getrange a b 10", false},
		{"kill", false},
		{"exclude", false},
		{"maintenance", false},
		{"coordinators", false},
	}
	for _, tt := range tests {
		ex := &recordExec{}
		cli := &CLI{Exec: ex}
		_, err := cli.Run(ctx, "ns", "pod-1", tt.cmds)
		if tt.write {
			if !errors.Is(err, lost) || len(ex.argvs) != 0 {
				t.Errorf("%q with the lock lost: err %v, %d exec(s); want the guard's error and no exec", tt.cmds, err, len(ex.argvs))
			}
		} else if err != nil || len(ex.argvs) != 1 {
			t.Errorf("%q (a read) with the lock lost: err %v, %d exec(s); want it run", tt.cmds, err, len(ex.argvs))
		}
		// Without a guard (or with one that allows) everything runs.
		ex = &recordExec{}
		cli = &CLI{Exec: ex}
		if _, err := cli.Run(kube.WithWriteGuard(context.Background(), func() error { return nil }), "ns", "pod-1", tt.cmds); err != nil || len(ex.argvs) != 1 {
			t.Errorf("%q with the lock held: err %v, %d exec(s)", tt.cmds, err, len(ex.argvs))
		}
	}
	ex := &recordExec{}
	cli := &CLI{Exec: ex}
	if _, err := cli.runLock(ctx, "ns", "pod-1", "option on ACCESS_SYSTEM_KEYS; writemode on; set k v"); err != nil || len(ex.argvs) != 1 || !strings.Contains(execArg(ex.argvs[0]), "set k v") {
		t.Fatalf("runLock with the guard refusing: err %v, execs %v; want it run", err, ex.argvs)
	}
}

// TestUnknownGroupOnALargeCluster: naming a pod or process group that does not exist on a
// cluster of hundreds refuses in one short line: the closest names, and a capped list.
func TestUnknownGroupOnALargeCluster(t *testing.T) {
	g := &ops.NodeGroup{Name: "storage"}
	cr := CRState{Groups: map[string]CRGroup{}}
	for i := range 240 {
		id := fmt.Sprintf("storage-%d", i)
		g.Pods = append(g.Pods, ops.Pod{Name: "sample-cluster-" + id, Member: id})
		cr.Groups[id] = CRGroup{Class: "storage"}
	}
	c := &ops.Cluster{Namespace: "ns", Name: "sample-cluster", Groups: []*ops.NodeGroup{g}}
	_, err := resolveGroups(c, cr, []string{"storage-2390"})
	if err == nil || ops.ExitCode(err) != ops.ExitUsage {
		t.Fatalf("resolveGroups = %v, want a usage error", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || len(msg) > 600 ||
		!strings.Contains(msg, "did you mean ") || !strings.Contains(msg, `"storage-239"`) || !strings.Contains(msg, "allowed (480): ") || !strings.Contains(msg, "... and 470 more") {
		t.Fatalf("refusal = %q (%d bytes), want one short line with the closest names and a capped list", msg, len(msg))
	}
}
