package foundationdb

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/golden"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// liveCluster is simCluster on the real clock with short delays, for runs of whole plans.
func liveCluster(t *testing.T, generation, reconciled int64) (*ops.Cluster, *fdbsim.Cluster, *Engine) {
	t.Helper()
	return liveClusterWith(t, generation, reconciled, false, "")
}

// liveClusterWith is liveCluster with TLS listeners (ip:4500:tls, as the operator's cluster with
// spec.mainContainer.enableTls) and an fdbserver/fdbcli version ("" for the simulator's default).
func liveClusterWith(t *testing.T, generation, reconciled int64, tls bool, version string) (*ops.Cluster, *fdbsim.Cluster, *Engine) {
	t.Helper()
	port := ":4501"
	if tls {
		port = ":4500:tls"
	}
	host := fdbsim.NewHost(fdbsim.RealClock{})
	c := &ops.Cluster{Name: "myfdb", Namespace: "demo", Engine: ops.EngineFoundationDB}
	ref := &ops.ControllerRef{Kind: "FoundationDBCluster", Name: "myfdb", Object: map[string]any{
		"metadata": map[string]any{"name": "myfdb", "generation": generation},
		"status":   map[string]any{"generations": map[string]any{"reconciled": reconciled}},
	}}
	var specs []fdbsim.ProcessSpec
	for gi, class := range []string{"storage", "log", "stateless"} {
		g := &ops.NodeGroup{Name: class, Owner: NewOwner(ref, class)}
		for i, z := range []string{"zone-a", "zone-b", "zone-c"} {
			id := fmt.Sprintf("%s-%d", class, 10+i)
			pod := "myfdb-" + id
			g.Pods = append(g.Pods, ops.Pod{Name: pod, Member: id, Group: class, Ready: true, Zone: z})
			specs = append(specs, fdbsim.ProcessSpec{ID: id, Address: fmt.Sprintf("10.0.%d.%d", gi, i+1) + port, Class: class, Zone: z})
			host.BindPod("demo/"+pod, "demo/myfdb")
		}
		c.Groups = append(c.Groups, g)
	}
	var coords []string
	for _, a := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.1.1", "10.0.1.2"} {
		coords = append(coords, a+port)
	}
	model, err := fdbsim.New(fdbsim.RealClock{}, fdbsim.Config{RedundancyMode: "triple", RestartDelay: 150 * time.Millisecond,
		RecoveryStep: 10 * time.Millisecond, KillFlush: 50 * time.Millisecond, Version: version}, specs, coords)
	if err != nil {
		t.Fatal(err)
	}
	host.SetCluster("demo/myfdb", model)
	e, err := New(ops.EngineDeps{Client: fake.NewClientset(), Exec: &simExec{host: host}}, Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c, model, e
}

// mutations are the commands of the model's log that change the cluster.
func mutations(m *fdbsim.Cluster) []string {
	var out []string
	for _, e := range m.Log() {
		if strings.HasPrefix(e.Command, "kill ") || strings.HasPrefix(e.Command, "maintenance on") ||
			e.Command == "maintenance off" || strings.HasPrefix(e.Command, "exclude") || strings.HasPrefix(e.Command, "coordinators ") {
			out = append(out, e.Command)
		}
	}
	return out
}

