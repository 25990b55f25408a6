package foundationdb

import (
	"slices"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestOperatorLocksFromResource: the operator verbs' view of a FoundationDBCluster (what lock
// status, deny list and list render) is its deny list, status.locks and pause as the resource
// says, named as the operator spells them; none for the StatefulSet layout.
func TestOperatorLocksFromResource(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	c, _, e := liveCluster(t, 3, 3)
	obj := ops.ControllerOf(c.Groups[0]).Object
	obj["apiVersion"], obj["kind"] = "apps.foundationdb.org/v1beta2", "FoundationDBCluster"
	md := obj["metadata"].(map[string]any)
	md["namespace"], md["uid"] = "demo", "cr-uid"
	md["annotations"] = map[string]any{AnnotationPause: `{"by":"oncall@x","until":"2026-11-27T07:00:00Z"}`}
	obj["spec"] = map[string]any{"skip": true, "lockOptions": map[string]any{"denyList": []any{map[string]any{"id": "dc2"}, map[string]any{"id": "dc3", "allow": true}}}}
	obj["status"] = map[string]any{"locks": map[string]any{"lockDenyList": []any{"dc2"}}}
	l := e.OperatorLocks(t.Context(), c, false, now)
	if l == nil {
		t.Fatal("no operator locks for a FoundationDBCluster")
	}
	if l.Resource.Kind != "FoundationDBCluster" || l.Resource.Name != "myfdb" || l.Resource.UID != "cr-uid" {
		t.Errorf("resource %+v", l.Resource)
	}
	if want := []ops.OperatorDenyEntry{{ID: "dc2"}, {ID: "dc3", Allow: true}}; !slices.Equal(l.DenyList, want) {
		t.Errorf("deny list %+v, want %+v", l.DenyList, want)
	}
	if !slices.Equal(l.StatusLocks, []string{"dc2"}) {
		t.Errorf("status locks %v", l.StatusLocks)
	}
	if l.Paused == nil || l.Paused.Resume != "kubectl dbops lock release myfdb -n demo --id oncall@x" ||
		l.Paused.Description != "the operator is paused (spec.skip true, set by lock acquire --pause-operator as oncall@x; that lock expired at 2026-11-27T07:00:00Z, the pause did not)" {
		t.Errorf("pause %+v", l.Paused)
	}
	if l.DBLock != nil || l.DBLockError != "" {
		t.Errorf("the database was read with readDB false: %+v %q", l.DBLock, l.DBLockError)
	}
	if got := e.OperatorLockOwner(); got != LockOwnerID {
		t.Errorf("owner %q", got)
	}
	sts := &ops.Cluster{Name: "fdb", Namespace: "demo", Groups: []*ops.NodeGroup{{Name: "fdb", Owner: &ops.StatefulSetOwner{Name: "fdb"}}}}
	if e.OperatorResource(sts) != nil || e.OperatorLocks(t.Context(), sts, true, now) != nil {
		t.Error("the StatefulSet layout has no operator resource")
	}
}
