package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/fakes/cratedbtest"
)

// Secret values that must never show up in any output.
const (
	systemPW = "sys-Pa55-w0rd!"
	appPW    = "app-'quoted'-pw"
	licKey   = "LIC-abcdef-123456"
)

// crateGroups: 3 masters, 2 hot, 2 cold data nodes.
func crateGroups() []fakecluster.Group {
	return []fakecluster.Group{
		{Name: "master", Role: "master", Replicas: 3},
		{Name: "hot", Role: "data", Order: 1, Replicas: 2},
		{Name: "cold", Role: "data", Order: 2, Replicas: 2},
	}
}

// crateObjects lays out a CrateDB cluster "db" with dbops.io labels: crate
// containers carrying the expected-nodes argument, and the Secrets.
func crateObjects() []runtime.Object { return crateObjectsOf(crateGroups()) }

// crateObjectsOf is crateObjects with other group sizes.
func crateObjectsOf(groups []fakecluster.Group) []runtime.Object {
	objs := fakecluster.Objects("prod", "db", "cratedb", groups...)
	for _, o := range objs {
		if s, ok := o.(*appsv1.StatefulSet); ok {
			s.Spec.Template.Spec.Containers = []corev1.Container{{Name: "crate", Image: "crate:5.8",
				Args: []string{"-Cnode.name=$(HOSTNAME)", "-Cgateway.expected_data_nodes=4", "-Cgateway.recover_after_data_nodes=3"}}}
			s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
			if s.Name == "db-master" {
				s.Spec.Template.Spec.Containers[0].Args = nil
				s.Spec.Template.Spec.Containers[0].Command = []string{"/docker-entrypoint.sh", "crate", "-Cgateway.expected_nodes=7"}
			}
		}
	}
	secret := func(name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod"}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	return append(objs,
		secret("user-system-db", map[string]string{"password": systemPW}),
		secret("app-pw", map[string]string{"password": appPW}),
		secret("crate-license", map[string]string{"license": licKey}),
	)
}

func crateNodes() []string {
	return []string{"master-0", "master-1", "master-2", "data-hot-0", "data-hot-1", "data-cold-0", "data-cold-1"}
}

// crateHost is the hostname (pod name) of a node of the fake cluster,
// which names its nodes the CrateDB operator's way.
func crateHost(node string) string { return "db-" + strings.TrimPrefix(node, "data-") }

// addCrateNode puts node into sys.nodes with its pod's hostname.
func addCrateNode(db *cratedbtest.DB, node string) {
	db.AddNodes(node)
	db.Do(func(d *cratedbtest.DB) { d.Hosts[node] = crateHost(node) })
}

// crateEnv is a harness plus a fake CrateDB behind it.
type crateEnv struct {
	*harness
	db *cratedbtest.DB
}

func newCrateEnv(t *testing.T) *crateEnv {
	t.Helper()
	db := cratedbtest.New(crateNodes()...)
	db.Do(func(d *cratedbtest.DB) {
		d.Users["system"] = systemPW
		d.GrantAll("system")
		for _, n := range d.Nodes {
			d.Hosts[n] = crateHost(n)
		}
	})
	h := newHarness(t, crateObjects()...)
	h.clock = &tickClock{t: testNow}
	return &crateEnv{harness: h, db: db}
}

// tickClock advances a millisecond per reading, so audit events (named
// after the time) on the same object do not collide.
type tickClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *tickClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// run is harness.run with the fake database wired in and tiny intervals.
func (e *crateEnv) run(args ...string) result {
	e.t.Helper()
	return e.runWith(func(g *GlobalOptions) {
		g.crateFlags().Connector = e.db.Connector()
		g.Exec = e.db.Execer()
		g.crateFlags().PollInterval = time.Millisecond
	}, args...)
}

