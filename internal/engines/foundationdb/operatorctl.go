package foundationdb

import (
	"context"
	"fmt"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// The operator verbs (ops.OperatorControl) for a FoundationDBCluster: the operator's pause is
// spec.skip (pause.go), its deny list spec.lockOptions.denyList (deny.go), its lock the FDB lock
// key (fdblock.go).

// OperatorResource names the FoundationDBCluster (nil for the StatefulSet layout).
func (e *Engine) OperatorResource(c *ops.Cluster) *ops.ObjectRef {
	u := Resource(c)
	if u == nil {
		return nil
	}
	return &ops.ObjectRef{Kind: "FoundationDBCluster", APIVersion: ClusterGVR.GroupVersion().String(),
		Namespace: c.Namespace, Name: u.GetName(), UID: string(u.GetUID())}
}

// OperatorLocks reads the deny list, status.locks, the pause and (readDB) the FDB lock key.
func (e *Engine) OperatorLocks(ctx context.Context, c *ops.Cluster, readDB bool, now time.Time) *ops.OperatorLocks {
	u := Resource(c)
	if u == nil {
		return nil
	}
	l := &ops.OperatorLocks{Resource: *e.OperatorResource(c), Operator: "FoundationDB operator",
		DocumentField: "foundationdbOperator", DBLockField: "fdbLock", DBName: "FDB", PauseField: "spec.skip",
		DenyListField: "spec.lockOptions.denyList", StatusLocksField: "status.locks.lockDenyList", StatusLocks: ReadCR(u).Locks}
	for _, d := range OperatorDenyList(u) {
		l.DenyList = append(l.DenyList, ops.OperatorDenyEntry{ID: d.ID, Allow: d.Allow})
	}
	if p := ReadPause(u); p.Paused {
		l.Paused = &ops.OperatorPause{Description: p.Describe(now), Resume: p.ResumeCommand(u.GetNamespace(), u.GetName())}
	}
	if !readDB {
		return l
	}
	st, _, used, err := e.ReadFDBLock(ctx, c)
	switch {
	case !used:
	case err != nil:
		l.DBLockError = err.Error()
	default:
		db := &ops.OperatorDBLock{Key: PrintableKey(st.Key), DenyKeys: st.Denied}
		if h := st.Holder; h != nil {
			db.Holder = holderOf(*h)
		} else if st.Raw != nil {
			db.Raw = PrintableKey(string(st.Raw))
		}
		l.DBLock = db
	}
	return l
}

func holderOf(v LockValue) *ops.OperatorLockHolder {
	return &ops.OperatorLockHolder{Owner: v.Owner, Start: time.Unix(v.Start, 0).UTC(), End: time.Unix(v.End, 0).UTC()}
}

// SetOperatorPaused sets or clears spec.skip (SetSkip).
func (e *Engine) SetOperatorPaused(ctx context.Context, c *ops.Cluster, paused bool, by string, until time.Time) (bool, error) {
	u := Resource(c)
	if u == nil {
		return false, ops.Usagef("%s/%s is not a FoundationDBCluster", c.Namespace, c.Name)
	}
	if e.deps.Dynamic == nil {
		return false, fmt.Errorf("no dynamic client to write FoundationDBCluster %s/%s", c.Namespace, u.GetName())
	}
	p := Pause{}
	if paused {
		p = Pause{Paused: true, By: by, Until: until}
	}
	return SetSkip(ctx, e.deps.Dynamic, c.Namespace, u.GetName(), paused, p)
}

// SetOperatorInstanceDenied flips or adds the instance's entry of spec.lockOptions.denyList
// (SetOperatorDeny).
func (e *Engine) SetOperatorInstanceDenied(ctx context.Context, c *ops.Cluster, id string, allow bool) (bool, string, error) {
	u := Resource(c)
	if u == nil {
		return false, "", ops.Usagef("%s/%s is not a FoundationDBCluster", c.Namespace, c.Name)
	}
	if e.deps.Dynamic == nil {
		return false, "", fmt.Errorf("no dynamic client to write FoundationDBCluster %s/%s", c.Namespace, u.GetName())
	}
	entry := "{id: " + id + "}"
	if allow {
		entry = "{id: " + id + ", allow: true}"
	}
	changed, err := SetOperatorDeny(ctx, e.deps.Dynamic, u, id, allow)
	return changed, entry, err
}

// ClearOwnOperatorLock clears the FDB lock key held as LockOwnerID (ClearOwnFDBLock).
func (e *Engine) ClearOwnOperatorLock(ctx context.Context, c *ops.Cluster) (*ops.OperatorLockHolder, error) {
	v, err := e.ClearOwnFDBLock(ctx, c)
	if err != nil || v == nil {
		return nil, err
	}
	return holderOf(*v), nil
}

// OperatorLockOwner is LockOwnerID.
func (e *Engine) OperatorLockOwner() string { return LockOwnerID }
