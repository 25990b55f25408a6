//go:build e2e

package e2e

// End-to-end tests of the CrateDB procedures: the real kubectl-dbops binary against the
// testbed's API server, with the CrateDB simulator behind kwok's exec (crash) and
// port-forward (5432) of every pod.

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/bedwire"
)

// crateE2ECluster is the CrateDB cluster name of these tests (one per namespace).
const crateE2ECluster = "crate1"

// crateE2EGroup is one node group of the operator-shaped fixture.
type crateE2EGroup struct {
	name     string // cloud.crate.io/node-name: master, hot, cold
	replicas int32
	order    string // dbops.io/order, data groups only
}

func (g crateE2EGroup) sts(cluster string) string {
	if g.name == "master" {
		return "crate-master-" + cluster
	}
	return "crate-data-" + g.name + "-" + cluster
}

// crateE2EGroups is the shape of the issue: 3 masters, 3 hot, 2 cold.
var crateE2EGroups = []crateE2EGroup{{"master", 3, ""}, {"hot", 3, "0"}, {"cold", 2, "1"}}

// crateEnv is a CrateDB cluster on the testbed with its simulator.
type crateEnv struct {
	t        *testing.T
	ns, name string
	// layout is how the fixture names its CrateDB nodes: after the pods
	// (-Cnode.name=$(POD_NAME)) or the CrateDB operator's way.
	layout bedwire.Layout
	// groups are the node groups (crateE2EGroups unless a test needs another shape).
	groups []crateE2EGroup
	tls    bool
	// version is the CrateDB version ("" = bedwire.DefaultVersion); real, when set, runs the
	// pods in real containers on the real nodes.
	version string
	real    *bedwire.RealNodes
	// awareness is the fixture's -Ccluster.routing.allocation.awareness.attributes ("" = none).
	awareness string
	sim       *cratedbsim.Sim
	simCtx    context.Context // ends when the test's simulator stops
	sysPW     string
	simLog    *simLogLines
	env       []string
}

// simLogLines keeps the simulator's diagnostics in order. The simulator writes them while
// it holds its model lock, so their order is the order of the model's changes.
type simLogLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *simLogLines) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
}

func (l *simLogLines) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

func crateLabelsE2E(cluster, group string) map[string]string {
	return bedwire.Labels(cluster, group)
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// newCrateEnv creates the operator-shaped cluster in a new namespace, the Secret
// user-system-<cluster>, starts the simulator and wires it to the pods. With systemUser the
// system user exists already (as the operator leaves it) and a table with replicas is created.
// Nodes are named after their pods; newCrateEnvLayout picks the layout.
func newCrateEnv(t *testing.T, systemUser bool) *crateEnv {
	t.Helper()
	return newCrateEnvLayout(t, systemUser, bedwire.LayoutPodName)
}

// crateLayouts are the two naming layouts every procedure must handle.
var crateLayouts = []struct {
	name   string
	layout bedwire.Layout
}{{"pod-names", bedwire.LayoutPodName}, {"operator-names", bedwire.LayoutOperator}}

// fixture is the bedwire fixture of x's StatefulSets.
func (x *crateEnv) fixture() bedwire.Fixture {
	f := bedwire.Fixture{Namespace: x.ns, Cluster: x.name, Layout: x.layout, TLS: x.tls, Version: x.version, RealNodes: x.real, Awareness: x.awareness}
	for _, g := range x.groups {
		f.Groups = append(f.Groups, bedwire.Group{Name: g.name, Replicas: g.replicas})
	}
	return f
}

// node is the CrateDB node name of ordinal i of group, as the fixture's layout names it
// (the test knows its fixture; the tool has to find out).
func (x *crateEnv) node(group string, i int) string { return x.fixture().NodeName(group, i) }

func newCrateEnvLayout(t *testing.T, systemUser bool, layout bedwire.Layout) *crateEnv {
	t.Helper()
	return newCrateEnvGroups(t, systemUser, layout, crateE2EGroups)
}

func newCrateEnvGroups(t *testing.T, systemUser bool, layout bedwire.Layout, groups []crateE2EGroup) *crateEnv {
	t.Helper()
	return newCrateEnvWith(t, crateSetup{systemUser: systemUser, layout: layout, groups: groups})
}

// crateSetup is how a test wants its cluster.
type crateSetup struct {
	systemUser bool
	layout     bedwire.Layout
	groups     []crateE2EGroup // nil = crateE2EGroups
	tls        bool            // -Cssl.http/psql.enabled, passwords only over TLS
	chaos      cratedbsim.Chaos
	version    string // "" = bedwire.DefaultVersion
	// realNodes runs the pods in the CrateDB simulator image on the test bed's real nodes
	// (the caller has called needRealNodes): crash runs in the container, exec and
	// port-forwards go through the real kubelet, the simulator follows the real pods.
	realNodes bool
	// awareness starts every node with -Ccluster.routing.allocation.awareness.attributes.
	awareness string
	// shardSize, when set, makes the simulator's copies recover at
	// indices.recovery.max_bytes_per_sec (cratedbsim.Config.ShardSize).
	shardSize int64
}

func newCrateEnvWith(t *testing.T, cs crateSetup) *crateEnv {
	t.Helper()
	if cs.groups == nil {
		cs.groups = crateE2EGroups
	}
	ns := newNamespace(t)
	x := &crateEnv{t: t, ns: ns, name: crateE2ECluster, layout: cs.layout, groups: cs.groups, tls: cs.tls, version: cs.version, sysPW: "sys-" + randomHex(t, 12), simLog: &simLogLines{},
		awareness: cs.awareness}
	systemUser := cs.systemUser
	ctx := t.Context()
	_, total := x.fixture().Counts()
	if cs.realNodes {
		// The pods need the simulator's pod gateway address, so the simulator starts first.
		x.startSim(cs)
		x.real = &bedwire.RealNodes{PodGateway: x.sim.PodGatewayAddr()}
		if _, err := x.fixture().Image(); err != nil {
			t.Fatal(err)
		}
	}
	// The nodes find each other through its SRV records (-Cdiscovery.srv.query), on kwok as on
	// real nodes.
	if _, err := bed.Client.CoreV1().Services(ns).Create(ctx, x.fixture().DiscoveryService(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create discovery service: %v", err)
	}
	for _, sts := range x.fixture().StatefulSets() {
		if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create statefulset %s: %v", sts.Name, err)
		}
	}
	for _, g := range x.groups {
		waitCtx, cancel := context.WithTimeout(ctx, waitTimeout)
		err := bed.WaitPodsReady(waitCtx, ns, labels.SelectorFromSet(crateLabelsE2E(x.name, g.name)).String(), int(g.replicas))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	waitPVCsBound(t, ns, int(total))
	for _, g := range x.groups {
		waitStatefulSetSettled(t, ns, g.sts(x.name), g.replicas)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "user-system-" + x.name}, StringData: map[string]string{"password": x.sysPW}}
	if _, err := bed.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create system secret: %v", err)
	}

	if !cs.realNodes {
		x.startSim(cs)
	}
	waitSimNodes(t, x.sim, int(total))
	if !cs.realNodes {
		// Under kwok exec and port-forwards of the pods must be mapped to the nodes; real
		// containers serve them themselves.
		if err := bedwire.Attach(x.simCtx, bed, x.sim, ns); err != nil {
			t.Fatalf("attach simulator: %v", err)
		}
	}
	if systemUser {
		x.sql(`CREATE USER "system" WITH (password = $1)`, x.sysPW)
		x.sql(`GRANT ALL PRIVILEGES TO "system"`)
		x.sql(`CREATE TABLE doc.events (id TEXT, payload OBJECT) CLUSTERED INTO 6 SHARDS WITH (number_of_replicas = '1')`)
		x.sql(`CREATE TABLE doc.metrics (host TEXT, value DOUBLE) CLUSTERED INTO 4 SHARDS WITH (number_of_replicas = '0-1')`)
		x.waitGreen()
	}
	x.env = cliEnv(t)
	return x
}

