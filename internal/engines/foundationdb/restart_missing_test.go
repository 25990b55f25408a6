package foundationdb

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// TestRestartRefusesAGroupNotReporting: a process group whose process is down (missing from
// status json) refuses the restart before the first batch, naming it, whichever batch it is
// in: the operator bounces nothing while a process group it would restart has no address in
// status json (controllers/bounce_processes.go, getProcessesReadyForRestart), and a rolling
// restart that found it only at its batch would have bounced the batches before.
func TestRestartRefusesAGroupNotReporting(t *testing.T) {
	for _, mode := range []string{ops.ModePod, ops.ModeZone} {
		t.Run(mode, func(t *testing.T) {
			c, model, e := liveCluster(t, 3, 3)
			p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			// A stateless pod of the last bounce step: far from the first batch, and once the
			// recovery its stop starts is over every status check passes (no data, no log,
			// no coordinator on it).
			var last *ops.Step
			for _, s := range p.Steps {
				if s.Precheck != nil && len(s.Pods) > 0 {
					last = s
				}
			}
			if last == nil || last == p.Steps[0] {
				t.Fatalf("plan has no bounce step after the first")
			}
			var pod *ops.Pod
			for _, name := range last.Pods {
				if g, p := c.Pod(name); g.Name == "stateless" {
					pod = p
				}
			}
			if pod == nil {
				t.Fatalf("step %s has no stateless pod", last.ID)
			}
			if err := model.Stop(pod.Member); err != nil {
				t.Fatal(err)
			}
			waitRecovered(t, model)
			before := len(mutations(model))
			err = (&ops.Executor{LockID: "test", Timeout: 20 * time.Second}).Run(context.Background(), p)
			want := "process group(s) " + pod.Member + " report no process"
			if ops.ExitCode(err) != ops.ExitPrecondition || err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("run = %v (exit %d), want a refusal with %q", err, ops.ExitCode(err), want)
			}
			if m := mutations(model)[before:]; len(m) > 0 {
				t.Fatalf("the refused restart ran %q", m)
			}
		})
	}
}

// waitRecovered waits until the simulator's status json is available and fully recovered.
func waitRecovered(t *testing.T, m *fdbsim.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		var st Status
		if err := json.Unmarshal(m.StatusJSON(), &st); err != nil {
			t.Fatal(err)
		}
		if st.Available() && st.RecoveryName() == "fully_recovered" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the simulator did not recover: %s", st.RecoveryName())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
