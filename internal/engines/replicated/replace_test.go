package replicated

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// withPVCs gives every pod a PVC data-<pod> and makes the controller
// stand-in create a fresh one (new UID) when it recreates a pod whose PVC
// is gone, like the StatefulSet controller does.
func (f *fixture) withPVCs() {
	f.t.Helper()
	var gen atomic.Int64
	newPVC := func(pod string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + pod, Namespace: testNS,
			UID: types.UID(fmt.Sprintf("pvc-%s-%d", pod, gen.Add(1)))}}
	}
	for p := range f.roles() {
		if err := f.client.Tracker().Add(newPVC(p)); err != nil {
			f.t.Fatal(err)
		}
	}
	f.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateActionImpl).GetObject().(*corev1.Pod)
		gvr := corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
		if _, err := f.client.Tracker().Get(gvr, testNS, "data-"+pod.Name); err != nil {
			if err := f.client.Tracker().Add(newPVC(pod.Name)); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
	f.client.ClearActions()
}

// replCluster is the discovered cluster with each pod's PVC.
func (f *fixture) replCluster() *ops.Cluster {
	c := f.cluster()
	for i := range c.Groups[0].Pods {
		c.Groups[0].Pods[i].PVCs = []string{"data-" + c.Groups[0].Pods[i].Name}
	}
	return c
}

func (f *fixture) pvcUID(pod string) types.UID {
	f.t.Helper()
	pvc, err := f.client.CoreV1().PersistentVolumeClaims(testNS).Get(context.Background(), "data-"+pod, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return pvc.UID
}

func replaceReq(pods ...string) ops.ReplaceRequest {
	return ops.ReplaceRequest{Pods: pods, Strategy: ops.StrategyReplacement, MaxConcurrent: 1,
		Args: "--strategy replacement --max-concurrent 1 --pods " + strings.Join(pods, ",")}
}

func TestReplaceSecondaryAndPrimaryRolesRestored(t *testing.T) {
	roles := map[string]string{"db-0": RolePrimary, "db-1": RoleSecondary, "db-2": RolePrimary}
	f := newFixture(t, 3, roles, strings.Replace(testConfig, "primaries: 1", "primaries: 2", 1))
	f.withPVCs()
	f.app.seq = map[string]string{"db-0": "4", "db-1": "4", "db-2": "4"}
	oldPVC := map[string]types.UID{"db-0": f.pvcUID("db-0"), "db-1": f.pvcUID("db-1")}
	oldUID := map[string]types.UID{"db-0": f.uid("db-0"), "db-1": f.uid("db-1")}
	p, err := f.eng.PlanReplacement(context.Background(), f.replCluster(), replaceReq("db-1", "db-0"))
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "replace-roles.txt", planText(t, p))
	if err := f.run(p); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"db-1: stop",
		"db-1: secondary db-0.db-hl.prod.svc db-2.db-hl.prod.svc",
		"db-0: stop",
		"db-0: primary db-2.db-hl.prod.svc",
	}
	if got := f.app.mutations(); !slices.Equal(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
	for pod, role := range roles {
		if got := f.roles()[pod]; got != role {
			t.Errorf("%s role = %q after replacement, want %q", pod, got, role)
		}
	}
	for pod := range oldPVC {
		if f.pvcUID(pod) == oldPVC[pod] {
			t.Errorf("%s still has its old PVC", pod)
		}
		if f.uid(pod) == oldUID[pod] {
			t.Errorf("%s was not recreated", pod)
		}
	}
}

// The only primary comes back empty: the first-primary slot goes by
// sequence number, and the replaced pod becomes a secondary.
func TestReplaceOnlyPrimaryElectsBySequence(t *testing.T) {
	roles := map[string]string{"db-0": RolePrimary, "db-1": RoleSecondary, "db-2": RoleSecondary}
	f := newFixture(t, 3, roles, testConfig)
	f.withPVCs()
	f.app.seq = map[string]string{"db-1": "7", "db-2": "9"}
	p, err := f.eng.PlanReplacement(context.Background(), f.replCluster(), replaceReq("db-0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.run(p); err != nil {
		t.Fatal(err)
	}
	want := []string{"db-0: stop", "db-2: seed", "db-0: secondary db-2.db-hl.prod.svc"}
	if got := f.app.mutations(); !slices.Equal(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
	wantRoles := map[string]string{"db-0": RoleSecondary, "db-1": RoleSecondary, "db-2": RolePrimary}
	if got := f.roles(); !maps.Equal(got, wantRoles) {
		t.Errorf("roles = %v, want %v", got, wantRoles)
	}
}

// A failing stop does not stop the replacement; a crash after the pod was
// recreated (its label gone) resumes from the journaled role.
func TestReplaceStopFailsThenResumeAfterCrash(t *testing.T) {
	roles := map[string]string{"db-0": RolePrimary, "db-1": RoleSecondary, "db-2": RoleSecondary}
	f := newFixture(t, 3, roles, testConfig)
	f.withPVCs()
	f.app.seq = map[string]string{"db-0": "1", "db-1": "1", "db-2": "1"}
	f.app.failOn("stop", "db-1")
	crash := errors.New("crash")
	f.app.hook = func(pod, cmd string) error {
		if cmd == "secondary" && pod == "db-1" {
			return crash
		}
		return nil
	}
	oldPVC := f.pvcUID("db-1")
	locker := &memLocker{}
	run := func() error {
		p, err := f.eng.PlanReplacement(context.Background(), f.replCluster(), replaceReq("db-1"))
		if err != nil {
			t.Fatal(err)
		}
		return (&ops.Executor{LockID: "test", Locker: locker}).Run(context.Background(), p)
	}
	if err := run(); !errors.Is(err, crash) {
		t.Fatalf("first run: %v, want the injected failure", err)
	}
	if got := f.roles()["db-1"]; got != RoleFailed {
		t.Fatalf("db-1 role after the failed command = %q, want failed", got)
	}
	// The operator fixes the cause and runs again: the pod, already
	// replaced, gets its journaled role back without a second replacement.
	f.app.hook = nil
	if err := f.eng.setRole(context.Background(), nil, &site{ns: testNS}, "db-1", ""); err != nil {
		t.Fatal(err)
	}
	deleted := len(f.deleted)
	if err := run(); err != nil {
		t.Fatal(err)
	}
	if len(f.deleted) != deleted {
		t.Errorf("resumed run deleted %v again", f.deleted[deleted:])
	}
	if got := f.roles()["db-1"]; got != RoleSecondary {
		t.Errorf("db-1 role = %q, want secondary", got)
	}
	if f.pvcUID("db-1") == oldPVC {
		t.Error("db-1 still has its old PVC")
	}
	want := []string{"db-1: stop", "db-1: secondary db-0.db-hl.prod.svc", "db-1: secondary db-0.db-hl.prod.svc"}
	if got := f.app.mutations(); !slices.Equal(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
}

func TestReplaceRefusesConcurrency(t *testing.T) {
	f := newFixture(t, 3, map[string]string{"db-0": RolePrimary}, testConfig)
	req := replaceReq("db-1", "db-2")
	req.MaxConcurrent = 2
	_, err := f.eng.PlanReplacement(context.Background(), f.replCluster(), req)
	if !errors.Is(err, ops.ErrUsage) {
		t.Fatalf("got %v, want a usage error", err)
	}
	if len(f.app.all()) != 0 {
		t.Errorf("exec'd %v", f.app.all())
	}
}
