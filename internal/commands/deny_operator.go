package commands

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/foundationdb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// runOperatorInstance denies or allows a FoundationDB operator instance in the
// FoundationDBCluster's spec.lockOptions.denyList (foundationdb.SetOperatorDeny: conflict-safe,
// entries flipped or added, never removed). It needs no Lease: the write is one
// resourceVersion-checked patch of the operator's resource.
func (o *DenyOptions) runOperatorInstance(ctx context.Context) error {
	cl, c, err := o.discover(ctx, o.Cluster, false)
	if err != nil {
		return err
	}
	u := foundationdb.Resource(c)
	if u == nil {
		return ops.Usagef("--operator-instance applies to a FoundationDBCluster; %s/%s is not one", c.Namespace, c.Name)
	}
	if cl.Dynamic == nil {
		return fmt.Errorf("no dynamic client to write FoundationDBCluster %s/%s", c.Namespace, c.Name)
	}
	by, err := o.ResolveLockID()
	if err != nil {
		return err
	}
	allow := o.Action == "allow"
	id := o.OperatorInstance
	entry := "{id: " + id + "}"
	if allow {
		entry = "{id: " + id + ", allow: true}"
	}
	print := func(a DenyAction, text func(io.Writer) error) error {
		doc, err := document(a, "DenyAction", c.Name, c.Namespace)
		if err != nil {
			return err
		}
		return o.printDocument(o.Out, doc, text)
	}
	if o.DryRun {
		return print(DenyAction{Action: o.Action, ID: id, By: by, Reason: o.Reason, DryRun: true, OperatorInstance: true}, func(w io.Writer) error {
			_, err := ops.Fprintf(w, "would set %s in spec.lockOptions.denyList of FoundationDBCluster %s/%s\n", entry, c.Namespace, u.GetName())
			return err
		})
	}
	changed, err := foundationdb.SetOperatorDeny(ctx, cl.Dynamic, u, id, allow)
	if err != nil {
		return err
	}
	verb := map[bool]string{false: "denied", true: "allowed"}[allow]
	if changed {
		msg := fmt.Sprintf("FoundationDB operator instance %s %s (%s in spec.lockOptions.denyList) by %s", id, verb, entry, by)
		if o.Reason != "" {
			msg += ": " + o.Reason
		}
		a := &ops.KubeAuditor{Client: cl.Kube, Clock: cl.Clock, Instance: by}
		obj := ops.ObjectRef{Kind: "FoundationDBCluster", APIVersion: "apps.foundationdb.org/v1beta2", Namespace: c.Namespace, Name: u.GetName(),
			UID: string(u.GetUID()), Warning: !allow}
		if err := a.Record(ctx, obj, "DbopsOperatorInstance"+titleCase(verb), msg+" (kubectl-dbops)"); err != nil {
			ops.Fprintf(o.ErrOut, "warning: could not record the event on FoundationDBCluster %s/%s: %v\n", c.Namespace, u.GetName(), err)
		}
	}
	return print(DenyAction{Action: verb, ID: id, By: by, Reason: o.Reason, OperatorInstance: true, Changed: &changed}, func(w io.Writer) error {
		state := "set"
		if !changed {
			state = "already set"
		}
		_, err := ops.Fprintf(w, "operator instance %s %s on FoundationDBCluster %s/%s: %s %s\n", id, verb, c.Namespace, u.GetName(), entry, state)
		return err
	})
}

// operatorLocks is what a FoundationDBCluster says of the operator's locking: its deny list
// and status.locks. nil for other clusters.
type operatorLocks struct {
	resource string
	deny     []foundationdb.OperatorDenyEntry
	locks    []string
}

func operatorLocksOf(c *ops.Cluster) *operatorLocks {
	if c == nil {
		return nil
	}
	u := foundationdb.Resource(c)
	if u == nil {
		return nil
	}
	return &operatorLocks{resource: u.GetName(), deny: foundationdb.OperatorDenyList(u), locks: foundationdb.ReadCR(u).Locks}
}

// object is the document's foundationdbOperator field.
func (l *operatorLocks) object() map[string]any {
	deny := []any{}
	for _, e := range l.deny {
		m := map[string]any{"id": e.ID}
		if e.Allow {
			m["allow"] = true
		}
		deny = append(deny, m)
	}
	locks := []any{}
	for _, s := range l.locks {
		locks = append(locks, s)
	}
	return map[string]any{"resource": l.resource, "denyList": deny, "statusLockDenyList": locks}
}

func (l *operatorLocks) writeText(w io.Writer) {
	if l == nil {
		return
	}
	var entries []string
	for _, e := range l.deny {
		if e.Allow {
			entries = append(entries, e.ID+" (allowed)")
		} else {
			entries = append(entries, e.ID+" (denied)")
		}
	}
	ops.Fprintf(w, "FoundationDB operator (FoundationDBCluster %s):\n", l.resource)
	ops.Fprintf(w, "  spec.lockOptions.denyList:   %s\n", dash(strings.Join(entries, ", ")))
	ops.Fprintf(w, "  status.locks.lockDenyList:   %s\n", dash(strings.Join(l.locks, ", ")))
}
