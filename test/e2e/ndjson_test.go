//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// readmeEvents parses the README's "NDJSON events" table: event type -> documented field paths.
func readmeEvents(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "### NDJSON events")
	if i < 0 {
		t.Fatal("README has no NDJSON events section")
	}
	s = s[i:]
	s = s[:strings.Index(s, "```")]
	code := regexp.MustCompile("`([^`]+)`")
	out := map[string][]string{}
	for line := range strings.Lines(s) {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		typ := code.FindStringSubmatch(cells[1])
		if typ == nil || typ[1] == "type" {
			continue
		}
		var fields []string
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			fields = append(fields, m[1])
		}
		out[typ[1]] = fields
	}
	if len(out) < 5 {
		t.Fatalf("parsed only %d event types from the README table: %v", len(out), out)
	}
	return out
}

// commonFields may be on any event.
var commonFields = []string{"type", "time", "operation", "cluster", "elapsedNs"}

// fieldPaths lists the paths of every non-empty field of a decoded JSON value: "a.b", "a[].b".
func fieldPaths(prefix string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = true
			fieldPaths(p, x, out)
		}
	case []any:
		for _, x := range v {
			fieldPaths(prefix+"[]", x, out)
		}
	}
}

// covers reports whether documented path doc names seen path p or a parent of it.
func covers(doc, p string) bool {
	return p == doc || strings.HasPrefix(p, doc+".") || strings.HasPrefix(p, doc+"[]")
}

// TestNDJSONDocumented runs a restart in the ways that emit every kind of event (dry-run,
// paused, resumed with pauses, lock taken over from a denied ID, refused on a held lock, a step
// that times out) and checks the NDJSON against the README table both ways: every documented
// type and field appears in some run, and no run emits a type or field the table lacks.
func TestNDJSONDocumented(t *testing.T) {
	doc := readmeEvents(t)
	ns := newNamespace(t)
	createDBCluster(t, ns, webCluster, 3)
	env := cliEnv(t)
	base := []string{webCluster, "-n", ns}
	seen := map[string]map[string]bool{} // type -> field paths
	outcomes := map[string]bool{}
	record := func(res cliResult) {
		t.Helper()
		for line := range strings.Lines(res.Stdout) {
			var ev map[string]any
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("not NDJSON: %q: %v\n%s", line, err, res)
			}
			typ, _ := ev["type"].(string)
			if seen[typ] == nil {
				seen[typ] = map[string]bool{}
			}
			fieldPaths("", ev, seen[typ])
			if typ == "done" {
				outcomes[ev["outcome"].(string)] = true
			}
		}
	}
	run := func(wantCode int, args ...string) {
		t.Helper()
		res := runCLI(t, env, args...)
		if res.Code != wantCode {
			t.Fatalf("want exit %d: %s", wantCode, res)
		}
		if slices.Contains(args, "json") {
			record(res)
		}
	}
	restart := func(extra ...string) []string {
		return append(append([]string{"restart"}, base...), append([]string{"--rolling", "-o", "json"}, extra...)...)
	}

	// Plans: pod mode, zone mode (batch details).
	run(0, restart("--dry-run")...)
	run(0, restart("--dry-run=client", "--mode", "zone")...)
	// A run paused after one pod, its dry-run (notes, done steps), then the resume under a
	// lock taken by hand (extended), with pauses between pods (warnings) and skipped steps.
	run(7, restart("--yes", "--lock-id", "alice", "--pause-after", "1", "--lock-duration", "10s")...)
	run(0, restart("--dry-run", "--lock-id", "alice")...)
	run(0, append([]string{"lock", "acquire"}, append(base, "--id", "alice")...)...)
	// (The run releases that lock at its end: it resumed an unfinished journal.)
	run(0, restart("--yes", "--lock-id", "alice", "--pause-between", "500ms")...)
	// Zone mode (step progress), taking the lock over from a denied holder (previous).
	run(0, append([]string{"lock", "acquire"}, append(base, "--id", "bob", "--reason", "e2e")...)...)
	run(0, append([]string{"deny", "add"}, append(base, "bob")...)...)
	run(0, restart("--yes", "--lock-id", "alice", "--mode", "zone")...)
	run(0, append([]string{"deny", "allow"}, append(base, "bob")...)...)
	// Refused: the lock is held by someone else.
	run(0, append([]string{"lock", "acquire"}, append(base, "--id", "bob")...)...)
	run(3, restart("--yes", "--lock-id", "alice")...)
	run(0, append([]string{"lock", "release"}, append(base, "--id", "bob")...)...)
	// Steered from a second process (control events): paused with a reason, then aborted. A
	// cluster of its own whose pods take 2s to start, so the pause lands while the first step
	// waits (as in lockloss_test.go).
	createDBCluster(t, ns, "steered", 3, podsStartIn("2s"))
	steeredBase := []string{"steered", "-n", ns}
	steered := startCLI(t, env, append([]string{"restart"}, append(steeredBase, "--rolling", "-o", "json", "--yes", "--lock-id", "alice")...)...)
	steered.waitEvent("a step started", func(ev ndEvent) bool { return ev.Type == "step-started" })
	run(0, append([]string{"pause"}, append(steeredBase, "--lock-id", "bob", "--reason", "e2e")...)...)
	steered.waitEvent("the pause", func(ev ndEvent) bool { return ev.Type == "control" })
	run(0, append([]string{"abort"}, append(steeredBase, "--lock-id", "bob")...)...)
	if res := steered.wait(); res.Code != 7 {
		t.Fatalf("aborted run: want exit 7: %s", res)
	} else {
		record(res)
	}
	// A step that fails: the restarted pod can never be scheduled again (the StatefulSet's
	// template asks for a node that does not exist; OnDelete keeps the controller from
	// replacing the others), so the run times out waiting for it.
	updateStatefulSet(t.Context(), t, ns, webCluster, func(sts *appsv1.StatefulSet) {
		sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		sts.Spec.Template.Spec.NodeSelector = map[string]string{"dbops.io/e2e-no-such-node": "true"}
	})
	run(4, restart("--yes", "--lock-id", "alice", "--timeout", "8s")...)

	for typ, fields := range doc {
		got := seen[typ]
		if got == nil {
			t.Errorf("README documents event type %q; no run emitted it", typ)
			continue
		}
		for _, f := range fields {
			found := false
			for p := range got {
				if covers(f, p) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("README documents field %q of %q events; no run emitted it", f, typ)
			}
		}
	}
	for typ, paths := range seen {
		fields, ok := doc[typ]
		if !ok {
			t.Errorf("event type %q is emitted but not in the README table", typ)
			continue
		}
		var extra []string
		for p := range paths {
			if slices.ContainsFunc(append(slices.Clone(commonFields), fields...), func(f string) bool { return covers(f, p) || covers(p, f) }) {
				continue
			}
			extra = append(extra, p)
		}
		sort.Strings(extra)
		if len(extra) > 0 {
			t.Errorf("%q events carry fields the README does not list: %v", typ, extra)
		}
	}
	for _, o := range []string{"succeeded", "failed", "timeout", "paused", "aborted", "dry-run"} {
		if !outcomes[o] {
			t.Errorf("no done event with outcome %s (saw %v)", o, outcomes)
		}
	}
}