// watchHealth samples min_replicas_remaining until stop, returning the lowest seen.
func watchHealth(m *fdbsim.Cluster) (stop func() int) {
	var mu sync.Mutex
	low := 99
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var st Status
			if json.Unmarshal(m.StatusJSON(), &st) == nil && st.Cluster.Data != nil && st.Cluster.Data.State.MinReplicasRemaining != nil {
				mu.Lock()
				low = min(low, *st.Cluster.Data.State.MinReplicasRemaining)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int {
		close(done)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		return low
	}
}

func TestRestartByProcessZoneMode(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	var lastHolders []string
	for _, p := range model.Processes() {
		if slices.Contains(p.Roles, "master") || slices.Contains(p.Roles, "cluster_controller") {
			lastHolders = append(lastHolders, p.Address)
		}
	}
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 3 || !strings.HasSuffix(p.Args, "--method process") {
		t.Fatalf("plan: %d steps, args %q", len(p.Steps), p.Args)
	}
	// The dry-run view lists every fdbcli command of each batch.
	for _, s := range p.Steps {
		zone := strings.TrimPrefix(s.Target, "zone/")
		var kill string
		for _, d := range s.Details {
			if strings.HasPrefix(d, "run: fdbcli --exec 'kill; kill ") {
				kill = d
			}
		}
		if !slices.Contains(s.Details, fmt.Sprintf("run: fdbcli --exec 'maintenance on %s 600'", zone)) || kill == "" {
			t.Fatalf("step %s details %q", s.Target, s.Details)
		}
	}
	if err := p.Preflight(context.Background(), ops.PreflightState{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stop := watchHealth(model)
	if err := (&ops.Executor{LockID: "test", Timeout: time.Minute}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if low := stop(); low < 3 {
		t.Fatalf("min_replicas_remaining dropped to %d during the restart", low)
	}
	if d := model.DegradedStorage(); len(d) != 0 {
		t.Fatalf("storage failed outside maintenance: %q", d)
	}
	for _, pr := range model.Processes() {
		if !pr.Up || !pr.Started.After(start) {
			t.Fatalf("process %s not restarted by the run: %+v", pr.ID, pr)
		}
	}
	if z, _ := model.MaintenanceZone(); z != "" {
		t.Fatalf("maintenance zone %s left", z)
	}
	// One zone at a time, always the batch's, switched off before the next; master and
	// cluster controller in the last batch.
	muts := mutations(model)
	zoneOf := map[string]string{}
	for _, pr := range model.Processes() {
		zoneOf[pr.Address] = pr.Zone
	}
	open := ""
	var kills []string
	for _, m := range muts {
		switch {
		case strings.HasPrefix(m, "maintenance on "):
			if open != "" {
				t.Fatalf("maintenance on while %s is on: %q", open, muts)
			}
			open = strings.Fields(m)[2]
		case m == "maintenance off":
			open = ""
		case strings.HasPrefix(m, "kill "):
			kills = append(kills, m)
			for _, a := range strings.Fields(m)[1:] {
				if zoneOf[a] != open {
					t.Fatalf("kill of %s (zone %s) while maintenance is %q: %q", a, zoneOf[a], open, muts)
				}
			}
		}
	}
	if len(kills) != 3 {
		t.Fatalf("kills %q", kills)
	}
	// The batches holding the master or the cluster controller (at planning) are the last ones.
	holderBatches := map[int]bool{}
	for _, a := range lastHolders {
		for i, k := range kills {
			if slices.Contains(strings.Fields(k), a) {
				holderBatches[i] = true
			}
		}
	}
	for i := range holderBatches {
		if i < len(kills)-len(holderBatches) {
			t.Fatalf("master/cluster controller holders %v not in the last batches: %q", lastHolders, kills)
		}
	}
	// A second run restarts again (a new request), but the same run resumed does nothing twice:
	// see TestRestartResumeBouncesOnce.
}

func TestRestartRefusals(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(*testing.T, *fdbsim.Cluster)
		gen     int64
		wantMsg string
		// needsCoordinatorChange is status.generations.needsCoordinatorChange (0: unset).
		needsCoordinatorChange int64
	}{
		{"unavailable", func(t *testing.T, m *fdbsim.Cluster) {
			for _, id := range []string{"log-10", "log-11", "log-12"} {
				if err := m.Stop(id); err != nil {
					t.Fatal(err)
				}
			}
		}, 3, "refusing to restart", 0},
		{"not reconciled", nil, 4, "is not reconciled (generation 4, reconciled 3)", 0},
		{"coordinator change pending", nil, 3, "has a coordinator change pending (status.generations.needsCoordinatorChange)", 3},
		{"another zone in maintenance", func(t *testing.T, m *fdbsim.Cluster) {
			runFdbcli(t, m, "maintenance on zone-c 300")
		}, 3, "zone zone-c is in maintenance, set by someone else (", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, model, e := liveCluster(t, tt.gen, 3)
			if tt.setup != nil {
				tt.setup(t, model)
			}
			if tt.needsCoordinatorChange != 0 {
				gens := ops.ControllerOf(c.Groups[0]).Object["status"].(map[string]any)["generations"].(map[string]any)
				gens["needsCoordinatorChange"] = tt.needsCoordinatorChange
			}
			before := len(mutations(model))
			p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
			if err == nil {
				err = p.Preflight(context.Background(), ops.PreflightState{})
			}
			if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("got %v, want exit 5 with %q", err, tt.wantMsg)
			}
			if got := mutations(model)[before:]; len(got) != 0 {
				t.Fatalf("refusal ran %q", got)
			}
		})
	}
}

func runFdbcli(t *testing.T, m *fdbsim.Cluster, cmds string) {
	t.Helper()
	var out, errb strings.Builder
	if code := m.Run(context.Background(), []string{"--exec", cmds}, &out, &errb); code != 0 {
		t.Fatalf("%s: %s", cmds, errb.String())
	}
}

// TestRestartResumeBouncesOnce: a run interrupted right after a batch's kill resumes without
// killing that batch again, and clears its own maintenance zone.
func TestRestartResumeBouncesOnce(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
	if err != nil {
		t.Fatal(err)
	}
	// Interrupt the first run once its first kill is sent: cancel from the executor's events.
	ctx, cancel := context.WithCancel(context.Background())
	leases := fake.NewClientset()
	locker := func() *lock.Manager {
		return &lock.Manager{Client: leases, Namespace: "demo", Cluster: "myfdb", ID: "tester", Session: "s1"}
	}
	ex := &ops.Executor{LockID: "tester", Locker: locker()}
	go func() {
		for {
			if slices.ContainsFunc(mutations(model), func(m string) bool { return strings.HasPrefix(m, "kill ") }) {
				cancel()
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	_ = ex.Run(ctx, p)
	first := mutations(model)
	p2, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&ops.Executor{LockID: "tester", Locker: locker(), Timeout: time.Minute}).Run(context.Background(), p2); err != nil {
		t.Fatal(err)
	}
	all := mutations(model)
	kills := map[string]int{}
	for _, m := range all {
		if strings.HasPrefix(m, "kill ") {
			kills[m]++
		}
	}
	for k, n := range kills {
		if n > 1 {
			t.Fatalf("%q sent %d times: first run %q, all %q", k, n, first, all)
		}
	}
	if len(kills) != 3 {
		t.Fatalf("kills %v", kills)
	}
	if z, _ := model.MaintenanceZone(); z != "" {
		t.Fatalf("maintenance zone %s left", z)
	}
}

// TestRestartByProcessAllAtOnce: --mode all bounces every process in one fdbcli session (run
// from one of the batch's own pods: fdbcli is a client), without maintenance (several zones).
func TestRestartByProcessAllAtOnce(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeAll})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := (&ops.Executor{LockID: "test", Timeout: time.Minute}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	muts := mutations(model)
	if len(muts) != 1 || len(strings.Fields(muts[0])) != 10 {
		t.Fatalf("mutations %q, want one kill of the 9 processes", muts)
	}
	for _, pr := range model.Processes() {
		if !pr.Up || !pr.Started.After(start) {
			t.Fatalf("process %s not restarted", pr.ID)
		}
	}
}

// With the operator's maintenance checker on, each storage batch lists its storage process
// groups under the operator's maintenance prefix (an 8-byte little-endian unix time written
// before the zone is set), in the same fdbcli session; the plan shows the commands. The zone
// lasts the cluster's maintenanceModeTimeSeconds (600 s unset, the operator's
// GetMaintenaceModeTimeoutSeconds), and the entries' time is the API server's clock (the
// operator's checker compares them with its own in-cluster clock), here an hour ahead of the
// workstation's.
func TestRestartRegistersWithTheMaintenanceChecker(t *testing.T) {
	for _, tt := range []struct {
		name, prefix string
		spec         map[string]any
		seconds      int
		skew         time.Duration
	}{
		{"checker", "\xff\x02/org.foundationdb.kubernetes-operator/maintenance/",
			map[string]any{"automationOptions": map[string]any{"maintenanceModeOptions": map[string]any{"UseMaintenanceModeChecker": true}}}, 600, 0},
		{"reset with a custom lock prefix", "\xff\x02/my-prefix/maintenance/",
			map[string]any{"automationOptions": map[string]any{"maintenanceModeOptions": map[string]any{"resetMaintenanceMode": true}},
				"lockOptions": map[string]any{"lockKeyPrefix": "\xff\x02/my-prefix"}}, 600, 0},
		{"the cluster's maintenance time, the API server's clock", "\xff\x02/org.foundationdb.kubernetes-operator/maintenance/",
			map[string]any{"automationOptions": map[string]any{"maintenanceModeOptions": map[string]any{"UseMaintenanceModeChecker": true,
				"maintenanceModeTimeSeconds": int64(1200)}}}, 1200, time.Hour},
		{"a maintenance time below 1 s counts as unset", "\xff\x02/org.foundationdb.kubernetes-operator/maintenance/",
			map[string]any{"automationOptions": map[string]any{"maintenanceModeOptions": map[string]any{"UseMaintenanceModeChecker": true,
				"maintenanceModeTimeSeconds": int64(0)}}}, 600, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, model, e := liveCluster(t, 3, 3)
			e.deps.Clock = offsetClock(tt.skew)
			ops.ControllerOf(c.Groups[0]).Object["spec"] = tt.spec
			p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range p.Steps {
				zone := strings.TrimPrefix(s.Target, "zone/")
				want := fmt.Sprintf(`run: fdbcli --exec 'option on ACCESS_SYSTEM_KEYS; writemode on; set %s <start:int64le>; maintenance on %s %d'`,
					escapeToken(tt.prefix+storageIn(c, zone)), zone, tt.seconds)
				if !slices.Contains(s.Details, want) {
					t.Fatalf("step %s details %q, want %q", s.Target, s.Details, want)
				}
			}
			start := time.Now().Add(tt.skew).Unix()
			// The model's processes started just now: listed at once, the operator's checker
			// (whole-second uptimes and entry times) would count them as restarted already.
			started := map[string]time.Time{}
			for _, pr := range model.Processes() {
				started[pr.ID] = pr.Started
			}
			if err := (&ops.Executor{LockID: "test", Timeout: time.Minute}).Run(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			// Each batch listed its storage process group before its zone, and cleared it with
			// the zone (no operator runs here to drop it).
			var sets []string
			for _, e := range model.Log() {
				if !strings.HasPrefix(e.Command, "set ") {
					continue
				}
				key, v := e.Command[4:len(e.Command)-9], []byte(e.Command[len(e.Command)-8:])
				if !strings.HasPrefix(key, tt.prefix) {
					t.Fatalf("set %q outside the maintenance prefix", key)
				}
				ts := int64(binary.LittleEndian.Uint64(v))
				if ts < start || ts > time.Now().Add(tt.skew).Unix() {
					t.Fatalf("%q: maintenance start %d outside the run", key, ts)
				}
				// The operator's rule: restarted when now - floor(uptime) is after the entry's
				// time, true at some moment for any process that started less than 1 s before it.
				id := strings.TrimPrefix(key, tt.prefix)
				if r, ok := started[id]; !ok || time.Unix(ts, 0).Before(r.Add(time.Second)) {
					t.Fatalf("%q listed at %d, less than 1 s after its process started (%s): the operator would end the zone before the kill",
						key, ts, r.Format(time.RFC3339Nano))
				}
				sets = append(sets, key)
			}
			if len(sets) != 3 {
				t.Fatalf("maintenance list entries written: %q, want the 3 storage process groups", sets)
			}
			for _, m := range mutations(model) {
				if strings.HasPrefix(m, "maintenance on ") && !strings.HasSuffix(m, fmt.Sprintf(" %d", tt.seconds)) {
					t.Fatalf("ran %q, want a zone of %d s", m, tt.seconds)
				}
			}
			if kv := model.KV(tt.prefix); len(kv) != 0 {
				t.Fatalf("entries left after the run: %q", kv)
			}
			if d := model.DegradedStorage(); len(d) != 0 {
				t.Fatalf("storage failed outside maintenance: %q", d)
			}
		})
	}
}

func storageIn(c *ops.Cluster, zone string) string {
	for _, p := range c.Groups[0].Pods {
		if p.Zone == zone {
			return p.Member
		}
	}
	return ""
}

// TestRestartEndsMaintenanceOnTheOperatorsChecks: a busy cluster (data distribution always
// relocating) still ends each batch's maintenance zone, while a storage lag above the
// operator's 60 s keeps the zone on until it drops (its CheckQosStatus).
func TestRestartEndsMaintenanceOnTheOperatorsChecks(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	busy := fdbsim.Load{InFlightBytes: 1 << 30}
	lagging := busy
	lagging.DataLag = 90 * time.Second
	model.SetLoad(lagging)
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var waitedOnLag bool
	var offsDuringLag int
	sink := ops.SinkFunc(func(ev ops.Event) {
		if ev.Type != ops.EventStepWaiting || !strings.Contains(ev.Reason, "data lag") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !waitedOnLag {
			waitedOnLag = true
			offsDuringLag = slices.Index(mutations(model), "maintenance off") + 1
			if z, _ := model.MaintenanceZone(); z == "" {
				t.Errorf("waiting on the lag without a zone on")
			}
			model.SetLoad(busy)
		}
	})
	if err := (&ops.Executor{LockID: "test", Sink: sink, Timeout: time.Minute}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !waitedOnLag || offsDuringLag != 0 {
		t.Fatalf("waited on the storage lag %v, maintenance off sent while it was high %v: %q", waitedOnLag, offsDuringLag != 0, mutations(model))
	}
	if z, _ := model.MaintenanceZone(); z != "" {
		t.Fatalf("maintenance zone %s left", z)
	}
	if n := strings.Count(strings.Join(mutations(model), "\n"), "maintenance off"); n != 3 {
		t.Fatalf("%d maintenance off, want one per batch: %q", n, mutations(model))
	}
}

// TestRestartResumeWaitsForItsBouncedBatch: a run killed right after its kill went out, with
// the batch (a coordinator among it) not back yet, is re-run at once: the preflight does not
// refuse the unreachable coordinator its own bounce took away, the step waits for the batch
// (reported as that), never bounces it twice, and clears the killed run's zone.
func TestRestartResumeWaitsForItsBouncedBatch(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	model.HoldRestarts(true)
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
	if err != nil {
		t.Fatal(err)
	}
	leases := fake.NewClientset()
	locker := func() *lock.Manager {
		return &lock.Manager{Client: leases, Namespace: "demo", Cluster: "myfdb", ID: "tester", Session: "s1"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for !slices.ContainsFunc(mutations(model), func(m string) bool { return strings.HasPrefix(m, "kill ") }) {
			time.Sleep(2 * time.Millisecond)
		}
		cancel()
	}()
	_ = (&ops.Executor{LockID: "tester", Locker: locker()}).Run(ctx, p)
	zone, _ := model.MaintenanceZone()
	var st Status
	if err := json.Unmarshal(model.StatusJSON(), &st); err != nil {
		t.Fatal(err)
	}
	away := false
	for _, co := range st.Client.Coordinators.Coordinators {
		away = away || !co.Reachable
	}
	if zone == "" || !away {
		t.Fatalf("setup: want the killed run's zone on and a coordinator away; zone %q, %+v", zone, st.Client.Coordinators)
	}
	ls, err := locker().Status(context.Background())
	if err != nil || ls.Journal == nil {
		t.Fatalf("journal: %v %+v", err, ls)
	}
	p2, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Preflight(context.Background(), ops.PreflightState{Resuming: true, Done: ls.Journal.IsDone, Data: ls.Journal.Data}); err != nil {
		t.Fatalf("the re-run refused its own bounced batch: %v", err)
	}
	var mu sync.Mutex
	var waited string
	sink := ops.SinkFunc(func(ev ops.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Type == ops.EventStepWaiting && waited == "" {
			waited = ev.Reason
			model.HoldRestarts(false)
		}
	})
	if err := (&ops.Executor{LockID: "tester", Locker: locker(), Sink: sink, Timeout: time.Minute}).Run(context.Background(), p2); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if waited != "processes of the batch to report again" {
		t.Fatalf("first wait %q, want the bounced batch", waited)
	}
	kills := map[string]int{}
	for _, m := range mutations(model) {
		if strings.HasPrefix(m, "kill ") {
			kills[m]++
		}
	}
	for k, n := range kills {
		if n > 1 {
			t.Fatalf("%q sent %d times: %q", k, n, mutations(model))
		}
	}
	if len(kills) != 3 {
		t.Fatalf("kills %v", kills)
	}
	if z, _ := model.MaintenanceZone(); z != "" {
		t.Fatalf("maintenance zone %s left", z)
	}
}

// killFails fails every fdbcli session that kills, without running it: nothing is bounced.
type killFails struct{ next kube.Executor }

func (k killFails) Exec(ctx context.Context, namespace, pod, container string, argv []string, stdin io.Reader) ([]byte, []byte, error) {
	if slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "kill; kill ") }) {
		return nil, []byte("ERROR: Could not communicate with all of the processes\n"), &kube.ExitError{Code: 1}
	}
	return k.next.Exec(ctx, namespace, pod, container, argv, stdin)
}

// TestRestartEndsItsZoneWhenNothingWasKilled: a batch whose kill fails before any process
// went down leaves no maintenance zone behind, and says so.
func TestRestartEndsItsZoneWhenNothingWasKilled(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	e.deps.Exec = killFails{next: e.deps.Exec}
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
	if err != nil {
		t.Fatal(err)
	}
	err = (&ops.Executor{LockID: "test", Timeout: time.Minute}).Run(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "nothing was bounced; maintenance zone") {
		t.Fatalf("err %v", err)
	}
	if z, _ := model.MaintenanceZone(); z != "" {
		t.Fatalf("maintenance zone %s left: %q", z, mutations(model))
	}
	if got := mutations(model); len(got) != 2 || got[1] != "maintenance off" {
		t.Fatalf("mutations %q", got)
	}
}

// TestRestartPlanPutsTransactionSystemLast: a pod-by-pod plan bounces the storage-only pods
// first, then the pods of the transaction system (each bounce a recovery), the master's and
// cluster controller's last, and the plan says so.
func TestRestartPlanPutsTransactionSystemLast(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	// Groups as discovery may list them: the transaction system's before storage.
	slices.Reverse(c.Groups)
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModePod})
	if err != nil {
		t.Fatal(err)
	}
	rank := map[string]int{}
	for _, pr := range model.Processes() {
		r := 0
		for _, role := range pr.Roles {
			switch role {
			case "master", "cluster_controller":
				r = 2
			case "log", "commit_proxy", "grv_proxy", "resolver":
				r = max(r, 1)
			}
		}
		rank["myfdb-"+pr.ID] = r
	}
	last := 0
	for _, s := range p.Steps {
		r := rank[s.Pods[0]]
		if r < last {
			t.Fatalf("%s (rank %d) after a rank %d batch", s.Target, r, last)
		}
		last = r
	}
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	assertPlan(t, p, strings.Join(ids, " "), "restart_pod_order.txt")
}

