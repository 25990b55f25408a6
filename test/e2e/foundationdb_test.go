//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbop"
)

// fdbModel is the simulator's model of the fixture's cluster.
func fdbModel(t *testing.T, ns string, b interface{ Cluster(string) *fdbsim.Cluster }) *fdbsim.Cluster {
	t.Helper()
	m := b.Cluster(fdbop.Key(ns, "myfdb"))
	if m == nil {
		t.Fatal("no model for myfdb")
	}
	return m
}

// waitFDBKill waits until a kill from a pod is on the simulator's log: the run's first batch
// is under way. The simulator has no watch, so its log is polled.
func waitFDBKill(t *testing.T, m *fdbsim.Cluster) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !slices.ContainsFunc(fdbMutations(m), func(c string) bool { return strings.HasPrefix(c, "kill ") }) {
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-tick.C:
		}
	}
}

// fdbMutations are the commands that changed the simulated cluster, run from pods (the
// operator's own are left out, except the maintenance checker's "maintenance off").
func fdbMutations(m *fdbsim.Cluster) []string {
	var out []string
	for _, e := range m.Log() {
		if (e.Client == "operator" && e.Command != "maintenance off") || !e.OK {
			continue
		}
		if strings.HasPrefix(e.Command, "kill ") || strings.HasPrefix(e.Command, "maintenance on") || e.Command == "maintenance off" {
			out = append(out, e.Command)
		}
	}
	return out
}

// fdbZones are the distinct zoneids of the model's processes of class, of every process when
// class is "", sorted. The test bed has more zones than the fixture has processes per class, so
// which zones a class uses is the scheduler's choice: tests count them here, never assume them.
func fdbZones(m *fdbsim.Cluster, class string) []string {
	var out []string
	for _, p := range m.Processes() {
		if (class == "" || p.Class == class) && !slices.Contains(out, p.Zone) {
			out = append(out, p.Zone)
		}
	}
	slices.Sort(out)
	return out
}