// startSim starts the simulator following x's namespace, stopped at the test's end; on real
// nodes with its pod gateway on the pod bridge.
func (x *crateEnv) startSim(cs crateSetup) {
	t := x.t
	t.Helper()
	simCfg := cratedbsim.Config{
		Client:       bed.Client,
		Namespace:    x.ns,
		Cluster:      x.name,
		TickInterval: 100 * time.Millisecond,
		Logf:         x.simLog.logf,
		Chaos:        cs.chaos,
		ShardSize:    cs.shardSize,
	}
	if cs.realNodes {
		ip, iface, err := bed.RealNodePodGateway()
		if err != nil {
			t.Fatal(err)
		}
		simCfg.PodGateway, simCfg.PodGatewayInterface = ip, iface
	}
	if cs.tls {
		tlsCfg, err := bedwire.ServerTLS(bed, x.ns)
		if err != nil {
			t.Fatal(err)
		}
		simCfg.TLS = tlsCfg
	}
	simCtx, cancel := context.WithCancel(context.Background())
	sim, err := cratedbsim.Start(simCtx, simCfg)
	if err != nil {
		cancel()
		t.Fatalf("start simulator: %v", err)
	}
	x.sim, x.simCtx = sim, simCtx
	t.Cleanup(func() {
		cancel()
		sim.Close()
		if t.Failed() {
			lines := x.simLog.snapshot()
			if len(lines) > 300 {
				lines = lines[len(lines)-300:]
			}
			t.Logf("simulator log (last %d lines):\n  %s", len(lines), strings.Join(lines, "\n  "))
		}
	})
}

// sql runs a setup or inspection statement as the superuser crate, logged as node "e2e".
func (x *crateEnv) sql(stmt string, args ...any) *cratedbsim.Result {
	x.t.Helper()
	res, err := x.sim.Exec("e2e", "crate", stmt, args...)
	if err != nil {
		x.t.Fatalf("%s: %v", stmt, err)
	}
	return res
}

