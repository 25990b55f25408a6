package cratedb_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/cratedb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/discovery"
	"github.com/kubectl-dbops/kubectl-dbops/test/fakes/cratedbtest"
)

const pw = "s3cr3t-'pw'"

func setup(t *testing.T, groups ...fakecluster.Group) (*fake.Clientset, *ops.Cluster, *cratedbtest.DB) {
	t.Helper()
	objs := fakecluster.Objects("prod", "db", "cratedb", groups...)
	objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "user-system-db", Namespace: "prod"},
		Data: map[string][]byte{"password": []byte(pw + "\n")}})
	client := fake.NewClientset(objs...)
	c, err := discovery.Discover(context.Background(), client, discovery.Options{Namespace: "prod", Name: "db", Recognizers: cratedb.Recognizers()})
	if err != nil {
		t.Fatal(err)
	}
	// The CrateDB operator's node names (master-<i>, data-<group>-<i>),
	// which differ from the pod names; the pods are found by hostname.
	var nodes []string
	hosts := map[string]string{}
	for _, g := range c.Groups {
		for _, p := range g.Pods {
			n := "data-" + g.Name + "-" + itoa(p.Ordinal)
			if g.Role == ops.RoleMaster {
				n = "master-" + itoa(p.Ordinal)
			}
			nodes = append(nodes, n)
			hosts[n] = p.Name
		}
	}
	db := cratedbtest.New(nodes...)
	db.Do(func(d *cratedbtest.DB) {
		d.Users["system"] = pw
		d.Hosts = hosts
	})
	return client, c, db
}

func itoa(i int) string { return strconv.Itoa(i) }

func engine(client *fake.Clientset, db *cratedbtest.DB, x kube.Executor) *cratedb.Engine {
	if x == nil {
		x = db.Execer()
	}
	e, err := cratedb.New(ops.EngineDeps{Client: client, Exec: x}, cratedb.Config{Connector: db.Connector(), HealthChecks: 2, HealthInterval: time.Millisecond, PollInterval: time.Millisecond,
		StableFor: time.Millisecond})
	if err != nil {
		panic(err)
	}
	return e
}

func TestHealth(t *testing.T) {
	groups := []fakecluster.Group{{Name: "master", Role: "master", Replicas: 3}, {Name: "hot", Role: "data", Order: 1, Replicas: 2}}
	tests := []struct {
		name   string
		change func(d *cratedbtest.DB)
		status string
		msg    string
	}{
		{"green", func(*cratedbtest.DB) {}, "green", "5/5 nodes, max severity 1, master master-0"},
		{"empty sys.health", func(d *cratedbtest.DB) { d.Severity = nil }, "green", "5/5 nodes, max severity none"},
		{"yellow", func(d *cratedbtest.DB) { d.Severity = int32(2) }, "yellow", "max severity 2"},
		{"red", func(d *cratedbtest.DB) { d.Severity = int32(3) }, "red", "max severity 3"},
		{"node missing", func(d *cratedbtest.DB) { d.Nodes = d.Nodes[1:] }, "yellow", "4/5 nodes"},
		{"no master", func(d *cratedbtest.DB) { d.Master = "" }, "yellow", "master none"},
		{"exclusions", func(d *cratedbtest.DB) { d.Exclusions = "data-hot-1" }, "green", "allocation excluded from data-hot-1"},
		{"allocation restricted", func(d *cratedbtest.DB) { d.Allocation = "primaries" }, "green", "shard allocation restricted to primaries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, c, db := setup(t, groups...)
			db.Do(tt.change)
			h, err := engine(client, db, nil).Health(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if h.Status != tt.status || !strings.Contains(h.Message, tt.msg) {
				t.Errorf("health %s (%s), want %s containing %q", h.Status, h.Message, tt.status, tt.msg)
			}
		})
	}
}

