package foundationdb

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestOperatorWritesRefuseACRThatKeepsChanging: pausing the operator (spec.skip) and editing
// its deny list are merge patches carrying the resourceVersion read; on a conflict the CR is
// read again and the change computed again, a bounded number of times. A CR that changes on
// every attempt is refused (precondition, naming the conflicts), never overwritten blindly.
func TestOperatorWritesRefuseACRThatKeepsChanging(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(dyn *dynamicfake.FakeDynamicClient, u *unstructured.Unstructured) error
	}{
		{name: "pause", write: func(dyn *dynamicfake.FakeDynamicClient, _ *unstructured.Unstructured) error {
			_, err := SetSkip(context.Background(), dyn, "demo", "myfdb", true, Pause{Paused: true, By: "alice@ws"})
			return err
		}},
		{name: "deny", write: func(dyn *dynamicfake.FakeDynamicClient, u *unstructured.Unstructured) error {
			_, err := SetOperatorDeny(context.Background(), dyn, u, "other-operator", false)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "apps.foundationdb.org/v1beta2", "kind": "FoundationDBCluster",
				"metadata": map[string]any{"name": "myfdb", "namespace": "demo", "resourceVersion": "7"},
				"spec":     map[string]any{},
			}}
			dyn := fakeCRClient(u.DeepCopy())
			dyn.PrependReactor("patch", "foundationdbclusters", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewConflict(ClusterGVR.GroupResource(), "myfdb", errors.New("the object has been modified"))
			})
			err := tc.write(dyn, u)
			if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), "keeps changing (6 resourceVersion conflicts)") {
				t.Fatalf("err %v, want the precondition refusal after 6 conflicts", err)
			}
			patches := 0
			for _, a := range dyn.Actions() {
				if a.GetVerb() == "patch" {
					patches++
				}
			}
			if patches != maxPatchConflicts+1 {
				t.Fatalf("%d patches, want %d", patches, maxPatchConflicts+1)
			}
		})
	}
}

// TestFDBLockDecide: what the operator's takeLockInTransaction does with the lock key, which
// our run does before a batch: a key that holds no (owner, start, end) tuple is refused, not
// overwritten; a live holder other than us is refused naming it; an expired or denied holder,
// or our own entry, is taken over keeping its start; an empty key starts now.
func TestFDBLockDecide(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	other := &LockValue{Owner: "operator-a", Start: now.Unix() - 100, End: now.Unix() + 500}
	for _, tc := range []struct {
		name    string
		st      FDBLockState
		start   int64
		refusal string
	}{
		{name: "empty", start: now.Unix()},
		{name: "not a tuple", st: FDBLockState{Raw: []byte("garbage")}, refusal: "which is not an (owner, start, end) tuple"},
		{name: "held by another", st: FDBLockState{Holder: other}, refusal: `is held by "operator-a"`},
		{name: "held by another, denied", st: FDBLockState{Holder: other, Denied: []string{"operator-a"}}, start: other.Start},
		{name: "expired", st: FDBLockState{Holder: &LockValue{Owner: "operator-a", Start: now.Unix() - 900, End: now.Unix() - 1}}, start: now.Unix() - 900},
		{name: "ours", st: FDBLockState{Holder: &LockValue{Owner: LockOwnerID, Start: now.Unix() - 50, End: now.Unix() + 50}}, start: now.Unix() - 50},
		{name: "we are denied", st: FDBLockState{Denied: []string{LockOwnerID}}, refusal: "is on the FoundationDB operator's deny list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, err := (&FDBLock{}).decide(tc.st, now)
			if tc.refusal != "" {
				if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("err %v, want a precondition naming %q", err, tc.refusal)
				}
				return
			}
			if err != nil || start != tc.start {
				t.Fatalf("start %d, err %v; want %d", start, err, tc.start)
			}
		})
	}
}

// conflictingExec answers every fdbcli transaction ("begin ... commit") with FoundationDB's
// commit conflict (error 1020), as when another writer keeps winning the lock key.
type conflictingExec struct {
	inner kube.Executor
	txns  int
}

func (c *conflictingExec) Exec(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader) ([]byte, []byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if strings.Contains(execArg(argv), "begin") {
		c.txns++
		return []byte("ERROR: Transaction not committed due to conflict with another transaction (1020)\n"), nil, errors.New("exit status 1: Transaction not committed due to conflict with another transaction (1020)")
	}
	return c.inner.Exec(ctx, ns, pod, container, argv, stdin)
}

// TestFDBLockTakeBoundsConflicts: taking the operator's lock key retries a commit conflict a
// bounded number of times, then refuses (precondition) instead of fighting another writer
// forever.
func TestFDBLockTakeBoundsConflicts(t *testing.T) {
	c, _, e := liveCluster(t, 3, 3)
	l := e.NewFDBLock(c, LockConfig{Use: true, Prefix: defaultLockPrefix, Duration: 10 * time.Minute})
	x := &conflictingExec{inner: e.deps.Exec}
	l.cli = &CLI{Exec: x}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err := l.Take(ctx)
	if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), "3 commit conflicts in a row") {
		t.Fatalf("err %v, want the precondition after 3 conflicts", err)
	}
	if x.txns != lockConflictRetries {
		t.Fatalf("%d transactions, want %d", x.txns, lockConflictRetries)
	}
}