// TestRestartGroupsStatelessTransactionSystem: pod by pod, the three stateless pods (commit
// proxies, GRV proxy, resolver, master, cluster controller) are bounced in one batch, one fdbcli
// kill, so the whole restart costs one recovery per log pod and one for them, as the plan says,
// and as the simulator counts (a recovery per bounce of a transaction-system process).
func TestRestartGroupsStatelessTransactionSystem(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModePod})
	if err != nil {
		t.Fatal(err)
	}
	stateless := []string{"myfdb-stateless-10", "myfdb-stateless-11", "myfdb-stateless-12"}
	var tx []*ops.Step
	for _, s := range p.Steps {
		if slices.ContainsFunc(s.Pods, func(n string) bool { return slices.Contains(stateless, n) }) {
			tx = append(tx, s)
		}
	}
	if len(tx) != 1 || !slices.Equal(tx[0].Pods, stateless) || tx[0] != p.Steps[len(p.Steps)-1] {
		t.Fatalf("stateless pods in %d batches, want one, last: %v", len(tx), p.Steps)
	}
	if !slices.ContainsFunc(p.Notes, func(n string) bool {
		return strings.Contains(n, "4 in all") && strings.Contains(n, "1 recovery for them all")
	}) {
		t.Fatalf("notes %q", p.Notes)
	}
	if err := p.Preflight(context.Background(), ops.PreflightState{}); err != nil {
		t.Fatal(err)
	}
	before := model.Recoveries()
	if err := (&ops.Executor{LockID: "test", Timeout: time.Minute}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if got := model.Recoveries() - before; got != 4 {
		t.Fatalf("%d recoveries during the restart, want 4 (3 log pods, 1 stateless batch); kills %q", got, mutations(model))
	}
}

