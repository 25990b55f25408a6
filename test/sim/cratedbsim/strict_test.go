package cratedbsim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodSettings(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crate-data-hot-c-2", Namespace: "ns"}, Status: corev1.PodStatus{PodIP: "10.0.0.7"}}
	c := &corev1.Container{
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "ZONE", Value: "z-$(POD_NAME)"},
		},
		Command: []string{"/docker-entrypoint.sh", "crate", "-Cnode.name=data-hot-$(hostname | awk -F- '{print $NF}')"},
		Args: []string{"-Cnetwork.publish_host=$(POD_IP)", "-Cnode.attr.zone=$(ZONE)", "-Cescaped=$$(POD_NAME)",
			"-Cundefined=$(NOPE)", "-Cplaceholder=${POD_NAME}", "-Cnode.master=false", "not-a-setting"},
	}
	got := podSettings(pod, c)
	want := nodeSettings{
		"node.name": "data-hot-2", "network.publish_host": "10.0.0.7", "node.attr.zone": "z-crate-data-hot-c-2",
		"escaped": "$(POD_NAME)", "undefined": "$(NOPE)", "placeholder": "crate-data-hot-c-2", "node.master": "false",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("settings = %v, want %v", got, want)
	}
	if got.bool("node.master", true) || !got.bool("node.data", true) {
		t.Fatal("roles: node.master=false, node.data default true")
	}
	// The current operator's spelling of the ordinal.
	c.Command = []string{"/docker-entrypoint.sh", "crate", "-Cnode.name=data-hot-$(hostname | rev | cut -d- -f1 | rev)"}
	if got := podSettings(pod, c)["node.name"]; got != "data-hot-2" {
		t.Errorf("node.name with rev/cut = %q, want data-hot-2", got)
	}
}

func TestVersions(t *testing.T) {
	for _, tc := range []struct {
		image string
		want  string
	}{
		{"crate:5.10.3", "5.10.3"}, {"docker.io/crate/crate:5.2", "5.2.0"}, {"crate:latest", ""}, {"crate", ""},
		{"registry:5000/crate:4.6.7", "4.6.7"},
	} {
		v, ok := imageVersion(tc.image)
		if got := map[bool]string{true: v.String(), false: ""}[ok]; got != tc.want {
			t.Errorf("imageVersion(%q) = %q, want %q", tc.image, got, tc.want)
		}
	}
	if knownNodeSetting("gateway.expected_data_nodes", Version{4, 6, 0}) || !knownNodeSetting("gateway.expected_data_nodes", Version{4, 7, 0}) {
		t.Fatal("gateway.expected_data_nodes exists from 4.7")
	}
	for _, tc := range []struct {
		version     string
		licenseOK   bool
		existsError string
	}{
		{"4.8.4", true, "UserAlreadyExistsException[User 'u' already exists]"},
		{"5.2.11", true, "UserAlreadyExistsException[User 'u' already exists]"},
		{"5.3.0", false, "UserAlreadyExistsException[User 'u' already exists]"},
		{"5.6.0", false, "RoleAlreadyExistsException[Role 'u' already exists]"},
		{"5.10.3", false, "RoleAlreadyExistsException[Role 'u' already exists]"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			sim := startVersion(t, tc.version, nil)
			_, err := sim.Exec("master-0", "crate", `SET LICENSE 'key'`)
			var se *SQLError
			if tc.licenseOK != (err == nil) || (err != nil && (!errors.As(err, &se) || !strings.HasPrefix(se.Message, "SQLParseException[") || se.Code != 4000)) {
				t.Fatalf("SET LICENSE on %s: %v", tc.version, err)
			}
			if _, err := sim.Exec("master-0", "crate", `CREATE USER u`); err != nil {
				t.Fatal(err)
			}
			if _, err := sim.Exec("master-0", "crate", `CREATE USER u`); err == nil || err.Error() != tc.existsError {
				t.Fatalf("second CREATE USER: %v, want %s", err, tc.existsError)
			}
			res, err := sim.Exec("master-0", "crate", `SELECT version['number'] FROM sys.nodes`)
			if err != nil || res.Rows[0][0] != tc.version {
				t.Fatalf("version = %v, %v", res, err)
			}
		})
	}
}