func TestParseSecretRef(t *testing.T) {
	tests := []struct {
		in, want string
		err      bool
	}{
		{"s", "s/password", false},
		{"s/k", "s/k", false},
		{"s/", "", true},
		{"/k", "", true},
		{"", "", true},
		{"a/b/c", "", true},
	}
	for _, tt := range tests {
		r, err := cratedb.ParseSecretRef("--x", tt.in, "password")
		if (err != nil) != tt.err || (err == nil && r.String() != tt.want) {
			t.Errorf("ParseSecretRef(%q) = %v, %v", tt.in, r, err)
		}
		if err != nil && ops.ExitCode(err) != ops.ExitUsage {
			t.Errorf("ParseSecretRef(%q): exit %d, want 2", tt.in, ops.ExitCode(err))
		}
	}
}

// leakyExecer fails like a crash that echoes its statement.
type leakyExecer struct{}

func (leakyExecer) Exec(_ context.Context, ns, pod, container string, argv []string, stdin io.Reader) ([]byte, []byte, error) {
	stmt := strings.Join(argv, " ")
	if stdin != nil {
		b, _ := io.ReadAll(stdin)
		stmt = string(b)
	}
	if strings.Contains(stmt, "version['number']") {
		return []byte("| version['number'] |\n| 5.10.1 |\nSELECT 1 row in set (0.001 sec)\n"), nil, nil
	}
	return []byte("SQLActionException: " + stmt), []byte(stmt), &kube.ExitError{Namespace: ns, Pod: pod, Container: container, Code: 1}
}

func TestBootstrapErrorsRedactSecrets(t *testing.T) {
	client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3})
	db.Do(func(d *cratedbtest.DB) { delete(d.Users, "system") })
	e := engine(client, db, leakyExecer{})
	p, err := e.PlanBootstrap(context.Background(), c, cratedb.BootstrapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	err = (&ops.Executor{LockID: "t"}).Run(context.Background(), p)
	if err == nil {
		t.Fatal("bootstrap succeeded with a failing crash")
	}
	for _, s := range []string{pw, strings.ReplaceAll(pw, "'", "''")} {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("error leaks the password: %v", err)
		}
	}
	if !strings.Contains(err.Error(), "'***'") {
		t.Errorf("error does not show the redacted statement: %v", err)
	}
}

// journalLock is a held lock whose journal says an earlier restart
// deleted db-master-0 and crashed before re-enabling allocation.
type journalLock struct{ j *ops.Journal }

func (l *journalLock) Acquire(context.Context, string) (ops.HeldLock, error) { return l, nil }
func (l *journalLock) ID() string                                            { return "t@test" }
func (l *journalLock) Info() ops.LockInfo {
	return ops.LockInfo{Action: ops.LockAcquired, Holder: "t@test", Expires: time.Now().Add(time.Hour)}
}
func (l *journalLock) Renew(context.Context) (ops.LockInfo, error)         { return l.Info(), nil }
func (l *journalLock) Release(context.Context) error                       { return nil }
func (l *journalLock) Journal() *ops.Journal                               { return l.j }
func (l *journalLock) SaveJournal(_ context.Context, j *ops.Journal) error { l.j = j; return nil }
func (l *journalLock) Detach(context.Context) error                        { return nil }

func TestRestartResumeReenablesAllocation(t *testing.T) {
	client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3})
	db.Do(func(d *cratedbtest.DB) { d.Allocation = "primaries" })
	e := engine(client, db, nil)
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Groups: []string{"master"}})
	if err != nil {
		t.Fatal(err)
	}
	p.Steps = p.Steps[:1] // only db-master-0, which the journal says was restarted
	lk := &journalLock{j: &ops.Journal{Operation: "restart", Args: p.Args, State: ops.JournalInterrupted,
		Data: map[string]string{"restart.uid/db-master-0": "old-uid", "cratedb.gate/db-master-0": "pending"}}}
	if err := (&ops.Executor{Locker: lk}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	db.Do(func(d *cratedbtest.DB) {
		if d.Allocation != "" {
			t.Errorf("allocation still %q after the resumed run", d.Allocation)
		}
	})
	if got := db.Statements(true); !slices.Equal(got, []string{`RESET GLOBAL "cluster.routing.allocation.enable"`}) {
		t.Errorf("writes %v: want only the RESET (the pod was already restarted)", got)
	}
	if lk.j.Data["cratedb.gate/db-master-0"] != "" {
		t.Error("gate still marked pending")
	}
}

