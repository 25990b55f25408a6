package cratedb_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/fakes/cratedbtest"
)

var replGroups = []fakecluster.Group{{Name: "master", Role: "master", Replicas: 3}, {Name: "hot", Role: "data", Order: 1, Replicas: 3}}

// simulate ties the fake database to the fake StatefulSet controller: a
// deleted pod's node leaves sys.nodes, a recreated one rejoins on a fresh
// PVC. It reports deletions of pods whose node still held shards.
func simulate(t *testing.T, client *fake.Clientset, c *ops.Cluster, db *cratedbtest.DB) *[]string {
	t.Helper()
	var (
		mu       sync.Mutex
		problems []string
		gen      int
	)
	node := db.NodeOf
	for _, p := range c.AllPods() {
		for _, name := range p.PVCs {
			if _, err := client.CoreV1().PersistentVolumeClaims("prod").Create(context.Background(),
				&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", UID: types.UID(name + "-uid0")}},
				metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fakecluster.Start(t, client, "prod")
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n := node(a.(k8stesting.DeleteAction).GetName())
		db.Do(func(d *cratedbtest.DB) {
			if d.Shards[n] > 0 {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("pod of %s deleted with %d shards on it", n, d.Shards[n]))
				mu.Unlock()
			}
		})
		db.RemoveNodes(n)
		return false, nil, nil
	})
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		gvr := corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
		name := "data-" + p.Name
		if _, err := client.Tracker().Get(gvr, "prod", name); err != nil {
			mu.Lock()
			gen++
			uid := types.UID(fmt.Sprintf("%s-new%d", name, gen))
			mu.Unlock()
			if err := client.Tracker().Create(gvr, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", UID: uid}}, "prod"); err != nil {
				return true, nil, err
			}
		}
		// A fresh data directory: the node comes back with a new ID.
		n := node(p.Name)
		db.AddNodes(n)
		db.Do(func(d *cratedbtest.DB) { d.IDs[n] = fmt.Sprintf("id-%s-gen%d", n, gen) })
		return false, nil, nil
	})
	return &problems
}

func TestReplacementDrainsThenKeepsOtherExclusions(t *testing.T) {
	client, c, db := setup(t, replGroups...)
	problems := simulate(t, client, c, db)
	db.Do(func(d *cratedbtest.DB) {
		d.Exclusions = "data-hot-7"
		d.Shards["data-hot-1"] = 5
		d.Shards["data-hot-0"] = 4
		d.Replicas = []string{"1"}
	})
	e := engine(client, db, nil)
	p, err := e.PlanReplacement(context.Background(), c, ops.ReplaceRequest{Pods: []string{"db-hot-1"}, MaxConcurrent: 1, Args: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	want := []string{"replace/drain/db-hot-1", "replace/recreate/db-hot-1", "replace/rejoin/db-hot-1", "replace/include/db-hot-1"}
	if !slices.Equal(ids, want) {
		t.Fatalf("steps %v, want %v", ids, want)
	}
	lk := &journalLock{j: nil}
	if err := (&ops.Executor{Locker: lk, Timeout: time.Minute}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if len(*problems) > 0 {
		t.Errorf("data lost: %v", *problems)
	}
	writes := db.Statements(true)
	wantWrites := []string{
		`SET GLOBAL "cluster.routing.allocation.exclude._name" = 'data-hot-7,data-hot-1'`,
		`SET GLOBAL "cluster.routing.allocation.exclude._name" = 'data-hot-7'`,
	}
	if !slices.Equal(writes, wantWrites) {
		t.Errorf("writes %v\nwant %v", writes, wantWrites)
	}
	db.Do(func(d *cratedbtest.DB) {
		if !slices.Contains(d.Nodes, "data-hot-1") {
			t.Error("data-hot-1 not back in sys.nodes")
		}
		if d.Shards["data-hot-0"] != 4 {
			t.Errorf("shards of a node not replaced moved: %d", d.Shards["data-hot-0"])
		}
	})
	pvc, err := client.CoreV1().PersistentVolumeClaims("prod").Get(context.Background(), "data-db-hot-1", metav1.GetOptions{})
	if err != nil || strings.HasSuffix(string(pvc.UID), "-uid0") {
		t.Errorf("PVC not replaced: %v %v", pvc, err)
	}
}

func TestReplacementRefusals(t *testing.T) {
	tests := []struct {
		name  string
		setup func(d *cratedbtest.DB)
		pods  []string
		n     int
		want  string
	}{
		{"red", func(d *cratedbtest.DB) { d.Severity = int32(3) }, []string{"db-hot-1"}, 1, "cluster is red"},
		{"replicas need the nodes", func(d *cratedbtest.DB) { d.Replicas = []string{"1"} }, []string{"db-hot-0", "db-hot-1"}, 2, "only 1 data nodes remain"},
		// Replicas would never leave the drained node (drainblock.go).
		{"allocation held to new_primaries", func(d *cratedbtest.DB) { d.Allocation = "new_primaries" }, []string{"db-hot-1"}, 1,
			"cannot replace db-hot-1: cluster.routing.allocation.enable is 'new_primaries'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, c, db := setup(t, replGroups...)
			simulate(t, client, c, db)
			db.Do(tt.setup)
			e := engine(client, db, nil)
			p, err := e.PlanReplacement(context.Background(), c, ops.ReplaceRequest{Pods: tt.pods, MaxConcurrent: tt.n, Args: "x"})
			if err != nil {
				t.Fatal(err)
			}
			client.ClearActions()
			// Before the lock: nothing written at all, not even the Lease.
			if p.Preflight == nil {
				t.Fatal("the replacement plan has no preflight")
			}
			err = p.Preflight(context.Background(), ops.PreflightState{})
			if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("preflight: err = %v, want a precondition error containing %q", err, tt.want)
			}
			if w := fakecluster.Writes(client); len(w) > 0 {
				t.Errorf("refused preflight wrote %v", w)
			}
			// A resumed run skips it (its own exclusion may hold the cluster in flux); the
			// drain step's precheck refuses the same way under the lock.
			if err := p.Preflight(context.Background(), ops.PreflightState{Resuming: true}); err != nil {
				t.Errorf("preflight of a resumed run: %v", err)
			}
			err = (&ops.Executor{Locker: &journalLock{}, Timeout: time.Minute}).Run(context.Background(), p)
			if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a precondition error containing %q", err, tt.want)
			}
			if w := db.Statements(true); len(w) > 0 {
				t.Errorf("refused replacement wrote SQL: %v", w)
			}
			for _, w := range fakecluster.Writes(client) {
				if !strings.Contains(w, "leases") {
					t.Errorf("refused replacement wrote %s", w)
				}
			}
		})
	}
}

func TestNotMembers(t *testing.T) {
	client, c, db := setup(t, replGroups...)
	db.RemoveNodes("data-hot-2")
	got, err := engine(client, db, nil).NotMembers(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["db-hot-2"] != "no CrateDB node in sys.nodes matches it (hostname db-hot-2)" {
		t.Errorf("NotMembers = %v", got)
	}
}
