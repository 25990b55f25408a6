//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// TestFleetRestartRBACRefusal is internal/commands' TestFleetRestartRBACRefusal on the two
// real control planes: in bed-b the fleet's context (bed-b-ro) acts as a user bound to exactly
// the README's Role and ClusterRole without `delete pods`; bed-a's is the admin. A fleet
// restart of the cluster both beds have (bed-b-ro first) refuses bed-b-ro's target in its RBAC
// preflight, before its lock is taken: exit 6, an ERROR line naming the context and the
// missing permission, the summary's outcome failed (Forbidden), no pod restarted and no Lease
// created in bed-b. With --fail-fast (the default) bed-a is not started (no pod restarted, no
// Lease); with --fail-fast=false every bed-a pod is restarted.
func TestFleetRestartRBACRefusal(t *testing.T) {
	bedB.get(t)
	x := newFleetEnv(t, false)
	deletePods := ops.Permission{Verb: "delete", Resource: "pods"}
	u := newRBACUserIn(t, bedB.tb, x.ns)
	u.setRules(without(u.role.Rules, deletePods), deletePods, false)
	x.contextAs("bed-b-ro", "bed-b", x.ns, u.name)
	x.context("bed-a", "bed-a", x.ns)
	for _, c := range []string{"bed-a", "bed-b"} {
		x.generic(c, x.ns, "web", 2)
	}
	refusal := "ERROR: context bed-b-ro, cluster " + x.ns + "/web: failed: "

	for _, tc := range []struct {
		name     string
		flags    []string
		summary  string // context, outcome and reason code of each row
		restartA bool   // bed-a's pods are restarted
		last     string // how the last line names the targets
	}{
		{"fail-fast", nil, "bed-b-ro failed Forbidden,bed-a not-started -", false,
			"error: fleet: 1 of 2 targets failed (bed-b-ro/" + x.ns + "/web); 1 of 2 targets not-started (bed-a/" + x.ns + "/web): "},
		{"no fail-fast", []string{"--fail-fast=false"}, "bed-b-ro failed Forbidden,bed-a succeeded -", true,
			"error: fleet: 1 of 2 targets failed (bed-b-ro/" + x.ns + "/web): "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			beforeA, beforeB := x.uids("bed-a", x.ns, "web"), x.uids("bed-b-ro", x.ns, "web")
			res := x.run(append([]string{"restart", "web", "--rolling", "--context", "bed-b-ro,bed-a", "--yes"}, tc.flags...)...)
			if res.Code != ops.ExitForbidden {
				t.Fatalf("want exit 6: %s", res)
			}
			line := ""
			for _, l := range strings.Split(res.Stderr, "\n") {
				if strings.HasPrefix(l, refusal) {
					line = l
				}
			}
			if !strings.Contains(line, "you may not delete pods") {
				t.Errorf("no refusal line naming bed-b-ro and `delete pods`: %s", res)
			}
			if strings.Contains(res.Stderr, "ERROR: context bed-a") {
				t.Errorf("bed-a reported as failed: %s", res)
			}
			lines := strings.Split(strings.TrimSpace(res.Stderr), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, tc.last) {
				t.Errorf("the last line does not start %q: %s", tc.last, res)
			}
			var rows []string
			for _, f := range fleetSummaryRows(t, res) {
				rows = append(rows, f[0]+" "+f[3]+" "+f[len(f)-1])
			}
			if strings.Join(rows, ",") != tc.summary {
				t.Errorf("summary rows %v, want %s: %s", rows, tc.summary, res)
			}

			if got := x.uids("bed-b-ro", x.ns, "web"); fmt.Sprint(got) != fmt.Sprint(beforeB) {
				t.Errorf("bed-b: pods changed despite the refusal %v -> %v", beforeB, got)
			}
			afterA := x.uids("bed-a", x.ns, "web")
			for pod, uid := range beforeA {
				if restarted := afterA[pod] != "" && afterA[pod] != uid; restarted != tc.restartA {
					t.Errorf("bed-a: pod %s restarted %v, want %v (uid %s -> %q)", pod, restarted, tc.restartA, uid, afterA[pod])
				}
			}
			// The lock (with its journal) is a Lease: none in bed-b means the refusal came before
			// the lock; in bed-a, one only when its target ran.
			for c, want := range map[string][]string{"bed-b-ro": nil, "bed-a": nil} {
				if c == "bed-a" && tc.restartA {
					want = []string{lock.LeaseName("web")}
				}
				ls, err := x.client(c).CoordinationV1().Leases(x.ns).List(t.Context(), metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, l := range ls.Items {
					names = append(names, l.Name)
				}
				if fmt.Sprint(names) != fmt.Sprint(want) {
					t.Errorf("%s: Leases %v in %s, want %v", c, names, x.ns, want)
				}
			}
		})
	}
}