func TestScaleResumeRemovesOnlyOwnExclusions(t *testing.T) {
	client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3}, fakecluster.Group{Name: "hot", Role: "data", Order: 1, Replicas: 3})
	// An earlier run excluded data-hot-2 and crashed after the shrink;
	// data-hot-7 was excluded by someone else and must stay.
	sts, _ := client.AppsV1().StatefulSets("prod").Get(context.Background(), "db-hot", metav1.GetOptions{})
	two := int32(2)
	sts.Spec.Replicas = &two
	if _, err := client.AppsV1().StatefulSets("prod").Update(context.Background(), sts, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = client.CoreV1().Pods("prod").Delete(context.Background(), "db-hot-2", metav1.DeleteOptions{})
	db.RemoveNodes("data-hot-2")
	db.Do(func(d *cratedbtest.DB) { d.Exclusions = "data-hot-7,data-hot-2" })
	e := engine(client, db, nil)
	lk := &journalLock{j: &ops.Journal{Operation: "scale", Args: "--data hot=2", State: ops.JournalInterrupted,
		Done: []string{"drain/hot"},
		Data: map[string]string{"cratedb.scale.excluded": "data-hot-2", "cratedb.scale.drain/hot": "1", "cratedb.scale.nodes/hot": "data-hot-2"}}}
	p, err := e.PlanScale(context.Background(), c, ops.ScaleRequest{Data: map[string]int32{"hot": 2}, Journal: lk.j})
	if err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	if err := (&ops.Executor{Locker: lk}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	db.Do(func(d *cratedbtest.DB) {
		if d.Exclusions != "data-hot-7" || !d.Acked {
			t.Errorf("exclusions %q (want data-hot-7), acked %v", d.Exclusions, d.Acked)
		}
	})
	for _, w := range fakecluster.Writes(client) {
		if strings.HasPrefix(w, "update statefulsets") {
			t.Errorf("resumed run changed replicas again: %s", w)
		}
	}
}

func TestExpectedNodesArgs(t *testing.T) {
	// Gateway settings are rewritten wherever they are: args, command, or
	// inside one shell command line; recover-after follows as the quorum.
	tests := []struct {
		name, version, want string
	}{
		{"before 4.7: node counts", "4.6.8", "exec crate -Cgateway.expected_nodes=6 -Cgateway.recover_after_nodes=4 -Cnode.name=x"},
		{"4.7 on: data node settings", "5.10.1", "exec crate -Cgateway.expected_data_nodes=3 -Cgateway.recover_after_data_nodes=2 -Cnode.name=x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3}, fakecluster.Group{Name: "hot", Role: "data", Order: 1, Replicas: 2})
			db.Do(func(d *cratedbtest.DB) { d.Version = tt.version })
			for _, g := range c.Groups {
				s := ops.StatefulSetOf(g)
				s.Spec.Template.Spec.Containers = []corev1.Container{{Name: "crate", Command: []string{"sh", "-c", "exec crate -Cgateway.expected_nodes=5 -Cgateway.recover_after_nodes=3 -Cnode.name=x"}}}
				if _, err := client.AppsV1().StatefulSets("prod").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			// Under RollingUpdate the controller would restart every pod:
			// refused unless confirmed, before anything is written.
			client.ClearActions()
			_, err := engine(client, db, nil).PlanScale(context.Background(), c, ops.ScaleRequest{Data: map[string]int32{"hot": 3}})
			if ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), "--allow-rolling-update") {
				t.Fatalf("RollingUpdate StatefulSet: %v, want a refusal naming --allow-rolling-update", err)
			}
			if w := fakecluster.Writes(client); len(w) > 0 {
				t.Errorf("refusal wrote %v", w)
			}
			e, err := cratedb.New(ops.EngineDeps{Client: client, Exec: db.Execer()}, cratedb.Config{Connector: db.Connector(), HealthChecks: 1, HealthInterval: time.Millisecond,
				PollInterval: time.Millisecond, AllowRollingUpdate: true})
			if err != nil {
				t.Fatal(err)
			}
			p, err := e.PlanScale(context.Background(), c, ops.ScaleRequest{Data: map[string]int32{"hot": 3}})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(p.Notes, "\n"), "statefulset/db-hot uses updateStrategy RollingUpdate") {
				t.Errorf("no RollingUpdate note in %q", p.Notes)
			}
			var step *ops.Step
			for _, s := range p.Steps {
				if s.ID == "expected-nodes" {
					step = s
				}
			}
			if step == nil {
				t.Fatal("no expected-nodes step")
			}
			p.Steps = []*ops.Step{step}
			if err := (&ops.Executor{LockID: "t"}).Run(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			s, _ := client.AppsV1().StatefulSets("prod").Get(context.Background(), "db-hot", metav1.GetOptions{})
			if got := s.Spec.Template.Spec.Containers[0].Command[2]; got != tt.want {
				t.Errorf("command %q, want %q", got, tt.want)
			}
			if *s.Spec.Replicas != 2 {
				t.Errorf("expected-nodes step changed replicas")
			}
		})
	}
}

