//go:build e2e

package e2e

// End-to-end tests of the CrateDB engine's node identity (docs/procedures.md, CrateDB): every pod is
// mapped to its node from sys.nodes, in both naming layouts, and a pod whose node cannot be
// found stops scale and replace before anything is written.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/bedwire"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// shardState is what must survive every procedure: per table, its started primary and
// replica copies and its shards neither missing nor under-replicated once the cluster
// settled, and the number of shard copies overall.
type shardState struct {
	tables map[string]string // schema.table -> "primaries=P replicas=R missing=M under=U"
	copies int
}

func (x *crateEnv) shardState() shardState {
	x.t.Helper()
	st := shardState{tables: map[string]string{}}
	primaries, replicas := map[string]int{}, map[string]int{}
	for _, c := range x.sim.Shards() {
		st.copies++
		switch {
		case !c.Started: // recovering or relocating: counted once it is a copy
		case c.Primary:
			primaries[c.Table]++
		default:
			replicas[c.Table]++
		}
	}
	for _, r := range x.sql(`SELECT table_schema, table_name, missing_shards, underreplicated_shards FROM sys.health`).Rows {
		table := fmt.Sprintf("%v.%v", r[0], r[1])
		st.tables[table] = fmt.Sprintf("primaries=%d replicas=%d missing=%v under=%v", primaries[table], replicas[table], r[2], r[3])
	}
	return st
}

// sameAs reports whether every table of before is as it was and the copies add up.
func (st shardState) sameAs(before shardState) bool {
	for table, b := range before.tables {
		if st.tables[table] != b {
			return false
		}
	}
	return st.copies == before.copies
}

func (x *crateEnv) wantSameShards(step string, before shardState) {
	x.t.Helper()
	x.waitGreen()
	// A shard being relocated counts on both nodes until the move ends: poll (a database
	// cannot be watched) until the copies settle.
	deadline := time.Now().Add(waitTimeout)
	after := x.shardState()
	for !after.sameAs(before) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		after = x.shardState()
	}
	for table, b := range before.tables {
		if a := after.tables[table]; a != b {
			x.t.Errorf("after %s, table %s: %s, before %s", step, table, a, b)
		}
	}
	if after.copies != before.copies {
		x.t.Errorf("after %s: %d shard copies, before %d", step, after.copies, before.copies)
	}
}

// TestCrateDBKeepsShards scales the hot group 3->2 and 2->3 and restarts it, in both
// naming layouts, with a table of 0 replicas (its only copies must be moved, never lost).
func TestCrateDBKeepsShards(t *testing.T) {
	for _, l := range crateLayouts {
		t.Run(l.name, func(t *testing.T) {
			x := newCrateEnvLayout(t, true, l.layout)
			x.sql(`CREATE TABLE doc.single (id TEXT) CLUSTERED INTO 4 SHARDS WITH (number_of_replicas = '0')`)
			x.waitGreen()
			before := x.shardState()
			if len(before.tables) < 3 || before.copies == 0 {
				t.Fatalf("fixture has no data to lose: %+v", before)
			}
			for _, step := range [][]string{
				{"scale", "--data", "hot=2"},
				{"scale", "--data", "hot=3"},
				{"restart", "--rolling", "--group", "hot", "--health-checks", "1", "--health-interval", "200ms"},
			} {
				res := runCLI(t, x.env, x.args(step[0], append(step[1:], "--yes", "--no-tui")...)...)
				if res.Code != 0 {
					t.Fatalf("%v: want exit 0: %s", step, res)
				}
				x.wantSameShards(strings.Join(step, " "), before)
			}
			// The plan names the real nodes of the pods it removes.
			res := runCLI(t, x.env, x.args("scale", "--data", "hot=2", "--dry-run")...)
			if res.Code != 0 || !strings.Contains(res.Stdout, x.node("hot", 2)) {
				t.Errorf("dry-run plan does not name node %s: %s", x.node("hot", 2), res)
			}
		})
	}
}

// TestCrateDBUnknownNodeRefuses: a Ready pod whose CrateDB node is not in sys.nodes (its node
// fails to start: TLS asked for without a certificate) makes scale and replace refuse with
// exit 2, naming the pod, before the lock is taken or anything else written; in both naming
// layouts.
func TestCrateDBUnknownNodeRefuses(t *testing.T) {
	for _, l := range crateLayouts {
		t.Run(l.name, func(t *testing.T) { testCrateDBUnknownNodeRefuses(t, l.layout) })
	}
}

