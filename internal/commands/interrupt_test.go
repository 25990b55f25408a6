package commands

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestInterruptIsReportedOnce: Ctrl-C while a restart waits for its pod (no controller
// recreates it here) reports the interruption once, in the view's done line with the one
// way to continue, without "context canceled", and no error line of the command's own on
// stderr (it printed the same error a third time).
func TestInterruptIsReportedOnce(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.ctx = ctx
	h.client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		cancel() // Ctrl-C right after the step's action
		return false, nil, nil
	})
	r := h.run("restart", "db", "--rolling", "--group", "hot", "--yes", "--lock-id", "alice@test")
	if r.code != ops.ExitInterrupted {
		t.Fatalf("exit %d, want %d: %s\n%s", r.code, ops.ExitInterrupted, r.err, r.out)
	}
	all := r.out + r.err
	for _, bad := range []string{"context canceled", "error:", "interrupted: ", "kubectl dbops resume"} {
		if strings.Contains(all, bad) {
			t.Errorf("output has %q:\n%s\n%s", bad, r.out, r.err)
		}
	}
	if n := strings.Count(all, "interrupted in step 1/"); n != 1 {
		t.Errorf("the interruption is reported %d times, want once:\n%s\n%s", n, r.out, r.err)
	}
	if n := strings.Count(all, "re-run the same command to resume: "); n != 1 {
		t.Errorf("%d ways to continue, want one:\n%s\n%s", n, r.out, r.err)
	}
}
