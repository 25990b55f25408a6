package commands

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

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
// and status.locks, and, where the operator uses its FDB lock, the lock key and deny keys as
// the database holds them. nil for other clusters.
type operatorLocks struct {
	resource  string
	namespace string
	// pause is the operator's pause (spec.skip), shown with how to end it.
	pause foundationdb.Pause
	deny  []foundationdb.OperatorDenyEntry
	locks []string
	// fdb is the lock key's state (nil: the cluster does not use the operator's lock);
	// fdbErr why it could not be read.
	fdb    *foundationdb.FDBLockState
	fdbErr string
	now    time.Time
}

func operatorLocksOf(c *ops.Cluster) *operatorLocks {
	if c == nil {
		return nil
	}
	u := foundationdb.Resource(c)
	if u == nil {
		return nil
	}
	return &operatorLocks{resource: u.GetName(), namespace: u.GetNamespace(), deny: foundationdb.OperatorDenyList(u), locks: foundationdb.ReadCR(u).Locks,
		pause: foundationdb.ReadPause(u), now: time.Now()}
}

// readOperatorLocks is operatorLocksOf with the FDB lock key and deny keys read through fdbcli
// (foundationdb.Engine.ReadFDBLock) where the cluster uses the operator's lock. A failed read
// is shown, not fatal: the Lease's state is what these commands are for.
func (o *LockOptions) readOperatorLocks(ctx context.Context) *operatorLocks {
	l := operatorLocksOf(o.found)
	if l == nil || o.clients == nil {
		return l
	}
	l.now = time.Now()
	e, err := foundationdb.New(EngineDeps{Clients: o.clients, Cluster: o.found, Options: o.GlobalOptions}.deps(), o.fdbOptions())
	if err != nil {
		l.fdbErr = err.Error()
		return l
	}
	st, _, used, err := e.ReadFDBLock(ctx, o.found)
	switch {
	case !used:
	case err != nil:
		l.fdbErr = err.Error()
	default:
		l.fdb = &st
	}
	return l
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
	out := map[string]any{"resource": l.resource, "denyList": deny, "statusLockDenyList": locks}
	if l.pause.Paused {
		out["paused"] = map[string]any{"description": l.pause.Describe(l.now), "resume": l.pause.ResumeCommand(l.namespace, l.resource)}
	}
	if l.fdbErr != "" {
		out["fdbLock"] = map[string]any{"error": l.fdbErr}
	}
	if st := l.fdb; st != nil {
		keys := []any{}
		for _, d := range st.Denied {
			keys = append(keys, d)
		}
		m := map[string]any{"key": foundationdb.PrintableKey(st.Key), "denyKeys": keys}
		if h := st.Holder; h != nil {
			m["holder"] = map[string]any{"owner": h.Owner, "start": time.Unix(h.Start, 0).UTC().Format(time.RFC3339),
				"end": time.Unix(h.End, 0).UTC().Format(time.RFC3339), "expired": h.Expired(l.now)}
		} else if st.Raw != nil {
			m["raw"] = foundationdb.PrintableKey(string(st.Raw))
		}
		out["fdbLock"] = m
	}
	return out
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
	if l.pause.Paused {
		ops.Fprintf(w, "  spec.skip:                   %s; resume it with: %s\n", l.pause.Describe(l.now), l.pause.ResumeCommand(l.namespace, l.resource))
	}
	if l.fdbErr != "" {
		ops.Fprintf(w, "  FDB lock key:                unreadable: %s\n", l.fdbErr)
	}
	st := l.fdb
	if st == nil {
		return
	}
	// Keys and IDs come from the database: fdbcli's escaping for keys, quoting for the owner,
	// and ops.Fprintf's for the rest.
	ops.Fprintf(w, "  FDB lock key:                %s\n", foundationdb.PrintableKey(st.Key))
	switch h := st.Holder; {
	case h != nil && h.Expired(l.now):
		ops.Fprintf(w, "  FDB lock holder:             %s, expired at %s (free to take)\n", strconv.Quote(h.Owner), time.Unix(h.End, 0).UTC().Format(time.RFC3339))
	case h != nil:
		ops.Fprintf(w, "  FDB lock holder:             %s since %s, until %s (%s left)\n", strconv.Quote(h.Owner),
			time.Unix(h.Start, 0).UTC().Format(time.RFC3339), time.Unix(h.End, 0).UTC().Format(time.RFC3339), time.Unix(h.End, 0).Sub(l.now).Round(time.Second))
	case st.Raw != nil:
		ops.Fprintf(w, "  FDB lock holder:             unreadable value %s\n", foundationdb.PrintableKey(string(st.Raw)))
	default:
		ops.Fprintf(w, "  FDB lock holder:             none\n")
	}
	var denied []string
	for _, d := range st.Denied {
		denied = append(denied, strconv.Quote(d))
	}
	ops.Fprintf(w, "  FDB deny keys:               %s\n", dash(strings.Join(denied, ", ")))
}