// waitGreen polls the simulator (a database cannot be watched) until it is green with every
// node the StatefulSets want.
func (x *crateEnv) waitGreen() {
	x.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		sev, n := x.sim.Health()
		if sev <= 1 && n == x.wantNodes() {
			return
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("simulator not green: severity %d, %d nodes (want %d): %+v", sev, n, x.wantNodes(), x.sim.Nodes())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (x *crateEnv) wantNodes() int {
	n := 0
	for _, g := range x.groups {
		s, err := bed.Client.AppsV1().StatefulSets(x.ns).Get(x.t.Context(), g.sts(x.name), metav1.GetOptions{})
		if err != nil {
			x.t.Fatalf("get statefulset: %v", err)
		}
		n += int(*s.Spec.Replicas)
	}
	return n
}

func (x *crateEnv) lastSeq() int {
	st := x.sim.Statements()
	if len(st) == 0 {
		return 0
	}
	return st[len(st)-1].Seq
}

// toolStatements returns the statements after seq that kubectl-dbops ran (not the test's).
func (x *crateEnv) toolStatements(after int) []cratedbsim.Statement {
	var out []cratedbsim.Statement
	for _, s := range x.sim.Statements() {
		if s.Seq > after && s.Node != "e2e" {
			out = append(out, s)
		}
	}
	return out
}

func (x *crateEnv) args(cmd string, more ...string) []string {
	return append([]string{cmd, x.name, "-n", x.ns}, more...)
}

func dumpStatements(st []cratedbsim.Statement) string {
	var b strings.Builder
	for _, s := range st {
		fmt.Fprintf(&b, "  #%d %s %s@%s %s", s.Seq, s.Protocol, s.User, s.Node, s.Statement)
		if s.Error != "" {
			fmt.Fprintf(&b, " -> ERROR %s", s.Error)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func isMutatingStatement(stmt string) bool {
	for _, p := range []string{"CREATE ", "ALTER ", "GRANT ", "SET ", "RESET ", "UPDATE ", "DROP ", "DELETE ", "INSERT "} {
		if strings.HasPrefix(strings.ToUpper(stmt), p) {
			return true
		}
	}
	return false
}

func createSecret(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: data}
	if _, err := bed.Client.CoreV1().Secrets(ns).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create secret %s: %v", name, err)
	}
}

// canLogIn connects as user to a simulated node's PostgreSQL listener; on real nodes through a
// port-forward to a pod's 5432, as clients of a real cluster do; over TLS (verified with the
// test bed CA) when the cluster uses TLS.
func (x *crateEnv) canLogIn(user, password string) error {
	ctx, cancel := context.WithTimeout(x.t.Context(), 10*time.Second)
	defer cancel()
	var addr string
	for _, n := range x.sim.Nodes() {
		if n.Up && n.PGAddr != "" {
			addr = n.PGAddr
			if x.real != nil {
				fw, err := kube.PortForward(ctx, bed.RESTConfig, x.ns, n.Pod, cratedbsim.PodPGPort)
				if err != nil {
					return fmt.Errorf("port-forward to %s: %w", n.Pod, err)
				}
				defer fw.Close()
				addr = fw.LocalAddr()
			}
			break
		}
	}
	sslmode := "disable"
	if x.tls {
		sslmode = "require"
	}
	host, port, _ := strings.Cut(addr, ":")
	// The host in the connection string: pgx decides on TLS per host (never for sockets).
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s dbname=doc sslmode=%s", host, port, sslmode))
	if err != nil {
		return err
	}
	if x.tls && cfg.TLSConfig == nil {
		return errors.New("no TLS configuration for a TLS cluster")
	}
	if cfg.TLSConfig != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(bed.CAPEM())
		cfg.TLSConfig.RootCAs, cfg.TLSConfig.ServerName, cfg.TLSConfig.InsecureSkipVerify = pool, "localhost", false
	}
	cfg.User, cfg.Password = user, password
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

func (x *crateEnv) privileges(user string) int64 {
	x.t.Helper()
	res := x.sql(`SELECT count(DISTINCT type) FROM sys.privileges WHERE grantee = $1 AND class = 'CLUSTER' AND state = 'GRANT'`, user)
	if len(res.Rows) != 1 {
		return 0
	}
	n, _ := res.Rows[0][0].(int64)
	return n
}

// TestCrateDBBootstrap is bootstrap case 1 on kwok: the password statements reach crash on its
// stdin through the test bed's exec, which ends stdin as a kubelet does
// (test/testbed/nodeserver.go), so crash runs them. The system user exists already with
// another password (the Secret changed since): CREATE USER fails with the version's
// already-exists error and bootstrap sets the Secret's password with ALTER USER, which the
// simulator's statement log shows; no password is in an exec argument the API server recorded.
// Before the node server it hung until its deadline ("context deadline exceeded; output:
// CONNECT OK"). TestRealNodeCrateDBBootstrap runs the same case over a real kubelet.
func TestCrateDBBootstrap(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		layout        bedwire.Layout
		license       bool
	}{
		{"v5-2-operator-names", "5.2.11", bedwire.LayoutOperator, true},
		{"v5-10-pod-names", "5.10.3", bedwire.LayoutPodName, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newCrateEnvWith(t, crateSetup{layout: tc.layout, version: tc.version})
			testCrateDBBootstrap(t, x, tc.license, "old-"+randomHex(t, 12))
		})
	}
}

// testCrateDBBootstrap is case 1 on x: license first (before 5.3; from 5.3 --license-secret
// is ignored and said so), then the system user, then the users with all privileges; a second
// run changes nothing; no secret is ever printed, logged by the simulator or recorded by the
// API server. With oldSysPW set the system user exists already with that other password:
// CREATE USER fails with the version's already-exists error (UserAlreadyExistsException
// before 5.6, RoleAlreadyExistsException from 5.6 on) and bootstrap sets the Secret's
// password with ALTER USER; only that one logs in afterwards.
func testCrateDBBootstrap(t *testing.T, x *crateEnv, withLicense bool, oldSysPW string) {
	license := "LIC-" + randomHex(t, 16)
	appPW, reportPW := "app-"+randomHex(t, 10), "rep-"+randomHex(t, 10)
	createSecret(t, x.ns, "crate-license", map[string]string{"license": license})
	createSecret(t, x.ns, "app-secret", map[string]string{"password": appPW})
	createSecret(t, x.ns, "report-secret", map[string]string{"pw": reportPW})
	secrets := []string{license, appPW, reportPW, x.sysPW}
	if oldSysPW != "" {
		x.sql(`CREATE USER "system" WITH (password = $1)`, oldSysPW)
		secrets = append(secrets, oldSysPW)
	}
	args := x.args("bootstrap", "--license-secret", "crate-license", "--user", "app=app-secret", "--user", "report=report-secret/pw", "--yes", "--no-tui")
	version := x.fixture().Version
	// What bootstrap says when it skips the license at run time (the plan cannot know the
	// version before crash read it), and what its plan says once the version is known.
	ignoredAtRun := "--license-secret ignored: CrateDB " + version + " has no licenses (SET LICENSE exists only before 5.3)"
	ignoredInPlan := "--license-secret is ignored: CrateDB " + version + " has no licenses (SET LICENSE exists only before 5.3)"
	licenseStep := "set the license first (more nodes than a free license allows) (only if the version, read first with crash, is below 5.3; from 5.3 on --license-secret is ignored)"

	seq0 := x.lastSeq()
	first := runCLI(t, x.env, args...)
	if first.Code != 0 {
		t.Fatalf("first bootstrap: want exit 0: %s", first)
	}
	run1 := x.toolStatements(seq0)
	var mutating []string
	for _, s := range run1 {
		if isMutatingStatement(s.Statement) {
			mutating = append(mutating, fmt.Sprintf("%s %s: %s", s.Protocol, s.User, s.Statement))
		}
	}
	var want []string
	// The first run's plan has the license step, conditional on the version crash reads.
	if !strings.Contains(first.Stdout, licenseStep) {
		t.Errorf("first bootstrap's plan lacks the conditional license step %q: %s", licenseStep, first)
	}
	if withLicense {
		want = append(want, `http crate: SET LICENSE '***'`)
		if out := first.Stdout + first.Stderr; strings.Contains(out, ignoredAtRun) || strings.Contains(out, "license-secret is ignored:") {
			t.Errorf("bootstrap on CrateDB %s says the license is ignored: %s", version, first)
		}
	} else if !regexp.MustCompile(`waiting( \S+)?: ` + regexp.QuoteMeta(ignoredAtRun)).MatchString(first.Stdout) {
		t.Errorf("bootstrap on CrateDB %s does not say at run time %q: %s", version, ignoredAtRun, first)
	}
	want = append(want, `http crate: CREATE USER "system" WITH (password = '***')`)
	if oldSysPW != "" {
		want = append(want, `http crate: ALTER USER "system" SET (password = '***')`)
		exists := "RoleAlreadyExistsException[Role 'system' already exists]"
		if strings.HasPrefix(version, "5.2.") {
			exists = "UserAlreadyExistsException[User 'system' already exists]"
		}
		var got []string
		for _, s := range run1 {
			if strings.HasPrefix(s.Statement, `CREATE USER "system"`) {
				got = append(got, s.Error)
			}
		}
		if !slices.Equal(got, []string{exists}) {
			t.Errorf("CREATE USER \"system\" on CrateDB %s answered %q, want once %q:\n%s", version, got, exists, dumpStatements(run1))
		}
		if err := x.canLogIn("system", oldSysPW); err == nil {
			t.Errorf("user system still logs in with its old password")
		}
	}
	want = append(want,
		`http crate: GRANT ALL PRIVILEGES TO "system"`,
		`pg system: CREATE USER "app" WITH (password = $1)`,
		`pg system: GRANT ALL PRIVILEGES TO "app"`,
		`pg system: CREATE USER "report" WITH (password = $1)`,
		`pg system: GRANT ALL PRIVILEGES TO "report"`,
	)
	if !slices.Equal(mutating, want) {
		t.Errorf("first run's writing statements:\n  %s\nwant:\n  %s\nfull log:\n%s", strings.Join(mutating, "\n  "), strings.Join(want, "\n  "), dumpStatements(run1))
	}
	// crash ran them: over HTTP, on a node of the cluster, as the pod's localhost saw it.
	nodes := map[string]bool{}
	for _, n := range x.sim.Nodes() {
		nodes[n.Name] = true
	}
	for _, s := range run1 {
		if s.Protocol == "http" && !nodes[s.Node] {
			t.Errorf("crash statement #%d ran on %q, not a node of the cluster", s.Seq, s.Node)
		}
		if !withLicense && strings.Contains(strings.ToUpper(s.Statement), "LICENSE") {
			t.Errorf("bootstrap on CrateDB %s sent %s", x.fixture().Version, s.Statement)
		}
	}
	for user, pw := range map[string]string{"system": x.sysPW, "app": appPW, "report": reportPW} {
		if err := x.canLogIn(user, pw); err != nil {
			t.Errorf("user %s cannot log in with its Secret's password: %v", user, err)
		}
		if n := x.privileges(user); n != 4 {
			t.Errorf("user %s holds %d cluster privilege types, want 4 (ALL)", user, n)
		}
	}

	seq1 := x.lastSeq()
	second := runCLI(t, x.env, args...)
	if second.Code != 0 {
		t.Fatalf("second bootstrap: want exit 0: %s", second)
	}
	run2 := x.toolStatements(seq1)
	var rewrites []string
	for _, s := range run2 {
		up := strings.ToUpper(s.Statement)
		if strings.HasPrefix(up, "CREATE ") || strings.HasPrefix(up, "ALTER ") || strings.HasPrefix(up, "GRANT ") {
			rewrites = append(rewrites, s.Statement)
		}
		if strings.HasPrefix(up, "SET LICENSE") {
			t.Logf("second run set the license again (same key, no change): #%d %s", s.Seq, s.Statement)
		}
		if !withLicense && strings.Contains(up, "LICENSE") {
			t.Errorf("second bootstrap on CrateDB %s sent %s", version, s.Statement)
		}
	}
	// The system user works now, so the plan knows the version: from 5.3 on it says the
	// license is ignored and has no license step to say it again.
	if !withLicense && (!strings.Contains(second.Stdout, ignoredInPlan) || strings.Contains(second.Stdout, ignoredAtRun) || strings.Contains(second.Stdout, licenseStep)) {
		t.Errorf("second bootstrap on CrateDB %s: want the plan note %q and no license step: %s", version, ignoredInPlan, second)
	}
	if len(rewrites) > 0 {
		t.Errorf("second run wrote users again:\n  %s\nfull log:\n%s", strings.Join(rewrites, "\n  "), dumpStatements(run2))
	}
	for _, res := range []cliResult{first, second} {
		for _, sec := range secrets {
			if strings.Contains(res.Stdout, sec) || strings.Contains(res.Stderr, sec) {
				t.Errorf("a secret value appears in the output of %v:\n%s", res.Args, res)
			}
		}
	}
	for _, s := range x.sim.Statements() {
		for _, sec := range secrets {
			if strings.Contains(s.Statement, sec) || strings.Contains(s.Error, sec) {
				t.Errorf("a secret value reached the statement log: #%d", s.Seq)
			}
		}
	}
	t.Logf("bootstrap: first run %s (%d statements), second run %s (%d statements)",
		first.Elapsed.Round(time.Millisecond), len(run1), second.Elapsed.Round(time.Millisecond), len(run2))
	// Secrets reach crash and psql on stdin or in the PostgreSQL protocol, never as exec
	// arguments the API server would record.
	assertSecretsNotAudited(t, secrets...)
}

// recordStatefulSetWatch records every StatefulSet event of ns from now on.
func recordStatefulSetWatch(t *testing.T, ns string) *watchRecorder {
	c := bed.Client.AppsV1().StatefulSets(ns)
	return startRecorder(t, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, o)
		},
	})
}

