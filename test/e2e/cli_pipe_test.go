//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// A reader that closes the pipe after the first line (`kubectl dbops restart ... | head -1`)
// does not kill the tool mid-operation: the restart finishes, the lock is released, the
// journal says succeeded, and the lost output is reported (exit 1, "writing output").
func TestClosedStdoutPipe(t *testing.T) {
	ns := newNamespace(t)
	old := uidsByName(createDBCluster(t, ns, webCluster, 3))

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, dbopsBinary(t), "restart", webCluster, "-n", ns, "--rolling", "--yes", "--no-tui")
	cmd.Env = cliEnv(t)
	cmd.Stdout = w
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close() // the child holds the only write end now
	first, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the first line: %v", err)
	}
	r.Close() // as head -1 does
	code := cliExitCode(t, cmd.Wait())
	t.Logf("first line %q; exit %d; stderr:\n%s", first, code, stderr.String())
	if code != 1 || !strings.Contains(stderr.String(), "writing output") {
		t.Errorf("exit %d, stderr %q: want exit 1 and a 'writing output' line (not death by SIGPIPE, exit -1)", code, stderr.String())
	}

	sel := labels.SelectorFromSet(labels.Set{"app": webCluster})
	waitPods(t, ns, sel, 3, func(p *corev1.Pod) bool { return p.UID != old[p.Name] })
	lease, j := getLockLease(t, ns, webCluster)
	if h := holderString(lease.Spec.HolderIdentity); h != "" {
		t.Errorf("lock still held by %q after the run, want released", h)
	}
	if j.State != "succeeded" || len(j.Done) != 3 {
		t.Errorf("journal = %+v, want succeeded with 3 steps done", j)
	}
}
