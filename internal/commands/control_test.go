package commands

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// pause, continue and abort refuse with one line and write nothing without a run to steer (no
// Lease, a hold taken by hand) and for bad input; with a running operation the request is
// written on the Lease, with an Event.
func TestControlCommands(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lease bool // a running restart holds the lock
		args  []string
		code  int
		want  string
	}{
		{name: "pause without a run", args: []string{"pause", "db", "--reason", "x"}, code: ops.ExitPrecondition, want: "no operation is running"},
		{name: "abort without a run", args: []string{"abort", "db"}, code: ops.ExitPrecondition, want: "no operation is running"},
		{name: "continue not paused", lease: true, args: []string{"continue", "db"}, code: ops.ExitPrecondition, want: "is not paused"},
		{name: "no cluster", args: []string{"pause"}, code: ops.ExitUsage},
		{name: "dry-run", lease: true, args: []string{"pause", "db", "--dry-run"}, code: 0, want: "would write a pause request"},
		{name: "pause", lease: true, args: []string{"pause", "db", "--reason", "lag"}, code: 0, want: "pause requested on prod/db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := fakecluster.Objects("prod", "db", "", dbGroups()...)
			if tc.lease {
				l := heldLease("prod", "db", "ci@test", "s1", "restart --rolling", "")
				l.Annotations[lock.AnnotationJournal] = `{"operation":"restart","args":"--rolling","holder":"ci@test","state":"running","steps":3}`
				objs = append(objs, l)
			}
			h := newHarness(t, objs...)
			r := h.run(tc.args...)
			if r.code != tc.code || !strings.Contains(r.out+r.err, tc.want) {
				t.Fatalf("exit %d, want %d saying %q\nstdout: %s\nstderr: %s", r.code, tc.code, tc.want, r.out, r.err)
			}
			w := fakecluster.Writes(h.client)
			if tc.code != 0 || strings.Contains(tc.name, "dry-run") {
				if strings.Count(strings.TrimSpace(r.err), "\n") > 0 {
					t.Errorf("refusal is not one line:\n%s", r.err)
				}
				if len(w) > 0 {
					t.Errorf("wrote: %v", w)
				}
				return
			}
			l, err := h.client.CoordinationV1().Leases("prod").Get(t.Context(), lock.LeaseName("db"), metav1.GetOptions{})
			if err != nil || !strings.Contains(l.Annotations[lock.AnnotationControl], `"action":"pause"`) || !strings.Contains(l.Annotations[lock.AnnotationControl], `"reason":"lag"`) {
				t.Fatalf("lease control annotation = %q (%v)", l.Annotations[lock.AnnotationControl], err)
			}
			ev, _ := h.client.CoreV1().Events("prod").List(t.Context(), metav1.ListOptions{})
			found := false
			for _, e := range ev.Items {
				found = found || e.Reason == "DbopsRunPauseRequested"
			}
			if !found {
				t.Error("no DbopsRunPauseRequested event")
			}
		})
	}
}
