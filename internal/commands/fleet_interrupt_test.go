package commands

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// TestFleetRestartInterrupted: Ctrl-C during a fleet restart (two targets at once) leaves
// every running target at a step boundary with its action complete: each deleted exactly the
// pod of its step in flight, and its journal says interrupted, resumable. The summary names
// both interrupted (not failed), the exit code is 130, and `resume --fleet` finishes both
// from their journals without restarting a pod twice.
func TestFleetRestartInterrupted(t *testing.T) {
	fh := newFleetHarness(t)
	ca := fakecluster.Start(t, fh.clients["ctx-a"], "db")
	cb := fakecluster.Start(t, fh.clients["ctx-b"], "db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fh.ctx = ctx
	// Ctrl-C once both targets sent their first delete: ctx-b's delete waits for ctx-a's.
	aSent := make(chan struct{})
	fh.clients["ctx-a"].PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case <-aSent:
		default:
			close(aSent)
		}
		return false, nil, nil
	})
	fh.clients["ctx-b"].PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-aSent
		cancel()
		return false, nil, nil
	})
	r := fh.run("restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b", "--max-parallel", "2", "--yes", "--lock-id", "ci@test")
	if r.code != ops.ExitInterrupted {
		t.Fatalf("exit %d, want %d: %s\n%s", r.code, ops.ExitInterrupted, r.err, r.out)
	}
	if got := fleetSummaryRows(t, r.out); got != "ctx-a interrupted,ctx-b interrupted" {
		t.Errorf("summary %s:\n%s", got, r.out)
	}
	// One line per target, its outcome's word once: "interrupted in step 1/3 (...)" or
	// "interrupted before step 2/3 (...)", whichever boundary the target reached.
	for _, c := range []string{"ctx-a", "ctx-b"} {
		if !strings.Contains(r.err, "ERROR: context "+c+", cluster db/orders: interrupted ") || strings.Contains(r.err, "interrupted: interrupted") {
			t.Errorf("%s: stderr:\n%s", c, r.err)
		}
	}
	// Each target's action ran to its end: one delete each (the step in flight), no more.
	if len(ca.Deleted()) != 1 || len(cb.Deleted()) != 1 {
		t.Fatalf("deleted: ctx-a %v, ctx-b %v", ca.Deleted(), cb.Deleted())
	}
	for _, c := range []string{"ctx-a", "ctx-b"} {
		l, err := fh.clients[c].CoordinationV1().Leases("db").Get(t.Context(), lock.LeaseName("orders"), metav1.GetOptions{})
		if err != nil || !strings.Contains(l.Annotations["dbops.io/journal"], `"state":"interrupted"`) {
			t.Fatalf("%s: journal %v, %v", c, l, err)
		}
	}

	fh.ctx = context.Background()
	r = fh.run("resume", "orders", "--contexts", "ctx-a,ctx-b", "--max-parallel", "2", "--yes", "--lock-id", "ci@test")
	if r.code != 0 {
		t.Fatalf("resume: exit %d: %s\n%s", r.code, r.err, r.out)
	}
	if got := fleetSummaryRows(t, r.out); got != "ctx-a succeeded,ctx-b succeeded" {
		t.Errorf("resume summary %s:\n%s", got, r.out)
	}
	for c, d := range map[string][]string{"ctx-a": ca.Deleted(), "ctx-b": cb.Deleted()} {
		seen := map[string]bool{}
		for _, p := range d {
			if seen[p] {
				t.Errorf("%s: %s restarted twice: %v", c, p, d)
			}
			seen[p] = true
		}
		if len(d) != 3 {
			t.Errorf("%s: deleted %v, want each of the 3 pods once", c, d)
		}
	}
}
