//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestEtcdRestartCatchUpTimes restarts 5 real etcd members and LOGS where the time went: each
// member's pod start (delete to Ready) and catch-up (Ready to healthy with its raft index at the
// leader's), from the done event's stepTimes, and the wall time against their sum. It asserts
// only that the run succeeds and reports a catch-up time for every member (speed is measured,
// not tested).
func TestEtcdRestartCatchUpTimes(t *testing.T) {
	x := newEtcd(t, 5)
	x.writeKeys("before", 10)
	x.waitHealthy(5)
	res := runCLI(t, cliEnv(t), "restart", x.name, "-n", x.ns, "--rolling", "--yes", "-o", "json")
	if res.Code != 0 {
		t.Fatalf("restart failed: %s", res)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	var done struct {
		Type      string `json:"type"`
		StepTimes []struct {
			Step    string        `json:"step"`
			Took    time.Duration `json:"tookNs"`
			Gate    time.Duration `json:"gateNs"`
			CatchUp time.Duration `json:"catchUpNs"`
		} `json:"stepTimes"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &done); err != nil || done.Type != "done" {
		t.Fatalf("last event %q: %v", lines[len(lines)-1], err)
	}
	var sum, steps time.Duration
	var per []string
	for _, st := range done.StepTimes {
		if !strings.HasPrefix(st.Step, "restart/") {
			continue
		}
		start := st.Took - st.Gate
		sum += start + st.CatchUp
		steps += st.Took
		per = append(per, fmt.Sprintf("%s start %s catch-up %s (gate %s)", strings.TrimPrefix(st.Step, "restart/"),
			start.Round(time.Millisecond), st.CatchUp.Round(time.Millisecond), st.Gate.Round(time.Millisecond)))
		if st.CatchUp <= 0 {
			t.Errorf("step %s reports no catch-up time", st.Step)
		}
	}
	if len(per) != 5 {
		t.Fatalf("stepTimes for %d members, want 5: %+v", len(per), done.StepTimes)
	}
	t.Logf("per member: %s", strings.Join(per, "; "))
	t.Logf("MEASURED: wall %s, steps %s, sum of start + catch-up %s: wall/sum %.3f, steps/sum %.3f (load: %s)",
		res.Elapsed.Round(time.Millisecond), steps.Round(time.Millisecond), sum.Round(time.Millisecond),
		float64(res.Elapsed)/float64(sum), float64(steps)/float64(sum), loadavg())
	x.waitHealthy(5)
	x.checkKeys()
}
