package commands

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// interruptedJournal is the journal a `restart db --rolling [--group ...]`
// interrupted after its first step leaves: the plan's args and step IDs are
// read from the command's own dry-run, so the journal is the one this build
// writes.
func interruptedJournal(t *testing.T, h *harness, by string, groups ...string) ops.Journal {
	t.Helper()
	args := []string{"restart", "db", "--rolling", "--dry-run", "-o", "json"}
	for _, g := range groups {
		args = append(args, "--group", g)
	}
	r := h.run(args...)
	if r.code != 0 {
		t.Fatalf("dry-run: exit %d: %s", r.code, r.err)
	}
	var ev struct {
		Plan ops.PlanView `json:"plan"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(r.out, "\n", 2)[0]), &ev); err != nil {
		t.Fatal(err)
	}
	req := &ops.Request{Command: []string{"restart"}, Cluster: "db", Namespace: "prod", Engine: "generic",
		Flags: []ops.RequestFlag{{Name: "rolling", Values: []string{"true"}, Bool: true}}}
	if len(groups) > 0 {
		req.Flags = append([]ops.RequestFlag{{Name: "group", Values: groups}}, req.Flags...)
	}
	return ops.Journal{Operation: "restart", Args: ev.Plan.Args, Holder: by, State: ops.JournalInterrupted,
		Started: testNow.Add(-time.Hour), Updated: testNow.Add(-time.Hour + time.Minute), Steps: len(ev.Plan.Steps),
		Done: []string{ev.Plan.Steps[0].ID}, Request: req, Error: "interrupted: context canceled"}
}

// putJournal stores j on the cluster's lock object, as an interrupted run
// leaves it (lock released, journal kept), and forgets the actions so far.
func putJournal(t *testing.T, h *harness, j ops.Journal) {
	t.Helper()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "dbops-db", Namespace: "prod",
		Annotations: map[string]string{"dbops.io/journal": string(b)}}}
	if _, err := h.client.CoordinationV1().Leases("prod").Create(t.Context(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.client.ClearActions()
}

func readJournal(t *testing.T, h *harness) ops.Journal {
	t.Helper()
	lease, err := h.client.CoordinationV1().Leases("prod").Get(t.Context(), "dbops-db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var j ops.Journal
	if err := json.Unmarshal([]byte(lease.Annotations["dbops.io/journal"]), &j); err != nil {
		t.Fatal(err)
	}
	return j
}

// `resume CLUSTER` runs the recorded request (here restart --group hot,
// which the plain `restart --rolling` would not be) from where it stopped,
// as the resuming user's lock ID, naming the ID that started it.
func TestResumeRunsTheRecordedRequest(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
	putJournal(t, h, interruptedJournal(t, h, "alice@test", "hot"))
	ctrl := fakecluster.Start(t, h.client, "prod")
	r := h.run("resume", "db", "--yes", "--lock-id", "bob@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	if got, want := ctrl.Deleted(), []string{"db-hot-1"}; !slices.Equal(got, want) {
		t.Errorf("deleted %v, want %v (only the step the interrupted run had not done)", got, want)
	}
	for _, want := range []string{
		"resuming restart --rolling --group hot on prod/db, started 2026-11-22T06:00:00Z by alice@test, left interrupted with 1 of 2 step(s) done, now as bob@test: kubectl dbops restart db -n prod --group=hot --rolling",
	} {
		if !strings.Contains(r.err, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.err)
		}
	}
	if want := "by alice@test (now resumed as bob@test): 1 step(s) already done"; !strings.Contains(r.out, want) {
		t.Errorf("output does not name the ID that started the run (%q):\n%s", want, r.out)
	}
	j := readJournal(t, h)
	if j.State != ops.JournalSucceeded || len(j.Done) != 2 || j.Holder != "bob@test" {
		t.Errorf("journal after resume = %+v", j)
	}
	if j.Request == nil || j.Request.CommandLine() != "kubectl dbops restart db -n prod --group=hot --lock-id=bob@test --rolling" || j.Request.Engine != "generic" {
		t.Errorf("journal request after resume = %+v", j.Request)
	}
}

// resume honours --dry-run (done steps marked, nothing written) and -o.
func TestResumeDryRun(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
			putJournal(t, h, interruptedJournal(t, h, "alice@test", "hot"))
			r := h.run("resume", "db", "--dry-run", "-o", format)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			assertGolden(t, "resume-dry-run."+format, r.out)
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("dry-run wrote: %v", w)
			}
		})
	}
}

// Without a terminal and without --yes, resume refuses like the command it
// runs: nothing written.
func TestResumeNeedsConfirmation(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
	putJournal(t, h, interruptedJournal(t, h, "alice@test"))
	r := h.run("resume", "db")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, "refusing to restart prod/db without confirmation") {
		t.Errorf("exit %d, stderr %q", r.code, r.err)
	}
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("refusal wrote: %v", w)
	}
}

// The confirmation prompt of a resumed run shows only the steps left.
func TestConfirmShowsRemainingSteps(t *testing.T) {
	for _, cmd := range [][]string{{"resume", "db"}, {"restart", "db", "--rolling"}} {
		t.Run(cmd[0], func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
			putJournal(t, h, interruptedJournal(t, h, "alice@test"))
			h.terminal, h.stdin = true, "n\n"
			r := h.run(cmd...)
			if r.code != ops.ExitUsage || !strings.Contains(r.err, "aborted at the confirmation prompt") {
				t.Fatalf("exit %d, stderr %q", r.code, r.err)
			}
			prompt := r.err
			if cmd[0] == "resume" {
				_, prompt, _ = strings.Cut(prompt, "\n") // the "resuming ..." line
			}
			assertGolden(t, "confirm-remaining.text", prompt)
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("answering no wrote: %v", w)
			}
		})
	}
}

// A different request on a cluster with an unfinished journal would throw
// its progress away: dry-run and the prompt warn, no terminal and no --yes
// refuses with nothing written, --yes goes ahead and says so.
func TestDifferentCommandReplacingUnfinishedJournal(t *testing.T) {
	setup := func(t *testing.T) *harness {
		h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
		putJournal(t, h, interruptedJournal(t, h, "alice@test"))
		return h
	}
	t.Run("no terminal", func(t *testing.T) {
		h := setup(t)
		r := h.run("restart", "db", "--rolling", "--group", "cold")
		want := "refusing to start restart --rolling --group cold on prod/db: it would replace the record of the unfinished restart --rolling " +
			"(started 2026-11-22T06:00:00Z by alice@test, interrupted, 1 of 6 step(s) done), whose progress would be lost; " +
			"resume that with: kubectl dbops resume db -n prod, or pass --yes to run restart anyway"
		if r.code != ops.ExitUsage || strings.TrimSpace(r.err) != "error: "+want {
			t.Errorf("exit %d, stderr:\n%s\nwant:\n%s", r.code, r.err, want)
		}
		if w := fakecluster.Writes(h.client); len(w) > 0 {
			t.Errorf("refusal wrote: %v", w)
		}
	})
	t.Run("dry-run", func(t *testing.T) {
		h := setup(t)
		r := h.run("restart", "db", "--rolling", "--group", "cold", "--dry-run")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		assertGolden(t, "replace-journal-dry-run.text", r.out)
		if w := fakecluster.Writes(h.client); len(w) > 0 {
			t.Errorf("dry-run wrote: %v", w)
		}
	})
	t.Run("prompt", func(t *testing.T) {
		h := setup(t)
		h.terminal, h.stdin = true, "n\n"
		r := h.run("restart", "db", "--rolling", "--group", "cold")
		if r.code != ops.ExitUsage {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		assertGolden(t, "replace-journal-prompt.text", r.err)
		if w := fakecluster.Writes(h.client); len(w) > 0 {
			t.Errorf("answering no wrote: %v", w)
		}
	})
	t.Run("yes", func(t *testing.T) {
		h := setup(t)
		ctrl := fakecluster.Start(t, h.client, "prod")
		r := h.run("restart", "db", "--rolling", "--group", "cold", "--yes", "--lock-id", "bob@test")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		if got, want := ctrl.Deleted(), []string{"db-cold-0"}; !slices.Equal(got, want) {
			t.Errorf("deleted %v, want %v", got, want)
		}
		if want := "an earlier restart --rolling was left interrupted; its record is replaced by this restart"; !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	})
}

// Nothing to resume: no journal is an error naming the cluster; a finished
// one changes nothing and exits 0, so a retried CI step passes.
func TestResumeNothing(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
	r := h.run("resume", "db", "--yes", "--disable-locks")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, "it cannot run with --disable-locks") {
		t.Errorf("--disable-locks: exit %d, stderr %q", r.code, r.err)
	}
	r = h.run("resume", "db", "--yes")
	if r.code != ops.ExitPrecondition || !strings.Contains(r.err, "nothing to resume on prod/db: no operation is recorded on its lock") {
		t.Errorf("no journal: exit %d, stderr %q", r.code, r.err)
	}
	j := interruptedJournal(t, h, "alice@test")
	j.State, j.Done = ops.JournalSucceeded, nil
	putJournal(t, h, j)
	r = h.run("resume", "db", "--yes")
	if r.code != 0 || !strings.Contains(r.err, "nothing to resume on prod/db: the last operation (restart --rolling by alice@test) succeeded") {
		t.Errorf("finished journal: exit %d, stderr %q", r.code, r.err)
	}
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("resume with nothing to do wrote: %v", w)
	}
}

// The journal comes from the cluster: a request this build would not have
// recorded is refused with nothing written.
func TestResumeRefusesForeignRequests(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*ops.Journal)
		code  int
		want  string
		flags []string
	}{
		{"old journal", func(j *ops.Journal) { j.Request = nil }, ops.ExitPrecondition,
			"was recorded without its command (by an older kubectl-dbops); run that command again", nil},
		{"not resumable", func(j *ops.Journal) { j.Request.Command = []string{"lock", "release"} }, ops.ExitPrecondition,
			`it records the command "lock release" (resumable: restart, scale, bootstrap, replace)`, nil},
		{"other cluster", func(j *ops.Journal) { j.Request.Cluster = "other" }, ops.ExitPrecondition, "it records a run on prod/other", nil},
		{"unknown flag", func(j *ops.Journal) {
			j.Request.Flags = append(j.Request.Flags, ops.RequestFlag{Name: "force", Values: []string{"x"}})
		},
			ops.ExitPrecondition, "restart has no flag --force", nil},
		{"credential flag", func(j *ops.Journal) {
			j.Request.Flags = append(j.Request.Flags, ops.RequestFlag{Name: "token", Values: []string{"x"}})
		},
			ops.ExitPrecondition, "--token is not a flag a request records", nil},
		{"control character", func(j *ops.Journal) { j.Request.Flags[0].Values = []string{"hot\x1b[2J"} }, ops.ExitUsage, "--group", nil},
		{"engine differs", func(*ops.Journal) {}, ops.ExitUsage, "--engine etcd differs from the engine generic the interrupted run was planned by", []string{"--engine", "etcd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
			j := interruptedJournal(t, h, "alice@test", "hot")
			tt.edit(&j)
			putJournal(t, h, j)
			r := h.run(append([]string{"resume", "db", "--yes"}, tt.flags...)...)
			if r.code != tt.code || strings.Count(r.err, "\n") != 1 || !strings.Contains(r.err, tt.want) {
				t.Errorf("exit %d (want %d), stderr %q, want one line containing %q", r.code, tt.code, r.err, tt.want)
			}
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("refusal wrote: %v", w)
			}
		})
	}
}

// A run still in progress (journal running, its lock held) is not offered
// for replacement: taking the lock refuses, naming its holder.
func TestRunInProgressIsNotReplaced(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
	j := interruptedJournal(t, h, "alice@test")
	j.State = ops.JournalRunning
	b, _ := json.Marshal(j)
	holder, secs, renewed := "alice@test", int32(600), metav1.NewMicroTime(testNow.Add(-time.Second))
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "dbops-db", Namespace: "prod",
		Annotations: map[string]string{"dbops.io/journal": string(b)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &renewed, AcquireTime: &renewed}}
	if _, err := h.client.CoordinationV1().Leases("prod").Create(t.Context(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.terminal, h.stdin = true, "y\n"
	r := h.run("restart", "db", "--rolling", "--group", "cold", "--lock-id", "bob@test", "--no-tui")
	if r.code != ops.ExitLocked || strings.Contains(r.err, "lose the progress") || !strings.Contains(r.err, "locked by alice@test") {
		t.Errorf("exit %d (want 3), stderr:\n%s", r.code, r.err)
	}
}

// The default lock ID comes from the kubeconfig (lock.IDFromKubeconfig):
// the chosen context's user and server, the impersonated user with --as,
// or --lock-id as given.
func TestResolveLockID(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "alice@api.prod.example:6443"},
		{[]string{"--context", "staging"}, "bob@api.prod.example:6443"},
		{[]string{"--as", "carol"}, "carol@api.prod.example:6443"},
		// --user overrides the context's user for the requests, and so names the person.
		{[]string{"--user", "bob"}, "bob@api.prod.example:6443"},
		{[]string{"-s", "https://10.0.0.1:6443"}, "alice@10.0.0.1:6443"},
		{[]string{"--lock-id", "ci@test", "--as", "carol"}, "ci@test"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
			r := h.run(append([]string{"lock", "acquire", "db", "-n", "prod"}, tt.args...)...)
			if r.code != 0 || !strings.Contains(r.out+r.err, "acquired by "+tt.want+" ") {
				t.Errorf("exit %d, stdout %q, stderr %q; want acquired by %s", r.code, r.out, r.err, tt.want)
			}
		})
	}
}

// A run of `restart --group hot` killed after it deleted the second pod but before it could
// journal the first step done leaves that pod missing (its journaled UID gone). Re-running the
// request resumes: the preflight reads the journal's UIDs, so it does not refuse for the pod
// this request deleted, and neither pod is deleted again.
func TestResumeWhileThisRequestsPodIsDown(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
	j := interruptedJournal(t, h, "alice@test", "hot")
	first, second := j.Done[0], ""
	r := h.run("restart", "db", "--rolling", "--group", "hot", "--dry-run", "-o", "json")
	for _, id := range []string{"restart/db-hot-0", "restart/db-hot-1"} {
		if !strings.Contains(r.out, `"id":"`+id+`"`) {
			t.Fatalf("the plan has no step %s:\n%s", id, r.out)
		}
		if id != first {
			second = id
		}
	}
	pod := func(id string) string { return strings.TrimPrefix(id, "restart/") }
	live, err := h.client.CoreV1().Pods("prod").Get(t.Context(), pod(second), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j.Done, j.Current = nil, first
	j.Data = map[string]string{"restart.uid/" + pod(first): "uid-before-the-killed-run", "restart.uid/" + pod(second): string(live.UID)}
	putJournal(t, h, j)
	ctrl := fakecluster.Start(t, h.client, "prod")
	// The killed run's delete: the StatefulSet controller brings it back only once the re-run
	// watches.
	if err := h.client.CoreV1().Pods("prod").Delete(t.Context(), pod(second), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r = h.run("restart", "db", "--rolling", "--group", "hot", "--yes", "--lock-id", "bob@test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	if got, want := ctrl.Deleted(), []string{pod(second)}; !slices.Equal(got, want) {
		t.Errorf("deleted %v, want only the killed run's delete %v", got, want)
	}
	if j := readJournal(t, h); j.State != ops.JournalSucceeded || len(j.Done) != 2 {
		t.Errorf("journal after the re-run = %+v", j)
	}
}