// replicaChanges reduces StatefulSet events to spec.replicas changes, in the API server's order.
func replicaChanges(r *watchRecorder) []string {
	cur := map[string]int32{}
	for _, o := range r.initial {
		if s, ok := o.(*appsv1.StatefulSet); ok {
			cur[s.Name] = *s.Spec.Replicas
		}
	}
	var out []string
	for _, e := range r.snapshot() {
		s, ok := e.Obj.(*appsv1.StatefulSet)
		if !ok || e.Type != watch.Modified || s.Spec.Replicas == nil {
			continue
		}
		if n := *s.Spec.Replicas; n != cur[s.Name] {
			out = append(out, fmt.Sprintf("%s %d->%d", s.Name, cur[s.Name], n))
			cur[s.Name] = n
		}
	}
	return out
}

var tickCounts = regexp.MustCompile(`cratedbsim: tick: .*`)

// shardsOnWhenDown returns, for node, the shard count of the last tick summary logged before
// the simulator saw the node go down (its pod deleted), and whether both were found. The
// simulator logs both under its model lock, so the order is exact.
func shardsOnWhenDown(lines []string, node string) (shards int, downLine int, ok bool) {
	downLine = -1
	for i, l := range lines {
		if strings.Contains(l, "cratedbsim: node "+node+" (pod ") && strings.HasSuffix(l, ") is down") {
			downLine = i
			break
		}
	}
	if downLine < 0 {
		return 0, -1, false
	}
	for i := downLine - 1; i >= 0; i-- {
		if !tickCounts.MatchString(lines[i]) {
			continue
		}
		for _, f := range strings.Fields(lines[i]) {
			if name, n, found := strings.Cut(f, ":"); found && name == node {
				c, _ := strconv.Atoi(n)
				return c, downLine, true
			}
		}
	}
	return 0, downLine, false
}

// shardHistory reads node's shard counts from the simulator's tick summaries in lines: the
// most it held and the changes of the count.
func shardHistory(lines []string, node string) (most int, history []string) {
	for _, l := range lines {
		if !tickCounts.MatchString(l) {
			continue
		}
		for _, f := range strings.Fields(l) {
			if name, v, found := strings.Cut(f, ":"); found && name == node {
				c, _ := strconv.Atoi(v)
				most = max(most, c)
				if len(history) == 0 || history[len(history)-1] != v {
					history = append(history, v)
				}
			}
		}
	}
	return most, history
}

