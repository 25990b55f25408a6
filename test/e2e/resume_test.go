//go:build e2e

// End-to-end tests of resuming an interrupted operation: the printed hint pasted into a
// shell, `kubectl dbops resume`, and the refusal to overwrite an unfinished journal.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/bedwire"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// TestResumeCrateDBRestart interrupts a CrateDB rolling restart with SIGINT after its first
// pod, checks that a different command would not silently throw its progress away, then
// finishes it: by pasting the printed hint verbatim into a shell (through kubectl's plugin
// lookup), or with `resume CLUSTER`. Either way every pod is restarted exactly once, in order.
func TestResumeCrateDBRestart(t *testing.T) {
	t.Run("pasted-hint", func(t *testing.T) { testResumeCrateDB(t, true) })
	t.Run("resume-command", func(t *testing.T) { testResumeCrateDB(t, false) })
}

func testResumeCrateDB(t *testing.T, paste bool) {
	kubectl := bed.Kubectl() // pasting the hint goes through kubectl's plugin lookup
	x := newCrateEnvLayout(t, true, bedwire.LayoutPodName)
	var order []string
	for _, g := range crateE2EGroups {
		for i := range int(g.replicas) {
			order = append(order, fmt.Sprintf("%s-%d", g.sts(x.name), i))
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

	// Run 1, with run-only flags the hint must leave out: interrupted after the first pod.
	run1 := startCLI(t, x.env, x.args("restart", "--rolling", "--yes", "--health-checks", "2", "--health-interval", "200ms",
		"--timeout", "20m", "-o", "json")...)
	run1.waitEvent("the first step-done", func(e ndEvent) bool { return e.Type == "step-done" })
	if err := run1.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	res1 := run1.wait()
	if res1.Code != 130 {
		t.Fatalf("interrupted run: want exit 130: %s", res1)
	}
	done1 := stepsOf(parseNDJSON(t, res1), "step-done")
	hint := resumeHintOf(t, res1)
	t.Logf("run 1: steps done %v; hint: %s", done1, hint)
	wantPrefix := "kubectl dbops restart " + x.name + " -n " + x.ns + " "
	if !strings.HasPrefix(hint, wantPrefix) {
		t.Errorf("hint %q does not start with %q", hint, wantPrefix)
	}
	for _, bad := range []string{"dbops dbops", "--timeout", " -o", "--output", "--kubeconfig"} {
		if strings.Contains(hint, bad) {
			t.Errorf("hint %q contains %q", hint, bad)
		}
	}
	// The run had --yes: the hint repeats it, so it works where it was printed (no terminal).
	for _, want := range []string{"--rolling", "--health-checks=2", "--health-interval=200ms", "--yes"} {
		if !strings.Contains(hint, want) {
			t.Errorf("hint %q lacks %q", hint, want)
		}
	}

	// Run 1 may have deleted the next pod just before the interrupt landed (the next delete
	// follows a Ready at once): let it come back, so the commands below meet the cluster as an
	// operator would after the incident, not a refusal for a pod that is not Ready.
	waitPods(t, x.ns, labels.Everything(), x.wantNodes(), func(p *corev1.Pod) bool {
		return testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
	x.waitGreen()

	// Through a counting proxy: its own lock ID (admin@proxy), and a record of every write.
	kc, counter := countingKubeconfig(t)
	env := slices.Clone(x.env)
	for i, kv := range env {
		if strings.HasPrefix(kv, "KUBECONFIG=") {
			env[i] = "KUBECONFIG=" + kc
		}
	}
	lease := func() (string, ops.Journal) {
		l, err := bed.Client.CoordinationV1().Leases(x.ns).Get(t.Context(), "dbops-"+x.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var j ops.Journal
		if err := json.Unmarshal([]byte(l.Annotations["dbops.io/journal"]), &j); err != nil {
			t.Fatalf("journal on the lease: %v", err)
		}
		return l.ResourceVersion, j
	}
	rv0, j0 := lease()
	if j0.State != ops.JournalInterrupted || j0.Request == nil {
		t.Fatalf("journal after the interrupted run: %+v", j0)
	}

	// A different command warns in dry-run, and refuses without --yes (no terminal here).
	resumeCmd := "kubectl dbops resume " + x.name + " -n " + x.ns
	dry := runCLI(t, env, x.args("restart", "--rolling", "--group", "cold", "--dry-run")...)
	if dry.Code != 0 || !strings.Contains(dry.Stdout, "WARNING: replaces the record of the unfinished restart --rolling") ||
		!strings.Contains(dry.Stdout, resumeCmd) {
		t.Errorf("dry-run of a different command does not warn about the unfinished journal: %s", dry)
	}
	refused := runCLI(t, env, x.args("restart", "--rolling", "--group", "cold")...)
	if refused.Code != ops.ExitUsage || !strings.Contains(refused.Stderr, "would replace the record of the unfinished restart --rolling") ||
		!strings.Contains(refused.Stderr, resumeCmd) || !strings.Contains(refused.Stderr, "pass --yes") {
		t.Errorf("a different command without --yes: want exit 2 naming the unfinished run and how to resume it: %s", refused)
	}
	if w := apiWrites(counter); len(w) > 0 {
		t.Errorf("the warned and refused commands wrote: %v", w)
	}
	if rv, _ := lease(); rv != rv0 {
		t.Errorf("the lease changed (resourceVersion %s -> %s) though nothing should have been written", rv0, rv)
	}

	// Finish it.
	var res2 cliResult
	if paste {
		res2 = runPasted(t, env, kubectl, hint)
	} else {
		res2 = runCLI(t, env, "resume", x.name, "-n", x.ns, "--yes")
		if !strings.Contains(res2.Stderr, "resuming restart --rolling on "+x.ns+"/"+x.name) {
			t.Errorf("resume does not say what it resumes: %s", res2)
		}
	}
	if res2.Code != 0 {
		t.Fatalf("resumed run: want exit 0: %s", res2)
	}
	if want := fmt.Sprintf("by %s (now resumed as admin@", defaultLockID(t)); !strings.Contains(res2.Stdout, want) {
		t.Errorf("the resumed run does not name the lock ID that started it (%q): %s", want, res2)
	}
	changes := waitReplacementsReady(t, podRec, order, old)
	checkRestartOrder(t, changes, order, old)
	counter.mu.Lock()
	deletes := counter.counts["DELETE pods"]
	counter.mu.Unlock()
	// Run 1's last delete may have been in flight at SIGINT (an action finishes): that pod
	// is then skipped by its precheck. Never more than the pods run 1 had not finished.
	if most := len(order) - len(done1); deletes > most || deletes < most-1 {
		t.Errorf("the resumed run deleted %d pods, want %d (or one fewer): %s", deletes, most, counter)
	}
	if _, j := lease(); j.State != ops.JournalSucceeded || len(j.Done) != len(order) {
		t.Errorf("journal after the resumed run: %+v", j)
	}
}

// resumeHintOf returns the command line of the resume hint in a run's final done event.
func resumeHintOf(t *testing.T, res cliResult) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(res.Stdout))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var ev struct {
			Type   string `json:"type"`
			Resume string `json:"resume"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("stdout line is not JSON: %q", sc.Text())
		}
		if ev.Type == "done" && ev.Resume != "" {
			hint, ok := strings.CutPrefix(ev.Resume, "re-run the same command to resume: ")
			if !ok {
				t.Fatalf("resume hint %q lacks its prefix", ev.Resume)
			}
			return hint
		}
	}
	t.Fatalf("no done event with a resume hint: %s", res)
	return ""
}

// runPasted runs line verbatim through /bin/sh, with a PATH where `kubectl dbops` finds this
// build as a plugin, and no terminal: the hint carries the interrupted run's --yes.
func runPasted(t *testing.T, env []string, kubectl, line string) cliResult {
	t.Helper()
	env = pluginPath(t, env)
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", line)
	cmd.Env = env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{Args: []string{"sh", "-c", line}, Code: cliExitCode(t, err), Stdout: stdout.String(), Stderr: stderr.String()}
	t.Logf("sh -c %q: exit %d", line, res.Code)
	return res
}

// apiWrites lists the requests through the counting proxy that could change something
// (access reviews only ask).
func apiWrites(c *apiRequestCounter) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k, n := range c.counts {
		verb, resource, _ := strings.Cut(k, " ")
		if slices.Contains([]string{"GET", "WATCH"}, verb) || strings.Contains(resource, "selfsubjectaccessreviews") || strings.Contains(resource, "selfsubjectrulesreviews") {
			continue
		}
		out = append(out, fmt.Sprintf("%s=%d", k, n))
	}
	return out
}
