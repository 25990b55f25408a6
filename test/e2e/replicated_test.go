//go:build e2e

package e2e

// End-to-end tests of the replicated engine through the real CLI: a host
// shell script plays the application in every pod (kwok runs exec argv
// locally), keeping each pod's state in a temp dir and telling pods apart
// by the per-pod env var REPL_POD.

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// replScript is the application: "app.sh CMD [PRIMARY-DNS...]". Files in
// $REPL_STATE/<pod>/: seq (sequence output), fail-<cmd> (exit 3), role.
// Every call is appended to $REPL_STATE/log as "<pod> <cmd> [args]".
const replScript = `#!/bin/sh
cmd=$1; shift
d="$REPL_STATE/$REPL_POD"
mkdir -p "$d"
echo "$REPL_POD $cmd $*" | sed 's/ *$//' >> "$REPL_STATE/log"
case "$cmd" in
sequence)
  [ -f "$d/seq" ] || { echo "no data yet" >&2; exit 1; }
  cat "$d/seq";;
status)
  cat "$d/role" 2>/dev/null || echo idle;;
*)
  if [ -f "$d/fail-$cmd" ]; then echo "$cmd refused in $REPL_POD" >&2; exit 3; fi
  echo "$cmd" > "$d/role";;
esac
`

// replApp is one replicated cluster and its script state.
type replApp struct {
	t     *testing.T
	ns    string
	name  string
	state string
	bin   string
	env   []string
}

// replConfig returns the configuration document with the given commands
// (all of: sequence seed primary secondary stop status when nil).
func (a *replApp) config(primaries int, cmds ...string) string {
	if cmds == nil {
		cmds = []string{"sequence", "seed", "primary", "secondary", "stop", "status"}
	}
	c := map[string]any{}
	for _, n := range cmds {
		c[n] = map[string]any{"argv": []string{a.bin, n}, "timeout": "20s"}
	}
	b, err := json.Marshal(map[string]any{"primaries": primaries, "commands": c})
	if err != nil {
		a.t.Fatal(err)
	}
	return string(b)
}

// newReplApp creates StatefulSet name with replicas pods (Parallel), labelled
// for the replicated engine, with annotation as its configuration, and
// exec mappings for ordinals up to maxPods-1.
func newReplApp(t *testing.T, name string, replicas, maxPods int, annotation func(*replApp) string, mods ...func(*appsv1.StatefulSet)) *replApp {
	t.Helper()
	ns := newNamespace(t)
	dir := t.TempDir()
	a := &replApp{t: t, ns: ns, name: name, state: filepath.Join(dir, "state"), bin: filepath.Join(dir, "app.sh"), env: cliEnv(t)}
	if err := os.MkdirAll(a.state, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, a.bin, replScript)
	for o := range maxPods {
		pod := fmt.Sprintf("%s-%d", name, o)
		if err := bed.SetExec(t.Context(), ns, pod, testbed.ExecTarget{Env: map[string]string{"REPL_POD": pod, "REPL_STATE": a.state}}); err != nil {
			t.Fatalf("exec mapping for %s: %v", pod, err)
		}
	}
	sts := statefulSet(name, int32(replicas))
	sts.Labels = maps.Clone(sts.Labels)
	maps.Copy(sts.Labels, map[string]string{"dbops.io/cluster": name, "dbops.io/engine": "replicated"})
	sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	sts.Spec.Template.Spec.TopologySpreadConstraints = nil
	if annotation != nil {
		sts.Annotations = map[string]string{"dbops.io/replicated-config": annotation(a)}
	}
	for _, m := range mods {
		m(sts)
	}
	if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(t.Context(), sts, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create statefulset: %v", err)
	}
	a.waitReady(replicas)
	waitStatefulSetSettled(t, ns, name, int32(replicas))
	return a
}

