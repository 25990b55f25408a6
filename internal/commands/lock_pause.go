package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/foundationdb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// pauseOperator sets the FoundationDBCluster's spec.skip for a lock just acquired, recording
// on the Lease first that this tool set it (a crash after the patch still leaves the record
// the release needs). A skip already set by someone else is left alone and not recorded, so
// the release will not clear it. It returns a line for the text output.
func (o *LockOptions) pauseOperator(ctx context.Context, m *lock.Manager, until time.Time) (string, error) {
	u := foundationdb.Resource(o.found)
	if u == nil || o.clients == nil || o.clients.Dynamic == nil {
		return "", ops.Usagef("--pause-operator applies to a FoundationDBCluster (it sets spec.skip); %s/%s is not one", m.Namespace, m.Cluster)
	}
	recorded, err := m.PausedOperator(ctx)
	if err != nil {
		return "", err
	}
	if skip := foundationdb.ReadCR(u).Skip; skip && recorded == "" {
		return fmt.Sprintf("spec.skip of FoundationDBCluster %s/%s was already set by someone else: left as it is, and the release will leave it too\n", m.Namespace, u.GetName()), nil
	}
	if err := m.SetPausedOperator(ctx, u.GetName()); err != nil {
		return "", err
	}
	changed, err := foundationdb.SetSkip(ctx, o.clients.Dynamic, m.Namespace, u.GetName(), true,
		foundationdb.Pause{Paused: true, By: m.ID, Until: until})
	if err != nil {
		return "", err
	}
	if !changed && recorded == "" {
		// Someone else set it between our read and our write: it is theirs.
		if err := m.ClearPausedOperator(ctx); err != nil {
			return "", err
		}
		return fmt.Sprintf("spec.skip of FoundationDBCluster %s/%s was set by someone else meanwhile: left as it is\n", m.Namespace, u.GetName()), nil
	}
	return fmt.Sprintf("operator paused: spec.skip set on FoundationDBCluster %s/%s (cleared by lock release)\n", m.Namespace, u.GetName()), nil
}

// unpauseOperator clears spec.skip before a release, only when the Lease records that this
// tool set it and the release is allowed (our lock, or --force). It returns a line for the
// text output.
func (o *LockOptions) unpauseOperator(ctx context.Context, m *lock.Manager) (string, error) {
	name, err := m.PausedOperator(ctx)
	if err != nil || name == "" {
		return "", err
	}
	st, err := m.Status(ctx)
	if err != nil {
		return "", err
	}
	if !st.Mine && !m.Force {
		return "", nil // the release refuses; the pause stays with the lock
	}
	if o.clients == nil || o.clients.Dynamic == nil {
		return "", fmt.Errorf("no dynamic client to clear spec.skip of FoundationDBCluster %s/%s", m.Namespace, name)
	}
	if _, err := foundationdb.SetSkip(ctx, o.clients.Dynamic, m.Namespace, name, false, foundationdb.Pause{}); err != nil {
		return "", err
	}
	if err := m.ClearPausedOperator(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("operator resumed: spec.skip cleared on FoundationDBCluster %s/%s (set by lock acquire --pause-operator)\n", m.Namespace, name), nil
}