// scaleController stands in for the StatefulSet controller and CrateDB on
// replica changes: pods are created Ready or deleted at once, and their
// nodes join or leave sys.nodes.
func (e *crateEnv) scaleController() *[]string {
	var order []string
	fakecluster.PatchReplicasAsUpdate(e.client)
	e.client.PrependReactor("update", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sts := a.(k8stesting.UpdateAction).GetObject().(*appsv1.StatefulSet)
		old, err := e.client.Tracker().Get(a.GetResource(), sts.Namespace, sts.Name)
		if err != nil {
			return true, nil, err
		}
		from, to := *old.(*appsv1.StatefulSet).Spec.Replicas, *sts.Spec.Replicas
		if err := e.client.Tracker().Update(a.GetResource(), sts, sts.Namespace); err != nil {
			return true, nil, err
		}
		role, group := "data", strings.TrimPrefix(sts.Name, "db-")
		if group == "master" {
			role = "master"
		}
		node := func(i int32) string {
			if role == "master" {
				return fmt.Sprintf("master-%d", i)
			}
			return fmt.Sprintf("data-%s-%d", group, i)
		}
		podGVR := corev1.SchemeGroupVersion.WithResource("pods")
		for i := from; i < to; i++ {
			p := fakecluster.Pod(sts, int(i), types.UID(fmt.Sprintf("%s-%d-new", sts.Name, i)))
			if err := e.client.Tracker().Create(podGVR, p, sts.Namespace); err != nil {
				return true, nil, err
			}
			addCrateNode(e.db, node(i))
		}
		for i := to; i < from; i++ {
			if err := e.client.Tracker().Delete(podGVR, sts.Namespace, fmt.Sprintf("%s-%d", sts.Name, i)); err != nil {
				return true, nil, err
			}
			e.db.RemoveNodes(node(i))
		}
		if from != to {
			// With the number of statements the database had seen then.
			order = append(order, fmt.Sprintf("%s %d->%d @%d", sts.Name, from, to, len(e.db.Calls())))
		}
		return true, sts, nil
	})
	return &order
}

// assertNoSecrets fails when a secret value appears in any captured text.
func assertNoSecrets(t *testing.T, what string, texts ...string) {
	t.Helper()
	for _, s := range []string{systemPW, appPW, "app-''quoted''-pw", licKey} {
		for _, txt := range texts {
			if strings.Contains(txt, s) {
				t.Errorf("%s leaks a secret (%q):\n%s", what, s, txt)
			}
		}
	}
}

// eventMessages returns the audit events' messages.
func (e *crateEnv) eventMessages() string {
	list, err := e.client.CoreV1().Events("prod").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var b strings.Builder
	for _, ev := range list.Items {
		b.WriteString(ev.Reason + ": " + ev.Message + "\n")
	}
	return b.String()
}

func TestCrateBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
		env  map[string]string
	}{
		{"bad SCALING_TIMEOUT", []string{"scale", "db", "--data", "hot=3", "--yes"}, "SCALING_TIMEOUT must be a positive number of seconds", map[string]string{"SCALING_TIMEOUT": "soon"}},
		{"bad BOOTSTRAP_TIMEOUT", []string{"bootstrap", "db", "--yes"}, "BOOTSTRAP_TIMEOUT must be a positive number of seconds", map[string]string{"BOOTSTRAP_TIMEOUT": "-5"}},
		{"no change flags", []string{"scale", "db", "--yes"}, "nothing to scale: give --replicas N, or --master N and/or --data GROUP=N", nil},
		{"unknown group", []string{"scale", "db", "--data", "warm=3", "--yes"}, `unknown data node group "warm" for cluster db; allowed: hot, cold`, nil},
		{"master as data", []string{"scale", "db", "--data", "master=5", "--yes"}, `unknown data node group "master"`, nil},
		{"not a number", []string{"scale", "db", "--data", "hot=abc"}, `--data "hot=abc": N must be a whole number`, nil},
		{"negative", []string{"scale", "db", "--data", "hot=-1"}, `--data "hot=-1": N must not be negative`, nil},
		{"no group", []string{"scale", "db", "--data", "=3"}, `--data "=3": missing group name`, nil},
		{"no equals", []string{"scale", "db", "--data", "hot"}, `--data "hot": want GROUP=N`, nil},
		{"duplicate", []string{"scale", "db", "--data", "hot=3", "--data", "hot=4"}, "--data hot given twice", nil},
		{"duplicate in list", []string{"scale", "db", "--data", "hot=3,cold=1,hot=4"}, "--data hot given twice", nil},
		{"bad list entry", []string{"scale", "db", "--data", "hot=3,cold"}, `--data "cold": want GROUP=N`, nil},
		{"even masters", []string{"scale", "db", "--master", "4"}, "masters must be an odd number of at least 3 (allowed: 3, 5, 7, ...)", nil},
		{"one master", []string{"scale", "db", "--master", "1"}, "masters must be an odd number of at least 3", nil},
		{"bad sslmode", []string{"scale", "db", "--data", "hot=3", "--pg-sslmode", "prefer"}, `unknown --pg-sslmode "prefer"; allowed: auto, disable, require, verify-ca, verify-full`, nil},
		{"zero health checks", []string{"restart", "db", "--rolling", "--health-checks", "0"}, "--health-checks must be at least 1", nil},
		{"zero stable-for", []string{"restart", "db", "--rolling", "--stable-for", "0s", "--yes"}, "--stable-for must be positive", nil},
		{"stable-for with the operator rule", []string{"restart", "db", "--rolling", "--stable-for", "1s", "--health-interval", "10s", "--yes"}, "--stable-for is the evidence gate's; --health-checks/--health-interval select the crate-operator's rule instead", nil},
		{"missing password secret", []string{"scale", "db", "--data", "cold=1", "--system-password-secret", "nope", "--yes"}, `Secret prod/nope not found (wanted key "password")`, nil},
		{"missing password key", []string{"scale", "db", "--data", "cold=1", "--system-password-secret", "app-pw/pass", "--yes"}, `Secret prod/app-pw has no key "pass"`, nil},
		{"user without secret", []string{"bootstrap", "db", "--user", "app"}, `--user "app": want NAME=SECRET[/KEY]`, nil},
		{"user empty name", []string{"bootstrap", "db", "--user", "=app-pw"}, "missing user name", nil},
		{"user twice", []string{"bootstrap", "db", "--user", "app=app-pw", "--user", "app=x"}, "--user app given twice", nil},
		{"missing user secret", []string{"bootstrap", "db", "--user", "app=missing", "--yes"}, "password of user app: Secret prod/missing not found", nil},
		{"missing CA secret", []string{"restart", "db", "--rolling", "--pg-sslmode", "verify-full", "--pg-ca-secret", "nope", "--yes"}, `--pg-ca-secret: Secret prod/nope not found (wanted key "ca.crt")`, nil},
		{"missing CA key", []string{"scale", "db", "--data", "cold=1", "--pg-sslmode", "verify-ca", "--pg-ca-secret", "app-pw", "--yes"}, `--pg-ca-secret: Secret prod/app-pw has no key "ca.crt"`, nil},
		{"missing license key", []string{"bootstrap", "db", "--license-secret", "crate-license/lic", "--yes"}, `Secret prod/crate-license has no key "lic"`, nil},
		{"generic cannot scale", []string{"scale", "db", "--data", "hot=3", "--engine", "generic", "--yes"}, "engine generic (cluster db) cannot scale", nil},
		{"generic cannot bootstrap", []string{"bootstrap", "db", "--engine", "generic", "--yes"}, "engine generic (cluster db) has no bootstrap procedure", nil},
		{"pg-port 0", []string{"bootstrap", "db", "--pg-host", "crate.prod", "--pg-port", "0", "--yes"}, `invalid argument "0" for "--pg-port" flag: a port is a number between 1 and 65535`, nil},
		{"pg-port 0 without pg-host", []string{"bootstrap", "db", "--pg-port", "0", "--yes"}, `invalid argument "0" for "--pg-port" flag: a port is a number between 1 and 65535`, nil},
		{"pg-port too large", []string{"restart", "db", "--rolling", "--pg-host", "crate.prod", "--pg-port", "65536", "--yes"}, `invalid argument "65536" for "--pg-port" flag: a port is a number between 1 and 65535`, nil},
		{"pg-port negative", []string{"scale", "db", "--data", "cold=1", "--pg-host", "crate.prod", "--pg-port=-1", "--yes"}, `invalid argument "-1" for "--pg-port" flag: a port is a number between 1 and 65535`, nil},
		{"pg-port not a number", []string{"bootstrap", "db", "--pg-host", "crate.prod", "--pg-port", "pg", "--yes"}, `invalid argument "pg" for "--pg-port" flag: a port is a number between 1 and 65535`, nil},
		{"bootstrap system user", []string{"bootstrap", "db", "--user", "system=app-pw", "--yes"}, "the system user is created by bootstrap itself", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCrateEnv(t)
			for k, v := range tt.env {
				e.env[k] = v
			}
			r := e.run(tt.args...)
			if r.code != ops.ExitUsage {
				t.Fatalf("exit %d, want 2; stderr: %s", r.code, r.err)
			}
			lines := strings.Split(strings.TrimSpace(r.err), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Errorf("stderr = %q, want one line containing %q", r.err, tt.want)
			}
			if w := fakecluster.Writes(e.client); len(w) > 0 {
				t.Errorf("bad input wrote to the API: %v", w)
			}
			if w := e.db.Statements(true); len(w) > 0 {
				t.Errorf("bad input wrote to the database: %v", w)
			}
			assertNoSecrets(t, "error", r.out, r.err)
		})
	}
}

func TestCrateNoDedicatedMasters(t *testing.T) {
	objs := fakecluster.Objects("prod", "db", "cratedb", fakecluster.Group{Name: "hot", Role: "data", Replicas: 3})
	e := newCrateEnv(t)
	e.harness = newHarness(t, objs...)
	e.clock = &tickClock{t: testNow}
	r := e.run("scale", "db", "--master", "5", "--yes")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, "has no dedicated master node group, so --master does not apply") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if w := fakecluster.Writes(e.client); len(w) > 0 {
		t.Errorf("wrote: %v", w)
	}
}

