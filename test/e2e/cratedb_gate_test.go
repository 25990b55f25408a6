//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCrateDBRestartGateSpeed restarts an 8-node simulated CrateDB cluster (shards of 20 MiB
// recovering at CrateDB's default 40mb/s per node) with the evidence gate (default
// --stable-for 3s) and with the crate-operator's rule (--health-checks 3 --health-interval I),
// alternating, and LOGS the wall times, their ratio, each pod's gate time (pod Ready to step
// done, from the done event's stepTimes), the time beyond shard recovery and the API requests
// per pod as the CLI and a counting proxy see them. No timing is asserted (speed is measured,
// not tested); what it asserts is safety: sampled all along, every shard keeps at least
// max(1, replicas) started copies outside the node being restarted, and every run succeeds.
//
// DBOPS_E2E_GATE_INTERVAL sets I (default 3s, a tenth of the crate-operator's 30s so that the
// suite stays short; the measurement uses 30s, where one operator run takes 10 minutes);
// DBOPS_E2E_GATE_ROUNDS the number of alternations (default 1).
func TestCrateDBRestartGateSpeed(t *testing.T) {
	interval := 3 * time.Second
	if v := os.Getenv("DBOPS_E2E_GATE_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("DBOPS_E2E_GATE_INTERVAL: %v", err)
		}
		interval = d
	}
	rounds := 1
	if v := os.Getenv("DBOPS_E2E_GATE_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("DBOPS_E2E_GATE_ROUNDS: %q", v)
		}
		rounds = n
	}
	x := newCrateEnvWith(t, crateSetup{systemUser: true, shardSize: 20 << 20})
	x.sql(`CREATE TABLE doc.big (id TEXT) CLUSTERED INTO 16 SHARDS WITH (number_of_replicas = '1')`)
	x.waitGreen()
	// Each table's shards and the started copies they need: max(1, replicas' lower bound)
	// outside the restarted node, whose copies the simulator drops while it is down.
	tables := []struct {
		name           string
		shards, copies int
	}{{"doc.events", 6, 1}, {"doc.metrics", 4, 1}, {"doc.big", 16, 1}}

	// The safety sampler: every few milliseconds, every shard's started copies.
	var mu sync.Mutex
	var violations []string
	// quietAt are the moments recoveries ended (some copy was not started, then none was).
	var quietAt []time.Time
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		wasBusy := false
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			started := map[string]int{}
			busy := false
			for _, c := range x.sim.Shards() {
				if c.Started {
					started[fmt.Sprintf("%s/%d", c.Table, c.Shard)]++
				} else {
					busy = true
				}
			}
			if busy != wasBusy {
				if !busy {
					mu.Lock()
					quietAt = append(quietAt, time.Now())
					mu.Unlock()
				}
				wasBusy = busy
			}
			for _, tb := range tables {
				for id := range tb.shards {
					key := fmt.Sprintf("%s/%d", tb.name, id)
					if n := started[key]; n < tb.copies {
						mu.Lock()
						violations = append(violations, fmt.Sprintf("%s %s: %d started copies", time.Now().Format("15:04:05.000"), key, n))
						mu.Unlock()
					}
				}
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	type result struct {
		name    string
		wall    time.Duration
		gates   []time.Duration
		cliReq  int
		proxReq int
	}
	var results []result
	run := func(name string, gateArgs ...string) result {
		t.Helper()
		kubeconfig, counter := countingKubeconfig(t)
		env := slices.Clone(x.env)
		for i, kv := range env {
			if strings.HasPrefix(kv, "KUBECONFIG=") {
				env[i] = "KUBECONFIG=" + kubeconfig
			}
		}
		args := x.args("restart", append([]string{"--rolling", "--yes", "-o", "json"}, gateArgs...)...)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, dbopsBinary(t), args...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		wall := time.Since(start)
		if err != nil {
			t.Fatalf("%s: kubectl-dbops %s: %v\nstderr: %s\nstdout tail: %s", name, strings.Join(args, " "), err, stderr.String(), tail(stdout.String(), 3000))
		}
		var done struct {
			Type        string         `json:"type"`
			Time        time.Time      `json:"time"`
			Outcome     string         `json:"outcome"`
			APIRequests map[string]int `json:"apiRequests"`
			StepTimes   []struct {
				Step   string        `json:"step"`
				Target string        `json:"target"`
				Took   time.Duration `json:"tookNs"`
				Gate   time.Duration `json:"gateNs"`
			} `json:"stepTimes"`
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		// When each step was reported done.
		doneAt := map[string]time.Time{}
		for _, l := range lines {
			var ev struct {
				Type string    `json:"type"`
				Time time.Time `json:"time"`
				Step *struct {
					ID string `json:"id"`
				} `json:"step"`
			}
			if json.Unmarshal([]byte(l), &ev) == nil && ev.Type == "step-done" && ev.Step != nil {
				doneAt[ev.Step.ID] = ev.Time
			}
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &done); err != nil || done.Type != "done" || done.Outcome != "succeeded" {
			t.Fatalf("%s: last event %q: %v", name, lines[len(lines)-1], err)
		}
		r := result{name: name, wall: wall, cliReq: done.APIRequests["total"]}
		counter.mu.Lock()
		r.proxReq = counter.total
		counter.mu.Unlock()
		var per []string
		var beyondMax time.Duration
		for _, st := range done.StepTimes {
			if st.Gate <= 0 {
				continue
			}
			r.gates = append(r.gates, st.Gate)
			// Beyond recovery: from the later of the pod Ready and the end of the last
			// recovery the sampler saw within the gate, to the step done.
			end := doneAt[st.Step]
			from := end.Add(-st.Gate)
			mu.Lock()
			for _, q := range quietAt {
				if q.After(from) && q.Before(end) {
					from = q
				}
			}
			mu.Unlock()
			beyond := end.Sub(from)
			beyondMax = max(beyondMax, beyond)
			per = append(per, fmt.Sprintf("%s gate %s, beyond recovery %s (step %s)", st.Target, st.Gate.Round(time.Millisecond), beyond.Round(time.Millisecond), st.Took.Round(time.Millisecond)))
		}
		t.Logf("%s: longest time beyond pod start and shard recovery: %s", name, beyondMax.Round(time.Millisecond))
		pods := max(len(r.gates), 1)
		t.Logf("%s: %s wall, %d pods, gate time per pod (Ready to done): %s", name, wall.Round(time.Millisecond), len(r.gates), strings.Join(per, ", "))
		t.Logf("%s: API requests: CLI counted %d (%.1f per pod), proxy saw %d (%.1f per pod); CLI %v; proxy %s",
			name, r.cliReq, float64(r.cliReq)/float64(pods), r.proxReq, float64(r.proxReq)/float64(pods), done.APIRequests, counter)
		x.waitGreen()
		return r
	}
	for i := range rounds {
		results = append(results, run(fmt.Sprintf("evidence gate #%d", i+1)))
		results = append(results, run(fmt.Sprintf("crate-operator rule (3 x %s) #%d", interval, i+1),
			"--health-checks", "3", "--health-interval", interval.String()))
	}
	var ev, op time.Duration
	for _, r := range results {
		if strings.HasPrefix(r.name, "evidence") {
			ev += r.wall
		} else {
			op += r.wall
		}
	}
	t.Logf("MEASURED: evidence gate %s vs crate-operator rule (3 checks, %s apart) %s over %d round(s): ratio %.3f (load: %s)",
		ev.Round(time.Millisecond), interval, op.Round(time.Millisecond), rounds, float64(ev)/float64(op), loadavg())
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Errorf("%d samples with a shard below its started copies (first: %s)", len(violations), violations[0])
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