func testCrateDBUnknownNodeRefuses(t *testing.T, layout bedwire.Layout) {
	x := newCrateEnvLayout(t, true, layout)
	ctx := t.Context()
	sts := "crate-data-hot-" + x.name
	pod := sts + "-2"
	// The operator puts CrateDB's settings in the container's command, the pod-names
	// layout in its args.
	field := "args"
	if layout == bedwire.LayoutOperator {
		field = "command"
	}
	patch, err := json.Marshal([]map[string]any{{"op": "add", "path": "/spec/template/spec/containers/0/" + field + "/-", "value": "-Cssl.psql.enabled=true"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bed.Client.AppsV1().StatefulSets(x.ns).Patch(ctx, sts, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	old, err := bed.Client.CoreV1().Pods(x.ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bed.Client.CoreV1().Pods(x.ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods(t, x.ns, labels.SelectorFromSet(bedwire.Labels(x.name, "hot")), 1, func(p *corev1.Pod) bool {
		return p.Name == pod && p.UID != old.UID && testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
	deadline := time.Now().Add(waitTimeout)
	for slices.ContainsFunc(x.sim.Nodes(), func(n cratedbsim.NodeInfo) bool { return n.Name == x.node("hot", 2) && n.Up }) {
		if time.Now().After(deadline) {
			t.Fatalf("node %s still up after its pod came back unable to start it", x.node("hot", 2))
		}
		time.Sleep(50 * time.Millisecond)
	}
	stsBefore, err := bed.Client.AppsV1().StatefulSets(x.ns).Get(ctx, sts, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seq0 := x.lastSeq()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"scale", "--data", "hot=2", "--yes"}, "pod " + pod + " has no CrateDB node in sys.nodes"},
		{[]string{"replace", pod, "--yes"}, "pod " + pod + " is Ready but has no CrateDB node in sys.nodes"},
	} {
		res := runCLI(t, x.env, x.args(c.args[0], c.args[1:]...)...)
		if res.Code != 2 || !strings.Contains(res.Stderr, c.want) || strings.Count(strings.TrimSpace(res.Stderr), "\n") > 0 {
			t.Errorf("%v: want exit 2 and one line with %q: %s", c.args, c.want, res)
		}
	}
	// Nothing written: no lock (a Lease), no StatefulSet change, no pod deleted, no statement
	// that changes the database.
	leases, err := bed.Client.CoordinationV1().Leases(x.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) > 0 {
		t.Errorf("a refused command took the lock: %v", leases.Items[0].Name)
	}
	stsAfter, err := bed.Client.AppsV1().StatefulSets(x.ns).Get(ctx, sts, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// (Its status follows the pods; the spec, counted by the generation, must not change.)
	if stsAfter.Generation != stsBefore.Generation {
		t.Errorf("StatefulSet %s changed by a refused command (generation %d -> %d)", sts, stsBefore.Generation, stsAfter.Generation)
	}
	for _, s := range x.toolStatements(seq0) {
		if isMutatingStatement(s.Statement) {
			t.Errorf("refused command ran %s", s.Statement)
		}
	}
	cur, err := bed.Client.CoreV1().Pods(x.ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil || cur.DeletionTimestamp != nil {
		t.Errorf("pod %s deleted by a refused command: %v", pod, err)
	}
}

// TestCrateDBScaleDownThenFullRestart: after 6 -> 2 data nodes the recover-after setting must
// follow (quorum of 2 = 2); with the old one (quorum of 6 = 4) a full restart of the cluster
// would never recover its state.
func TestCrateDBScaleDownThenFullRestart(t *testing.T) {
	x := newCrateEnvGroups(t, true, bedwire.LayoutPodName, []crateE2EGroup{{"master", 3, ""}, {"hot", 6, "0"}})
	before := x.shardState()
	res := runCLI(t, x.env, x.args("scale", "--data", "hot=2", "--yes", "--no-tui")...)
	if res.Code != 0 {
		t.Fatalf("scale 6->2: want exit 0: %s", res)
	}
	x.wantSameShards("scale hot=2", before)
	s, err := bed.Client.AppsV1().StatefulSets(x.ns).Get(t.Context(), "crate-data-hot-"+x.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := s.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"-Cgateway.expected_data_nodes=2", "-Cgateway.recover_after_data_nodes=2"} {
		if !slices.Contains(args, want) {
			t.Errorf("hot args %v lack %s", args, want)
		}
	}
	res = runCLI(t, x.env, x.args("restart", "--rolling", "--mode", "all", "--yes", "--no-tui", "--health-checks", "1", "--health-interval", "200ms")...)
	if res.Code != 0 {
		t.Fatalf("full restart after the scale: want exit 0 (state recovered): %s", res)
	}
	x.wantSameShards("full restart", before)
}

// TestCrateDBBootstrapIgnoresLicenseOn510: CrateDB 5.10 has no licenses: bootstrap says that
// --license-secret is ignored and sends no SET LICENSE. (With the system user in place,
// as the operator leaves it, no crash runs: the version is read over PostgreSQL; the crash
// path is TestCrateDBBootstrap's.)
func TestCrateDBBootstrapIgnoresLicenseOn510(t *testing.T) {
	x := newCrateEnv(t, true)
	license, appPW := "LIC-"+randomHex(t, 16), "app-"+randomHex(t, 10)
	createSecret(t, x.ns, "crate-license", map[string]string{"license": license})
	createSecret(t, x.ns, "app-secret", map[string]string{"password": appPW})
	seq0 := x.lastSeq()
	res := runCLI(t, x.env, x.args("bootstrap", "--license-secret", "crate-license", "--user", "app=app-secret", "--yes", "--no-tui")...)
	if res.Code != 0 {
		t.Fatalf("bootstrap: want exit 0: %s", res)
	}
	if !strings.Contains(res.Stdout+res.Stderr, "--license-secret is ignored: CrateDB 5.10") {
		t.Errorf("bootstrap does not say the license is ignored: %s", res)
	}
	for _, s := range x.toolStatements(seq0) {
		if strings.Contains(strings.ToUpper(s.Statement), "LICENSE") {
			t.Errorf("bootstrap on 5.10 sent %s", s.Statement)
		}
	}
	if err := x.canLogIn("app", appPW); err != nil {
		t.Errorf("user app cannot log in: %v", err)
	}
	for _, secret := range []string{license, appPW, x.sysPW} {
		if strings.Contains(res.Stdout+res.Stderr, secret) {
			t.Errorf("a secret is in the output")
		}
	}
	// Nor in any API request (exec argv included) the API server recorded.
	assertSecretsNotAudited(t, license, appPW, x.sysPW)
}

// TestCrateDBTLS: a cluster with -Cssl.http.enabled / -Cssl.psql.enabled and password logins
// only over TLS (the operator's host-based auth) bootstraps and restarts with no TLS flag.
func TestCrateDBTLS(t *testing.T) {
	x := newCrateEnvWith(t, crateSetup{systemUser: true, layout: bedwire.LayoutOperator, tls: true})
	appPW := "app-" + randomHex(t, 10)
	createSecret(t, x.ns, "app-secret", map[string]string{"password": appPW})
	res := runCLI(t, x.env, x.args("bootstrap", "--user", "app=app-secret", "--yes", "--no-tui")...)
	if res.Code != 0 {
		t.Fatalf("bootstrap over TLS: want exit 0: %s", res)
	}
	created := false
	for _, s := range x.toolStatements(0) {
		if strings.HasPrefix(s.Statement, `CREATE USER "app"`) {
			created = true
		}
	}
	if !created {
		t.Errorf("bootstrap did not create user app:\n%s", dumpStatements(x.toolStatements(0)))
	}
	before := x.shardState()
	res = runCLI(t, x.env, x.args("restart", "--rolling", "--group", "hot", "--yes", "--no-tui", "--health-checks", "1", "--health-interval", "200ms")...)
	if res.Code != 0 {
		t.Fatalf("restart over TLS: want exit 0: %s", res)
	}
	x.wantSameShards("restart", before)
	assertSecretsNotAudited(t, appPW, x.sysPW)
}

// plainWaiting is a plain progress line of a step that waits: "[i/n] target waiting[ for]: reason".
var plainWaiting = regexp.MustCompile(`\] \S+ waiting( \S+)?: `)

// TestCrateDBRestartTransientErrors: master elections answer with transient errors and
// stopped nodes stay in sys.nodes for a while; a rolling restart rides that out, and says
// which errors it tolerated. A restart that fails (a timeout while a pod is out) leaves shard
// allocation enabled.
func TestCrateDBRestartTransientErrors(t *testing.T) {
	x := newCrateEnvWith(t, crateSetup{systemUser: true, chaos: cratedbsim.Chaos{ElectionErrors: 3, ShutdownGrace: 2 * time.Second}})
	before := x.shardState()
	seq0 := x.lastSeq()
	res := runCLI(t, x.env, x.args("restart", "--rolling", "--group", "master", "--yes", "--no-tui", "--health-checks", "1", "--health-interval", "200ms")...)
	if res.Code != 0 {
		t.Fatalf("restart with transient errors: want exit 0: %s", res)
	}
	x.wantSameShards("restart", before)
	// The chaos happened to the tool's statements (the test's own would have failed it)...
	run1 := x.toolStatements(seq0)
	injected := 0
	for _, s := range run1 {
		if s.Injected {
			injected++
		}
	}
	if injected == 0 {
		t.Errorf("the simulator injected no election error into the restart's statements; it proves nothing:\n%s", dumpStatements(run1))
	}
	// ... and the tool reported each error it retried (the plain view drops only a line
	// that repeats the one before it).
	reported := 0
	for _, line := range strings.Split(res.Stdout, "\n") {
		// "[1/3] pod/NAME waiting 2s: database error 1 of at most ..., retrying: ..."
		if plainWaiting.MatchString(line) && strings.Contains(line, ": database error ") && strings.Contains(line, "retrying: ") && strings.Contains(line, "MasterNotDiscoveredException") {
			reported++
		}
	}
	if reported == 0 || reported < injected {
		t.Errorf("the tool reported %d tolerated election errors, the simulator injected %d:\n%s", reported, injected, res.Stdout)
	}
	t.Logf("%d election errors injected, %d reported, restart took %s", injected, reported, res.Elapsed.Round(time.Millisecond))

	// Fails: the first hot pod cannot come back (its new incarnation fits no node), so the
	// timeout ends the run while allocation is held at primaries; it must be enabled again
	// when the command has exited, by this run itself.
	sts, pod := "crate-data-hot-"+x.name, "crate-data-hot-"+x.name+"-0"
	patch := []byte(`{"spec":{"template":{"spec":{"nodeSelector":{"e2e.dbops.io/no-such-node":"true"}}}}}`)
	if _, err := bed.Client.AppsV1().StatefulSets(x.ns).Patch(t.Context(), sts, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	seq1 := x.lastSeq()
	res = runCLI(t, x.env, x.args("restart", "--rolling", "--group", "hot", "--yes", "--no-tui", "--timeout", "4s")...)
	if res.Code == 0 {
		t.Fatalf("restart of a pod whose node cannot start succeeded: %s", res)
	}
	if want := "(pod/" + pod + ": "; !strings.Contains(res.Stderr, want) || !strings.Contains(res.Stderr, "(shard allocation was re-enabled)") {
		t.Errorf("the failed restart does not say that it failed at %s and re-enabled allocation: %s", pod, res)
	}
	run2 := x.toolStatements(seq1)
	var set, reset int
	for _, s := range run2 {
		switch {
		case s.Error != "":
		case s.Statement == `SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = 'primaries'`:
			set = s.Seq
		case s.Statement == `RESET GLOBAL "cluster.routing.allocation.enable"` && set > 0:
			reset = s.Seq
		}
	}
	switch {
	case set == 0:
		t.Errorf("the failed restart never held allocation at primaries; it proves nothing:\n%s", dumpStatements(run2))
	case reset < set:
		t.Errorf("allocation held at primaries after a failed restart (SET #%d, no RESET after it):\n%s", set, dumpStatements(run2))
	}
	res2 := x.sql(`SELECT settings['cluster']['routing']['allocation']['enable'] FROM sys.cluster`)
	if len(res2.Rows) != 1 || fmt.Sprint(res2.Rows[0][0]) != "all" {
		t.Errorf("cluster.routing.allocation.enable = %v after the failed restart, want all", res2.Rows)
	}
}

// TestCrateDBReplaceFailed: replace --failed picks only the crash-looping pod (its node left
// sys.nodes; every other pod maps to its node), in both layouts. While that node held the only
// copy of shards (a table without replicas) the cluster is red and the replacement, which
// would wipe its volume, is refused with nothing written; once that table is given up, the
// replacement runs and every other table keeps its primaries and replicas.
func TestCrateDBReplaceFailed(t *testing.T) {
	for _, l := range crateLayouts {
		t.Run(l.name, func(t *testing.T) {
			x := newCrateEnvLayout(t, true, l.layout)
			ctx := t.Context()
			before := x.shardState()
			pod := "crate-data-hot-" + x.name + "-1"
			node := x.node("hot", 1)
			x.sql(`CREATE TABLE doc.single (id TEXT) CLUSTERED INTO 10 SHARDS WITH (number_of_replicas = '0')`)
			x.waitGreen()
			if !slices.ContainsFunc(x.sim.Shards(), func(c cratedbsim.ShardCopy) bool { return c.Table == "doc.single" && c.Node == node }) {
				t.Fatalf("no shard of doc.single on %s: %+v", node, x.sim.Shards())
			}
			oldPod, err := bed.Client.CoreV1().Pods(x.ns).Get(ctx, pod, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			oldPVCs := pvcUIDs(t, x.ns)
			notReadySince := crashPod(t, x.ns, pod)
			// Its shards of doc.single had no other copy: red (polled, a database cannot
			// be watched).
			deadline := time.Now().Add(waitTimeout)
			for sev, _ := x.sim.Health(); sev < 3; sev, _ = x.sim.Health() {
				if time.Now().After(deadline) {
					t.Fatalf("cluster not red after %s went down: severity %d", node, sev)
				}
				time.Sleep(50 * time.Millisecond)
			}
			// --failure-threshold 1s: the pod must have been not Ready that long.
			time.Sleep(time.Until(notReadySince.Add(1100 * time.Millisecond)))
			replace := x.args("replace", "--failed", "--failure-threshold", "1s", "--yes", "--no-tui", "--health-checks", "1", "--health-interval", "200ms")
			seq0 := x.lastSeq()
			res := runCLI(t, x.env, replace...)
			// The refusal names the red table and the node missing from sys.nodes (issue #37
			// item 7), not only the cluster's colour.
			if want := "node of pod " + pod + " is missing from the cluster"; res.Code != 5 || !strings.Contains(res.Stderr, want) || !strings.Contains(res.Stderr, "doc.single are RED") || strings.Count(strings.TrimSpace(res.Stderr), "\n") > 0 {
				t.Errorf("replace --failed on a red cluster: want exit 5 and one line with %q and the red table doc.single: %s", want, res)
			}
			// Nothing written: the pod and its PVC kept, no lock (the journal lives on it),
			// no event, no allocation exclusion, no statement that changes the database.
			if cur, err := bed.Client.CoreV1().Pods(x.ns).Get(ctx, pod, metav1.GetOptions{}); err != nil || cur.UID != oldPod.UID || cur.DeletionTimestamp != nil {
				t.Errorf("pod %s replaced or deleted by a refused command: %v", pod, err)
			}
			if now := pvcUIDs(t, x.ns); !maps.Equal(now, oldPVCs) {
				t.Errorf("PVCs changed by a refused command: %v -> %v", oldPVCs, now)
			}
			if leases, err := bed.Client.CoordinationV1().Leases(x.ns).List(ctx, metav1.ListOptions{}); err != nil || len(leases.Items) > 0 {
				t.Errorf("a refused command took the lock (%v): %+v", err, leases)
			}
			if evs, err := bed.Client.CoreV1().Events(x.ns).List(ctx, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			} else {
				for _, ev := range evs.Items {
					if strings.HasPrefix(ev.Reason, "Dbops") {
						t.Errorf("a refused command recorded event %s: %s", ev.Reason, ev.Message)
					}
				}
			}
			if ex := x.exclusions(); ex != "" {
				t.Errorf("a refused command excluded %q from allocation", ex)
			}
			for _, s := range x.toolStatements(seq0) {
				if isMutatingStatement(s.Statement) {
					t.Errorf("a refused command ran %s", s.Statement)
				}
			}

			// The table is given up; the cluster heals around the missing node (yellow
			// until the replicas it held are rebuilt elsewhere) and the replacement runs.
			x.sql(`DROP TABLE doc.single`)
			res = runCLI(t, x.env, replace...)
			if res.Code != 0 || !strings.Contains(res.Stdout, pod) {
				t.Fatalf("replace --failed: want exit 0 replacing %s: %s", pod, res)
			}
			for _, other := range []string{"crate-data-hot-" + x.name + "-0", "crate-master-" + x.name + "-0", "crate-data-cold-" + x.name + "-1"} {
				if strings.Contains(res.Stdout, other) {
					t.Errorf("replace --failed touched healthy pod %s:\n%s", other, res.Stdout)
				}
			}
			if now := pvcUIDs(t, x.ns)["data-"+pod]; now == "" || now == oldPVCs["data-"+pod] {
				t.Errorf("PVC data-%s: uid %s before, %s after; want a new one", pod, oldPVCs["data-"+pod], now)
			}
			x.wantSameShards("replace --failed", before)
		})
	}
}