func TestCrateDryRunGolden(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
	}{
		{"scale-dry-run.text", []string{"scale", "db", "--master", "5", "--data", "hot=3", "--data", "cold=1", "--dry-run"}},
		{"scale-dry-run.json", []string{"scale", "db", "--master", "5", "--data", "hot=3", "--data", "cold=1", "--dry-run", "-o", "json"}},
		{"restart-cratedb-dry-run.text", []string{"restart", "db", "--rolling", "--group", "hot", "--dry-run"}},
		{"bootstrap-dry-run.text", []string{"bootstrap", "db", "--license-secret", "crate-license", "--user", "app=app-pw", "--dry-run"}},
		{"bootstrap-dry-run.json", []string{"bootstrap", "db", "--license-secret", "crate-license", "--user", "app=app-pw", "--dry-run", "-o", "json"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			e := newCrateEnv(t)
			r := e.run(tt.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			assertGolden(t, tt.golden, r.out)
			if w := fakecluster.Writes(e.client); len(w) > 0 {
				t.Errorf("dry-run wrote: %v", w)
			}
			if w := e.db.Statements(true); len(w) > 0 {
				t.Errorf("dry-run wrote to the database: %v", w)
			}
			if x := e.db.Execs(); len(x) > 0 {
				t.Errorf("dry-run ran crash: %d times", len(x))
			}
			assertNoSecrets(t, "plan", r.out, r.err)
		})
	}
}

func TestCrateScale(t *testing.T) {
	tests := []struct {
		name      string
		priorExcl string
		wantExcl  string
		wantReset bool
	}{
		{name: "no prior exclusions", priorExcl: "", wantExcl: "", wantReset: true},
		{name: "prior exclusion kept", priorExcl: "data-hot-9", wantExcl: "data-hot-9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCrateEnv(t)
			order := e.scaleController()
			e.db.Do(func(d *cratedbtest.DB) {
				d.Exclusions = tt.priorExcl
				d.Replicas = []string{"1", "0-1"}
				d.Shards = map[string]int{"data-cold-1": 5, "data-cold-0": 4}
			})
			r := e.run("scale", "db", "--master", "5", "--data", "hot=3,cold=1", "--yes", "-o", "json", "--lock-id", "ci@test")
			if r.code != 0 {
				t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
			}
			// Masters first, growth before shrinking.
			var changes []string
			shrinkAt := -1
			for _, o := range *order {
				change, at, _ := strings.Cut(o, " @")
				changes = append(changes, change)
				if strings.HasPrefix(change, "db-cold ") {
					shrinkAt, _ = strconv.Atoi(at)
				}
			}
			if want := []string{"db-master 3->5", "db-hot 2->3", "db-cold 2->1"}; !slices.Equal(changes, want) {
				t.Errorf("StatefulSet changes %v, want %v", changes, want)
			}
			excl := `SET GLOBAL "cluster.routing.allocation.exclude._name" = '` + strings.TrimPrefix(tt.priorExcl+",data-cold-1", ",") + `'`
			restore := `RESET GLOBAL "cluster.routing.allocation.exclude._name"`
			if !tt.wantReset {
				restore = `SET GLOBAL "cluster.routing.allocation.exclude._name" = '` + tt.wantExcl + `'`
			}
			want := []string{excl, restore, `UPDATE sys.node_checks SET acknowledged = TRUE WHERE id = 1`, `UPDATE sys.node_checks SET acknowledged = TRUE WHERE id = 2`}
			if got := e.db.Statements(true); !slices.Equal(got, want) {
				t.Errorf("database writes:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			e.db.Do(func(d *cratedbtest.DB) {
				if d.Exclusions != tt.wantExcl {
					t.Errorf("exclusions %q, want %q", d.Exclusions, tt.wantExcl)
				}
				if !d.Acked || !d.AckedRecover {
					t.Errorf("node checks acknowledged: expected nodes %v, recover-after %v", d.Acked, d.AckedRecover)
				}
				if d.Shards["data-cold-1"] != 0 {
					t.Errorf("shards left on data-cold-1: %d", d.Shards["data-cold-1"])
				}
			})
			if !strings.Contains(r.out, "shards left on data-cold-1") {
				t.Errorf("no shards-left progress in the events:\n%s", r.out)
			}
			// The drain finished before the StatefulSet shrank.
			lastShards := -1
			for i, c := range e.db.Calls() {
				if strings.HasPrefix(c.SQL, "SELECT node['name'], count(*), sum(size) FROM sys.shards") {
					lastShards = i
				}
			}
			if lastShards < 0 || shrinkAt <= lastShards {
				t.Errorf("shrink did not wait for the drain (last shards poll #%d, shrink after #%d)", lastShards, shrinkAt)
			}
			// 4 data nodes on 5.10 (the fake's version): the data node
			// settings everywhere (the master's expected_nodes is renamed),
			// recover-after at the quorum, 3.
			for name, wants := range map[string][]string{"db-master": {"-Cgateway.expected_data_nodes=4"},
				"db-hot":  {"-Cgateway.expected_data_nodes=4", "-Cgateway.recover_after_data_nodes=3"},
				"db-cold": {"-Cgateway.expected_data_nodes=4", "-Cgateway.recover_after_data_nodes=3"}} {
				s, err := e.client.AppsV1().StatefulSets("prod").Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				c := s.Spec.Template.Spec.Containers[0]
				for _, want := range wants {
					if !slices.Contains(append(c.Args, c.Command...), want) {
						t.Errorf("%s: args %v command %v, want %s", name, c.Args, c.Command, want)
					}
				}
			}
			ev := e.eventMessages()
			for _, reason := range []string{"DbopsScale", "DbopsExcludeNodes", "DbopsExpectedNodes", "DbopsRestoreExclusions", "DbopsAckNodeCheck"} {
				if !strings.Contains(ev, reason) {
					t.Errorf("no %s audit event in:\n%s", reason, ev)
				}
			}
			assertNoSecrets(t, "scale output", r.out, r.err, ev)
		})
	}
}