// lowestReplicas samples min_replicas_remaining until stop.
func lowestReplicas(m *fdbsim.Cluster) (stop func() int) {
	var mu sync.Mutex
	low := 99
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var st struct {
				Cluster struct {
					Data *struct {
						State struct {
							MinReplicasRemaining *int `json:"min_replicas_remaining"`
						} `json:"state"`
					} `json:"data"`
				} `json:"cluster"`
			}
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

// checkMaintenanceDiscipline: every kill ran while exactly its batch's zone was in
// maintenance (or none, for a batch without storage), one zone at a time, none left.
func checkMaintenanceDiscipline(t *testing.T, m *fdbsim.Cluster, muts []string, wantKills bool) {
	t.Helper()
	zoneOf, classOf := map[string]string{}, map[string]string{}
	for _, p := range m.Processes() {
		// A kill names a TLS process without ":tls" (fdbcli's kill list keys).
		zoneOf[strings.TrimSuffix(p.Address, ":tls")] = p.Zone
		classOf[strings.TrimSuffix(p.Address, ":tls")] = p.Class
	}
	open, ons := "", 0
	for _, c := range muts {
		switch {
		case strings.HasPrefix(c, "maintenance on "):
			if open != "" {
				t.Fatalf("maintenance on while %s is on: %q", open, muts)
			}
			open = strings.Fields(c)[2]
			ons++
		case c == "maintenance off":
			open = ""
		case strings.HasPrefix(c, "kill "):
			for _, a := range strings.Fields(c)[1:] {
				// A zone without storage processes gets no maintenance zone (there is no data
				// movement to hold back); pods land in zones at random, so some runs have one.
				if open == "" && classOf[a] != "storage" {
					continue
				}
				if zoneOf[a] != open {
					t.Fatalf("kill of %s (zone %s) while maintenance is %q: %q", a, zoneOf[a], open, muts)
				}
			}
		}
	}
	if want := len(fdbZones(m, "storage")); ons != want {
		t.Fatalf("%d maintenance zones set, want one per storage zone (%d): %q", ons, want, muts)
	}
	if z, _ := m.MaintenanceZone(); z != "" {
		t.Fatalf("maintenance zone %s left after the run", z)
	}
	if d := m.DegradedStorage(); len(d) != 0 {
		t.Fatalf("storage processes failed outside a maintenance zone: %q", d)
	}
	if !wantKills && slices.ContainsFunc(muts, func(c string) bool { return strings.HasPrefix(c, "kill ") }) {
		t.Fatalf("--method pod sent kills: %q", muts)
	}
}

func TestFoundationDBStatus(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	env := cliEnv(t)
	r := runCLI(t, env, "status", "myfdb", "-n", ns)
	if r.Code != 0 {
		t.Fatal(r)
	}
	model := fdbModel(t, ns, b.Host)
	for _, want := range append([]string{"engine foundationdb, layout foundationdb-operator", "Health:   healthy",
		"FoundationDBCluster/myfdb", "Processes:", "COORDINATOR", "master", "cluster_controller",
		"maintenance: none", "operatorReconciled: yes", "coordinators: 5/5 reachable", "recovery: fully_recovered"}, fdbZones(model, "")...) {
		if !strings.Contains(r.Stdout, want) {
			t.Fatalf("status lacks %q:\n%s", want, r.Stdout)
		}
	}
	for _, class := range []string{"storage", "log", "stateless"} {
		if !strings.Contains(r.Stdout, "\n  "+class+" ") {
			t.Fatalf("status lacks group %s:\n%s", class, r.Stdout)
		}
	}
	r = runCLI(t, env, "status", "myfdb", "-n", ns, "-o", "json")
	if r.Code != 0 {
		t.Fatal(r)
	}
	var doc struct {
		Cluster struct {
			Engine string
			Groups []struct {
				Name       string
				Controller struct{ Kind, Name string }
				Pods       []struct{ Name, Member, Zone string }
			}
		}
		Health struct {
			Status  string
			Details map[string]string
			Table   struct{ Rows [][]string }
		}
	}
	if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, r.Stdout)
	}
	if doc.Cluster.Engine != "foundationdb" || len(doc.Cluster.Groups) != 3 || doc.Health.Status != "healthy" || len(doc.Health.Table.Rows) != 9 {
		t.Fatalf("json: %+v", doc)
	}
	for _, g := range doc.Cluster.Groups {
		if g.Controller.Kind != "FoundationDBCluster" || len(g.Pods) != 3 {
			t.Fatalf("group %+v", g)
		}
		for _, p := range g.Pods {
			if p.Member == "" || !strings.HasPrefix(p.Zone, "zone-") {
				t.Fatalf("pod %+v", p)
			}
		}
	}
	// Under maintenance the zone and its remaining time show, and the processes in it are
	// marked. Pods land in zones at random, so the zone is one that holds processes.
	zone := fdbZones(model, "")[0]
	var out, errb strings.Builder
	if code := model.Run(context.Background(), []string{"--exec", "maintenance on " + zone + " 300"}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	r = runCLI(t, env, "status", "myfdb", "-n", ns)
	if !strings.Contains(r.Stdout, "maintenance: zone "+zone+", ") || !strings.Contains(r.Stdout, "UnderMaintenance") {
		t.Fatalf("status under maintenance:\n%s", r.Stdout)
	}
}

func podUIDs(t *testing.T, ns string) map[string]types.UID {
	t.Helper()
	pods, err := bed.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-cluster-name=myfdb"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		out[p.Name] = p.UID
	}
	return out
}

