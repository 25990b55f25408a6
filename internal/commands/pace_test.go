package commands

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestRestartPauseAfter: --pause-after N restarts N pods, stops with exit 7
// and outcome paused, keeps the journal; the same command without the flag
// finishes the rest without restarting those pods again.
func TestRestartPauseAfter(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
	ctrl := fakecluster.Start(t, h.client, "prod")
	r := h.run("restart", "db", "--rolling", "--yes", "--lock-id", "alice@test", "--pause-after", "2", "-o", "json")
	if r.code != ops.ExitPaused {
		t.Fatalf("exit %d, want %d: %s\n%s", r.code, ops.ExitPaused, r.err, r.out)
	}
	if got, want := ctrl.Deleted(), []string{"db-master-0", "db-master-1"}; !slices.Equal(got, want) {
		t.Errorf("deleted %v, want %v", got, want)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	var last ops.Event
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if last.Type != ops.EventDone || last.Outcome != ops.OutcomePaused || !strings.Contains(last.Resume, "kubectl dbops") {
		t.Errorf("last event %+v", last)
	}
	if !strings.Contains(r.err, "paused after 2 step(s) as asked (--pause-after 2)") {
		t.Errorf("stderr %q", r.err)
	}
	lease, err := h.client.CoordinationV1().Leases("prod").Get(t.Context(), "dbops-db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var j ops.Journal
	if err := json.Unmarshal([]byte(lease.Annotations["dbops.io/journal"]), &j); err != nil {
		t.Fatal(err)
	}
	if j.State != ops.JournalPaused || len(j.Done) != 2 {
		t.Errorf("journal %+v", j)
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("lock still held by %q while paused", *lease.Spec.HolderIdentity)
	}

	r = h.run("restart", "db", "--rolling", "--yes", "--lock-id", "alice@test")
	if r.code != 0 {
		t.Fatalf("resume: exit %d: %s\n%s", r.code, r.err, r.out)
	}
	want := []string{"db-master-0", "db-master-1", "db-master-2", "db-hot-0", "db-hot-1", "db-cold-0"}
	if got := ctrl.Deleted(); !slices.Equal(got, want) {
		t.Errorf("deleted %v, want %v", got, want)
	}
}

// TestRestartPauseBetween: --pause-between waits between pods (reported as
// a warning), not before the first; Ctrl-C during the wait ends it at once
// (see internal/ops/pace_test.go).
func TestRestartPauseBetween(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	fakecluster.Start(t, h.client, "prod")
	r := h.run("restart", "db", "--rolling", "--yes", "--lock-id", "alice@test", "--pause-between", "10ms")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if n := strings.Count(r.out, "pausing 10ms before pod/"); n != 2 {
		t.Errorf("%d pauses, want 2 (between 3 pods):\n%s", n, r.out)
	}
	if strings.Contains(r.out, "pausing 10ms before pod/db-web-0") {
		t.Errorf("paused before the first pod:\n%s", r.out)
	}
}

func TestPacingFlagsRefused(t *testing.T) {
	for _, args := range [][]string{{"--pause-after", "-1"}, {"--pause-between", "-1s"}} {
		h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
		r := h.run(append([]string{"restart", "db", "--rolling", "--yes"}, args...)...)
		if r.code != ops.ExitUsage || !strings.Contains(r.err, args[0]) {
			t.Errorf("%v: exit %d: %s", args, r.code, r.err)
		}
		if len(h.client.Actions()) > 0 {
			t.Errorf("%v: API calls %v", args, h.client.Actions())
		}
	}
}