func TestCrateScaleRefuses(t *testing.T) {
	tests := []struct {
		name  string
		setup func(d *cratedbtest.DB)
		want  string
	}{
		{"yellow", func(d *cratedbtest.DB) { d.Severity = int32(2) }, "cluster is yellow"},
		{"node missing", func(d *cratedbtest.DB) {
			d.Nodes = slices.DeleteFunc(d.Nodes, func(n string) bool { return n == "data-hot-0" })
		},
			"the StatefulSets want 7 nodes but sys.nodes has 6"},
		{"replicas all", func(d *cratedbtest.DB) { d.Replicas = []string{"1", "all"} }, "number_of_replicas = 'all'"},
		{"replicas too many", func(d *cratedbtest.DB) { d.Replicas = []string{"3-all"} }, "number_of_replicas = '3-all', which needs 4 data nodes, and only 3 data nodes would remain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCrateEnv(t)
			e.scaleController()
			e.db.Do(tt.setup)
			r := e.run("scale", "db", "--data", "cold=1", "--yes", "--lock-id", "ci@test")
			if r.code != ops.ExitPrecondition || !strings.Contains(r.err, tt.want) {
				t.Fatalf("exit %d, want 5 with %q: %s", r.code, tt.want, r.err)
			}
			// Refused while planning: not even the lock is written.
			if w := fakecluster.Writes(e.client); len(w) > 0 {
				t.Errorf("refused scale wrote to the API: %v", w)
			}
			if w := e.db.Statements(true); len(w) > 0 {
				t.Errorf("refused scale wrote to the database: %v", w)
			}
		})
	}
}

func TestCrateRestartGate(t *testing.T) {
	e := newCrateEnv(t)
	ctrl := fakecluster.Start(t, e.client, "prod")
	// The restarted node is missing from sys.nodes for a poll, and the
	// cluster is yellow once after the first pod, which restarts the count.
	e.db.Do(func(d *cratedbtest.DB) {
		d.Absent["master-0"] = 1
		// The first reading is the preflight's (green before the lock).
		d.SeverityScript = []any{int32(1), int32(1), int32(2), int32(1), int32(1)}
	})
	r := e.run("restart", "db", "--rolling", "--group", "master", "--health-checks", "2", "--health-interval", "1ms", "--yes", "-o", "json", "--lock-id", "ci@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	if got, want := ctrl.Deleted(), []string{"db-master-0", "db-master-1", "db-master-2"}; !slices.Equal(got, want) {
		t.Errorf("deleted %v, want %v", got, want)
	}
	set := `SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = 'primaries'`
	reset := `RESET GLOBAL "cluster.routing.allocation.enable"`
	if got, want := e.db.Statements(true), []string{set, reset, set, reset, set, reset}; !slices.Equal(got, want) {
		t.Errorf("database writes %v, want %v", got, want)
	}
	// Per pod: allocation held, node back, allocation reset, then green
	// checks - and never through the pod being restarted. Each SET starts
	// the next pod's gate.
	var seq []string
	pod := -1
	for _, c := range e.db.Calls() {
		switch {
		case c.SQL == set:
			pod++
			if c.Pod == fmt.Sprintf("db-master-%d", pod) {
				t.Errorf("allocation for pod %d set through that very pod", pod)
			}
			seq = append(seq, fmt.Sprintf("pod%d:hold", pod))
		case strings.HasPrefix(c.SQL, "SELECT id, name, hostname, rest_url") && pod >= 0:
			// (pod -1: the plan's mapping of pods to nodes)
			if last := seq[len(seq)-1]; last != fmt.Sprintf("pod%d:node?", pod) {
				seq = append(seq, fmt.Sprintf("pod%d:node?", pod))
			}
		case c.SQL == reset:
			seq = append(seq, fmt.Sprintf("pod%d:reset", pod))
		case c.SQL == `SELECT max(severity) FROM sys.health`:
			seq = append(seq, fmt.Sprintf("pod%d:health", pod))
		}
	}
	want := []string{
		"pod-1:health", // preflight: green before the lock is taken
		"pod0:hold", "pod0:node?", "pod0:reset", "pod0:health", "pod0:health", "pod0:health", "pod0:health",
		"pod1:hold", "pod1:node?", "pod1:reset", "pod1:health", "pod1:health",
		"pod2:hold", "pod2:node?", "pod2:reset", "pod2:health", "pod2:health",
	}
	if !slices.Equal(seq, want) {
		t.Errorf("gate sequence\n  %v\nwant\n  %v", seq, want)
	}
	if !strings.Contains(r.out, "green 2/2") {
		t.Errorf("no green progress in events:\n%s", r.out)
	}
	// The first connection maps pods to nodes while planning (the preflight reuses it).
	if c := e.db.Connects(); len(c) < 3 || c[1] == "db-master-0" || c[2] == "db-master-1" {
		t.Errorf("connections %v: want each pod's gate to connect through another pod", c)
	}
	e.db.Do(func(d *cratedbtest.DB) {
		if d.Allocation != "" {
			t.Errorf("allocation left at %q", d.Allocation)
		}
	})
}