// On a TLS cluster the kill names each process by its status json address without ":tls" (the
// key of fdbcli's kill list); before 7.3 the session sleeps after the kill so the requests leave
// before fdbcli exits. Every process is bounced, and the dry run shows the exact commands.
func TestRestartByProcessTLSAndVersions(t *testing.T) {
	for _, tt := range []struct {
		name, version, golden string
		tls                   bool
	}{
		{"tls 7.3", "7.3.63", "restart_tls_73.txt", true},
		{"tls 7.1", "7.1.57", "restart_tls_71.txt", true},
		{"plain 7.1", "7.1.57", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, model, e := liveClusterWith(t, 3, 3, tt.tls, tt.version)
			p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
			if err != nil {
				t.Fatal(err)
			}
			if tt.golden != "" {
				var b bytes.Buffer
				if err := ops.WritePlanText(&b, p.View()); err != nil {
					t.Fatal(err)
				}
				golden.Assert(t, tt.golden, b.Bytes())
			}
			if err := p.Preflight(context.Background(), ops.PreflightState{}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := (&ops.Executor{LockID: "test", Timeout: time.Minute}).Run(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			for _, pr := range model.Processes() {
				if !pr.Up || !pr.Started.After(start) {
					t.Fatalf("process %s not restarted by the run: %+v", pr.ID, pr)
				}
			}
			for _, m := range mutations(model) {
				if strings.HasPrefix(m, "kill ") && strings.Contains(m, ":tls") {
					t.Fatalf("kill with :tls: %q", m)
				}
			}
		})
	}
}

// TestZonePlanWarnsWithoutAvailabilityMargin: triple redundancy with logs in exactly three
// zones leaves max_zone_failures_without_losing_availability 0, so a zone batch is a short
// outage: the zone plan says so, a pod plan (one pod at a time) does not.
func TestZonePlanWarnsWithoutAvailabilityMargin(t *testing.T) {
	c, _, e := liveCluster(t, 3, 3)
	for _, tc := range []struct {
		mode string
		want bool
	}{{ops.ModeZone, true}, {ops.ModePod, false}} {
		p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: tc.mode})
		if err != nil {
			t.Fatal(err)
		}
		got := slices.ContainsFunc(p.Notes, func(n string) bool {
			return strings.Contains(n, "max_zone_failures_without_losing_availability 0") && strings.Contains(n, "unavailable")
		})
		if got != tc.want {
			t.Errorf("--mode %s: availability warning %t, want %t: %q", tc.mode, got, tc.want, p.Notes)
		}
	}
}

