package cratedb_test

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/cratedb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/fakes/cratedbtest"
)

// countingExecer counts the commands run in pods before passing them on.
type countingExecer struct {
	next kube.Executor
	n    atomic.Int32
}

func (x *countingExecer) Exec(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader) ([]byte, []byte, error) {
	x.n.Add(1)
	return x.next.Exec(ctx, ns, pod, container, argv, stdin)
}

// TestBootstrapRefusesWithoutAReadyMasterEligiblePod: bootstrap runs crash in a Ready pod of
// the master-eligible group only. A group with no pod refuses at plan time; with every pod not
// Ready the run refuses (precondition) before any crash runs in a pod that cannot answer.
func TestBootstrapRefusesWithoutAReadyMasterEligiblePod(t *testing.T) {
	t.Run("no pod", func(t *testing.T) {
		client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 1})
		for _, g := range c.Groups {
			g.Pods = nil
		}
		x := &countingExecer{next: db.Execer()}
		_, err := engine(client, db, x).PlanBootstrap(context.Background(), c, cratedb.BootstrapRequest{})
		if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), "no master-eligible pod") {
			t.Fatalf("err %v, want the precondition refusal", err)
		}
		if x.n.Load() != 0 {
			t.Fatalf("%d command(s) run in pods", x.n.Load())
		}
	})
	t.Run("no Ready pod", func(t *testing.T) {
		client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3})
		db.Do(func(d *cratedbtest.DB) { delete(d.Users, "system") })
		pods, err := client.CoreV1().Pods("prod").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			if _, err := client.CoreV1().Pods("prod").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		x := &countingExecer{next: db.Execer()}
		e := engine(client, db, x)
		p, err := e.PlanBootstrap(context.Background(), c, cratedb.BootstrapRequest{})
		if err != nil {
			t.Fatal(err)
		}
		err = (&ops.Executor{LockID: "t"}).Run(context.Background(), p)
		if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), "no Ready pod in master-eligible group master") {
			t.Fatalf("err %v, want the precondition refusal", err)
		}
		if x.n.Load() != 0 {
			t.Fatalf("%d command(s) run in pods that are not Ready", x.n.Load())
		}
	})
}

// TestBootstrapRefusesDuplicateUsers: the engine refuses a user named twice (which password
// would win?) or the system user (bootstrap creates it from its own Secret) with exit 2,
// before reading any Secret or running anything; the command checks the flags too, but the
// engine must not rely on its caller.
func TestBootstrapRefusesDuplicateUsers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		users   []ops.UserRequest
		message string
	}{
		{name: "twice", users: []ops.UserRequest{{Name: "app", Password: ops.SecretRef{Name: "a", Key: "pw"}}, {Name: "app", Password: ops.SecretRef{Name: "b", Key: "pw"}}},
			message: "--user app given twice"},
		{name: "system", users: []ops.UserRequest{{Name: cratedb.SystemUser, Password: ops.SecretRef{Name: "a", Key: "pw"}}},
			message: "the system user is created by bootstrap itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3})
			x := &countingExecer{next: db.Execer()}
			_, err := engine(client, db, x).PlanBootstrap(context.Background(), c, cratedb.BootstrapRequest{Users: tc.users})
			if ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err %v, want exit 2 naming %q", err, tc.message)
			}
			if x.n.Load() != 0 {
				t.Fatalf("%d command(s) run in pods", x.n.Load())
			}
		})
	}
}
