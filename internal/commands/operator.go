package commands

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// operatorControl is the operator verbs of cluster c's engine (ops.OperatorControl) when the
// cluster has an operator's resource the engine steers; nil otherwise.
func (g *GlobalOptions) operatorControl(cl *Clients, c *ops.Cluster) (ops.OperatorControl, error) {
	if c == nil || cl == nil {
		return nil, nil
	}
	for _, k := range g.Engines {
		if k.Name != c.Engine || k.Operator == nil {
			continue
		}
		ctl, err := k.Operator(EngineDeps{Clients: cl, Cluster: c, Flags: g.engineFlagsOf(k.Name), Options: g})
		if err != nil || ctl.OperatorResource(c) == nil {
			return nil, err
		}
		return ctl, nil
	}
	return nil, nil
}

// runOperatorInstance denies or allows an operator instance in the deny list of the
// cluster's operator resource (ops.OperatorControl: conflict-safe, entries flipped or added,
// never removed). It needs no Lease: the write is one resourceVersion-checked patch of the
// operator's resource.
func (o *DenyOptions) runOperatorInstance(ctx context.Context) error {
	cl, c, err := o.discover(ctx, o.Cluster, false)
	if err != nil {
		return err
	}
	ctl, err := o.operatorControl(cl, c)
	if err != nil {
		return err
	}
	if ctl == nil {
		return ops.Usagef("--operator-instance applies to a cluster an operator's resource manages (a FoundationDBCluster); %s/%s is not one", c.Namespace, c.Name)
	}
	res := ctl.OperatorResource(c)
	by, err := o.RunFlags.ResolveLockID(o.ConfigFlags)
	if err != nil {
		return err
	}
	allow := o.Action == "allow"
	id := o.OperatorInstance
	print := func(a DenyAction, text func(io.Writer) error) error {
		doc, err := document(a, "DenyAction", c.Name, c.Namespace)
		if err != nil {
			return err
		}
		return o.printDocument(o.Out, doc, text)
	}
	locks := ctl.OperatorLocks(ctx, c, false, time.Now())
	if o.RunFlags.DryRun {
		entry := "{id: " + id + "}"
		if allow {
			entry = "{id: " + id + ", allow: true}"
		}
		return print(DenyAction{Action: o.Action, ID: id, By: by, Reason: o.Reason, DryRun: true, OperatorInstance: true}, func(w io.Writer) error {
			_, err := ops.Fprintf(w, "would set %s in %s of %s %s/%s\n", entry, locks.DenyListField, res.Kind, c.Namespace, res.Name)
			return err
		})
	}
	changed, entry, err := ctl.SetOperatorInstanceDenied(ctx, c, id, allow)
	if err != nil {
		return err
	}
	verb := map[bool]string{false: "denied", true: "allowed"}[allow]
	if changed {
		msg := fmt.Sprintf("%s instance %s %s (%s in %s) by %s", locks.Operator, id, verb, entry, locks.DenyListField, by)
		if o.Reason != "" {
			msg += ": " + o.Reason
		}
		a := &ops.KubeAuditor{Client: cl.Kube, Clock: cl.Clock, Instance: by}
		obj := *res
		obj.Warning = !allow
		if err := a.Record(ctx, obj, "DbopsOperatorInstance"+titleCase(verb), msg+" (kubectl-dbops)"); err != nil {
			ops.Fprintf(o.ErrOut, "warning: could not record the event on %s %s/%s: %v\n", res.Kind, c.Namespace, res.Name, err)
		}
	}
	return print(DenyAction{Action: verb, ID: id, By: by, Reason: o.Reason, OperatorInstance: true, Changed: &changed}, func(w io.Writer) error {
		state := "set"
		if !changed {
			state = "already set"
		}
		_, err := ops.Fprintf(w, "operator instance %s %s on %s %s/%s: %s %s\n", id, verb, res.Kind, c.Namespace, res.Name, entry, state)
		return err
	})
}

// operatorLocks is what the cluster's operator resource says of the operator's locking (and,
// where it was read, its lock in the database), for lock status and deny list. nil for
// clusters without one.
type operatorLocks struct {
	*ops.OperatorLocks
	now time.Time
}