// TestPauseAfterResume: --pause-after 1 restarts one pod and stops (exit 7, journal paused,
// lock released, a resume hint); the same command without it finishes the rest without
// restarting that pod again, waiting --pause-between between pods.
func TestPauseAfterResume(t *testing.T) {
	ns := newNamespace(t)
	old := uidsByName(createDBCluster(t, ns, webCluster, 3))
	env := cliEnv(t)
	args := []string{"restart", webCluster, "-n", ns, "--rolling", "--yes", "-o", "json", "--lock-id", "e2e-pace"}
	res := runCLI(t, env, append(args, "--pause-after", "1")...)
	if res.Code != 7 {
		t.Fatalf("want exit 7 (paused): %s", res)
	}
	evs := parseNDJSON(t, res)
	if got := lastOutcome(evs); got != "paused" {
		t.Errorf("outcome %q, want paused", got)
	}
	if done := stepsOf(evs, "step-done"); !slices.Equal(done, []string{"restart/web-0"}) {
		t.Errorf("paused run did %v, want restart/web-0 only", done)
	}
	var last struct {
		Resume string `json:"resume"`
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || !strings.Contains(last.Resume, "kubectl dbops") {
		t.Errorf("no resume hint in the done event (%v):\n%s", err, res.Stdout)
	}
	lease, j := getLockLease(t, ns, webCluster)
	if j.State != "paused" || !slices.Equal(j.Done, []string{"restart/web-0"}) {
		t.Errorf("journal %+v, want paused with restart/web-0 done", j)
	}
	if h := holderString(lease.Spec.HolderIdentity); h != "" {
		t.Errorf("lock held by %q while paused", h)
	}
	pods, err := bed.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changed := map[string]bool{}
	for _, p := range pods.Items {
		changed[p.Name] = p.UID != old[p.Name]
	}
	if !changed["web-0"] || changed["web-1"] || changed["web-2"] {
		t.Errorf("restarted pods after the pause: %v, want web-0 only", changed)
	}

	start := time.Now()
	res = runCLI(t, env, append(args, "--pause-between", "2s")...)
	if res.Code != 0 {
		t.Fatalf("resume: %s", res)
	}
	evs = parseNDJSON(t, res)
	if started := stepsOf(evs, "step-started"); !slices.Equal(started, []string{"restart/web-1", "restart/web-2"}) {
		t.Errorf("resume started %v, want web-1 and web-2", started)
	}
	if skipped := stepsOf(evs, "step-skipped"); !slices.Equal(skipped, []string{"restart/web-0"}) {
		t.Errorf("resume skipped %v, want web-0", skipped)
	}
	pauses := 0
	for _, e := range evs {
		if e.Type == "warning" && strings.Contains(e.Message, "(--pause-between)") {
			pauses++
		}
	}
	if pauses != 1 || time.Since(start) < 2*time.Second {
		t.Errorf("%d pause warnings in %s, want 1 pause of 2s between web-1 and web-2", pauses, time.Since(start))
	}
	_, j = getLockLease(t, ns, webCluster)
	if j.State != "succeeded" || len(j.Done) != 3 {
		t.Errorf("journal %+v, want succeeded with 3 done", j)
	}
}

// TestStatusWatchSeesChanges: `status --watch -o json` prints the status, then a document
// when the lock is taken by another command, and exits 0 on SIGINT.
func TestStatusWatchSeesChanges(t *testing.T) {
	ns := newNamespace(t)
	createDBCluster(t, ns, webCluster, 3)
	env := cliEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	w := startJSONWatch(ctx, t, env, "status", webCluster, "-n", ns, "--watch", "-o", "json", "--timeout", "2m")
	type doc struct {
		Kind string `json:"kind"`
		Lock struct {
			Holder string `json:"holder"`
		} `json:"lock"`
	}
	next := func(what string) (d doc) {
		t.Helper()
		if err := json.Unmarshal(w.next(what), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := next("the first status"); d.Kind != "ClusterStatus" || d.Lock.Holder != "" {
		t.Fatalf("first document %+v", d)
	}
	if res := runCLI(t, env, "lock", "acquire", webCluster, "-n", ns, "--id", "bob"); res.Code != 0 {
		t.Fatalf("lock acquire: %s", res)
	}
	for d := next("the lock taken"); d.Lock.Holder != "bob"; d = next("the lock taken") {
	}
	if code := w.interrupt(); code != 0 {
		t.Errorf("status --watch after SIGINT: exit %d; stderr: %s", code, w.stderr.String())
	}
}

// jsonWatch is a running `kubectl-dbops ... -o json` that prints a stream of documents.
type jsonWatch struct {
	t      *testing.T
	ctx    context.Context
	cmd    *exec.Cmd
	stderr *strings.Builder
	docs   chan json.RawMessage
	exited bool
}

// startJSONWatch starts the CLI with args and decodes its stdout as JSON documents; the
// process is killed when the test ends unless interrupt ended it.
func startJSONWatch(ctx context.Context, t *testing.T, env []string, args ...string) *jsonWatch {
	t.Helper()
	w := &jsonWatch{t: t, ctx: ctx, cmd: exec.CommandContext(ctx, dbopsBinary(t), args...), stderr: &strings.Builder{}, docs: make(chan json.RawMessage, 16)}
	w.cmd.Env = env
	w.cmd.Stderr = w.stderr
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !w.exited {
			_ = w.cmd.Process.Kill()
			_ = w.cmd.Wait()
		}
	})
	go func() {
		defer close(w.docs)
		dec := json.NewDecoder(out)
		for {
			var d json.RawMessage
			if err := dec.Decode(&d); err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
					t.Errorf("decoding the watch output: %v", err)
				}
				return
			}
			w.docs <- d
		}
	}()
	return w
}

// next is the next document; the test fails if the output ends or the context first.
func (w *jsonWatch) next(what string) json.RawMessage {
	w.t.Helper()
	select {
	case d, ok := <-w.docs:
		if !ok {
			w.t.Fatalf("watch output ended before %s; stderr: %s", what, w.stderr.String())
		}
		return d
	case <-w.ctx.Done():
		w.t.Fatalf("no document for %s", what)
	}
	return nil
}

// interrupt sends SIGINT, reads the rest of the output and returns the exit code.
func (w *jsonWatch) interrupt() int {
	w.t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		w.t.Fatal(err)
	}
	for range w.docs {
	}
	err := w.cmd.Wait()
	w.exited = true
	return cliExitCode(w.t, err)
}
