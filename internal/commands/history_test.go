package commands

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// Each run of an operation leaves a record on the lock's Lease (who, command, start and end,
// outcome, steps), which `history` shows: a timed-out run, then the run that resumed it.
func TestHistory(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	if r := h.run("history", "db", "-n", "prod"); r.code != 0 || !strings.Contains(r.out, "no operations recorded on prod/db") {
		t.Fatalf("history before any run: exit %d %q %q", r.code, r.out, r.err)
	}
	ctrl := fakecluster.Start(t, h.client, "prod")
	ctrl.SetHold(true)
	if r := h.run("restart", "db", "--rolling", "--yes", "--timeout", "1s", "--lock-id", "ci@test", "-n", "prod"); r.code != ops.ExitTimeout {
		t.Fatalf("first run: exit %d: %s", r.code, r.err)
	}
	ctrl.SetHold(false)
	ctrl.Flush()
	if r := h.run("restart", "db", "--rolling", "--yes", "--lock-id", "alice@test", "-n", "prod"); r.code != 0 {
		t.Fatalf("resumed run: exit %d: %s", r.code, r.err)
	}
	r := h.run("history", "db", "-n", "prod", "-o", "json")
	if r.code != 0 {
		t.Fatalf("history: exit %d: %s", r.code, r.err)
	}
	var doc History
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("history -o json: %v\n%s", err, r.out)
	}
	if len(doc.Items) != 2 || doc.Unfinished != nil {
		t.Fatalf("history items %+v (unfinished %+v), want 2 runs", doc.Items, doc.Unfinished)
	}
	first, second := doc.Items[0], doc.Items[1]
	if first.LockID != "ci@test" || first.Outcome != ops.JournalTimeout || first.Steps != 3 || first.Error == "" ||
		!strings.Contains(first.Command, "kubectl dbops restart db -n prod") || first.Run == "" {
		t.Errorf("first record %+v, want ci@test's timed-out restart", first)
	}
	if second.LockID != "alice@test" || second.Outcome != ops.JournalSucceeded || second.StepsDone != 3 || second.Run == first.Run ||
		second.Started.Before(first.Ended) {
		t.Errorf("second record %+v, want alice@test's run, succeeded with 3 steps, started after the first ended", second)
	}
	r = h.run("history", "db", "-n", "prod")
	if lines := strings.Split(strings.TrimSpace(r.out), "\n"); len(lines) != 3 || !strings.Contains(lines[1], "ci@test") || !strings.Contains(lines[2], "succeeded") {
		t.Errorf("history text:\n%s", r.out)
	}
}

// status tells a run that is alive now (its holder renews the lock) from one to resume: the
// first is shown as running, with who, since when and at which step, and no resume hint.
func TestStatusRunningNotResume(t *testing.T) {
	l := heldLease("prod", "db", "bob@elsewhere", "s1", "restart --rolling", "")
	l.Annotations[lock.AnnotationJournal] = `{"operation":"restart","args":"--rolling","holder":"bob@elsewhere","state":"running",` +
		`"started":"2026-11-22T06:50:00Z","runStarted":"2026-11-22T06:55:00Z","updated":"2026-11-22T06:59:00Z","steps":3,` +
		`"done":["restart/db-web-0"],"current":"restart/db-web-1","request":{"command":["restart"],"cluster":"db","namespace":"prod"}}`
	h := newHarness(t, append(fakecluster.Objects("prod", "db", "", webObjects()...), l)...)
	r := h.run("status", "db", "-n", "prod")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	want := "Running:  restart --rolling by bob@elsewhere since 2026-11-22T06:55:00Z, 1/3 steps done, at restart/db-web-1"
	if !strings.Contains(r.out, want) || strings.Contains(r.out, "resume") {
		t.Errorf("status:\n%s\nwant %q and no resume hint", r.out, want)
	}
}

// status in another terminal shows what the running step is blocked on, from the journal on
// the Lease, and the run's ETA.
func TestStatusShowsBlockedAndETA(t *testing.T) {
	l := heldLease("prod", "db", "bob@elsewhere", "s1", "restart --rolling", "")
	l.Annotations[lock.AnnotationJournal] = `{"operation":"restart","args":"--rolling","holder":"bob@elsewhere","state":"running",` +
		`"started":"2026-11-22T06:50:00Z","runStarted":"2026-11-22T06:55:00Z","updated":"2026-11-22T06:59:00Z","steps":3,` +
		`"done":["restart/db-web-0"],"current":"restart/db-web-1","request":{"command":["restart"],"cluster":"db","namespace":"prod"},` +
		`"blocked":{"kind":"pod","on":"pod prod/db-web-1","since":"2026-11-22T06:57:00Z","giveUpAt":"2026-11-22T07:25:00Z","toUnblock":"kubectl describe pod -n prod db-web-1"},` +
		`"eta":{"at":"2026-11-22T06:56:00Z","lowNs":60000000000,"highNs":120000000000,"basis":"2 restart step(s) left"}}`
	h := newHarness(t, append(fakecluster.Objects("prod", "db", "", webObjects()...), l)...)
	r := h.run("status", "db", "-n", "prod")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	for _, want := range []string{
		"Blocked:  on pod prod/db-web-1 (pod) since 2026-11-22T06:57:00Z, gives up at 2026-11-22T07:25:00Z\n",
		"  to unblock: kubectl describe pod -n prod db-web-1\n",
		"ETA:      1m0s–2m0s (2 restart step(s) left), estimated 2026-11-22T06:56:00Z\n",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("status:\n%s\nwant %q", r.out, want)
		}
	}
}
