package commands

import (
	"context"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

const replConfig = `commands:
  sequence: {argv: [/bin/sequence], timeout: 5s}
  seed: {argv: [/bin/seed]}
  primary: {argv: [/bin/primary]}
  secondary: {argv: [/bin/secondary]}
  stop: {argv: [/bin/stop]}
`

// fakeReplExec answers the commands by base name; sequence prints seq[pod].
type fakeReplExec struct {
	mu    sync.Mutex
	seq   map[string]string
	calls []string
}

func (f *fakeReplExec) Exec(_ context.Context, _, pod, _ string, argv []string, _ io.Reader) ([]byte, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Query commands run under "timeout -s KILL SECS": timeout(1) in the container runs the rest.
	if len(argv) > 4 && argv[0] == "timeout" && argv[1] == "-s" {
		argv = argv[4:]
	}
	cmd := path.Base(argv[0])
	f.calls = append(f.calls, strings.TrimSpace(pod+": "+cmd+" "+strings.Join(argv[1:], " ")))
	if cmd == "sequence" {
		v, ok := f.seq[pod]
		if !ok {
			return nil, nil, &kube.ExitError{Pod: pod, Code: 1}
		}
		return []byte(v + "\n"), nil, nil
	}
	return nil, nil, nil
}

func (f *fakeReplExec) get() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

type replEnv struct {
	*harness
	exec *fakeReplExec
}

// newReplEnv lays out replicated cluster "app" (StatefulSet app-db) with
// the given annotation.
func newReplEnv(t *testing.T, replicas int, annotation string) *replEnv {
	t.Helper()
	objs := fakecluster.Objects("prod", "app", "replicated", fakecluster.Group{Name: "db", Role: "data", Replicas: replicas})
	for _, o := range objs {
		if s, ok := o.(*appsv1.StatefulSet); ok && annotation != "" {
			s.Annotations["dbops.io/replicated-config"] = annotation
		}
	}
	h := newHarness(t, objs...)
	h.clock = &tickClock{t: testNow}
	return &replEnv{harness: h, exec: &fakeReplExec{seq: map[string]string{}}}
}

func (e *replEnv) run(args ...string) result {
	e.t.Helper()
	return e.runWith(func(g *GlobalOptions) { g.Exec = e.exec }, args...)
}

func (e *replEnv) roles() map[string]string {
	list, err := e.client.CoreV1().Pods("prod").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		out[p.Name] = p.Labels["dbops.io/role"]
	}
	return out
}

func TestReplicatedBootstrap(t *testing.T) {
	e := newReplEnv(t, 3, replConfig)
	e.exec.seq = map[string]string{"app-db-0": "3", "app-db-1": "8", "app-db-2": "8"}
	r := e.run("bootstrap", "app", "--primaries", "2", "--yes", "--no-tui")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var mut []string
	for _, c := range e.exec.get() {
		if !strings.Contains(c, ": sequence") {
			mut = append(mut, c)
		}
	}
	want := []string{"app-db-1: seed", "app-db-2: primary app-db-1.app-db.prod.svc",
		"app-db-0: secondary app-db-1.app-db.prod.svc app-db-2.app-db.prod.svc"}
	if !slices.Equal(mut, want) {
		t.Errorf("commands = %q, want %q", mut, want)
	}
	if got := e.roles(); got["app-db-0"] != "secondary" || got["app-db-1"] != "primary" || got["app-db-2"] != "primary" {
		t.Errorf("roles = %v", got)
	}
	var audits int
	for _, w := range fakecluster.Writes(e.client) {
		if w == "create events/" {
			audits++
		}
	}
	if audits < 3 {
		t.Errorf("%d audit events, want one per role change", audits)
	}
	// status shows the roles.
	r = e.run("status", "app")
	if r.code != 0 || !strings.Contains(r.out, "SEQUENCE") || !strings.Contains(r.out, "primary") {
		t.Errorf("status exit %d:\n%s\n%s", r.code, r.out, r.err)
	}
}

func TestReplicatedBadConfigurationChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name, annotation string
		env              map[string]string
		args             []string
		want             string
		seq              string
	}{
		{"no primary command", "commands: {sequence: {argv: [/bin/sequence]}}", nil, []string{"bootstrap", "app", "--yes"}, "missing required command(s) primary", "1"},
		{"empty argv", replConfig + "  status: {argv: []}\n", nil, []string{"scale", "app", "--replicas", "4", "--yes"}, "commands.status.argv is empty", "1"},
		{"bad timeout in env", replConfig, map[string]string{EnvReplicatedConfig: "commands: {stop: {timeout: later}}"}, []string{"bootstrap", "app", "--yes"}, "DBOPS_REPLICATED_CONFIG: commands.stop.timeout", "1"},
		{"bad DBOPS_PRIMARIES", replConfig, map[string]string{EnvPrimaries: "two"}, []string{"bootstrap", "app", "--yes"}, "--primaries from DBOPS_PRIMARIES", "1"},
		{"non-numeric sequence", replConfig, nil, []string{"bootstrap", "app", "--yes"}, `printed "lots"`, "lots"},
		{"restart without primary", "commands: {sequence: {argv: [s]}}", nil, []string{"restart", "app", "--rolling", "--yes"}, "missing required command(s) primary", "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newReplEnv(t, 3, tc.annotation)
			maps := map[string]string{"app-db-0": "1", "app-db-1": tc.seq, "app-db-2": "1"}
			e.exec.seq = maps
			for k, v := range tc.env {
				e.env[k] = v
			}
			e.client.ClearActions()
			r := e.run(tc.args...)
			if r.code != ops.ExitUsage || !strings.Contains(r.err, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 with %q", r.code, r.err, tc.want)
			}
			for _, c := range e.exec.get() {
				if !strings.Contains(c, ": sequence") {
					t.Errorf("ran %s", c)
				}
			}
			if tc.seq != "lots" && len(e.exec.get()) > 0 {
				t.Errorf("exec'd %v before rejecting the configuration", e.exec.get())
			}
			if w := fakecluster.Writes(e.client); len(w) > 0 {
				t.Errorf("wrote %v", w)
			}
		})
	}
}