func (x *crateEnv) exclusions() string {
	x.t.Helper()
	res := x.sql(`SELECT settings['cluster']['routing']['allocation']['exclude']['_name'] FROM sys.cluster`)
	if len(res.Rows) != 1 || res.Rows[0][0] == nil {
		return ""
	}
	return fmt.Sprint(res.Rows[0][0])
}

// statusHealth runs `status -o json` and returns health.status.
func (x *crateEnv) statusHealth() (string, cliResult) {
	x.t.Helper()
	res := runCLI(x.t, x.env, x.args("status", "-o", "json")...)
	if res.Code != 0 {
		x.t.Fatalf("status: want exit 0: %s", res)
	}
	var st struct {
		Health *struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"health"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil || st.Health == nil {
		x.t.Fatalf("status -o json: %v: %s", err, res)
	}
	return st.Health.Status, res
}

// TestCrateDBScale is case 2: masters up, hot up and cold down in one command.
// It runs in both naming layouts: the tool must find the nodes of the pods it removes.
func TestCrateDBScale(t *testing.T) {
	for _, l := range crateLayouts {
		t.Run(l.name, func(t *testing.T) { testCrateDBScale(t, l.layout) })
	}
}

func testCrateDBScale(t *testing.T, layout bedwire.Layout) {
	x := newCrateEnvLayout(t, true, layout)
	cold1 := x.node("cold", 1)
	// An exclusion from before this run must survive it.
	x.sql(`SET GLOBAL "cluster.routing.allocation.exclude._name" = 'data-retired-0'`)
	x.waitGreen()
	stsRec := recordStatefulSetWatch(t, x.ns)
	podRec := recordPodWatch(t, x.ns)
	seq0 := x.lastSeq()

	res := runCLI(t, x.env, x.args("scale", "--data", "hot=6", "--data", "cold=1", "--master", "5", "--yes", "-o", "json")...)
	if res.Code != 0 {
		t.Fatalf("scale: want exit 0: %s", res)
	}
	evs := parseNDJSON(t, res)
	if out := lastOutcome(evs); out != "succeeded" {
		t.Errorf("outcome %q, want succeeded", out)
	}
	t.Logf("scale steps done: %v", stepsOf(evs, "step-done"))

	// Replica changes: masters first, then the growing group, then the shrinking one.
	want := []string{
		"crate-master-" + x.name + " 3->5",
		"crate-data-hot-" + x.name + " 3->6",
		"crate-data-cold-" + x.name + " 2->1",
	}
	if got := replicaChanges(stsRec); !slices.Equal(got, want) {
		t.Errorf("StatefulSet replica changes %v, want %v", got, want)
	}
	// The expected-nodes argument follows the new data node count.
	for _, g := range crateE2EGroups {
		s, err := bed.Client.AppsV1().StatefulSets(x.ns).Get(t.Context(), g.sts(x.name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := s.Spec.Template.Spec.Containers[0]
		args := append(slices.Clone(c.Command), c.Args...)
		for _, want := range []string{"-Cgateway.expected_data_nodes=7", "-Cgateway.recover_after_data_nodes=4"} {
			if !slices.Contains(args, want) {
				t.Errorf("statefulset %s args %v lack %s", s.Name, args, want)
			}
		}
	}

	// No shard was on the removed pod's node when its pod went.
	lines := x.simLog.snapshot()
	if n, at, ok := shardsOnWhenDown(lines, cold1); !ok {
		t.Errorf("no tick summary with %s before it went down (down at log line %d)", cold1, at)
	} else if n != 0 {
		t.Errorf("%s held %d shards when its pod went:\n  %s", cold1, n, strings.Join(lines[max(0, at-5):at+1], "\n  "))
	} else {
		// Not vacuous: the node held shards before the drain.
		most, history := shardHistory(lines[:at], cold1)
		if most == 0 {
			t.Errorf("%s never held a shard: the check proves nothing", cold1)
		}
		t.Logf("%s shard counts in the simulator's ticks until its pod went: %s (0 when it went)", cold1, strings.Join(history, " -> "))
	}
	// Statement order: exclusion set, shard count polled, then the pod removed.
	st := x.toolStatements(seq0)
	setExcl, lastShards, ack, restore := -1, -1, -1, -1
	for _, s := range st {
		switch {
		case strings.HasPrefix(s.Statement, `SET GLOBAL "cluster.routing.allocation.exclude._name" = 'data-retired-0,`+cold1+`'`):
			setExcl = s.Seq
		case strings.HasPrefix(s.Statement, `SELECT node['name'], count(*), sum(size) FROM sys.shards`):
			lastShards = s.Seq
		case strings.HasPrefix(s.Statement, `SET GLOBAL "cluster.routing.allocation.exclude._name" = 'data-retired-0'`):
			restore = s.Seq
		case strings.HasPrefix(s.Statement, `UPDATE sys.node_checks SET acknowledged = TRUE WHERE id = 1`):
			ack = s.Seq
		}
	}
	downSeq := -1
	for _, e := range x.sim.NodeEvents() {
		if e.Node == cold1 && !e.Up && downSeq < 0 {
			downSeq = e.Seq
		}
	}
	if setExcl < 0 || lastShards < setExcl || downSeq < lastShards || restore < downSeq || ack < restore {
		t.Errorf("want SET exclusion (#%d) < shard polls (last #%d) < %s down (#%d) < exclusion restored (#%d) < ack (#%d):\n%s",
			setExcl, lastShards, cold1, downSeq, restore, ack, dumpStatements(st))
	}
	if got := x.exclusions(); got != "data-retired-0" {
		t.Errorf("allocation exclusions after the scale = %q, want the prior %q", got, "data-retired-0")
	}
	// The expected-nodes (1) and recover-after (2) checks are acknowledged on every node.
	checks := x.sql(`SELECT id, acknowledged FROM sys.node_checks`)
	for _, r := range checks.Rows {
		if id := fmt.Sprint(r[0]); (id == "1" || id == "2") && r[1] != true {
			t.Errorf("node check %s not acknowledged: %v", id, checks.Rows)
			break
		}
	}

	// The sim's placement right after: every node up, none on a removed node, green.
	for _, n := range x.sim.Nodes() {
		if n.Name == cold1 && (n.Up || n.Shards > 0) {
			t.Errorf("%s after the scale: %+v", cold1, n)
		}
	}
	pods := podTransitions(podRec.snapshot())
	for _, p := range pods {
		if p.Terminating && p.Name != "crate-data-cold-"+x.name+"-1" {
			t.Errorf("pod deleted that the scale should keep: %s", p)
		}
	}
	health, sres := x.statusHealth()
	if health != "green" {
		t.Errorf("status health %q after the scale, want green: %s", health, sres)
	}
	var summary []string
	for _, n := range x.sim.Nodes() {
		if n.Up {
			summary = append(summary, fmt.Sprintf("%s:%d", n.Name, n.Shards))
		}
	}
	t.Logf("scale took %s; shards per node after: %s", res.Elapsed.Round(time.Millisecond), strings.Join(summary, " "))
}

// TestCrateDBScaleRefusals is case 3: each refusal exits non-zero with one clear line and
// changes nothing.
func TestCrateDBScaleRefusals(t *testing.T) {
	x := newCrateEnv(t, true)
	tests := []struct {
		name   string
		setup  func(x *crateEnv)
		undo   func(x *crateEnv)
		args   []string
		code   int
		stderr string
	}{{
		name: "replicas-do-not-fit",
		// 4 replicas fit on the 5 data nodes now, not on the 4 left after cold=1.
		setup: func(x *crateEnv) {
			x.sql(`CREATE TABLE doc.wide (id INT) CLUSTERED INTO 2 SHARDS WITH (number_of_replicas = '4')`)
			x.waitGreen()
		},
		undo:   func(x *crateEnv) { x.sql(`DROP TABLE doc.wide`); x.waitGreen() },
		args:   []string{"--data", "cold=1"},
		code:   5,
		stderr: "number_of_replicas = '4'",
	}, {
		name: "partition-replicas",
		// ALTER TABLE ONLY lowers the template: information_schema.tables shows 1 replica, the
		// existing partition keeps 4, which needs all 5 data nodes.
		setup: func(x *crateEnv) {
			x.sql(`CREATE TABLE doc.parts (d TEXT, v INT) CLUSTERED INTO 2 SHARDS PARTITIONED BY (d) WITH (number_of_replicas = '4')`)
			x.sql(`INSERT INTO doc.parts (d) VALUES ('2026-11')`)
			x.sql(`ALTER TABLE ONLY doc.parts SET (number_of_replicas = '1')`)
			x.waitGreen()
		},
		undo:   func(x *crateEnv) { x.sql(`DROP TABLE doc.parts`); x.waitGreen() },
		args:   []string{"--data", "cold=1"},
		code:   5,
		stderr: "partition ",
	}, {
		name: "allocation-filter",
		// The table may only live on the cold node the scale removes.
		setup: func(x *crateEnv) {
			x.sql(`CREATE TABLE doc.pinned (id INT) CLUSTERED INTO 2 SHARDS WITH (number_of_replicas = '0')`)
			x.sql(`ALTER TABLE doc.pinned SET ("routing.allocation.require._name" = '` + x.node("cold", 1) + `')`)
			x.waitGreen()
		},
		undo:   func(x *crateEnv) { x.sql(`DROP TABLE doc.pinned`); x.waitGreen() },
		args:   []string{"--data", "cold=1"},
		code:   5,
		stderr: "routing.allocation.require._name = '",
	}, {
		name: "allocation-primaries",
		// crate-operator's pods leave a transient 'primaries' when their postStart reset fails:
		// replicas would never leave the removed node.
		setup:  func(x *crateEnv) { x.sql(`SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = 'primaries'`) },
		undo:   func(x *crateEnv) { x.sql(`RESET GLOBAL "cluster.routing.allocation.enable"`); x.waitGreen() },
		args:   []string{"--data", "cold=1", "--timeout", "2m"},
		code:   5,
		stderr: "cluster.routing.allocation.enable is 'primaries'",
	}, {
		name: "master-2", args: []string{"--master", "2"}, code: 2, stderr: "odd number of at least 3",
	}, {
		name: "master-4", args: []string{"--master", "4"}, code: 2, stderr: "odd number of at least 3",
	}, {
		name: "unknown-group", args: []string{"--data", "warm=2"}, code: 2, stderr: `unknown data node group "warm"`,
	}, {
		name: "not-green",
		// Replicas of a new table cannot be allocated while allocation is held to primaries.
		setup: func(x *crateEnv) {
			x.sql(`SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = 'primaries'`)
			x.sql(`CREATE TABLE doc.fresh (id INT) CLUSTERED INTO 2 SHARDS WITH (number_of_replicas = '1')`)
			if sev, _ := x.sim.Health(); sev != 2 {
				x.t.Fatalf("setup: severity %d, want 2 (yellow)", sev)
			}
		},
		undo: func(x *crateEnv) {
			x.sql(`RESET GLOBAL "cluster.routing.allocation.enable"`)
			x.sql(`DROP TABLE doc.fresh`)
			x.waitGreen()
		},
		args:   []string{"--data", "hot=2"},
		code:   5,
		stderr: "it must be green",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := &crateEnv{t: t, ns: x.ns, name: x.name, layout: x.layout, groups: x.groups, tls: x.tls, sim: x.sim, sysPW: x.sysPW, simLog: x.simLog, env: x.env}
			if tc.setup != nil {
				tc.setup(x)
			}
			if tc.undo != nil {
				defer tc.undo(x)
			}
			before := snapshotNamespace(t, x.ns)
			seq0 := x.lastSeq()
			res := runCLI(t, x.env, x.args("scale", append(tc.args, "--yes")...)...)
			if res.Code != tc.code {
				t.Errorf("want exit %d: %s", tc.code, res)
			}
			if !strings.Contains(res.Stderr, tc.stderr) {
				t.Errorf("stderr lacks %q: %s", tc.stderr, res)
			}
			errLines := 0
			for l := range strings.Lines(res.Stderr) {
				if strings.HasPrefix(l, "error: ") {
					errLines++
				}
			}
			if errLines != 1 {
				t.Errorf("want exactly one \"error: \" line on stderr, got %d: %q", errLines, res.Stderr)
			}
			for _, s := range x.toolStatements(seq0) {
				if isMutatingStatement(s.Statement) {
					t.Errorf("refused scale ran a writing statement: #%d %s", s.Seq, s.Statement)
				}
			}
			diffs := diffRVSnapshots(t, before, snapshotNamespace(t, x.ns))
			var other []string
			for _, d := range diffs {
				if strings.Contains(d, "lease/dbops-"+x.name) {
					// The lock Lease records the refused run in its journal (see report).
					t.Logf("lock lease written by the refused run: %s", d)
					continue
				}
				other = append(other, d)
			}
			if len(other) > 0 {
				t.Errorf("a refused scale changed the namespace:\n  %s", strings.Join(other, "\n  "))
			}
			if len(other) < len(diffs) {
				// What the lease may hold after a refusal: no holder, a failed journal.
				l, j := getLockLease(t, x.ns, x.name)
				if h := holderString(l.Spec.HolderIdentity); h != "" {
					t.Errorf("the lock is still held by %q after the refusal", h)
				}
				t.Logf("journal after the refusal: operation %q state %q done %v", j.Operation, j.State, j.Done)
			}
			t.Logf("stderr: %s", strings.TrimSpace(res.Stderr))
		})
	}
}

// TestCrateDBScaleRefusedByAwareness: every node starts with allocation awareness on its group
// attribute (node_name, as crate-operator sets it), so each shard of a table with one replica
// keeps one copy among the hot and one among the cold nodes; with no cold node left those
// copies have nowhere to go. The scale is refused before anything is written, and the
// simulator shows why: with the cold nodes excluded their copies stay.
func TestCrateDBScaleRefusedByAwareness(t *testing.T) {
	x := newCrateEnvWith(t, crateSetup{systemUser: true, layout: bedwire.LayoutOperator, awareness: "node_name"})
	before := snapshotNamespace(t, x.ns)
	seq0 := x.lastSeq()
	res := runCLI(t, x.env, x.args("scale", "--data", "cold=0", "--yes")...)
	if res.Code != 5 || !strings.Contains(res.Stderr, "cluster.routing.allocation.awareness.attributes = 'node_name'") {
		t.Fatalf("want exit 5 naming the awareness setting: %s", res)
	}
	for _, s := range x.toolStatements(seq0) {
		if isMutatingStatement(s.Statement) {
			t.Errorf("refused scale ran a writing statement: #%d %s", s.Seq, s.Statement)
		}
	}
	for _, d := range diffRVSnapshots(t, before, snapshotNamespace(t, x.ns)) {
		if !strings.Contains(d, "lease/dbops-") {
			t.Errorf("the refused scale changed the namespace: %s", d)
		}
	}
	// The stall the refusal avoids: excluded, the cold nodes keep their copies.
	cold := x.node("cold", 0) + "," + x.node("cold", 1)
	x.sql(`SET GLOBAL "cluster.routing.allocation.exclude._name" = '` + cold + `'`)
	defer func() { x.sql(`RESET GLOBAL "cluster.routing.allocation.exclude._name"`); x.waitGreen() }()
	x.sim.Tick()
	x.sim.Tick()
	x.sim.Tick()
	left := 0
	for _, c := range x.sim.Shards() {
		if c.Table == "doc.events" && (c.Node == x.node("cold", 0) || c.Node == x.node("cold", 1)) {
			left++
		}
	}
	if left == 0 {
		t.Errorf("the cold nodes' copies of doc.events all moved under awareness; want them kept: %+v", x.sim.Shards())
	}
}

// podDownUp returns the sequence numbers of the first down event of node and of the first
// up event after it, -1 when missing; and how many times node went down.
func podDownUp(evs []cratedbsim.NodeEvent, node string, after int) (down, up, downs int) {
	down, up = -1, -1
	for _, e := range evs {
		if e.Node != node || e.Seq <= after {
			continue
		}
		if !e.Up {
			downs++
			if down < 0 {
				down = e.Seq
			}
		} else if down >= 0 && up < 0 {
			up = e.Seq
		}
	}
	return down, up, downs
}

// TestCrateDBRollingRestart is cases 4 and 5: a rolling restart stopped after the second pod
// (SIGINT, or SIGKILL as a crash) and run again restarts every pod exactly once, in order,
// with the allocation and health gates around each; it counts API requests per restarted pod.
func TestCrateDBRollingRestart(t *testing.T) {
	t.Run("sigint", func(t *testing.T) { testCrateDBRollingRestart(t, syscall.SIGINT, bedwire.LayoutPodName) })
	t.Run("sigkill-operator-names", func(t *testing.T) { testCrateDBRollingRestart(t, syscall.SIGKILL, bedwire.LayoutOperator) })
}

func testCrateDBRollingRestart(t *testing.T, sig syscall.Signal, layout bedwire.Layout) {
	testCrateDBRollingRestartOn(t, newCrateEnvLayout(t, true, layout), sig)
}

// testCrateDBRollingRestartOn runs the interrupted and resumed rolling restart on x (a
// cluster with the system user and tables).
func testCrateDBRollingRestartOn(t *testing.T, x *crateEnv, sig syscall.Signal) {
	var order []string // pod names in the procedure's order
	var nodes []string // their CrateDB node names
	for _, g := range x.groups {
		for i := range int(g.replicas) {
			order = append(order, fmt.Sprintf("%s-%d", g.sts(x.name), i))
			nodes = append(nodes, x.node(g.name, i))
		}
	}
	list, err := bed.Client.CoreV1().Pods(x.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]types.UID{}
	for _, p := range list.Items {
		old[p.Name] = p.UID
	}
	podRec := recordPodWatch(t, x.ns)
	kubeconfig, counter := countingKubeconfig(t)
	env := slices.Clone(x.env)
	for i, kv := range env {
		if strings.HasPrefix(kv, "KUBECONFIG=") {
			env[i] = "KUBECONFIG=" + kubeconfig
		}
	}
	seq0 := x.lastSeq()
	args := x.args("restart", "--rolling", "--yes", "--health-checks", "2", "--health-interval", "200ms", "-o", "json")

	// Run 1: interrupted after the second pod is done.
	run1 := startCLI(t, env, args...)
	doneSteps := 0
	run1.waitEvent("the 2nd step-done", func(e ndEvent) bool {
		if e.Type == "step-done" {
			doneSteps++
		}
		return doneSteps == 2
	})
	if err := run1.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	res1 := run1.wait()
	switch {
	case sig == syscall.SIGINT && res1.Code != 130:
		t.Errorf("interrupted run: want exit 130: %s", res1)
	case sig == syscall.SIGKILL && res1.Code != -1:
		t.Errorf("killed run: want no exit code: %s", res1)
	}
	ev1 := parseNDJSON(t, res1)
	done1 := stepsOf(ev1, "step-done")
	counter.mu.Lock()
	req1 := counter.total
	counter.mu.Unlock()
	t.Logf("run 1 (%v after 2 steps): outcome %s, steps done %v, %d API requests", sig, lastOutcome(ev1), done1, req1)
	if sig == syscall.SIGKILL {
		// The killed process still holds the lock: give it up as its message says.
		if res := runCLI(t, env, "lock", "release", x.name, "-n", x.ns); res.Code != 0 {
			t.Fatalf("lock release after the crash: %s", res)
		}
	}

	// Run 2: resumes.
	res2 := runCLI(t, env, args...)
	if res2.Code != 0 {
		t.Fatalf("resumed run: want exit 0: %s", res2)
	}
	ev2 := parseNDJSON(t, res2)
	var planDone []string
	for _, e := range ev2 {
		if e.Type == "plan" && e.Plan != nil {
			for _, s := range e.Plan.Steps {
				if s.Done {
					planDone = append(planDone, s.ID)
				}
			}
		}
	}
	skipped := stepsOf(ev2, "step-skipped")
	t.Logf("run 2: steps marked done in the plan %v, skipped %v", planDone, skipped)
	for _, e := range ev2 {
		if e.Type == "step-skipped" {
			t.Logf("  skipped %s: %s", e.stepID(), e.Reason)
		}
	}
	for _, id := range done1 {
		switch {
		case slices.Contains(stepsOf(ev2, "step-started"), id) && !slices.Contains(skipped, id):
			t.Errorf("step %s, done in run 1, ran again in run 2", id)
		case !slices.Contains(planDone, id) && !slices.Contains(skipped, id):
			t.Errorf("step %s, done in run 1, is neither done in run 2's plan nor skipped", id)
		case !slices.Contains(planDone, id):
			// The executor emits step-done before it saves the journal: a crash in
			// between leaves the step to its precheck (new UID, Ready), see report.
			t.Logf("step %s: step-done was streamed in run 1 but not journaled; run 2 skipped it by its precheck", id)
		}
		if sig == syscall.SIGINT && !slices.Contains(planDone, id) {
			t.Errorf("after SIGINT, step %s should be journaled as done", id)
		}
	}

	// Every pod restarted exactly once, in order, each after the previous one was back.
	changes := waitReplacementsReady(t, podRec, order, old)
	checkRestartOrder(t, changes, order, old)

	// The allocation and health gates, from the statement log and node events (one sequence).
	st := x.toolStatements(seq0)
	nodeEvs := x.sim.NodeEvents()
	prevUp := seq0
	for i, node := range nodes {
		down, up, downs := podDownUp(nodeEvs, node, seq0)
		if downs != 1 || down < 0 || up < 0 {
			t.Errorf("node %s went down %d times (first #%d, back #%d), want exactly once", node, downs, down, up)
			continue
		}
		if down < prevUp {
			t.Errorf("node %s went down (#%d) before the previous node was back (#%d)", node, down, prevUp)
		}
		// Allocation held to primaries when the pod went, not sent through that pod.
		lastAlloc := ""
		for _, s := range st {
			if s.Seq > down {
				break
			}
			if strings.Contains(s.Statement, `"cluster.routing.allocation.enable"`) {
				lastAlloc = s.Statement
				if s.Seq > prevUp && strings.HasPrefix(s.Statement, "SET GLOBAL TRANSIENT") && s.Node == node {
					t.Errorf("allocation for %s was set through the node being restarted", node)
				}
			}
		}
		if lastAlloc != `SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = 'primaries'` {
			t.Errorf("node %s went down (#%d) with the last allocation statement %q, want SET ... 'primaries'", node, down, lastAlloc)
		}
		// After it is back: RESET, then 2 health checks, before the next pod goes.
		next := int(^uint(0) >> 1)
		if i+1 < len(nodes) {
			if d, _, _ := podDownUp(nodeEvs, nodes[i+1], seq0); d >= 0 {
				next = d
			}
		}
		reset, checks := -1, 0
		for _, s := range st {
			if s.Seq <= up || s.Seq >= next {
				continue
			}
			switch {
			case s.Statement == `RESET GLOBAL "cluster.routing.allocation.enable"` && reset < 0:
				reset = s.Seq
			case s.Statement == `SELECT max(severity) FROM sys.health` && reset >= 0:
				checks++
			}
		}
		if reset < 0 || checks < 2 {
			t.Errorf("between node %s back (#%d) and the next deletion (#%d): allocation reset #%d, %d health checks after it (want >= 2)", node, up, next, reset, checks)
		}
		prevUp = up
	}
	if t.Failed() {
		t.Logf("statements and node events:\n%s", dumpStatements(st))
		for _, e := range nodeEvs {
			if e.Seq > seq0 {
				t.Logf("  #%d node %s up=%v", e.Seq, e.Node, e.Up)
			}
		}
	}
	// Allocation is back to its default.
	if res := x.sql(`SELECT settings['cluster']['routing']['allocation']['enable'] FROM sys.cluster`); len(res.Rows) != 1 || res.Rows[0][0] != "all" {
		t.Errorf("allocation.enable after the restart: %v, want all", res.Rows)
	}

	counter.mu.Lock()
	total, deletes := counter.total, counter.counts["DELETE pods"]
	counter.mu.Unlock()
	if deletes != len(order) {
		t.Errorf("the tool sent %d pod DELETEs over both runs, want %d: %s", deletes, len(order), counter)
	}
	t.Logf("API requests for a CrateDB rolling restart of %d pods (2 runs): %d total, %.1f per restarted pod; run 1 %d (%d pods), run 2 %d (%d pods); by kind: %s",
		len(order), total, float64(total)/float64(len(order)), req1, len(done1), total-req1, len(order)-len(done1), counter)
	if n := len(order) - len(done1); n > 0 {
		t.Logf("API requests per restarted pod in the resumed run alone: %.1f", float64(total-req1)/float64(n))
	}
	// The steady-state cost per pod of the resumed run: at most 8 (delete, the gate's and the
	// restart's events, the step's journal write; connections pick pods from the run's
	// informer).
	if perPod, window := counter.perPodBetweenDeletesFrom(req1); perPod > 8 {
		t.Errorf("%.1f API requests per restarted CrateDB pod, want at most 8; between the deletes:\n  %s", perPod, strings.Join(window, "\n  "))
	} else {
		t.Logf("API requests per restarted pod between the resumed run's first and last delete: %.1f", perPod)
	}
	t.Logf("durations: run 1 %s, run 2 %s", res1.Elapsed.Round(time.Millisecond), res2.Elapsed.Round(time.Millisecond))
	// The gate reports the SQL statements each pod's restart took.
	reported := 0
	for _, e := range ev2 {
		if e.Type == "step-progress" && strings.Contains(e.Message, "SQL statements for pod") {
			reported++
			t.Logf("  %s", e.Message)
		}
	}
	if want := len(order) - len(done1); reported < want-1 {
		t.Errorf("%d pods reported their SQL statements in the resumed run, want at least %d", reported, want-1)
	}
	if health, sres := x.statusHealth(); health != "green" {
		t.Errorf("status health %q after the restart, want green: %s", health, sres)
	}
}