func TestConnectFailureIsNotRetriedForever(t *testing.T) {
	client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3})
	db.Do(func(d *cratedbtest.DB) { d.Users["system"] = "other" })
	_, err := engine(client, db, nil).Health(context.Background(), c)
	if err == nil || strings.Contains(err.Error(), pw) {
		t.Fatalf("health with a wrong password: %v", err)
	}
	if errors.Is(err, ops.ErrUsage) {
		t.Errorf("auth failure reported as usage: %v", err)
	}
}

func TestNodeIdentityRefusals(t *testing.T) {
	groups := []fakecluster.Group{{Name: "master", Role: "master", Replicas: 3}, {Name: "hot", Role: "data", Order: 1, Replicas: 3}}
	notReady := func(client *fake.Clientset, pod string) {
		p, _ := client.CoreV1().Pods("prod").Get(context.Background(), pod, metav1.GetOptions{})
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		_, _ = client.CoreV1().Pods("prod").UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	}
	scale := func(e *cratedb.Engine, c *ops.Cluster) error {
		_, err := e.PlanScale(context.Background(), c, ops.ScaleRequest{Data: map[string]int32{"hot": 2}})
		return err
	}
	replace := func(e *cratedb.Engine, c *ops.Cluster) error {
		_, err := e.PlanReplacement(context.Background(), c, ops.ReplaceRequest{Pods: []string{"db-hot-1"}, MaxConcurrent: 1, Args: "x"})
		return err
	}
	restart := func(e *cratedb.Engine, c *ops.Cluster) error {
		_, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{})
		return err
	}
	tests := []struct {
		name  string
		setup func(client *fake.Clientset, d *cratedbtest.DB)
		plan  func(*cratedb.Engine, *ops.Cluster) error
		want  string
	}{
		{"scale: removed pod has no node", func(_ *fake.Clientset, d *cratedbtest.DB) { d.Hosts["data-hot-2"] = "somewhere-else" },
			scale, "pod db-hot-2 has no CrateDB node in sys.nodes"},
		{"scale: two nodes claim one pod", func(_ *fake.Clientset, d *cratedbtest.DB) { d.Hosts["data-hot-1"] = "db-hot-0" },
			scale, "pod db-hot-0 (hostname db-hot-0) matches several CrateDB nodes: data-hot-0, data-hot-1"},
		{"replace: Ready pod without a node", func(_ *fake.Clientset, d *cratedbtest.DB) { delete(d.Hosts, "data-hot-1") },
			replace, "pod db-hot-1 is Ready but has no CrateDB node"},
		{"replace: failed pod while a node matches no pod", func(client *fake.Clientset, d *cratedbtest.DB) {
			d.Hosts["data-hot-1"] = "renamed"
			notReady(client, "db-hot-1")
		}, replace, "nodes data-hot-1 match no pod"},
		{"restart: ambiguous mapping", func(_ *fake.Clientset, d *cratedbtest.DB) { d.Hosts["data-hot-2"] = "db-master-0" },
			restart, "pod db-master-0 (hostname db-master-0) matches several CrateDB nodes: master-0, data-hot-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, c, db := setup(t, groups...)
			db.Do(func(d *cratedbtest.DB) { tt.setup(client, d) })
			client.ClearActions()
			err := tt.plan(engine(client, db, nil), c)
			if ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line, exit 2, containing %q", err, tt.want)
			}
			if w := fakecluster.Writes(client); len(w) > 0 {
				t.Errorf("refusal wrote to the API: %v", w)
			}
			if w := db.Statements(true); len(w) > 0 {
				t.Errorf("refusal wrote to the database: %v", w)
			}
		})
	}
}