func TestFoundationDBRestartByProcessZone(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	var holders []string
	for _, p := range model.Processes() {
		if slices.Contains(p.Roles, "master") || slices.Contains(p.Roles, "cluster_controller") {
			holders = append(holders, p.Address)
		}
	}
	uids := podUIDs(t, ns)
	env := cliEnv(t)
	dry := runCLI(t, env, "restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--dry-run")
	if dry.Code != 0 || strings.Count(dry.Stdout, "fdbcli --exec 'kill; kill ") != len(fdbZones(model, "")) || strings.Count(dry.Stdout, "fdbcli --exec 'maintenance on zone-") != len(fdbZones(model, "storage")) {
		t.Fatalf("dry-run:\n%s", dry)
	}
	if muts := fdbMutations(model); len(muts) != 0 {
		t.Fatalf("dry-run changed the cluster: %q", muts)
	}
	start := time.Now()
	stop := lowestReplicas(model)
	r := runCLI(t, env, "restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--yes", "-o", "json")
	low := stop()
	if r.Code != 0 {
		t.Fatal(r)
	}
	if low < 3 {
		t.Fatalf("min_replicas_remaining fell to %d during the restart", low)
	}
	// The done event counts the run's requests; each fdbcli call is an exec (a GET of pods/exec).
	evs := parseNDJSON(t, r)
	done := evs[len(evs)-1]
	if done.Type != "done" || done.APIRequests["get pods/exec"] == 0 || done.APIRequests["delete pods"] != 0 {
		t.Fatalf("done event %+v", done)
	}
	t.Logf("requests: %v (%d processes restarted)", done.APIRequests, len(model.Processes()))
	for _, p := range model.Processes() {
		if p.Class == "storage" && !p.Started.After(start) {
			t.Fatalf("storage process %s not restarted (uptime longer than the run)", p.ID)
		}
	}
	muts := fdbMutations(model)
	checkMaintenanceDiscipline(t, model, muts, true)
	var kills []string
	for _, c := range muts {
		if strings.HasPrefix(c, "kill ") {
			kills = append(kills, c)
		}
	}
	last := map[int]bool{}
	for _, a := range holders {
		for i, k := range kills {
			if slices.Contains(strings.Fields(k), a) {
				last[i] = true
			}
		}
	}
	for i := range last {
		if i < len(kills)-len(last) {
			t.Fatalf("master/cluster controller %v not in the last batches: %q", holders, kills)
		}
	}
	// Bounced, not deleted: the pods keep their UIDs.
	if got := podUIDs(t, ns); !mapsEqual(got, uids) {
		t.Fatalf("pods changed: %v -> %v", uids, got)
	}
}