func TestReplicatedPrimariesPrecedence(t *testing.T) {
	e := newReplEnv(t, 5, replConfig+"primaries: 1\n")
	for i := range 5 {
		e.exec.seq["app-db-"+string(rune('0'+i))] = "1"
	}
	cfg := filepath.Join(e.env["XDG_CONFIG_HOME"], "kubectl-dbops", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("replicated:\n  primaries: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"config file beats annotation", nil, nil, "--primaries 2"},
		{"env beats config file", map[string]string{EnvPrimaries: "3"}, nil, "--primaries 3"},
		{"env document beats config file", map[string]string{EnvReplicatedConfig: `{"primaries": 4}`}, nil, "--primaries 4"},
		{"flag beats env", map[string]string{EnvPrimaries: "3"}, []string{"--primaries", "5"}, "--primaries 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			delete(e.env, EnvPrimaries)
			delete(e.env, EnvReplicatedConfig)
			for k, v := range tc.env {
				e.env[k] = v
			}
			r := e.run(append([]string{"bootstrap", "app", "--dry-run"}, tc.args...)...)
			if r.code != 0 || !strings.Contains(r.out, "(engine replicated) "+tc.want+"\n") {
				t.Errorf("exit %d, out:\n%s\nwant %s (%s)", r.code, r.out, tc.want, r.err)
			}
		})
	}
	delete(e.env, EnvPrimaries)
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	r := e.run("bootstrap", "app", "--dry-run")
	if !strings.Contains(r.out, "--primaries 1\n") {
		t.Errorf("annotation: %s %s", r.out, r.err)
	}
}

func TestScalePrimariesFlagValidation(t *testing.T) {
	e := newReplEnv(t, 3, replConfig)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--primaries", "-1"}, "--primaries -1: must be at least 0"},
		{[]string{"--primaries", "1", "--master", "3"}, "--primaries cannot be combined with --master or --data"},
		{[]string{"--primaries", "1", "--data", "hot=2"}, "--primaries cannot be combined"},
		{[]string{"--replicas", "2", "--primaries", "3"}, "--primaries 3 is more than --replicas 2"},
		{[]string{"--primaries", "x"}, "invalid argument"},
	} {
		r := e.run(append([]string{"scale", "app", "--yes"}, tc.args...)...)
		if r.code != ops.ExitUsage || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d %q, want exit 2 with %q", tc.args, r.code, r.err, tc.want)
		}
	}
	if len(e.exec.get()) != 0 {
		t.Errorf("exec'd %v", e.exec.get())
	}
	// --primaries alone is a scale request for replicated apps.
	e.exec.seq = map[string]string{"app-db-0": "1", "app-db-1": "2", "app-db-2": "3"}
	r := e.run("scale", "app", "--primaries", "2", "--dry-run")
	if r.code != 0 || !strings.Contains(r.out, "--replicas 3 --primaries 2") {
		t.Errorf("exit %d:\n%s%s", r.code, r.out, r.err)
	}
}

// Replacement is planned by the replicated engine (stop, recreate with a
// fresh PVC, role back); several at once are refused before any write.
func TestReplicatedReplacePlan(t *testing.T) {
	e := newReplEnv(t, 3, replConfig)
	e.exec.seq = map[string]string{"app-db-0": "1", "app-db-1": "1", "app-db-2": "1"}
	e.client.ClearActions()
	r := e.run("replace", "app", "app-db-1", "--dry-run")
	if r.code != 0 {
		t.Fatalf("dry-run exit %d: %s", r.code, r.err)
	}
	for _, want := range []string{"run stop in app-db-1 before it is replaced", "delete 1 pod(s) and their PVCs", "give app-db-1 its journaled role back"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("plan lacks %q:\n%s", want, r.out)
		}
	}
	r = e.run("replace", "app", "app-db-1", "app-db-2", "--max-concurrent", "2", "--yes")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, "one pod at a time") {
		t.Errorf("--max-concurrent 2: exit %d, stderr %q; want exit 2", r.code, r.err)
	}
	if len(e.exec.get()) > 0 {
		t.Errorf("exec'd %v", e.exec.get())
	}
	if w := fakecluster.Writes(e.client); len(w) > 0 {
		t.Errorf("wrote %v", w)
	}
}
