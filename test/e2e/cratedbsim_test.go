//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/cratedbsim"
	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/cratedbsim/bedwire"
)

// crateSimCluster creates a CrateDB-layout cluster (StatefulSets crate-master-<name> and
// crate-data-hot-<name>, container "crate") and starts the simulator attached to it.
func crateSimCluster(t *testing.T, ns, name string, masters, data int32) *cratedbsim.Sim {
	t.Helper()
	ctx := t.Context()
	for _, g := range []struct {
		sts      string
		replicas int32
	}{{"crate-master-" + name, masters}, {"crate-data-hot-" + name, data}} {
		sts := statefulSet(g.sts, g.replicas)
		c := &sts.Spec.Template.Spec.Containers[0]
		c.Name = "crate"
		c.Args = []string{fmt.Sprintf("-Cgateway.expected_data_nodes=%d", data)}
		if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create statefulset %s: %v", g.sts, err)
		}
		sel := labels.SelectorFromSet(labels.Set{"app": g.sts}).String()
		waitCtx, cancel := context.WithTimeout(ctx, waitTimeout)
		err := bed.WaitPodsReady(waitCtx, ns, sel, int(g.replicas))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	simCtx, cancel := context.WithCancel(context.Background())
	sim, err := cratedbsim.Start(simCtx, cratedbsim.Config{
		Client:       bed.Client,
		Namespace:    ns,
		Cluster:      name,
		TickInterval: 100 * time.Millisecond,
		Logf:         t.Logf,
	})
	if err != nil {
		cancel()
		t.Fatalf("start simulator: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		sim.Close()
	})
	waitSimNodes(t, sim, int(masters+data))
	// simCtx keeps wiring pods recreated later in the test.
	if err := bedwire.Attach(simCtx, bed, sim, ns); err != nil {
		t.Fatalf("attach simulator: %v", err)
	}
	return sim
}

// waitSimNodes polls the simulator until sys.nodes has want rows.
func waitSimNodes(t *testing.T, sim *cratedbsim.Sim, want int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		_, n := sim.Health()
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sys.nodes has %d rows, want %d: %+v", n, want, sim.Nodes())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestCrateDBSimPortForwardAndExec(t *testing.T) {
	ns := newNamespace(t)
	sim := crateSimCluster(t, ns, "sim", 1, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// pgx through a real port-forward to a pod's 5432.
	fw, err := kube.PortForward(ctx, bed.RESTConfig, ns, "crate-data-hot-sim-0", cratedbsim.PodPGPort)
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	conn, err := pgx.Connect(ctx, "postgres://crate@"+fw.LocalAddr()+"/doc?sslmode=disable")
	if err != nil {
		t.Fatalf("connect through port-forward: %v", err)
	}
	defer conn.Close(context.Background())
	var count int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM sys.nodes").Scan(&count); err != nil || count != 3 {
		t.Fatalf("count(sys.nodes) = %d, %v", count, err)
	}
	var name string
	if err := conn.QueryRow(ctx, "SELECT name FROM sys.nodes WHERE name = $1", "data-hot-0").Scan(&name); err != nil {
		t.Fatalf("select node: %v", err)
	}

	// crash in the pod, as the bootstrap procedure runs it.
	crash := func(stmt string) ([]byte, []byte, error) {
		return kube.Exec(ctx, bed.RESTConfig, bed.Client, ns, "crate-master-sim-0", "crate",
			[]string{"crash", "--verify-ssl=false", "--host", "http://localhost:4200", "-c", stmt}, nil)
	}
	stmt := `CREATE USER "system" WITH (password = 'e2e-secret');`
	out, _, err := crash(stmt)
	if err != nil || !strings.Contains(string(out), "CREATE OK") {
		t.Fatalf("crash create user: %q, %v", out, err)
	}
	out, stderr, err := crash(stmt)
	var exitErr *kube.ExitError
	if !errors.As(err, &exitErr) || !strings.Contains(string(stderr), "AlreadyExistsException") {
		t.Fatalf("second create user: out=%q stderr=%q err=%v", out, stderr, err)
	}
	if strings.Contains(err.Error(), "e2e-secret") || strings.Contains(string(out)+string(stderr), "e2e-secret") {
		t.Fatalf("password leaked: %v %q %q", err, out, stderr)
	}
	var sawCreate bool
	for _, st := range sim.Statements() {
		if strings.Contains(st.Statement, "e2e-secret") {
			t.Fatalf("password in statement log: %q", st.Statement)
		}
		sawCreate = sawCreate || (st.Node == "master-0" && st.Protocol == "http" && strings.HasPrefix(st.Statement, "CREATE USER"))
	}
	if !sawCreate {
		t.Fatalf("statement log lacks the CREATE USER run on master-0: %+v", sim.Statements())
	}
}

func TestCrateDBSimFollowsPodRestart(t *testing.T) {
	ns := newNamespace(t)
	sim := crateSimCluster(t, ns, "sim", 1, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if _, err := sim.Exec("test", "crate", `CREATE TABLE t (id INT) CLUSTERED INTO 4 SHARDS WITH (number_of_replicas = '1')`); err != nil {
		t.Fatal(err)
	}
	oldID := ""
	for _, n := range sim.Nodes() {
		if n.Name == "data-hot-1" {
			oldID = n.ID
		}
	}
	pod := "crate-data-hot-sim-1"
	if err := bed.Client.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The node leaves sys.nodes and comes back with a new id; kwok restarts a pod within a
	// second, so the transitions are read from the simulator's node events, not polled.
	deadline := time.Now().Add(waitTimeout)
	for !restartSeen(sim.NodeEvents(), "data-hot-1", oldID) {
		if time.Now().After(deadline) {
			t.Fatalf("no restart of data-hot-1 seen: %+v", sim.NodeEvents())
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitSimNodes(t, sim, 3)
	// The recreated pod keeps its port-forward mapping.
	sel := labels.SelectorFromSet(labels.Set{"app": "crate-data-hot-sim"}).String()
	if err := bed.WaitPodsReady(ctx, ns, sel, 2); err != nil {
		t.Fatal(err)
	}
	var conn *pgx.Conn
	deadline = time.Now().Add(30 * time.Second)
	for {
		fw, err := kube.PortForward(ctx, bed.RESTConfig, ns, pod, cratedbsim.PodPGPort)
		if err == nil {
			conn, err = pgx.Connect(ctx, "postgres://crate@"+fw.LocalAddr()+"/doc?sslmode=disable")
			if err == nil {
				defer fw.Close()
				break
			}
			fw.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect to the restarted pod: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	defer conn.Close(context.Background())
	var count int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM sys.nodes").Scan(&count); err != nil || count != 3 {
		t.Fatalf("count after restart = %d, %v", count, err)
	}
	// Replicas recover with the ticker: green again, bounded.
	deadline = time.Now().Add(30 * time.Second)
	for {
		if sev, _ := sim.Health(); sev == 1 {
			break
		}
		if time.Now().After(deadline) {
			sev, _ := sim.Health()
			t.Fatalf("health stuck at %d", sev)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// restartSeen reports whether node went down (dropping out of sys.nodes) and came back up
// with an id other than oldID.
func restartSeen(events []cratedbsim.NodeEvent, node, oldID string) bool {
	down := false
	for _, e := range events {
		switch {
		case e.Node != node:
		case !e.Up:
			down = true
		case down && e.ID != oldID:
			return true
		}
	}
	return false
}