func (a *replApp) waitReady(n int) []*corev1.Pod {
	a.t.Helper()
	return waitPods(a.t, a.ns, labels.SelectorFromSet(labels.Set{"app": a.name}), n, func(p *corev1.Pod) bool {
		return testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
}

func (a *replApp) pod(o int) string { return fmt.Sprintf("%s-%d", a.name, o) }

func (a *replApp) dns(ords ...int) string {
	var out []string
	for _, o := range ords {
		out = append(out, fmt.Sprintf("%s.%s.%s.svc", a.pod(o), a.name, a.ns))
	}
	return strings.Join(out, " ")
}

// setSeq writes what the sequence command prints in pod ordinal o.
func (a *replApp) setSeq(o int, v string) {
	d := filepath.Join(a.state, a.pod(o))
	if err := os.MkdirAll(d, 0o755); err != nil {
		a.t.Fatal(err)
	}
	writeFile(a.t, filepath.Join(d, "seq"), v+"\n")
}

func (a *replApp) failOn(o int, cmd string) {
	d := filepath.Join(a.state, a.pod(o))
	if err := os.MkdirAll(d, 0o755); err != nil {
		a.t.Fatal(err)
	}
	writeFile(a.t, filepath.Join(d, "fail-"+cmd), "")
}

// log returns the script's calls, and truncates the log.
func (a *replApp) log() []string {
	p := filepath.Join(a.state, "log")
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		a.t.Fatal(err)
	}
	_ = os.Remove(p)
	return slices.Collect(strings.Lines(strings.TrimSpace(string(b))))
}

// mutations drops sequence and status calls from a log.
func mutations(log []string) []string {
	var out []string
	for _, l := range log {
		l = strings.TrimSpace(l)
		if l == "" || strings.Contains(l, " sequence") || strings.Contains(l, " status") {
			continue
		}
		out = append(out, l)
	}
	return out
}

func (a *replApp) roles() (map[string]string, map[string]types.UID) {
	a.t.Helper()
	list, err := bed.Client.CoreV1().Pods(a.ns).List(a.t.Context(), metav1.ListOptions{LabelSelector: "app=" + a.name})
	if err != nil {
		a.t.Fatal(err)
	}
	roles, uids := map[string]string{}, map[string]types.UID{}
	for _, p := range list.Items {
		roles[p.Name] = p.Labels["dbops.io/role"]
		uids[p.Name] = p.UID
	}
	return roles, uids
}

func (a *replApp) run(args ...string) cliResult {
	a.t.Helper()
	return runCLI(a.t, a.env, append(args, "-n", a.ns, "--yes", "--no-tui")...)
}

func TestReplicatedElectionTieGoesToPod2(t *testing.T) {
	a := newReplApp(t, "app", 11, 11, func(a *replApp) string { return a.config(1, "sequence", "seed", "primary", "stop") })
	for o := range 11 {
		a.setSeq(o, fmt.Sprint(o%7)) // 0..6, 0..3
	}
	a.setSeq(2, "40")
	a.setSeq(10, "40")
	r := a.run("bootstrap", "app")
	if r.Code != 0 {
		t.Fatalf("bootstrap: %s", r)
	}
	if got := mutations(a.log()); !slices.Equal(got, []string{"app-2 seed"}) {
		t.Errorf("commands = %q, want seed on app-2 only", got)
	}
	roles, _ := a.roles()
	if roles["app-2"] != "primary" || roles["app-10"] != "" {
		t.Errorf("roles = %v, want app-2 primary", roles)
	}
	// status shows the members table.
	r = runCLI(t, a.env, "status", "app", "-n", a.ns)
	if r.Code != 0 || !strings.Contains(r.Stdout, "ROLE") || !strings.Contains(r.Stdout, "SEQUENCE") {
		t.Errorf("status: %s", r)
	}
}

func TestReplicatedCandidateFailures(t *testing.T) {
	a := newReplApp(t, "app", 4, 4, func(a *replApp) string { return a.config(2, "sequence", "seed", "primary", "stop") })
	for o, v := range []string{"9", "8", "7", "6"} {
		a.setSeq(o, v)
	}
	a.failOn(0, "seed")    // first candidate: seed fails, stop works
	a.failOn(2, "primary") // second primary's first candidate: primary and stop fail
	a.failOn(2, "stop")
	_, before := a.roles()
	r := a.run("bootstrap", "app", "-o", "json")
	if r.Code != 0 {
		t.Fatalf("bootstrap: %s", r)
	}
	want := []string{"app-0 seed", "app-0 stop", "app-1 seed", "app-2 primary " + a.dns(1), "app-2 stop", "app-3 primary " + a.dns(1)}
	if got := mutations(a.log()); !slices.Equal(got, want) {
		t.Errorf("commands =\n%q\nwant\n%q", got, want)
	}
	roles, after := a.roles()
	if roles["app-0"] != "failed" || roles["app-1"] != "primary" || roles["app-3"] != "primary" || roles["app-2"] != "" {
		t.Errorf("roles = %v", roles)
	}
	if after["app-2"] == before["app-2"] || after["app-0"] != before["app-0"] {
		t.Errorf("UIDs before %v after %v: want only app-2 recreated", before, after)
	}
	a.waitReady(4)
}

func TestReplicatedScaleUpAndDown(t *testing.T) {
	a := newReplApp(t, "app", 3, 5, func(a *replApp) string { return a.config(3) })
	for o, v := range []string{"5", "3", "5", "1", "1"} {
		a.setSeq(o, v)
	}
	if r := a.run("bootstrap", "app"); r.Code != 0 {
		t.Fatalf("bootstrap: %s", r)
	}
	a.log()
	r := a.run("scale", "app", "--replicas", "5")
	if r.Code != 0 {
		t.Fatalf("scale up: %s", r)
	}
	want := []string{"app-3 secondary " + a.dns(0, 1, 2), "app-4 secondary " + a.dns(0, 1, 2)}
	if got := mutations(a.log()); !slices.Equal(got, want) {
		t.Errorf("scale up commands = %q, want %q", got, want)
	}
	roles, _ := a.roles()
	if roles["app-3"] != "secondary" || roles["app-4"] != "secondary" || len(roles) != 5 {
		t.Errorf("roles after scale up = %v", roles)
	}

	// 5 -> 3 and primaries 3 -> 2: the secondaries beyond go first, then the
	// primary with the lowest sequence number (app-1) is stopped and becomes
	// a secondary.
	r = a.run("scale", "app", "--replicas", "3", "--primaries", "2")
	if r.Code != 0 {
		t.Fatalf("scale down: %s", r)
	}
	want = []string{"app-4 stop", "app-3 stop", "app-1 stop", "app-1 secondary " + a.dns(0, 2)}
	if got := mutations(a.log()); !slices.Equal(got, want) {
		t.Errorf("scale down commands = %q, want %q", got, want)
	}
	a.waitReady(3)
	roles, _ = a.roles()
	if roles["app-0"] != "primary" || roles["app-2"] != "primary" || roles["app-1"] != "secondary" {
		t.Errorf("roles after scale down = %v", roles)
	}

	// Rolling restart: the secondary first, primaries last, each given its
	// role again (with the other primaries' names) before the next.
	_, before := a.roles()
	pods := recordPodWatch(t, a.ns)
	r = a.run("restart", "app", "--rolling")
	if r.Code != 0 {
		t.Fatalf("restart: %s", r)
	}
	want = []string{"app-1 secondary " + a.dns(0, 2), "app-0 primary " + a.dns(2), "app-2 primary " + a.dns(0)}
	if got := mutations(a.log()); !slices.Equal(got, want) {
		t.Errorf("restart commands = %q, want %q", got, want)
	}
	var order []string
	for _, c := range podTransitions(pods.snapshot()) {
		if c.Type == watch.Deleted {
			order = append(order, c.Name)
		}
	}
	if !slices.Equal(order, []string{"app-1", "app-0", "app-2"}) {
		t.Errorf("deletion order = %v, want app-1, app-0, app-2", order)
	}
	roles, after := a.roles()
	for pod, role := range map[string]string{"app-0": "primary", "app-1": "secondary", "app-2": "primary"} {
		if roles[pod] != role || after[pod] == before[pod] {
			t.Errorf("%s: role %q uid %s -> %s, want %s with a new UID", pod, roles[pod], before[pod], after[pod], role)
		}
	}
}

func TestReplicatedBadConfigurationRunsNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmds []string
		seq  string
		want string
	}{
		{"no primary command", []string{"sequence", "seed", "stop"}, "1", "missing required command(s) primary"},
		{"non-numeric sequence", nil, "many", `printed "many"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newReplApp(t, "app", 2, 2, func(a *replApp) string { return a.config(1, tc.cmds...) })
			a.setSeq(0, "1")
			a.setSeq(1, tc.seq)
			before := snapshotNamespace(t, a.ns)
			for _, args := range [][]string{{"bootstrap", "app"}, {"scale", "app", "--replicas", "3"}} {
				r := a.run(args...)
				if r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
					t.Errorf("%v: exit %d, want 2 with %q: %s", args, r.Code, tc.want, r)
				}
			}
			if got := mutations(a.log()); len(got) != 0 {
				t.Errorf("ran %q", got)
			}
			if d := diffRVSnapshots(t, before, snapshotNamespace(t, a.ns)); len(d) > 0 {
				t.Errorf("bad configuration changed the namespace: %v", d)
			}
		})
	}
}