// readOperatorLocks reads the operator's locks with its lock in the database. A failed read
// is shown, not fatal: the Lease's state is what these commands are for.
func (o *LockOptions) readOperatorLocks(ctx context.Context) *operatorLocks {
	ctl, err := o.operatorControl(o.clients, o.found)
	if ctl == nil {
		if err != nil {
			ops.Fprintf(o.ErrOut, "warning: the cluster's operator locks were not read: %v\n", err)
		}
		return nil
	}
	now := time.Now()
	return &operatorLocks{OperatorLocks: ctl.OperatorLocks(ctx, o.found, true, now), now: now}
}

// addTo adds the operator's locks to a lock status or deny list document.
func (l *operatorLocks) addTo(doc map[string]any) {
	if l != nil {
		doc[l.DocumentField] = l.object()
	}
}

// object is the document's operator field.
func (l *operatorLocks) object() map[string]any {
	deny := []any{}
	for _, e := range l.DenyList {
		m := map[string]any{"id": e.ID}
		if e.Allow {
			m["allow"] = true
		}
		deny = append(deny, m)
	}
	locks := []any{}
	for _, s := range l.StatusLocks {
		locks = append(locks, s)
	}
	out := map[string]any{"resource": l.Resource.Name, "denyList": deny, "statusLockDenyList": locks}
	if p := l.Paused; p != nil {
		out["paused"] = map[string]any{"description": p.Description, "resume": p.Resume}
	}
	if l.DBLockError != "" {
		out[l.DBLockField] = map[string]any{"error": l.DBLockError}
	}
	if st := l.DBLock; st != nil {
		keys := []any{}
		for _, d := range st.DenyKeys {
			keys = append(keys, d)
		}
		m := map[string]any{"key": st.Key, "denyKeys": keys}
		if h := st.Holder; h != nil {
			m["holder"] = map[string]any{"owner": h.Owner, "start": h.Start.UTC().Format(time.RFC3339),
				"end": h.End.UTC().Format(time.RFC3339), "expired": h.Expired(l.now)}
		} else if st.Raw != "" {
			m["raw"] = st.Raw
		}
		out[l.DBLockField] = m
	}
	return out
}

func (l *operatorLocks) writeText(w io.Writer) {
	if l == nil {
		return
	}
	var entries []string
	for _, e := range l.DenyList {
		if e.Allow {
			entries = append(entries, e.ID+" (allowed)")
		} else {
			entries = append(entries, e.ID+" (denied)")
		}
	}
	ops.Fprintf(w, "%s (%s %s):\n", l.Operator, l.Resource.Kind, l.Resource.Name)
	ops.Fprintf(w, "  %-28s %s\n", l.DenyListField+":", dash(strings.Join(entries, ", ")))
	ops.Fprintf(w, "  %-28s %s\n", l.StatusLocksField+":", dash(strings.Join(l.StatusLocks, ", ")))
	if p := l.Paused; p != nil {
		ops.Fprintf(w, "  %-28s %s; resume it with: %s\n", l.PauseField+":", p.Description, p.Resume)
	}
	if l.DBLockError != "" {
		ops.Fprintf(w, "  %-28s unreadable: %s\n", l.DBName+" lock key:", l.DBLockError)
	}
	st := l.DBLock
	if st == nil {
		return
	}
	// Keys come printable from the engine (the database's escaping); the owner is quoted, and
	// ops.Fprintf escapes the rest.
	ops.Fprintf(w, "  %-28s %s\n", l.DBName+" lock key:", st.Key)
	holder := l.DBName + " lock holder:"
	switch h := st.Holder; {
	case h != nil && h.Expired(l.now):
		ops.Fprintf(w, "  %-28s %s, expired at %s (free to take)\n", holder, strconv.Quote(h.Owner), h.End.UTC().Format(time.RFC3339))
	case h != nil:
		ops.Fprintf(w, "  %-28s %s since %s, until %s (%s left)\n", holder, strconv.Quote(h.Owner),
			h.Start.UTC().Format(time.RFC3339), h.End.UTC().Format(time.RFC3339), h.End.Sub(l.now).Round(time.Second))
	case st.Raw != "":
		ops.Fprintf(w, "  %-28s unreadable value %s\n", holder, st.Raw)
	default:
		ops.Fprintf(w, "  %-28s none\n", holder)
	}
	var denied []string
	for _, d := range st.DenyKeys {
		denied = append(denied, strconv.Quote(d))
	}
	ops.Fprintf(w, "  %-28s %s\n", l.DBName+" deny keys:", dash(strings.Join(denied, ", ")))
}
