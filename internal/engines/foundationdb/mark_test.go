package foundationdb

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// breakableExec fails every command once broken is set (the database's pods unreachable).
type breakableExec struct {
	next   kube.Executor
	broken atomic.Bool
}

func (b *breakableExec) Exec(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader) ([]byte, []byte, error) {
	if b.broken.Load() {
		return nil, nil, errors.New("unable to upgrade connection: container not found")
	}
	return b.next.Exec(ctx, ns, pod, container, argv, stdin)
}

// TestMarkRefusesWhatChangedSincePlan: marking a batch for removal is one patch carrying the
// resourceVersion read. When someone changed the FoundationDBCluster meanwhile (the patch
// conflicts), the run reads it again and checks again: a process group gone from its status
// is refused; so is a CR whose database cannot be checked again (status json unreadable);
// and a CR that keeps changing is refused after a bounded number of attempts. Each refusal
// is a precondition, and the list is never written.
func TestMarkRefusesWhatChangedSincePlan(t *testing.T) {
	for _, tc := range []struct {
		name string
		// conflicts is how many patches conflict (-1: all).
		conflicts int
		// changed is what someone else changed in the CR after the plan.
		changed func(now *unstructured.Unstructured)
		// unreachable: from the first conflict on, no command runs in the database's pods.
		unreachable bool
		message     string
	}{
		{name: "group gone from the status", conflicts: 1, changed: func(now *unstructured.Unstructured) {
			groups, _, _ := unstructured.NestedSlice(now.Object, "status", "processGroups")
			var kept []any
			for _, g := range groups {
				if g.(map[string]any)["processGroupID"] != "storage-11" {
					kept = append(kept, g)
				}
			}
			_ = unstructured.SetNestedSlice(now.Object, kept, "status", "processGroups")
		}, message: "process group storage-11 is no longer in the status"},
		{name: "cannot be checked again", conflicts: 1, unreachable: true,
			message: "changed since the plan and cannot be checked again"},
		{name: "keeps changing", conflicts: -1, message: "keeps changing (6 resourceVersion conflicts)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, sim := liveCluster(t, 3, 3)
			withProcessGroups(c)
			x := &breakableExec{next: sim.deps.Exec}
			e, err := New(ops.EngineDeps{Client: sim.deps.Client, Exec: x}, Options{PollInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			obj := liveCR(c).Object
			now := (&unstructured.Unstructured{Object: obj}).DeepCopy()
			if tc.changed != nil {
				tc.changed(now)
			}
			dyn := fakeCRClient(now)
			var seen, written atomic.Int32
			dyn.PrependReactor("patch", "foundationdbclusters", func(k8stesting.Action) (bool, runtime.Object, error) {
				if n := seen.Add(1); tc.conflicts < 0 || int(n) <= tc.conflicts {
					if tc.unreachable {
						x.broken.Store(true)
					}
					return true, nil, apierrors.NewConflict(ClusterGVR.GroupResource(), "myfdb", errors.New("the object has been modified"))
				}
				written.Add(1)
				return false, nil, nil
			})
			e.deps.Dynamic = dyn
			p, err := e.PlanReplacement(t.Context(), c, ops.ReplaceRequest{Pods: []string{"myfdb-storage-11"}, MaxConcurrent: 1})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			err = (&ops.Executor{LockID: "t"}).Run(ctx, p)
			if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err %v, want the precondition refusal %q", err, tc.message)
			}
			if written.Load() != 0 {
				t.Fatalf("%d patch(es) written", written.Load())
			}
		})
	}
}
