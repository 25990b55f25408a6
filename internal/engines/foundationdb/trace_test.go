package foundationdb

import (
	"context"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestFdbcliLeavesNoClientTraceFiles: fdbcli run in the operator's pods, whose main container
// sets FDB_NETWORK_OPTION_TRACE_ENABLE (the client then traces whatever fdbcli's flags), leaves
// no client trace file there: not from status, not from a whole restart. The same fdbcli run
// without the engine's env -u does leave one (the simulator models the environment).
func TestFdbcliLeavesNoClientTraceFiles(t *testing.T) {
	c, _, e := liveCluster(t, 3, 3)
	ex := e.deps.Exec.(*simExec)
	if _, err := e.Health(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeAll})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&ops.Executor{LockID: "test", Timeout: time.Minute}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if got := ex.host.AllTraceFiles(); len(got) != 0 {
		t.Fatalf("fdbcli left client trace files in the pods: %q", got)
	}
	if _, _, err := ex.Exec(context.Background(), "demo", "myfdb-storage-10", Container, []string{"fdbcli", "--exec", "status", "--timeout", "5"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := ex.host.TraceFiles("demo/myfdb-storage-10"); len(got) != 1 {
		t.Fatalf("bare fdbcli in the operator's container: trace files %q, want one (the model traces it)", got)
	}
}