func TestCrateRestartReconnectsWhenPodGoes(t *testing.T) {
	e := newCrateEnv(t)
	fakecluster.Start(t, e.client, "prod")
	// The connection's pod (master-0) dies while hot pods restart: the
	// engine must reconnect and carry on.
	e.client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		e.db.Drop("db-master-0")
		return false, nil, nil
	})
	r := e.run("restart", "db", "--rolling", "--group", "hot", "--health-checks", "1", "--health-interval", "1ms", "--yes", "--lock-id", "ci@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	if c := e.db.Connects(); len(c) < 2 {
		t.Errorf("connections %v: want a reconnect after the pod went away", c)
	}
}

// crashStatements returns what crash ran (from -c, else stdin), the first
// two words of each, and fails the test when a secret is in an argv.
func crashStatements(t *testing.T, execs []cratedbtest.Exec) []string {
	t.Helper()
	var stmts []string
	for _, x := range execs {
		if len(x.Argv) < 4 || x.Argv[0] != "crash" || x.Argv[3] != "http://localhost:4200" {
			t.Fatalf("unexpected exec argv shape %q", x.Argv)
		}
		for _, secret := range []string{systemPW, appPW, licKey} {
			if strings.Contains(strings.Join(x.Argv, " "), secret) {
				t.Fatalf("a secret is in the exec command line (API-server audit logs record it)")
			}
		}
		text := x.Stdin
		if i := slices.Index(x.Argv, "-c"); i >= 0 {
			text = x.Argv[i+1]
		}
		for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
			f := strings.Fields(l)
			stmts = append(stmts, f[0]+" "+f[1])
		}
	}
	return stmts
}

func TestCrateBootstrap(t *testing.T) {
	tests := []struct {
		version string
		// crash statements of the first and the second run
		first, second []string
		note          string
	}{
		{"5.2.11", []string{"SELECT version['number']", "SET LICENSE", "CREATE USER", "GRANT ALL"}, []string{"SET LICENSE"}, ""},
		{"5.10.1", []string{"SELECT version['number']", "CREATE USER", "GRANT ALL"}, nil,
			"--license-secret is ignored: CrateDB 5.10.1 has no licenses"},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			e := newCrateEnv(t)
			e.db.Do(func(d *cratedbtest.DB) {
				delete(d.Users, "system")
				delete(d.Privileges, "system")
				d.Version = tt.version
			})
			args := []string{"bootstrap", "db", "--license-secret", "crate-license", "--user", "app=app-pw", "--yes", "--lock-id", "ci@test"}
			r := e.run(args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
			}
			if got := crashStatements(t, e.db.Execs()); !slices.Equal(got, tt.first) {
				t.Errorf("crash statements %v, want %v", got, tt.first)
			}
			for _, x := range e.db.Execs() {
				if strings.Contains(x.Stdin, "password") && slices.Contains(x.Argv, "-c") {
					t.Errorf("a password statement went to crash with -c")
				}
			}
			if want := []string{`CREATE USER "app" WITH (password = $1)`, `GRANT ALL PRIVILEGES TO "app"`}; !slices.Equal(e.db.Statements(true), want) {
				t.Errorf("database writes %v, want %v", e.db.Statements(true), want)
			}
			wantLicense := ""
			if len(tt.second) > 0 {
				wantLicense = licKey
			}
			e.db.Do(func(d *cratedbtest.DB) {
				if d.Users["system"] != systemPW || d.Users["app"] != appPW || d.License != wantLicense || !d.HasAll("app") {
					t.Errorf("state after bootstrap: users %d, license set %v, app granted %v", len(d.Users), d.License != "", d.HasAll("app"))
				}
			})
			first := e.eventMessages()
			assertNoSecrets(t, "bootstrap output", r.out, r.err, first)

			// Second run: the version is read over PostgreSQL now; nothing to
			// create, no statement changes anything.
			execs, writes := len(e.db.Execs()), len(e.db.Statements(true))
			r = e.run(args...)
			if r.code != 0 {
				t.Fatalf("second run: exit %d: %s\n%s", r.code, r.err, r.out)
			}
			if got := crashStatements(t, e.db.Execs()[execs:]); !slices.Equal(got, tt.second) {
				t.Errorf("second run ran crash statements %v, want %v", got, tt.second)
			}
			if tt.note != "" && !strings.Contains(r.out+r.err, tt.note) {
				t.Errorf("second run does not say %q:\n%s", tt.note, r.out)
			}
			if w := e.db.Statements(true)[writes:]; len(w) > 0 {
				t.Errorf("second run wrote %v", w)
			}
			assertNoSecrets(t, "second bootstrap output", r.out, r.err, e.eventMessages())
		})
	}
}

