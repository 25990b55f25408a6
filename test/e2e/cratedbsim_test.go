//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/bedwire"
)

// crateSimFixture creates the fixture's StatefulSets in ns, waits for their pods and starts
// a simulator attached to them (with a test bed certificate when the fixture uses TLS).
func crateSimFixture(t *testing.T, ns string, f bedwire.Fixture, chaos cratedbsim.Chaos) *cratedbsim.Sim {
	t.Helper()
	ctx := t.Context()
	f.Namespace = ns
	if _, err := bed.Client.CoreV1().Services(ns).Create(ctx, f.DiscoveryService(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create discovery service: %v", err)
	}
	for _, sts := range f.StatefulSets() {
		if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create statefulset %s: %v", sts.Name, err)
		}
	}
	for _, g := range f.Groups {
		waitCtx, cancel := context.WithTimeout(ctx, waitTimeout)
		err := bed.WaitPodsReady(waitCtx, ns, labels.SelectorFromSet(bedwire.Labels(f.Cluster, g.Name)).String(), int(g.Replicas))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg := cratedbsim.Config{Client: bed.Client, Namespace: ns, Cluster: f.Cluster, TickInterval: 100 * time.Millisecond, Logf: t.Logf, Chaos: chaos}
	if f.TLS {
		tlsCfg, err := bedwire.ServerTLS(bed, ns)
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLS = tlsCfg
	}
	simCtx, cancel := context.WithCancel(context.Background())
	sim, err := cratedbsim.Start(simCtx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("start simulator: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		sim.Close()
	})
	_, total := f.Counts()
	waitSimNodes(t, sim, int(total))
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

func simGroups() []bedwire.Group {
	return []bedwire.Group{{Name: "master", Replicas: 1}, {Name: "hot", Replicas: 2}}
}

// crashIn runs crash in a pod's crate container as the bootstrap procedure does.
func crashIn(ctx context.Context, ns, pod, host string, args ...string) (string, string, error) {
	out, errOut, err := kube.Exec(ctx, bed.RESTConfig, bed.Client, ns, pod, "crate",
		append([]string{"crash", "--verify-ssl=false", "--host", host}, args...), nil)
	return string(out), string(errOut), err
}

func TestCrateDBSimLayouts(t *testing.T) {
	for _, layout := range []bedwire.Layout{bedwire.LayoutPodName, bedwire.LayoutOperator} {
		t.Run(map[bedwire.Layout]string{bedwire.LayoutPodName: "pod-name", bedwire.LayoutOperator: "operator"}[layout], func(t *testing.T) {
			ns := newNamespace(t)
			f := bedwire.Fixture{Cluster: "sim", Layout: layout, Version: "5.2.11", Groups: simGroups()}
			sim := crateSimFixture(t, ns, f, cratedbsim.Chaos{})
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()

			// pgx through a real port-forward to a data pod's 5432: the pod's node by hostname.
			pod := f.StatefulSetName("hot") + "-1"
			fw, err := kube.PortForward(ctx, bed.RESTConfig, ns, pod, cratedbsim.PodPGPort)
			if err != nil {
				t.Fatal(err)
			}
			defer fw.Close()
			conn, err := pgx.Connect(ctx, "postgres://crate@"+fw.LocalAddr()+"/doc?sslmode=disable")
			if err != nil {
				t.Fatalf("connect through port-forward: %v", err)
			}
			defer conn.Close(context.Background())
			var name, version string
			if err := conn.QueryRow(ctx, "SELECT name, version['number'] FROM sys.nodes WHERE hostname = $1", pod).Scan(&name, &version); err != nil {
				t.Fatalf("select node: %v", err)
			}
			if name != f.NodeName("hot", 1) || version != "5.2.11" {
				t.Fatalf("pod %s runs node %q version %s, want %q 5.2.11", pod, name, version, f.NodeName("hot", 1))
			}
			var names []string
			for _, n := range sim.Nodes() {
				names = append(names, n.Name)
			}
			want := []string{f.NodeName("master", 0), f.NodeName("hot", 0), f.NodeName("hot", 1)}
			slices.Sort(want)
			if slices.Sort(names); !slices.Equal(names, want) {
				t.Fatalf("nodes = %v, want %v", names, want)
			}

			// crash in the master pod: 5.2 takes SET LICENSE and reports UserAlreadyExists.
			master := f.StatefulSetName("master") + "-0"
			if _, errOut, err := crashIn(ctx, ns, master, "http://localhost:4200", "-c", `SET LICENSE 'e2e-license';`); err != nil || !strings.Contains(errOut, "SET OK, 1 row affected") {
				t.Fatalf("crash set license: %q, %v", errOut, err)
			}
			stmt := `CREATE USER "system" WITH (password = 'e2e-secret');`
			if _, errOut, err := crashIn(ctx, ns, master, "http://localhost:4200", "-c", stmt); err != nil || !strings.Contains(errOut, "CREATE OK, 1 row affected") {
				t.Fatalf("crash create user: %q, %v", errOut, err)
			}
			out, errOut, err := crashIn(ctx, ns, master, "http://localhost:4200", "-c", stmt)
			var exitErr *kube.ExitError
			if !errors.As(err, &exitErr) || !strings.Contains(errOut, "UserAlreadyExistsException[User 'system' already exists]") {
				t.Fatalf("second create user: out=%q stderr=%q err=%v", out, errOut, err)
			}
			if strings.Contains(err.Error(), "e2e-secret") || strings.Contains(out+errOut, "e2e-secret") {
				t.Fatalf("password leaked: %v %q %q", err, out, errOut)
			}
			for _, st := range sim.Statements() {
				if strings.Contains(st.Statement, "e2e-secret") || strings.Contains(st.Statement, "e2e-license") {
					t.Fatalf("secret in statement log: %q", st.Statement)
				}
			}
		})
	}
}

func TestCrateDBSimTLS(t *testing.T) {
	ns := newNamespace(t)
	f := bedwire.Fixture{Cluster: "tls", Layout: bedwire.LayoutOperator, TLS: true, Groups: simGroups()}
	sim := crateSimFixture(t, ns, f, cratedbsim.Chaos{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	master := f.StatefulSetName("master") + "-0"

	// http against a node with ssl.http.enabled does not connect; https does.
	if _, errOut, err := crashIn(ctx, ns, master, "http://localhost:4200", "-c", "SELECT 1"); err == nil || !strings.Contains(errOut, "CONNECT ERROR") {
		t.Fatalf("http to a TLS node: %q, %v", errOut, err)
	}
	if _, errOut, err := crashIn(ctx, ns, master, "https://localhost:4200", "-c", `CREATE USER "system" WITH (password = 'tls-secret');`); err != nil || !strings.Contains(errOut, "CREATE OK") {
		t.Fatalf("https: %q, %v", errOut, err)
	}
	// crash verifies the certificate unless told not to; the test bed CA is not a system CA.
	if _, _, err := kube.Exec(ctx, bed.RESTConfig, bed.Client, ns, master, "crate",
		[]string{"crash", "--verify-ssl=true", "--host", "https://localhost:4200", "-c", "SELECT 1"}, nil); err == nil {
		t.Fatal("certificate from the test bed CA verified against system roots")
	}
	if _, err := sim.Exec("test", "crate", `GRANT ALL PRIVILEGES TO "system"`); err != nil {
		t.Fatal(err)
	}

	fw, err := kube.PortForward(ctx, bed.RESTConfig, ns, f.StatefulSetName("hot")+"-0", cratedbsim.PodPGPort)
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	connect := func(sslmode string) error {
		cfg, err := pgx.ParseConfig("postgres://system:tls-secret@" + fw.LocalAddr() + "/doc?sslmode=" + sslmode)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.TLSConfig != nil {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(bed.CAPEM())
			cfg.TLSConfig.RootCAs, cfg.TLSConfig.ServerName, cfg.TLSConfig.InsecureSkipVerify = pool, "localhost", false
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			var one int
			err = conn.QueryRow(ctx, "SELECT 1").Scan(&one)
			_ = conn.Close(ctx)
		}
		return err
	}
	// The operator's host-based authentication: passwords only over TLS.
	var pgErr *pgconn.PgError
	if err := connect("disable"); !errors.As(err, &pgErr) || pgErr.Code != "28000" {
		t.Fatalf("password login without TLS: %v, want refused", err)
	}
	if err := connect("verify-full"); err != nil {
		t.Fatalf("password login over TLS: %v", err)
	}
}

// TestCrateDBSimSeparateInstances runs two simulators for two clusters of the same name in
// two namespaces, as two sandboxes or test processes would: each bootstraps on its own.
func TestCrateDBSimSeparateInstances(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	f := bedwire.Fixture{Cluster: "twin", Layout: bedwire.LayoutOperator, Groups: []bedwire.Group{{Name: "hot", Replicas: 1}}}
	var sims []*cratedbsim.Sim
	var namespaces []string
	for range 2 {
		ns := newNamespace(t)
		namespaces = append(namespaces, ns)
		sims = append(sims, crateSimFixture(t, ns, f, cratedbsim.Chaos{}))
	}
	for i, ns := range namespaces {
		_, errOut, err := crashIn(ctx, ns, f.StatefulSetName("hot")+"-0", "http://localhost:4200", "-c", `CREATE USER "system" WITH (password = 'x');`)
		if err != nil || !strings.Contains(errOut, "CREATE OK") {
			t.Fatalf("bootstrap of instance %d: %q, %v", i, errOut, err)
		}
	}
	for i, sim := range sims {
		n := 0
		for _, st := range sim.Statements() {
			if strings.HasPrefix(st.Statement, "CREATE USER") {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("simulator %d ran %d CREATE USER, want 1: %+v", i, n, sim.Statements())
		}
	}
}

func TestCrateDBSimFollowsPodRestart(t *testing.T) {
	ns := newNamespace(t)
	f := bedwire.Fixture{Cluster: "sim", Layout: bedwire.LayoutPodName, Groups: simGroups()}
	sim := crateSimFixture(t, ns, f, cratedbsim.Chaos{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if _, err := sim.Exec("test", "crate", `CREATE TABLE t (id INT) CLUSTERED INTO 4 SHARDS WITH (number_of_replicas = '1')`); err != nil {
		t.Fatal(err)
	}
	pod := f.StatefulSetName("hot") + "-1"
	node := f.NodeName("hot", 1)
	oldID := ""
	for _, n := range sim.Nodes() {
		if n.Name == node {
			oldID = n.ID
		}
	}
	if err := bed.Client.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The node leaves sys.nodes and comes back; with its volume it keeps its node id (CrateDB
	// keeps the id in its data path). kwok restarts a pod within a second, so the
	// transitions are read from the simulator's node events, not polled.
	deadline := time.Now().Add(waitTimeout)
	for !restartSeen(sim.NodeEvents(), node) {
		if time.Now().After(deadline) {
			t.Fatalf("no restart of %s seen: %+v", node, sim.NodeEvents())
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitSimNodes(t, sim, 3)
	for _, n := range sim.Nodes() {
		if n.Name == node && n.ID != oldID {
			t.Fatalf("node id changed across a restart with the same volume: %s -> %s", oldID, n.ID)
		}
	}
	// The recreated pod keeps its port-forward mapping.
	sel := labels.SelectorFromSet(bedwire.Labels(f.Cluster, "hot")).String()
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

// TestCrateDBSimFullRestartRecoverAfter deletes every pod at once: the cluster state comes
// back only once recover_after_data_nodes data nodes joined, and at once when all expected
// ones did.
func TestCrateDBSimFullRestartRecoverAfter(t *testing.T) {
	ns := newNamespace(t)
	f := bedwire.Fixture{Cluster: "gw", Layout: bedwire.LayoutOperator, Groups: []bedwire.Group{{Name: "master", Replicas: 1}, {Name: "hot", Replicas: 3}}}
	sim := crateSimFixture(t, ns, f, cratedbsim.Chaos{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if _, err := sim.Exec("test", "crate", `CREATE TABLE t (id INT) CLUSTERED INTO 3 SHARDS WITH (number_of_replicas = 0)`); err != nil {
		t.Fatal(err)
	}
	// A recover-after above the data node count (as a scale-down that forgot it leaves it)
	// blocks the state after a full restart.
	hot, err := bed.Client.AppsV1().StatefulSets(ns).Get(ctx, f.StatefulSetName("hot"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	master, err := bed.Client.AppsV1().StatefulSets(ns).Get(ctx, f.StatefulSetName("master"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sts := range []string{hot.Name, master.Name} {
		updateStatefulSet(ctx, t, ns, sts, func(s *appsv1.StatefulSet) {
			c := &s.Spec.Template.Spec.Containers[0]
			for i, a := range c.Command {
				if strings.HasPrefix(a, "-Cgateway.recover_after_data_nodes=") {
					c.Command[i] = "-Cgateway.recover_after_data_nodes=4"
				}
			}
		})
	}
	if err := bed.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSimNodes(t, sim, 4)
	for range 10 { // ten ticks of the simulator (what a second of its own ticker runs), driven here: nothing may recover
		sim.Tick()
	}
	if _, err := sim.Exec("test", "crate", `SELECT max(severity) FROM sys.health`); err == nil || !strings.Contains(err.Error(), "state not recovered") {
		t.Fatalf("3 data nodes with recover_after_data_nodes=4 recovered: %v", err)
	}
	// Fixed to the quorum again and restarted: recovers, the table is back.
	for _, sts := range []string{hot.Name, master.Name} {
		updateStatefulSet(ctx, t, ns, sts, func(s *appsv1.StatefulSet) {
			c := &s.Spec.Template.Spec.Containers[0]
			for i, a := range c.Command {
				if strings.HasPrefix(a, "-Cgateway.recover_after_data_nodes=") {
					c.Command[i] = fmt.Sprintf("-Cgateway.recover_after_data_nodes=%d", bedwire.Quorum(3))
				}
			}
		})
	}
	if err := bed.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for {
		res, err := sim.Exec("test", "crate", `SELECT max(severity) FROM sys.health`)
		if err == nil && res.Rows[0][0] == int16(1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery with recover_after_data_nodes=2: %v %v", res, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// restartSeen reports whether node went down (dropping out of sys.nodes) and came back up.
func restartSeen(events []cratedbsim.NodeEvent, node string) bool {
	down := false
	for _, e := range events {
		switch {
		case e.Node != node:
		case !e.Up:
			down = true
		case down:
			return true
		}
	}
	return false
}

// TestCrateDBSimChaos deletes a master pod of a simulator with chaos on: statements fail
// with a transient error during the election that follows, and the stopped node stays in
// sys.nodes for the shutdown grace time.
func TestCrateDBSimChaos(t *testing.T) {
	ns := newNamespace(t)
	f := bedwire.Fixture{Cluster: "chaos", Layout: bedwire.LayoutOperator, Groups: []bedwire.Group{{Name: "master", Replicas: 3}, {Name: "hot", Replicas: 1}}}
	sim := crateSimFixture(t, ns, f, cratedbsim.Chaos{ElectionErrors: 2, ShutdownGrace: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	node := f.NodeName("master", 0)
	if err := bed.Client.CoreV1().Pods(ns).Delete(ctx, f.StatefulSetName("master")+"-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for !slices.ContainsFunc(sim.NodeEvents(), func(e cratedbsim.NodeEvent) bool { return e.Node == node && !e.Up }) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never stopped: %+v", node, sim.NodeEvents())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range 2 {
		_, err := sim.Exec("test", "crate", `SELECT max(severity) FROM sys.health`)
		var se *cratedbsim.SQLError
		if !errors.As(err, &se) || se.Code != 5031 {
			t.Fatalf("statement %d during the election: %v, want MasterNotDiscoveredException", i, err)
		}
	}
	if _, err := sim.Exec("test", "crate", `SELECT max(severity) FROM sys.health`); err != nil {
		t.Fatalf("after the election: %v", err)
	}
	// The pod came back (kwok is quick) with the same volume, so the node rejoined under its
	// id; while it was away it stayed listed.
	res, err := sim.Exec("test", "crate", `SELECT count(*) FROM sys.nodes WHERE name = $1`, node)
	if err != nil || res.Rows[0][0] != int64(1) {
		t.Fatalf("%s rows in sys.nodes: %v %v", node, res, err)
	}
}