// startVersion starts a one-node static simulator of a version.
func startVersion(t *testing.T, version string, settings map[string]string) *Sim {
	t.Helper()
	sim, err := Start(t.Context(), Config{
		StaticNodes:  []StaticNode{{Name: "master-0", Pod: "crate-master-c-0", Master: true, Data: true, Settings: settings}},
		Version:      version,
		TickInterval: -1,
		Logf:         t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	return sim
}

func TestSettings(t *testing.T) {
	sim := startVersion(t, "5.10.3", nil)
	exec := func(stmt string) error { _, err := sim.Exec("master-0", "crate", stmt); return err }
	get := func() string {
		res, err := sim.Exec("master-0", "crate", `SELECT settings['cluster']['routing']['allocation']['enable'] FROM sys.cluster`)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(res.Rows[0][0])
	}
	for _, step := range []struct {
		stmt string
		want string // effective value after, or "error:<prefix>"
	}{
		{`SET GLOBAL PERSISTENT "cluster.routing.allocation.enable" = 'none'`, "none"},
		{`SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = 'primaries'`, "primaries"}, // transient wins
		{`SET GLOBAL "cluster.routing.allocation.enable" = 'new_primaries'`, "new_primaries"},   // default: transient
		{`RESET GLOBAL "cluster.routing.allocation.enable"`, "all"},                             // clears both
		{`SET GLOBAL "cluster.routing.allocation.enabled" = 'all'`, "error:IllegalArgumentException[Setting 'cluster.routing.allocation.enabled' is not supported]"},
		{`SET GLOBAL "gateway.expected_data_nodes" = 3`, "error:UnsupportedOperationException[Setting 'gateway.expected_data_nodes' cannot be set/reset at runtime]"},
		{`RESET GLOBAL "no.such.setting"`, "error:IllegalArgumentException[Setting 'no.such.setting' is not supported]"},
		{`SET GLOBAL "cluster.routing.allocation.enable" = 'sometimes'`, "error:IllegalArgumentException"},
	} {
		err := exec(step.stmt)
		if want, ok := strings.CutPrefix(step.want, "error:"); ok {
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("%s: %v, want %s", step.stmt, err, want)
			}
			continue
		}
		if err != nil || get() != step.want {
			t.Fatalf("%s: %v, effective %q, want %q", step.stmt, err, get(), step.want)
		}
	}
	// RESET of a prefix resets every setting under it.
	if err := exec(`SET GLOBAL PERSISTENT "cluster.routing.allocation.exclude._name" = 'x'`); err != nil {
		t.Fatal(err)
	}
	if err := exec(`RESET GLOBAL "cluster.routing.allocation"`); err != nil {
		t.Fatal(err)
	}
	if _, v := sim.m.persistent["cluster.routing.allocation.exclude._name"]; v {
		t.Fatal("prefix RESET kept exclude._name")
	}
}

func TestReplicaValidation(t *testing.T) {
	sim := startVersion(t, "5.10.3", nil)
	for i, tc := range []struct {
		replicas string
		err      string
	}{
		{"0", ""}, {"2", ""}, {"0-all", ""}, {"1-3", ""}, {"0-1", ""},
		{"all", `IllegalArgumentException[The "number_of_replicas" range "all" isn't valid]`},
		{"3-1", "IllegalArgumentException[[index.auto_expand_replicas] minReplicas must be =< maxReplicas but wasn't 3 > 1]"},
		{"-1", "IllegalArgumentException"}, {"1-", "IllegalArgumentException"}, {"a-b", "IllegalArgumentException"},
	} {
		_, err := sim.Exec("master-0", "crate", fmt.Sprintf(`CREATE TABLE t%d (a INT) WITH (number_of_replicas = '%s')`, i, tc.replicas))
		if (tc.err == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("number_of_replicas %q: %v, want %q", tc.replicas, err, tc.err)
		}
	}
}

func TestPrimariesMoveUnderPrimariesAllocation(t *testing.T) {
	m := testModel(3, 3, 1)
	m.createTable("doc.t", 6, "1")
	settle(m, 100)
	m.transient[settingAllocationEnable] = "primaries"
	m.transient[settingAllocationExclude] = "data-hot-2"
	m.allocate()
	settle(m, 100)
	for _, copies := range m.tables["doc.t"].copies {
		for _, c := range copies {
			if c.node == "data-hot-2" && c.primary {
				t.Fatalf("a primary stayed on the excluded node: %s", m.summary())
			}
		}
	}
	if m.shardCounts()["data-hot-2"] == 0 {
		t.Fatalf("replicas must stay under allocation=primaries: %s", m.summary())
	}
}

// startGateway starts 3 masters and 4 data nodes with the operator's gateway settings for 4
// data nodes (expected 4, recover after 3).
func startGateway(t *testing.T, after string, chaos Chaos) (*Sim, *time.Time) {
	t.Helper()
	settings := map[string]string{"gateway.expected_data_nodes": "4", "gateway.recover_after_data_nodes": "3"}
	if after != "" {
		settings["gateway.recover_after_time"] = after
	}
	var nodes []StaticNode
	for i := range 3 {
		nodes = append(nodes, StaticNode{Name: fmt.Sprintf("master-%d", i), Pod: fmt.Sprintf("crate-master-c-%d", i), Master: true, Settings: settings})
	}
	for i := range 4 {
		nodes = append(nodes, StaticNode{Name: fmt.Sprintf("data-hot-%d", i), Pod: fmt.Sprintf("crate-data-hot-c-%d", i), Data: true, Settings: settings})
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sim, err := Start(t.Context(), Config{StaticNodes: nodes, TickInterval: -1, Logf: t.Logf, Chaos: chaos})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	sim.mu.Lock()
	sim.m.now = func() time.Time { return now }
	sim.mu.Unlock()
	return sim, &now
}

func TestRecoverAfterOnFullRestart(t *testing.T) {
	sim, now := startGateway(t, "", Chaos{})
	if _, err := sim.Exec("t", "crate", `CREATE TABLE t (a INT) CLUSTERED INTO 4 SHARDS WITH (number_of_replicas = 0)`); err != nil {
		t.Fatalf("all expected nodes joined: the state must be recovered: %v", err)
	}
	if _, err := sim.Exec("t", "crate", `SET GLOBAL TRANSIENT "cluster.routing.allocation.exclude._name" = 'data-hot-3'`); err != nil {
		t.Fatal(err)
	}
	all := []string{"master-0", "master-1", "master-2", "data-hot-0", "data-hot-1", "data-hot-2", "data-hot-3"}
	for _, n := range all {
		if err := sim.SetNodeUp(n, false); err != nil {
			t.Fatal(err)
		}
	}
	// Back with only 2 data nodes: below recover_after_data_nodes=3, never recovers.
	for _, n := range all[:5] {
		if err := sim.SetNodeUp(n, true); err != nil {
			t.Fatal(err)
		}
	}
	*now = now.Add(time.Hour)
	sim.Tick()
	_, err := sim.Exec("t", "crate", `SELECT max(severity) FROM sys.health`)
	var se *SQLError
	if !errors.As(err, &se) || se.Code != 5035 || !strings.Contains(se.Message, "state not recovered") {
		t.Fatalf("health with 2 of recover_after_data_nodes=3: %v", err)
	}
	if res, err := sim.Exec("t", "crate", `SELECT count(*) FROM sys.nodes`); err != nil || res.Rows[0][0] != int64(5) {
		t.Fatalf("sys.nodes answers before recovery: %v %v", res, err)
	}
	// A third data node: recover_after reached, expected (4) not, so recover_after_time
	// (default 5m with an expected count) must pass first.
	if err := sim.SetNodeUp("data-hot-2", true); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Exec("t", "crate", `SELECT max(severity) FROM sys.health`); err == nil {
		t.Fatal("recovered before recover_after_time")
	}
	*now = now.Add(5*time.Minute + time.Second)
	sim.Tick()
	if _, err := sim.Exec("t", "crate", `SELECT max(severity) FROM sys.health`); err != nil {
		t.Fatalf("after recover_after_time: %v", err)
	}
	// Transient settings did not survive the full restart.
	res, err := sim.Exec("t", "crate", `SELECT settings['cluster']['routing']['allocation']['exclude']['_name'] FROM sys.cluster`)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows[0][0] != "" {
		t.Fatalf("transient exclusion survived a full restart: %v", res.Rows)
	}
}

func TestRecoverAtOnceWithExpectedNodes(t *testing.T) {
	sim, _ := startGateway(t, "", Chaos{})
	for _, n := range []string{"master-0", "master-1", "master-2", "data-hot-0", "data-hot-1", "data-hot-2", "data-hot-3"} {
		if err := sim.SetNodeUp(n, false); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"master-0", "master-1", "data-hot-0", "data-hot-1", "data-hot-2", "data-hot-3"} {
		if err := sim.SetNodeUp(n, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sim.Exec("t", "crate", `SELECT max(severity) FROM sys.health`); err != nil {
		t.Fatalf("all expected data nodes are back: %v", err)
	}
}

func TestNodeChecksPerNode(t *testing.T) {
	sim, _ := startGateway(t, "", Chaos{})
	res, err := sim.Exec("t", "crate", `SELECT id, passed FROM sys.node_checks ORDER BY id`)
	if err != nil || len(res.Rows) != 7*len(nodeChecks()) {
		t.Fatalf("rows = %d, %v; want one per node and check", len(res.Rows), err)
	}
	count := func(id int, passed bool) int64 {
		res, err := sim.Exec("t", "crate", `SELECT count(*) FROM sys.node_checks WHERE id = $1 AND passed = $2`, fmt.Sprint(id), fmt.Sprint(passed))
		if err != nil {
			t.Fatal(err)
		}
		return res.Rows[0][0].(int64)
	}
	if count(checkExpectedNodes, true) != 7 || count(checkRecoverAfter, true) != 7 || count(checkRecoverTime, true) != 7 {
		t.Fatalf("checks 1-3 must pass with expected=4, after=3, 4 data nodes")
	}
	if err := sim.SetNodeUp("data-hot-3", false); err != nil {
		t.Fatal(err)
	}
	if count(checkExpectedNodes, false) != 6 {
		t.Fatal("check 1 must fail on every node with 3 of 4 expected data nodes")
	}
	// recover_after_time=0 with an expected count: check 3 fails.
	sim2, _ := startGateway(t, "0s", Chaos{})
	res, err = sim2.Exec("t", "crate", `SELECT count(*) FROM sys.node_checks WHERE id = 3 AND passed = false`)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows[0][0] != int64(7) {
		t.Fatalf("check 3 with recover_after_time=0: %v", res.Rows)
	}
}

func TestChaos(t *testing.T) {
	sim, now := startGateway(t, "", Chaos{ElectionErrors: 2, ShutdownGrace: 30 * time.Second})
	if err := sim.SetNodeUp("master-0", false); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, err := sim.Exec("t", "crate", `SELECT max(severity) FROM sys.health`)
		var se *SQLError
		if !errors.As(err, &se) || se.Code != 5031 {
			t.Fatalf("statement %d after the master left: %v, want MasterNotDiscovered", i, err)
		}
	}
	if _, err := sim.Exec("t", "crate", `SELECT max(severity) FROM sys.health`); err != nil {
		t.Fatalf("third statement: %v", err)
	}
	// The log tells the made-up errors from earned ones.
	var injected []bool
	for _, st := range sim.Statements() {
		if st.Statement == `SELECT max(severity) FROM sys.health` {
			injected = append(injected, st.Injected)
		}
	}
	if !slices.Equal(injected, []bool{true, true, false}) {
		t.Fatalf("Injected marks %v, want the two election errors marked", injected)
	}
	names := func() string {
		res, err := sim.Exec("t", "crate", `SELECT name FROM sys.nodes ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(res.Rows)
	}
	// The stopped node stays listed for the grace time.
	if got := names(); !strings.Contains(got, "master-0") {
		t.Fatalf("master-0 left sys.nodes at once: %s", got)
	}
	*now = now.Add(31 * time.Second)
	sim.Tick() // the master's fault detection publishes the departure (voting.go)
	if got := names(); strings.Contains(got, "master-0") {
		t.Fatalf("master-0 still listed after the grace time: %s", got)
	}
}

// TestShards: Shards lists the assigned copies per table, and a stopped node's copies leave
// the list (a table without replicas loses its primaries with it).
func TestShards(t *testing.T) {
	sim, _ := startGateway(t, "", Chaos{})
	for _, stmt := range []string{
		`CREATE TABLE doc.r (a INT) CLUSTERED INTO 4 SHARDS WITH (number_of_replicas = 1)`,
		`CREATE TABLE doc.s (a INT) CLUSTERED INTO 4 SHARDS WITH (number_of_replicas = 0)`,
	} {
		if _, err := sim.Exec("t", "crate", stmt); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		sim.Tick()
	}
	count := func() map[string]string {
		out := map[string]string{}
		n := map[string][2]int{}
		for _, c := range sim.Shards() {
			if !c.Started {
				continue
			}
			v := n[c.Table]
			if c.Primary {
				v[0]++
			} else {
				v[1]++
			}
			n[c.Table] = v
		}
		for k, v := range n {
			out[k] = fmt.Sprintf("%d+%d", v[0], v[1])
		}
		return out
	}
	if got := count(); got["doc.r"] != "4+4" || got["doc.s"] != "4+0" {
		t.Fatalf("started primaries+replicas %v, want doc.r 4+4, doc.s 4+0", got)
	}
	var onHot0 int
	for _, c := range sim.Shards() {
		if c.Node == "data-hot-0" && c.Table == "doc.s" {
			onHot0++
		}
	}
	if onHot0 == 0 {
		t.Fatal("no copy of doc.s on data-hot-0")
	}
	if err := sim.SetNodeUp("data-hot-0", false); err != nil {
		t.Fatal(err)
	}
	if got := count(); got["doc.s"] != fmt.Sprintf("%d+0", 4-onHot0) {
		t.Fatalf("after data-hot-0 stopped: %v, want doc.s to lose its %d primaries there", got, onHot0)
	}
	for _, c := range sim.Shards() {
		if c.Node == "data-hot-0" {
			t.Fatalf("a stopped node still holds %+v", c)
		}
	}
}

func TestHostBasedAuthOverTLS(t *testing.T) {
	serverTLS, pool := selfSigned(t)
	settings := operatorHBA()
	settings["ssl.psql.enabled"] = "true"
	settings["ssl.http.enabled"] = "true"
	settings["auth.host_based.config.99.ssl"] = "on"
	sim, err := Start(t.Context(), Config{
		StaticNodes:  []StaticNode{{Name: "n0", Pod: "p-0", Master: true, Data: true, Settings: settings}},
		TLS:          serverTLS,
		TickInterval: -1,
		Logf:         t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	if _, err := sim.Exec("t", "crate", `CREATE USER "system" WITH (password = 'pw')`); err != nil {
		t.Fatal(err)
	}
	info := sim.Nodes()[0]
	if !info.HTTPS || !info.PGTLS {
		t.Fatalf("node info: %+v", info)
	}
	// The HTTPS port does not answer plain HTTP: the connection just closes.
	if resp, err := http.Get("http://" + info.HTTPAddr + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("plain HTTP to an HTTPS node answered %s", resp.Status)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}}}
	resp, err := hc.Get("https://" + info.HTTPAddr + "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("https: %v %v", resp, err)
	}
	resp.Body.Close()
	host, port, _ := net.SplitHostPort(info.PGAddr)
	try := func(user, sslmode string) error {
		cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s user=%s password=pw dbname=doc sslmode=%s connect_timeout=5", host, port, user, sslmode))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.TLSConfig != nil {
			cfg.TLSConfig.RootCAs = pool
			cfg.TLSConfig.ServerName = "localhost"
			cfg.TLSConfig.InsecureSkipVerify = false
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			_ = conn.Close(ctx)
		}
		return err
	}
	if err := try("system", "verify-full"); err != nil {
		t.Fatalf("password over TLS: %v", err)
	}
	err = try("system", "disable")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28000" || !strings.Contains(pgErr.Message, "No valid auth.host_based entry") {
		t.Fatalf("password without TLS must be refused: %v", err)
	}
	if err := try("crate", "disable"); err != nil {
		t.Fatalf("crate from localhost is trusted: %v", err)
	}
}

// selfSigned makes a server certificate for localhost and its CA pool.
func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, pool
}

// TestDuplicateSettingRefusesStart: CrateDB's command line takes each -C key once
// (EnvironmentAwareCommand: "setting [k] already set, saw [a] and [b]") and an empty value
// not at all; such a node never starts, whatever the values. Before, the simulator let the
// later value win and started the node.
func TestDuplicateSettingRefusesStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
		up   bool
	}{
		{"each key once", []string{"-Cgateway.expected_data_nodes=3", "-Cgateway.recover_after_data_nodes=2"}, "", true},
		{"same key twice, same value", []string{"-Cgateway.expected_data_nodes=3", "-Cgateway.expected_data_nodes=3"},
			"setting [gateway.expected_data_nodes] already set, saw [3] and [3]", false},
		{"same key twice, other value", []string{"-Cgateway.expected_data_nodes=3", "-Cgateway.expected_data_nodes=4"},
			"setting [gateway.expected_data_nodes] already set, saw [3] and [4]", false},
		{"empty value", []string{"-Cgateway.expected_data_nodes="}, "setting [gateway.expected_data_nodes] must not be empty", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &corev1.Container{Command: []string{"/docker-entrypoint.sh", "crate", "-Cnode.name=n1"}, Args: tc.args}
			_, err := podSettingsChecked(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-0"}}, c)
			if (err == nil) != (tc.want == "") || (err != nil && err.Error() != tc.want) {
				t.Fatalf("podSettingsChecked: %v, want %q", err, tc.want)
			}
			f := newFakeCluster(t)
			f.sts("crate-data-hot-c", 1, append([]string{"-Cnode.name=$(POD_NAME)"}, tc.args...)...)
			f.pvc("crate-data-hot-c-0")
			f.pod("crate-data-hot-c-0", true)
			var logs []string
			var mu sync.Mutex
			sim, err := Start(t.Context(), Config{Client: f.client, Namespace: testNS, Cluster: "c", TickInterval: -1, Logf: func(format string, args ...any) {
				mu.Lock()
				logs = append(logs, fmt.Sprintf(format, args...))
				mu.Unlock()
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sim.Close)
			f.waitWatches()
			up := false
			for _, n := range sim.Nodes() {
				up = up || n.Up
			}
			if up != tc.up {
				t.Fatalf("node up = %v, want %v: %+v", up, tc.up, sim.Nodes())
			}
			if !tc.up {
				mu.Lock()
				defer mu.Unlock()
				if !strings.Contains(strings.Join(logs, "\n"), tc.want) {
					t.Errorf("log lacks %q:\n%s", tc.want, strings.Join(logs, "\n"))
				}
			}
		})
	}
}

// TestStartedCopies: sys.shards lists started copies with their table and node; copies still
// recovering are not started.
func TestStartedCopies(t *testing.T) {
	sim := startStatic(t)
	if _, err := sim.Exec("t", "crate", `CREATE TABLE doc.t (a INT) CLUSTERED INTO 2 SHARDS WITH (number_of_replicas = 1)`); err != nil {
		t.Fatal(err)
	}
	q := `SELECT schema_name, table_name, partition_ident, id, node['name'] FROM sys.shards WHERE routing_state IN ('STARTED', 'RELOCATING')`
	res, err := sim.Exec("t", "crate", q)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 { // the primaries start at once, the replicas recover over ticks
		t.Fatalf("started copies before recovery: %v", res.Rows)
	}
	for range 5 {
		sim.Tick()
	}
	if res, err = sim.Exec("t", "crate", q); err != nil || len(res.Rows) != 4 {
		t.Fatalf("started copies after recovery: %v, %v", res, err)
	}
	for _, r := range res.Rows {
		if r[0] != "doc" || r[1] != "t" || r[2] != "" || !strings.HasPrefix(fmt.Sprint(r[4]), "data-hot-") {
			t.Errorf("row %v", r)
		}
	}
}