func TestCrateBootstrapAlreadyExists(t *testing.T) {
	for _, version := range []string{"5.5.2", "5.10.1"} {
		t.Run(version, func(t *testing.T) {
			e := newCrateEnv(t)
			// The system user exists with another password: CREATE reports
			// the version's AlreadyExists error, ALTER sets the Secret's password.
			e.db.Do(func(d *cratedbtest.DB) {
				d.Users["system"] = "old-password"
				delete(d.Privileges, "system")
				d.Version = version
			})
			r := e.run("bootstrap", "db", "--yes", "--lock-id", "ci@test")
			if r.code != 0 {
				t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
			}
			if got, want := crashStatements(t, e.db.Execs()), []string{"SELECT version['number']", "CREATE USER", "ALTER USER", "GRANT ALL"}; !slices.Equal(got, want) {
				t.Errorf("crash statements %v, want %v", got, want)
			}
			e.db.Do(func(d *cratedbtest.DB) {
				if d.Users["system"] != systemPW {
					t.Error("system password not set from the Secret")
				}
			})
			if ev := e.eventMessages(); !strings.Contains(ev, "DbopsAlterUser") {
				t.Errorf("no DbopsAlterUser audit event:\n%s", ev)
			}
			assertNoSecrets(t, "bootstrap output", r.out, r.err, e.eventMessages())
		})
	}
}

func TestCrateStatusHealth(t *testing.T) {
	e := newCrateEnv(t)
	e.db.Do(func(d *cratedbtest.DB) { d.Exclusions = "data-cold-1" })
	r := e.run("status", "db")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if want := "Health:   green (7/7 nodes, max severity 1, master master-0, allocation excluded from data-cold-1)"; !strings.Contains(r.out, want) {
		t.Errorf("status lacks %q:\n%s", want, r.out)
	}
	e.db.Do(func(d *cratedbtest.DB) { d.Severity = int32(3) })
	if r := e.run("status", "db", "-o", "json"); !strings.Contains(r.out, `"status": "red"`) {
		t.Errorf("status json lacks red health:\n%s", r.out)
	}
}