// TestRestartKillStampsAreServerTime: the journaled kill times are the API server's clock
// (here an hour ahead of the workstation's), as the uptimes they are compared with on a resume
// are: a run resumed from another workstation, with another clock, must judge "restarted since
// the kill" by the same clock. The run itself still finishes, bouncing each batch once.
func TestRestartKillStampsAreServerTime(t *testing.T) {
	c, model, sim := liveCluster(t, 3, 3)
	skew := time.Hour
	e, err := New(ops.EngineDeps{Client: fake.NewClientset(), Exec: sim.deps.Exec, Clock: offsetClock(skew)}, Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	plan := func() *ops.Plan {
		p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	leases := fake.NewClientset()
	m := &lock.Manager{Client: leases, Namespace: "demo", Cluster: "myfdb", ID: "tester", Session: "s1"}
	// Interrupt the run once its first kill is out, leaving its journal.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for !slices.ContainsFunc(mutations(model), func(m string) bool { return strings.HasPrefix(m, "kill ") }) {
			time.Sleep(2 * time.Millisecond)
		}
		cancel()
	}()
	from := time.Now().Add(skew)
	_ = (&ops.Executor{LockID: "tester", Locker: m}).Run(ctx, plan())
	to := time.Now().Add(skew)
	state, err := m.Status(context.Background())
	if err != nil || state.Journal == nil {
		t.Fatalf("journal %v %v", state, err)
	}
	j := state.Journal
	stamps := 0
	for k, v := range j.Data {
		if !strings.HasPrefix(k, keyKilled) {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if at := time.Unix(0, n); err != nil || at.Before(from) || at.After(to) {
			t.Fatalf("%s = %s (%v), want the server's time between %v and %v", k, time.Unix(0, n), err, from, to)
		}
		stamps++
	}
	if stamps != 1 {
		t.Fatalf("%d kill stamps in the journal %v, want 1", stamps, j.Data)
	}
	// The resumed run judges the bounced batch by the same clock: no batch twice.
	if err := (&ops.Executor{LockID: "tester", Locker: m, Timeout: time.Minute}).Run(context.Background(), plan()); err != nil {
		t.Fatal(err)
	}
	kills := map[string]int{}
	for _, mu := range mutations(model) {
		if strings.HasPrefix(mu, "kill ") {
			kills[mu]++
		}
	}
	if len(kills) != 3 {
		t.Fatalf("kills %q", mutations(model))
	}
	for k, n := range kills {
		if n != 1 {
			t.Fatalf("%q sent %d times", k, n)
		}
	}
}
