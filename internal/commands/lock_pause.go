package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// pauseOperator pauses the cluster's operator (ops.OperatorControl: FoundationDB's spec.skip)
// for a lock just acquired, recording on the Lease first that this tool set it (a crash after
// the patch still leaves the record the release needs). A pause already set by someone else
// is left alone and not recorded, so the release will not clear it. It returns a line for the
// text output.
func (o *LockOptions) pauseOperator(ctx context.Context, m *lock.Manager, until time.Time) (string, error) {
	ctl, err := o.operatorControl(o.clients, o.found)
	if err != nil {
		return "", err
	}
	if ctl == nil {
		return "", ops.Usagef("--pause-operator applies to a cluster an operator's resource manages (a FoundationDBCluster: it sets spec.skip); %s/%s is not one", m.Namespace, m.Cluster)
	}
	res := ctl.OperatorResource(o.found)
	l := ctl.OperatorLocks(ctx, o.found, false, time.Now())
	recorded, err := m.PausedOperator(ctx)
	if err != nil {
		return "", err
	}
	if l.Paused != nil && recorded == "" {
		return fmt.Sprintf("%s of %s %s/%s was already set by someone else: left as it is, and the release will leave it too\n", l.PauseField, res.Kind, m.Namespace, res.Name), nil
	}
	if err := m.SetPausedOperator(ctx, res.Name); err != nil {
		return "", err
	}
	changed, err := ctl.SetOperatorPaused(ctx, o.found, true, m.ID, until)
	if err != nil {
		return "", err
	}
	if !changed && recorded == "" {
		// Someone else set it between our read and our write: it is theirs.
		if err := m.ClearPausedOperator(ctx); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s of %s %s/%s was set by someone else meanwhile: left as it is\n", l.PauseField, res.Kind, m.Namespace, res.Name), nil
	}
	return fmt.Sprintf("operator paused: %s set on %s %s/%s (cleared by lock release)\n", l.PauseField, res.Kind, m.Namespace, res.Name), nil
}

// unpauseOperator ends the operator's pause before a release, only when the Lease records that
// this tool set it and the release is allowed (our lock, or --force). It returns a line for
// the text output.
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
	ctl, err := o.operatorControl(o.clients, o.found)
	if err != nil {
		return "", err
	}
	if ctl == nil {
		return "", fmt.Errorf("the Lease records that this tool paused the operator of %s/%s (resource %s), but the cluster has no operator resource now; end the pause by hand", m.Namespace, m.Cluster, name)
	}
	res := ctl.OperatorResource(o.found)
	if _, err := ctl.SetOperatorPaused(ctx, o.found, false, "", time.Time{}); err != nil {
		return "", err
	}
	if err := m.ClearPausedOperator(ctx); err != nil {
		return "", err
	}
	l := ctl.OperatorLocks(ctx, o.found, false, time.Now())
	return fmt.Sprintf("operator resumed: %s cleared on %s %s/%s (set by lock acquire --pause-operator)\n", l.PauseField, res.Kind, m.Namespace, res.Name), nil
}