func mapsEqual(a, b map[string]types.UID) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestFoundationDBRestartByPodZone(t *testing.T) {
	ns := newNamespace(t)
	b := fdbSimFixture(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	uids := podUIDs(t, ns)
	start := time.Now()
	stop := lowestReplicas(model)
	r := runCLI(t, cliEnv(t), "restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--method", "pod", "--yes", "--timeout", "150s")
	low := stop()
	if r.Code != 0 {
		for _, p := range model.Processes() {
			t.Logf("process %+v", p)
		}
		t.Logf("status: %s", model.StatusJSON())
		t.Fatal(r)
	}
	if low < 3 {
		t.Fatalf("min_replicas_remaining fell to %d during the restart", low)
	}
	got := podUIDs(t, ns)
	for name, uid := range uids {
		if got[name] == "" || got[name] == uid {
			t.Fatalf("pod %s: uid %s -> %s, want the same name with a new UID", name, uid, got[name])
		}
	}
	for _, p := range model.Processes() {
		if !p.Up || !p.Started.After(start) {
			t.Fatalf("process %s not restarted: %+v", p.ID, p)
		}
	}
	checkMaintenanceDiscipline(t, model, fdbMutations(model), false)
}

func TestFoundationDBRestartRefusals(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, ns string, m *fdbsim.Cluster)
		want  string
	}{
		{"unavailable", func(t *testing.T, _ string, m *fdbsim.Cluster) {
			// Every coordinator stopped: no quorum, so the database stays unavailable (with
			// only the logs stopped, the simulator recovers onto other processes, as
			// FoundationDB recruits logs elsewhere, and the database comes back).
			for _, p := range m.Processes() {
				if slices.Contains(p.Roles, "coordinator") {
					if err := m.Stop(p.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Until the simulator's recovery notices the logs are gone, status json may still
			// report the database available (and refuse for another reason first): wait for it
			// to say unavailable, as FoundationDB's would (polled: a simulator has no watch).
			deadline := time.Now().Add(waitTimeout)
			for {
				var st struct {
					Client struct {
						DatabaseStatus struct{ Available bool } `json:"database_status"`
					} `json:"client"`
				}
				if err := json.Unmarshal(m.StatusJSON(), &st); err != nil {
					t.Fatal(err)
				}
				if !st.Client.DatabaseStatus.Available {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("status json still reports the database available with every coordinator stopped")
				}
				time.Sleep(50 * time.Millisecond)
			}
		}, "is unavailable"},
		{"not reconciled", func(t *testing.T, ns string, _ *fdbsim.Cluster) {
			// The operator is told to skip the cluster, then its spec changes: a generation the
			// operator has not reconciled. The refusal names why (the pause, and how to end it),
			// not only that the generation is behind.
			res := bed.Dynamic.Resource(fdbop.GVR).Namespace(ns)
			if _, err := res.Patch(t.Context(), "myfdb", types.MergePatchType, []byte(`{"spec":{"skip":true}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := res.Patch(t.Context(), "myfdb", types.MergePatchType, []byte(`{"spec":{"processGroupIDPrefix":"x"}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "the operator is paused (spec.skip true, not set by this tool); refusing to restart; resume it with: kubectl patch foundationdbcluster myfdb"},
		{"another zone in maintenance", func(t *testing.T, _ string, m *fdbsim.Cluster) {
			var out, errb strings.Builder
			if code := m.Run(context.Background(), []string{"--exec", "maintenance on zone-c 300"}, &out, &errb); code != 0 {
				t.Fatal(errb.String())
			}
		}, "zone zone-c is in maintenance, set by someone else"},
		{"storage process stopped", func(t *testing.T, _ string, m *fdbsim.Cluster) {
			// A storage process: its shards lose a replica (it may be a coordinator too: the
			// replicas are what the gate reads first).
			for _, p := range m.Processes() {
				if p.Class == "storage" {
					if err := m.Stop(p.ID); err != nil {
						t.Fatal(err)
					}
					return
				}
			}
			t.Fatal("setup: no storage process")
		}, "has min_replicas_remaining 2, below the configured 3"},
		{"log down recovering", func(t *testing.T, _ string, m *fdbsim.Cluster) {
			// A log of the current generation stops: FoundationDB recovers onto other
			// processes, and the recovery waits at all_logs_recruited while the old
			// generation's logs are still needed (HoldRecovery).
			m.HoldRecovery(true)
			for _, p := range m.Processes() {
				if slices.Contains(p.Roles, "log") {
					if err := m.Stop(p.ID); err != nil {
						t.Fatal(err)
					}
					waitFDBStatus(t, m, "the recovery at all_logs_recruited", func(s fdbStatusDoc) bool {
						return s.Client.DatabaseStatus.Available && s.Cluster.RecoveryState.Name == "all_logs_recruited"
					})
					return
				}
			}
			t.Fatal("setup: no process holds a log")
		}, "is recovering (all_logs_recruited); refusing to restart"},
		{"coordinator down", func(t *testing.T, ns string, m *fdbsim.Cluster) {
			// A coordinator that stores no data stops; once any recovery it started is over,
			// the unreachable coordinator is what status json reports wrong. The operator
			// would choose another coordinator (change_coordinators.go; the stand-in does): it
			// is paused first, which the gate reports only after status json's refusals.
			if _, err := bed.Dynamic.Resource(fdbop.GVR).Namespace(ns).Patch(t.Context(), "myfdb", types.MergePatchType, []byte(`{"spec":{"skip":true}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, p := range m.Processes() {
				if p.Class != "storage" && slices.Contains(p.Roles, "coordinator") {
					if err := m.Stop(p.ID); err != nil {
						t.Fatal(err)
					}
					waitFDBStatus(t, m, "fully recovered without the coordinator", func(s fdbStatusDoc) bool {
						return s.Client.DatabaseStatus.Available && s.Cluster.RecoveryState.Name == "fully_recovered"
					})
					if !slices.Contains(m.Coordinators(), p.Address) {
						t.Fatalf("setup: the operator replaced coordinator %s although paused", p.Address)
					}
					return
				}
			}
			t.Fatal("setup: no coordinator outside the storage processes")
		}, "is unreachable; refusing to restart"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := newNamespace(t)
			b := fdbSimFixture(t, ns, "myfdb")
			model := fdbModel(t, ns, b.Host)
			tt.setup(t, ns, model)
			before := len(fdbMutations(model))
			r := runCLI(t, cliEnv(t), "restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--yes")
			if r.Code != 5 || !strings.Contains(r.Stderr, tt.want) || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
				t.Fatalf("want exit 5 with one line %q: %s", tt.want, r)
			}
			if muts := fdbMutations(model)[before:]; len(muts) != 0 {
				t.Fatalf("refused restart changed the cluster: %q", muts)
			}
			leases, err := bed.Client.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{})
			if err != nil || len(leases.Items) != 0 {
				t.Fatalf("leases after a refusal: %v %v", err, leases)
			}
			pods, _ := bed.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
					t.Fatalf("pod %s touched by a refusal", p.Name)
				}
			}
			// The status json runs of the refusal left no client trace file in the pods, whose
			// container (as the operator's) sets FDB_NETWORK_OPTION_TRACE_ENABLE; a bare fdbcli
			// there does leave one.
			if tf := b.Host.AllTraceFiles(); len(tf) != 0 {
				t.Fatalf("the refused restart left client trace files in the pods: %q", tf)
			}
			pod := pods.Items[0].Name
			if _, errOut, err := fdbcliIn(t.Context(), ns, pod, "--exec", "status minimal", "--timeout", "5"); err != nil && tt.name != "unavailable" {
				t.Fatalf("bare fdbcli: %v: %s", err, errOut)
			}
			if tf := b.Host.TraceFiles(ns + "/" + pod); len(tf) != 1 || !strings.HasPrefix(tf[0], fdbsim.OperatorTraceDir+"/") {
				t.Fatalf("bare fdbcli in %s: trace files %q, want one in %s", pod, tf, fdbsim.OperatorTraceDir)
			}
		})
	}
}

// fdbStatusDoc is what the refusal cases read of the simulator's status json.
type fdbStatusDoc struct {
	Client struct {
		DatabaseStatus struct{ Available bool } `json:"database_status"`
	} `json:"client"`
	Cluster struct {
		RecoveryState struct{ Name string } `json:"recovery_state"`
	} `json:"cluster"`
}

// waitFDBStatus polls the simulator's status json until ok (a simulator has no watch).
func waitFDBStatus(t *testing.T, m *fdbsim.Cluster, what string, ok func(fdbStatusDoc) bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		var st fdbStatusDoc
		if err := json.Unmarshal(m.StatusJSON(), &st); err != nil {
			t.Fatal(err)
		}
		if ok(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status json never reported %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFoundationDBRestartInterrupted: a restart by process interrupted (SIGINT, and kill -9)
// while its first batch comes back, then run again, converges: every storage process
// restarted, no batch bounced twice, no maintenance zone left.
func TestFoundationDBRestartInterrupted(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			ns := newNamespace(t)
			b := fdbSimFixture(t, ns, "myfdb")
			model := fdbModel(t, ns, b.Host)
			env := cliEnv(t)
			args := []string{"restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--yes", "-o", "json"}
			start := time.Now()
			run := startCLI(t, env, args...)
			// Interrupt while the first batch's kill is under way: fdbcli holds its session
			// for the kill's flush delay, the processes restart meanwhile.
			waitFDBKill(t, model)
			if err := run.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			res := run.wait()
			if res.Code == 0 {
				t.Fatalf("the interrupted run succeeded: %s", res)
			}
			if sig == syscall.SIGKILL {
				// The dead run's session holds the lock until it expires: give it up, as a
				// retry after a crash does.
				if r := runCLI(t, env, "lock", "release", "myfdb", "-n", ns, "--lock-id", defaultLockID(t)); r.Code != 0 {
					t.Fatalf("lock release: %s", r)
				}
			}
			r := runCLI(t, env, args...)
			if r.Code != 0 {
				t.Fatal(r)
			}
			kills := map[string]int{}
			for _, c := range fdbMutations(model) {
				if strings.HasPrefix(c, "kill ") {
					kills[c]++
				}
			}
			if len(kills) != len(fdbZones(model, "")) {
				t.Fatalf("kills %v, want one per zone %v", kills, fdbZones(model, ""))
			}
			for k, n := range kills {
				if n != 1 {
					t.Fatalf("%q sent %d times", k, n)
				}
			}
			for _, p := range model.Processes() {
				if p.Class == "storage" && !p.Started.After(start) {
					t.Fatalf("storage process %s not restarted", p.ID)
				}
			}
			if z, _ := model.MaintenanceZone(); z != "" {
				t.Fatalf("maintenance zone %s left", z)
			}
		})
	}
}

// TestFoundationDBRestartKilledMidBatchRerunAtOnce: kill -9 the restart just after its first
// batch's fdbcli kill went out, while that batch is still away (a slow fdbmonitor: its
// coordinator unreachable, the recovery running), and re-run the same command at once with
// --wait-for-lock: the re-run does not refuse its own bounced batch, waits for it (reported as
// that), finishes, and clears the killed run's maintenance zone.
func TestFoundationDBRestartKilledMidBatchRerunAtOnce(t *testing.T) {
	ns := newNamespace(t)
	// The killed batch must hold storage, so that it set a maintenance zone for the re-run to
	// clear: the run is killed at its first kill, and its first batch is the restart's choice.
	b := fdbSimFixtureThreeZones(t, ns, "myfdb")
	model := fdbModel(t, ns, b.Host)
	env := cliEnv(t)
	args := []string{"restart", "myfdb", "-n", ns, "--rolling", "--mode", "zone", "--yes", "-o", "json", "--lock-duration", "15s"}
	start := time.Now()
	model.HoldRestarts(true)
	run := startCLI(t, env, args...)
	waitFDBKill(t, model)
	if err := run.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if res := run.wait(); res.Code == 0 {
		t.Fatalf("the killed run succeeded: %s", res)
	}
	if z, _ := model.MaintenanceZone(); z == "" {
		t.Fatal("setup: the killed run's zone is not on")
	}
	rerun := startCLI(t, env, append(args, "--wait-for-lock")...)
	rerun.waitEvent("the wait for the bounced batch", func(ev ndEvent) bool {
		return ev.Type == "step-waiting" && strings.Contains(ev.Reason, "processes of the batch to report again")
	})
	model.HoldRestarts(false)
	if res := rerun.wait(); res.Code != 0 {
		t.Fatal(res)
	}
	kills := map[string]int{}
	for _, c := range fdbMutations(model) {
		if strings.HasPrefix(c, "kill ") {
			kills[c]++
		}
	}
	if len(kills) != len(fdbZones(model, "")) {
		t.Fatalf("kills %v, want one per zone %v", kills, fdbZones(model, ""))
	}
	for k, n := range kills {
		if n != 1 {
			t.Fatalf("%q sent %d times", k, n)
		}
	}
	for _, p := range model.Processes() {
		if p.Class == "storage" && !p.Started.After(start) {
			t.Fatalf("storage process %s not restarted", p.ID)
		}
	}
	if z, _ := model.MaintenanceZone(); z != "" {
		t.Fatalf("maintenance zone %s left", z)
	}
}