func TestRestartTransientErrors(t *testing.T) {
	tests := []struct {
		name     string
		failures int
		failOn   string
		wantErr  string
	}{
		{"a master election's errors are ridden out", 5, "SELECT", ""},
		{"persistent errors fail the step, allocation re-enabled", 1000, "SELECT", "database errors in a row"},
		{"the re-enable fails too: one line saying what is left to do", 1000, "RESET", "re-enable it with RESET GLOBAL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3})
			fakecluster.Start(t, client, "prod")
			e := engine(client, db, nil)
			p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Groups: []string{"master"}})
			if err != nil {
				t.Fatal(err)
			}
			// From the first pod's gate on, every poll fails for a while.
			db.Do(func(d *cratedbtest.DB) { d.Failures, d.FailOn = tt.failures, tt.failOn })
			err = (&ops.Executor{Locker: &journalLock{}, Timeout: time.Minute}).Run(context.Background(), p)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("restart failed: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n")):
				t.Fatalf("err = %v, want one line with %q", err, tt.wantErr)
			}
			db.Do(func(d *cratedbtest.DB) {
				if tt.failOn == "RESET" {
					if d.Allocation != "primaries" {
						t.Errorf("allocation %q: the failing RESET cannot have re-enabled it", d.Allocation)
					}
					return
				}
				if d.Allocation != "" {
					t.Errorf("allocation left at %q", d.Allocation)
				}
			})
			if tt.failOn == "SELECT" && tt.wantErr != "" && !strings.Contains(err.Error(), "shard allocation was re-enabled") {
				t.Errorf("err = %v, want the re-enabled allocation reported", err)
			}
		})
	}
}

// TestRestartInterruptedWhilePodShutsDown: Ctrl-C after a pod's delete was sent (the action
// finishes regardless) re-enables shard allocation only once that pod is gone: primaries
// is held for the node's shutdown, which is still going on.
func TestRestartInterruptedWhilePodShutsDown(t *testing.T) {
	client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3})
	deleted := make(chan struct{})
	var once sync.Once
	// Deleting marks the pod terminating, as a kubelet with a grace period does; the test
	// removes it later.
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		da := a.(k8stesting.DeleteActionImpl)
		obj, err := client.Tracker().Get(a.GetResource(), da.Namespace, da.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		now := metav1.Now()
		pod.DeletionTimestamp = &now
		if err := client.Tracker().Update(a.GetResource(), pod, da.Namespace); err != nil {
			return true, nil, err
		}
		once.Do(func() { close(deleted) })
		return true, nil, nil
	})
	e := engine(client, db, nil)
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Groups: []string{"master"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := make(chan string, 1)
	sink := ops.SinkFunc(func(ev ops.Event) {
		if ev.Type == ops.EventStepWaiting && strings.Contains(ev.Reason, "to finish shutting down") {
			db.Do(func(d *cratedbtest.DB) {
				select {
				case waiting <- d.Allocation:
				default:
				}
			})
		}
	})
	errc := make(chan error, 1)
	go func() {
		errc <- (&ops.Executor{Locker: &journalLock{}, Sink: sink, Timeout: time.Minute}).Run(ctx, p)
	}()
	<-deleted
	cancel() // Ctrl-C
	select {
	case alloc := <-waiting:
		if alloc != "primaries" {
			t.Errorf("allocation %q while the pod shuts down, want primaries", alloc)
		}
	case err := <-errc:
		t.Fatalf("run ended (%v) without waiting for the pod being deleted", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no wait for the pod being deleted")
	}
	first := p.Steps[0].Target
	name := strings.TrimPrefix(first, "pod/")
	if err := client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "prod", name); err != nil {
		t.Fatal(err)
	}
	err = <-errc
	if ops.ExitCode(err) != ops.ExitInterrupted || !strings.Contains(err.Error(), "shard allocation was re-enabled") {
		t.Fatalf("run = %v, want interrupted with allocation re-enabled", err)
	}
	db.Do(func(d *cratedbtest.DB) {
		if d.Allocation != "" {
			t.Errorf("allocation left at %q", d.Allocation)
		}
	})
}