// A scale that crashed after lowering the StatefulSet, before its clean-up:
// sizes already match, so the re-run of the same request only finishes the
// clean-up (its own exclusion removed, expected nodes, node check) instead
// of refusing with "nothing to scale".
func TestCrateScaleResumesCleanupAfterResize(t *testing.T) {
	e := newCrateEnv(t)
	ctx := t.Context()
	sts, err := e.client.AppsV1().StatefulSets("prod").Get(ctx, "db-cold", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	sts.Spec.Replicas, sts.Status.Replicas, sts.Status.ReadyReplicas = &one, 1, 1
	if _, err := e.client.AppsV1().StatefulSets("prod").Update(ctx, sts, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CoreV1().Pods("prod").Delete(ctx, "db-cold-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.db.Do(func(d *cratedbtest.DB) {
		d.Nodes = slices.DeleteFunc(d.Nodes, func(n string) bool { return n == "data-cold-1" })
		d.Exclusions = "data-retired-0,data-cold-1"
	})
	j := ops.Journal{Operation: "scale", Args: "--data cold=1", Holder: "ci@test", State: ops.JournalInterrupted,
		Started: testNow.Add(-time.Minute), Done: []string{"drain/cold", "resize/cold"},
		Data: map[string]string{"cratedb.scale.excluded": "data-cold-1"}}
	b, _ := json.Marshal(j)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "dbops-db", Namespace: "prod",
		Annotations: map[string]string{"dbops.io/journal": string(b)}}}
	if _, err := e.client.CoordinationV1().Leases("prod").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := e.run("scale", "db", "--data", "cold=1", "--yes", "--lock-id", "ci@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	e.db.Do(func(d *cratedbtest.DB) {
		if d.Exclusions != "data-retired-0" {
			t.Errorf("exclusions = %q, want only the one this run did not add", d.Exclusions)
		}
	})
	if got := strings.Join(e.db.Statements(true), "\n"); !strings.Contains(got, "UPDATE sys.node_checks SET acknowledged = TRUE WHERE id = 1") {
		t.Errorf("node check not acknowledged; writes:\n%s", got)
	}
	// Without an unfinished run, the same request has nothing left to do:
	// a success (CI retries depend on it) that writes nothing.
	e.client.ClearActions()
	r = e.run("scale", "db", "--data", "cold=1", "--yes", "--lock-id", "ci@test", "--no-tui")
	if r.code != 0 || !strings.Contains(r.out+r.err, "cluster db already has master=3 hot=2 cold=1") || !strings.Contains(r.out+r.err, "nothing to do") {
		t.Errorf("second re-run: exit %d\nstdout: %s\nstderr: %s", r.code, r.out, r.err)
	}
	if w := fakecluster.Writes(e.client); len(w) != 0 {
		t.Errorf("second re-run wrote %v", w)
	}
}

// A rolling restart is refused before the lock when the first step could
// not start: the cluster is not green, or another pod is not Ready. Nothing
// is written (no Lease, no Event, no pod deleted, no SQL write), and
// --dry-run shows the plan but gives the same refusal.
func TestCrateRestartRefusedBeforeLock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(e *crateEnv)
		want  string
	}{
		{name: "yellow", setup: func(e *crateEnv) { e.db.Do(func(d *cratedbtest.DB) { d.Severity = int32(2) }) },
			want: "CrateDB cluster prod/db is yellow"},
		{name: "red", setup: func(e *crateEnv) { e.db.Do(func(d *cratedbtest.DB) { d.Severity = int32(3) }) },
			want: "CrateDB cluster prod/db is red"},
		{name: "pod elsewhere not Ready", setup: func(e *crateEnv) {
			p, err := e.client.CoreV1().Pods("prod").Get(context.Background(), "db-cold-1", metav1.GetOptions{})
			if err != nil {
				e.t.Fatal(err)
			}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			if _, err := e.client.CoreV1().Pods("prod").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
				e.t.Fatal(err)
			}
		}, want: "pod db-cold-1 of prod/db is not Ready; refusing to start pod/db-master-0"},
	} {
		for _, dry := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s dry-run=%v", tc.name, dry), func(t *testing.T) {
				e := newCrateEnv(t)
				tc.setup(e)
				e.client.ClearActions()
				args := []string{"restart", "db", "--rolling", "--yes", "--no-tui"}
				if dry {
					args = append(args, "--dry-run")
				}
				r := e.run(args...)
				if r.code != ops.ExitPrecondition || !strings.Contains(r.err, tc.want) {
					t.Fatalf("exit %d, stderr %q; want exit %d with %q", r.code, r.err, ops.ExitPrecondition, tc.want)
				}
				if n := strings.Count(strings.TrimSpace(r.err), "\n"); n != 0 {
					t.Errorf("refusal is %d lines: %q", n+1, r.err)
				}
				if dry && !strings.Contains(r.out, "pod/db-master-0") {
					t.Errorf("dry-run printed no plan:\n%s", r.out)
				}
				if w := fakecluster.Writes(e.client); len(w) != 0 {
					t.Errorf("refused restart wrote %v", w)
				}
				if w := e.db.Statements(true); len(w) != 0 {
					t.Errorf("refused restart wrote to the database: %v", w)
				}
			})
		}
	}
}

// The confirmation of a CrateDB restart fits one screen: a summary per node group with what
// its steps require, and a pointer to --dry-run for every step and statement.
func TestCrateRestartConfirmFitsOneScreen(t *testing.T) {
	e := newCrateEnv(t)
	e.terminal, e.stdin = true, "n\n"
	r := e.run("restart", "db", "--rolling")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, "aborted at the confirmation prompt") {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	if n := strings.Count(r.err, "\n"); n > 23 {
		t.Errorf("the confirmation takes %d lines, more than a 24-line terminal:\n%s", n, r.err)
	}
	assertGolden(t, "restart-cratedb-confirm.text", r.err)
	if w := fakecluster.Writes(e.client); len(w) > 0 {
		t.Errorf("answering no wrote: %v", w)
	}
}
