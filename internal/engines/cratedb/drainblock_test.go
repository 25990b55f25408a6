package cratedb_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/fakes/cratedbtest"
)

// TestDrainStalls: what keeps shards from moving is a refusal before anything is written,
// and, when it appears while the drain runs, stops the drain (exit 5, the exclusion given
// back) instead of waiting out the timeout; transient errors on the one-shot exclusion read
// are ridden out.
func TestDrainStalls(t *testing.T) {
	tests := []struct {
		name  string
		setup func(d *cratedbtest.DB)
		// args are the crate container's arguments in every StatefulSet.
		args    []string
		planErr string // refused by the plan's preflight
		runErr  string // stopped while draining
	}{{
		name:    "allocation held to primaries before",
		setup:   func(d *cratedbtest.DB) { d.Allocation = "primaries" },
		planErr: "cluster.routing.allocation.enable is 'primaries'",
	}, {
		name: "awareness keeps the zone's copies",
		// Two zones, one copy of each shard per zone; data-hot-2 is zone b's only node.
		setup: func(d *cratedbtest.DB) {
			d.Replicas = []string{"1"}
			d.Attrs = map[string]map[string]string{"data-hot-0": {"zone": "a"}, "data-hot-1": {"zone": "a"}, "data-hot-2": {"zone": "b"}}
		},
		args:    []string{"-Ccluster.routing.allocation.awareness.attributes=zone"},
		planErr: "table doc.t0 has number_of_replicas = '1' and cluster.routing.allocation.awareness.attributes = 'zone'",
	}, {
		name:   "allocation set to none while draining",
		setup:  func(d *cratedbtest.DB) { d.AllocationOnExclude = "none" },
		runErr: "cluster.routing.allocation.enable is 'none'",
	}, {
		name: "transient errors on the exclusion read",
		setup: func(d *cratedbtest.DB) {
			d.Failures, d.FailOn = 3, `SELECT settings['cluster']['routing']['allocation']['exclude']`
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3}, fakecluster.Group{Name: "hot", Role: "data", Order: 1, Replicas: 3})
			fakecluster.Start(t, client, "prod")
			db.Do(func(d *cratedbtest.DB) { d.Shards["data-hot-2"] = 40; d.DrainPerPoll = 1 })
			for _, g := range c.Groups {
				ops.StatefulSetOf(g).Spec.Template.Spec.Containers[0].Args = tt.args
			}
			e := engine(client, db, nil)
			two := int32(2)
			if tt.planErr != "" {
				db.Do(tt.setup)
			}
			p, err := e.PlanScale(context.Background(), c, ops.ScaleRequest{Data: map[string]int32{"hot": two}})
			if tt.planErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.planErr) || !errors.Is(err, ops.ErrPrecondition) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("plan err = %v, want one line with %q, exit 5", err, tt.planErr)
				}
				for _, s := range db.Statements(true) {
					t.Errorf("refused scale ran %s", s)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			db.Do(tt.setup)
			// The StatefulSet controller: the lower replica count deletes the pod above it.
			client.PrependReactor("patch", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
				_ = client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "prod", "db-hot-2")
				db.RemoveNodes("data-hot-2")
				return false, nil, nil
			})
			client.ClearActions()
			err = (&ops.Executor{Locker: &journalLock{}, Timeout: time.Minute}).Run(context.Background(), p)
			want := tt.runErr
			if want == "" {
				if err != nil {
					t.Fatalf("scale failed: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ops.ErrPrecondition) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line with %q, exit 5", err, want)
			}
			if !strings.Contains(err.Error(), "exclusion of data-hot-2 was removed") {
				t.Errorf("err = %v, want the removed exclusion reported", err)
			}
			db.Do(func(d *cratedbtest.DB) {
				if d.Exclusions != "" {
					t.Errorf("exclusion left: %q", d.Exclusions)
				}
			})
			for _, w := range fakecluster.Writes(client) {
				if strings.HasPrefix(w, "patch statefulsets") || strings.HasPrefix(w, "update statefulsets") {
					t.Errorf("stalled drain shrank the StatefulSet: %s", w)
				}
			}
		})
	}
}