// TestMasterScaleResumeContinues: a 5 -> 3 master scale killed after its first removal
// (replicas 4, the node gone) resumes with the one removal left: it plans from the live
// size, and changes the replicas only from 4 to 3.
func TestMasterScaleResumeContinues(t *testing.T) {
	client, _, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 5}, fakecluster.Group{Name: "hot", Role: "data", Order: 1, Replicas: 2})
	ctx := context.Background()
	sts, _ := client.AppsV1().StatefulSets("prod").Get(ctx, "db-master", metav1.GetOptions{})
	four := int32(4)
	sts.Spec.Replicas = &four
	if _, err := client.AppsV1().StatefulSets("prod").Update(ctx, sts, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = client.CoreV1().Pods("prod").Delete(ctx, "db-master-4", metav1.DeleteOptions{})
	db.RemoveNodes("master-4")
	c, err := discovery.Discover(ctx, client, discovery.Options{Namespace: "prod", Name: "db", Recognizers: cratedb.Recognizers()})
	if err != nil {
		t.Fatal(err)
	}
	// The StatefulSet controller: a lower replica count deletes the pods above it.
	client.PrependReactor("patch", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		for i := 3; i < 5; i++ {
			_ = client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "prod", "db-master-"+itoa(i))
		}
		db.RemoveNodes("master-3")
		return false, nil, nil
	})
	lk := &journalLock{j: &ops.Journal{Operation: "scale", Args: "--master 3", State: ops.JournalInterrupted,
		Done: []string{"drain/master", "replicas/master/4"},
		Data: map[string]string{"cratedb.scale.excluded": "master-3,master-4", "cratedb.scale.drain/master": "1", "cratedb.scale.nodes/master": "master-3,master-4"}}}
	e := engine(client, db, nil)
	three := int32(3)
	p, err := e.PlanScale(ctx, c, ops.ScaleRequest{Masters: &three, Journal: lk.j})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	if want := []string{"drain/master", "replicas/master/3", "exclusions", "ack-node-check"}; !slices.Equal(ids, want) {
		t.Fatalf("resumed plan %v, want %v", ids, want)
	}
	client.ClearActions()
	if err := (&ops.Executor{Locker: lk}).Run(ctx, p); err != nil {
		t.Fatal(err)
	}
	var patches []string
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "statefulsets" {
			patches = append(patches, string(a.(k8stesting.PatchAction).GetPatch()))
		}
	}
	if want := []string{`{"spec":{"replicas":3}}`}; !slices.Equal(patches, want) {
		t.Errorf("replica patches %v, want %v", patches, want)
	}
	db.Do(func(d *cratedbtest.DB) {
		if d.Exclusions != "" {
			t.Errorf("exclusions left: %q", d.Exclusions)
		}
	})
}
