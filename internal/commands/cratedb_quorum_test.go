package commands

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/fakes/cratedbtest"
)

// newCrateEnvMasters is newCrateEnv with five masters; masterData, when set, is the master
// template's -Cnode.data argument.
func newCrateEnvMasters(t *testing.T, masterData string) *crateEnv {
	t.Helper()
	groups := crateGroups()
	groups[0].Replicas = 5
	objs := crateObjectsOf(groups)
	for _, o := range objs {
		if s, ok := o.(*appsv1.StatefulSet); ok && s.Name == "db-master" && masterData != "" {
			c := &s.Spec.Template.Spec.Containers[0]
			c.Command = append(c.Command, "-Cnode.data="+masterData)
		}
	}
	e := newCrateEnv(t)
	e.harness = newHarness(t, objs...)
	e.harness.clock = &tickClock{t: testNow}
	addCrateNode(e.db, "master-3")
	addCrateNode(e.db, "master-4")
	return e
}

// TestCrateMasterScaleDownOneAtATime: 5 -> 3 masters removes one master-eligible node per
// step, highest ordinal first, each after a stable master; a master group that holds data
// (node.data unset: CrateDB's default) is drained first. Before quorum.go the StatefulSet
// went from 5 to 3 in one change, taking two voters away at once.
func TestCrateMasterScaleDownOneAtATime(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nodeData  string
		wantDrain bool
	}{
		{name: "masters hold data by default", wantDrain: true},
		{name: "dedicated masters", nodeData: "false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCrateEnvMasters(t, tc.nodeData)
			order := e.scaleController()
			e.db.Do(func(d *cratedbtest.DB) {
				d.Replicas = []string{"1"}
				if tc.wantDrain {
					d.Shards = map[string]int{"master-3": 3, "master-4": 4, "data-hot-0": 2}
				}
			})
			r := e.run("scale", "db", "--master", "3", "--health-checks", "2", "--health-interval", "1ms", "--yes", "-o", "json", "--lock-id", "ci@test")
			if r.code != 0 {
				t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
			}
			var changes []string
			var at []int
			for _, o := range *order {
				change, n, _ := strings.Cut(o, " @")
				changes = append(changes, change)
				i, _ := strconv.Atoi(n)
				at = append(at, i)
			}
			if want := []string{"db-master 5->4", "db-master 4->3"}; !slices.Equal(changes, want) {
				t.Fatalf("StatefulSet changes %v, want %v", changes, want)
			}
			// Between the two removals: the node gone, then a master read on every green
			// check (2 in a row), then the next removal's checks.
			calls := e.db.Calls()
			masterReads := 0
			for _, c := range calls[at[0]:at[1]] {
				if c.SQL == `SELECT master_node FROM sys.cluster` {
					masterReads++
				}
			}
			if masterReads < 3 {
				t.Errorf("%d master reads between the removals, want the 2 green checks and the next removal's check", masterReads)
			}
			var want []string
			if tc.wantDrain {
				want = append(want, `SET GLOBAL "cluster.routing.allocation.exclude._name" = 'master-3,master-4'`, `RESET GLOBAL "cluster.routing.allocation.exclude._name"`)
			}
			want = append(want, `UPDATE sys.node_checks SET acknowledged = TRUE WHERE id = 1`, `UPDATE sys.node_checks SET acknowledged = TRUE WHERE id = 2`)
			if got := e.db.Statements(true); !slices.Equal(got, want) {
				t.Errorf("database writes:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			if tc.wantDrain {
				lastShards := -1
				for i, c := range calls {
					if strings.HasPrefix(c.SQL, "SELECT node['name'], count(*), sum(size) FROM sys.shards") {
						lastShards = i
					}
				}
				if lastShards < 0 || at[0] <= lastShards {
					t.Errorf("the first removal did not wait for the drain (last shards poll #%d, removal after #%d)", lastShards, at[0])
				}
			}
			if ev := e.eventMessages(); !strings.Contains(ev, "removed master-eligible node master-4") || !strings.Contains(ev, "removed master-eligible node master-3") {
				t.Errorf("no per-node DbopsScale events:\n%s", ev)
			}
		})
	}
}

// TestCrateMasterScaleDownRefuses: a remaining master that is down, or no master, refuses
// the shrink before anything is written (exit 5).
func TestCrateMasterScaleDownRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(e *crateEnv)
		want  string
	}{
		{"remaining master pod not Ready", func(e *crateEnv) {
			p, err := e.client.CoreV1().Pods("prod").Get(context.Background(), "db-master-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			if _, err := e.client.CoreV1().Pods("prod").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			e.client.ClearActions()
		}, "master-eligible pod prod/db-master-1 is not Ready"},
		{"remaining master not in sys.nodes", func(e *crateEnv) { e.db.RemoveNodes("master-2") },
			"master-eligible the node of pod db-master-2 is not in sys.nodes"},
		{"no master", func(e *crateEnv) { e.db.Do(func(d *cratedbtest.DB) { d.Master = "" }) }, "no master is elected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCrateEnvMasters(t, "false")
			e.scaleController()
			tc.setup(e)
			r := e.run("scale", "db", "--master", "3", "--yes", "--lock-id", "ci@test")
			if r.code != ops.ExitPrecondition || !strings.Contains(r.err, tc.want) {
				t.Fatalf("exit %d, want 5 with %q: %s", r.code, tc.want, r.err)
			}
			if lines := strings.Split(strings.TrimSpace(r.err), "\n"); len(lines) != 1 {
				t.Errorf("want one line on stderr: %q", r.err)
			}
			if w := fakecluster.Writes(e.client); len(w) > 0 {
				t.Errorf("refused scale wrote to the API: %v", w)
			}
			if w := e.db.Statements(true); len(w) > 0 {
				t.Errorf("refused scale wrote to the database: %v", w)
			}
		})
	}
}

// TestCrateMasterScaleDownGolden: the plan of 5 -> 3 masters that hold data (the fixture's
// master template leaves node.data at CrateDB's default): a drain, then one removal per node.
func TestCrateMasterScaleDownGolden(t *testing.T) {
	e := newCrateEnvMasters(t, "")
	r := e.run("scale", "db", "--master", "3", "--dry-run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	assertGolden(t, "scale-master-down-dry-run.text", r.out)
	if w := fakecluster.Writes(e.client); len(w) > 0 {
		t.Errorf("dry-run wrote: %v", w)
	}
	if w := e.db.Statements(true); len(w) > 0 {
		t.Errorf("dry-run wrote to the database: %v", w)
	}
}
