package commands

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// LockOptions holds what the `lock` and `deny` subcommands share: the cluster, the lock ID to
// act as, and the flags some of them bind. Each subcommand's options embed it and add
// Complete and Run (Validate is this one's).
type LockOptions struct {
	*GlobalOptions
	// RunFlags are the shared run flags this command reads (--dry-run, the lock's, --timeout).
	RunFlags *RunFlags
	Cluster  string
	ID       string // --id: act as this lock ID (lock acquire|release)
	Duration time.Duration
	Reason   string
	// Force: take over (acquire) or release a lock someone else holds.
	Force bool
	// NoHeaders leaves out the table header (deny list).
	NoHeaders bool

	// PauseOperator: lock acquire also pauses the cluster's operator (FoundationDB spec.skip).
	PauseOperator bool

	// found is the cluster manager found (for what an engine's resource says of locks), with
	// the clients that found it.
	found   *ops.Cluster
	clients *Clients

	// fleet selects (and, for the writing subcommands, paces) a fleet of targets
	// (lock_fleet.go); collect takes a fleet target's -o json|yaml document.
	fleet   fleetMutationFlags
	collect func(runtime.Object)
	// clusterSel is -l without CLUSTER (and -A) over a fleet: the clusters acted on
	// (fleet_select.go); bound only by the lock and deny subcommands (cmd nil otherwise).
	clusterSel clusterSelect
}

// LockAction is the `lock acquire|release -o json|yaml` document.
type LockAction struct {
	ops.LockInfo
	// DryRun: nothing was changed; Action says what would be done.
	DryRun bool `json:"dryRun,omitempty"`
	// FDBLockCleared is the FoundationDB operator's lock key `lock release` cleared: held as
	// kubectl-dbops by a run that did not end.
	FDBLockCleared *ClearedFDBLock `json:"fdbLockCleared,omitempty"`
}

// ClearedFDBLock is the holder of a cleared FoundationDB lock key.
type ClearedFDBLock struct {
	Owner string    `json:"owner"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// operator names the operator, for the text output.
	operator string
}

// NewLockOptions returns options bound to the shared flags.
func NewLockOptions(g *GlobalOptions, rf *RunFlags) *LockOptions {
	// One target at a time unless --max-parallel says more (subcommands without fleet flags
	// stay valid: no fleet).
	return &LockOptions{GlobalOptions: g, RunFlags: rf, fleet: fleetMutationFlags{fleetFlags: fleetFlags{MaxParallel: 1}}}
}

// NewLockCmd builds `lock status|acquire|release`.
func NewLockCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Show, take or give up a cluster's lock",
		Long: `Every mutating command takes one lock per database cluster (a
coordination.k8s.io Lease named dbops-<cluster>). Use these commands to see who
holds it, to hold it by hand across several commands (e.g. during an incident),
and to release it.`,
		Example: `  kubectl dbops lock status mycrate
  kubectl dbops lock acquire mycrate --duration 1h --reason "INC-1234: investigating"
  kubectl dbops lock release mycrate

  # Stop whoever holds it (their running command stops before its next change)
  kubectl dbops lock release mycrate --force --reason "INC-1234: owner unreachable"`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE("status, acquire, release"),
	}
	cmd.AddCommand(newLockStatusCmd(g, rf), newLockAcquireCmd(g, rf), newLockReleaseCmd(g, rf))
	return cmd
}

// LockStatusOptions holds `lock status` flags.
type LockStatusOptions struct{ *LockOptions }

// NewLockStatusOptions returns options bound to the shared flags.
func NewLockStatusOptions(g *GlobalOptions, rf *RunFlags) *LockStatusOptions {
	return &LockStatusOptions{LockOptions: NewLockOptions(g, rf)}
}

func newLockStatusCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewLockStatusOptions(g, rf)
	cmd := &cobra.Command{
		Use:               "status CLUSTER",
		Annotations:       documentAnnotations(),
		Short:             "Show the lock holder, expiry, deny list and any unfinished operation",
		Example:           "  kubectl dbops lock status mycrate\n  kubectl dbops lock status mycrate -o json\n\n  # Fleet: the lock of orders in every context named prod-*\n  kubectl dbops lock status orders --contexts 'prod-*' -n db\n\n  # Fleet, no CLUSTER: the locks of the clusters labelled tier=db in every namespace\n  kubectl dbops lock status --contexts 'prod-*' -A -l tier=db",
		Args:              optionalClusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              runOptions(o),
	}
	o.addReadFleetFlags(cmd, g)
	return cmd
}

// Complete fills in arguments.
func (o *LockStatusOptions) Complete(_ *cobra.Command, args []string) error {
	o.Cluster = firstArg(args)
	return nil
}

// Run reads and prints the lock's state.
func (o *LockStatusOptions) Run(cmd *cobra.Command) error {
	if o.fleet.active(o.GlobalOptions) {
		return o.runFleet(cmd, nil, func(lo *LockOptions) error { return (&LockStatusOptions{lo}).Run(cmd) })
	}
	ctx := commandContext(cmd)
	m, err := o.manager(ctx)
	if err != nil {
		return err
	}
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	doc, err := document(st, "LockStatus", st.Cluster, st.Namespace)
	if err != nil {
		return err
	}
	fdb := o.readOperatorLocks(ctx)
	fdb.addTo(doc.Object)
	return o.printDocument(o.Out, doc, func(w io.Writer) error {
		var b strings.Builder
		ops.Fprintf(&b, "Lease:    %s/%s (you are %s)\n", st.Namespace, st.Lease, st.Self)
		writeLockText(&b, st)
		fdb.writeText(&b)
		_, err := fmt.Fprint(w, b.String())
		return err
	})
}

// LockAcquireOptions holds `lock acquire` flags.
type LockAcquireOptions struct{ *LockOptions }

// NewLockAcquireOptions returns options bound to the shared flags.
func NewLockAcquireOptions(g *GlobalOptions, rf *RunFlags) *LockAcquireOptions {
	return &LockAcquireOptions{LockOptions: NewLockOptions(g, rf)}
}

func newLockAcquireCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewLockAcquireOptions(g, rf)
	cmd := &cobra.Command{
		Use:         "acquire CLUSTER [--id ID] [--duration D] [--reason R]",
		Annotations: documentAnnotations(),
		Short:       "Take the cluster lock by hand (extends it when you hold it already)",
		Example: `  # Hold the lock for an hour while investigating
  kubectl dbops lock acquire mycrate --duration 1h --reason "INC-1234: investigating"

  # Take the lock from whoever holds it (their running command stops before its next change)
  kubectl dbops lock acquire mycrate --force --reason "INC-1234: stopping the restart"

  # Fleet: hold the lock of orders in every context named prod-* (one question for all)
  kubectl dbops lock acquire orders --contexts 'prod-*' -n db --duration 1h --reason "INC-1234: freeze"

  # Fleet, no CLUSTER: every cluster labelled tier=db in every namespace of the contexts prod-*
  kubectl dbops lock acquire --contexts 'prod-*' -A -l tier=db --duration 1h --reason "INC-1234: freeze" --dry-run`,
		Args:              optionalClusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              runOptions(o),
	}
	cmd.Flags().StringVar(&o.ID, "id", "", "Lock ID to act as (default: --lock-id or <user>@<host>)")
	cmd.Flags().DurationVar(&o.Duration, "duration", 0, "How long to hold the lock (default --lock-duration, 10m)")
	cmd.Flags().StringVar(&o.Reason, "reason", "", "Why you hold the lock (shown to others)")
	cmd.Flags().BoolVar(&o.Force, "force", false, "Take the lock over from someone else who holds it (their running command stops before its next change)")
	cmd.Flags().BoolVar(&o.PauseOperator, "pause-operator", false, "FoundationDB: also set the FoundationDBCluster's spec.skip (the operator leaves the cluster alone); lock release clears it only if this tool set it")
	o.addWriteFleetFlags(cmd, g)
	return cmd
}

// Complete fills in arguments.
func (o *LockAcquireOptions) Complete(_ *cobra.Command, args []string) error {
	o.Cluster = firstArg(args)
	return nil
}

// Run takes (or extends) the lock, or says what it would do (--dry-run).
func (o *LockAcquireOptions) Run(cmd *cobra.Command) error {
	if o.fleet.active(o.GlobalOptions) {
		return o.runFleet(cmd, &fleetWrite{"acquire the lock of", "Acquire the lock of"},
			func(lo *LockOptions) error { return (&LockAcquireOptions{lo}).Run(cmd) })
	}
	ctx := commandContext(cmd)
	m, err := o.manager(ctx)
	if err != nil {
		return err
	}
	var ctl ops.OperatorControl
	if o.PauseOperator {
		if ctl, err = o.operatorControl(o.clients, o.found); err != nil {
			return err
		}
		if ctl == nil {
			return ops.Usagef("--pause-operator applies to a cluster an operator's resource manages (a FoundationDBCluster: it sets spec.skip); %s/%s is not one", m.Namespace, m.Cluster)
		}
	}
	if o.RunFlags.DryRun {
		return o.printLockAction(m, LockAction{LockInfo: ops.LockInfo{Action: "acquire", Holder: m.ID, Operation: lock.ManualOperation}, DryRun: true},
			func(w io.Writer) error {
				_, err := ops.Fprintf(w, "would acquire the lock on %s/%s as %s for %s\n", m.Namespace, m.Cluster, m.ID, m.Duration)
				if err == nil && o.PauseOperator {
					_, err = ops.Fprintf(w, "would set spec.skip on FoundationDBCluster %s/%s (the operator leaves the cluster alone until the release)\n", m.Namespace, m.Cluster)
				}
				return err
			})
	}
	held, err := m.AcquireWithReason(ctx, lock.ManualOperation, o.Reason)
	if err != nil {
		return err
	}
	paused := ""
	info := held.Info()
	if o.PauseOperator {
		if paused, err = o.pauseOperator(ctx, m, info.Expires); err != nil {
			return err
		}
	}
	from := ""
	if info.Previous != "" {
		from = " from " + info.Previous
	}
	msg := fmt.Sprintf("lock %s%s by %s until %s", info.Action, from, info.Holder, info.Expires.UTC().Format(time.RFC3339))
	if o.Reason != "" {
		msg += ": " + o.Reason
	}
	o.recordLockEvent(ctx, m, "DbopsLock"+titleCase(info.Action), info.Action == ops.LockTakeover, msg)
	return o.printLockAction(m, LockAction{LockInfo: info}, func(w io.Writer) error {
		if _, err := ops.Fprintf(w, "lock on %s/%s %s%s by %s until %s\n", m.Namespace, m.Cluster, info.Action, from, info.Holder,
			info.Expires.UTC().Format(time.RFC3339)); err != nil {
			return err
		}
		return printNotes(w, paused)
	})
}

// LockReleaseOptions holds `lock release` flags.
type LockReleaseOptions struct{ *LockOptions }

// NewLockReleaseOptions returns options bound to the shared flags.
func NewLockReleaseOptions(g *GlobalOptions, rf *RunFlags) *LockReleaseOptions {
	return &LockReleaseOptions{LockOptions: NewLockOptions(g, rf)}
}

func newLockReleaseCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewLockReleaseOptions(g, rf)
	cmd := &cobra.Command{
		Use:               "release CLUSTER [--id ID]",
		Annotations:       documentAnnotations(),
		Short:             "Give up the cluster lock (someone else's only with --force)",
		Example:           "  kubectl dbops lock release mycrate\n\n  # Free a lock someone else holds (their running command stops before its next change)\n  kubectl dbops lock release mycrate --force --reason \"INC-1234: owner unreachable\"\n\n  # Fleet: give up the locks taken with lock acquire --contexts\n  kubectl dbops lock release orders --contexts 'prod-*' -n db --yes\n  kubectl dbops lock release --contexts 'prod-*' -A -l tier=db --yes",
		Args:              optionalClusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              runOptions(o),
	}
	cmd.Flags().StringVar(&o.ID, "id", "", "Lock ID to release as (default: --lock-id or <user>@<host>)")
	cmd.Flags().BoolVar(&o.Force, "force", false, "Release the lock although someone else holds it (their running command stops before its next change)")
	cmd.Flags().StringVar(&o.Reason, "reason", "", "Why you release it (recorded in the Event)")
	_ = cmd.RegisterFlagCompletionFunc("id", completeHolder(g, rf))
	o.addWriteFleetFlags(cmd, g)
	return cmd
}

// Complete fills in arguments.
func (o *LockReleaseOptions) Complete(_ *cobra.Command, args []string) error {
	o.Cluster = firstArg(args)
	return nil
}

// Run releases the lock, or says what it would do (--dry-run).
func (o *LockReleaseOptions) Run(cmd *cobra.Command) error {
	if o.fleet.active(o.GlobalOptions) {
		return o.runFleet(cmd, &fleetWrite{"release the lock of", "Release the lock of"},
			func(lo *LockOptions) error { return (&LockReleaseOptions{lo}).Run(cmd) })
	}
	ctx := commandContext(cmd)
	m, err := o.manager(ctx)
	if err != nil {
		return err
	}
	if o.RunFlags.DryRun {
		also := ""
		if l := o.readOperatorLocks(ctx); l != nil && l.DBLock != nil && l.DBLock.Holder != nil {
			if ctl, _ := o.operatorControl(o.clients, o.found); ctl != nil && l.DBLock.Holder.Owner == ctl.OperatorLockOwner() && !l.DBLock.Holder.Expired(l.now) {
				also = fmt.Sprintf("would also clear the %s's lock key held as %s until %s\n",
					l.Operator, ctl.OperatorLockOwner(), l.DBLock.Holder.End.UTC().Format(time.RFC3339))
			}
		}
		return o.printLockAction(m, LockAction{LockInfo: ops.LockInfo{Action: "release", Holder: m.ID}, DryRun: true},
			func(w io.Writer) error {
				if _, err := ops.Fprintf(w, "would release the lock on %s/%s held as %s\n", m.Namespace, m.Cluster, m.ID); err != nil {
					return err
				}
				return printNotes(w, also)
			})
	}
	unpaused, err := o.unpauseOperator(ctx, m)
	if err != nil {
		return err
	}
	r, err := m.ReleaseHolder(ctx)
	if err != nil {
		return err
	}
	displaced := r.Holder != m.ID
	held := ""
	if displaced {
		held = fmt.Sprintf(" (held by %s%s)", r.Holder, r.Work)
	}
	msg := fmt.Sprintf("lock released by %s%s", m.ID, held)
	if o.Reason != "" {
		msg += ": " + o.Reason
	}
	reason := "DbopsLockReleased"
	if displaced {
		reason = "DbopsLockForceReleased"
	}
	o.recordLockEvent(ctx, m, reason, displaced, msg)
	info := ops.LockInfo{Action: "released", Holder: m.ID}
	if displaced {
		info.Previous = r.Holder
	}
	cleared, fdbErr := o.clearOwnFDBLock(ctx)
	fdbNote := ""
	if cleared != nil {
		fdbNote = fmt.Sprintf("%s's lock key cleared (held as %s since %s, until %s, by a run that did not end)\n",
			cleared.operator, cleared.Owner, cleared.Start.Format(time.RFC3339), cleared.End.Format(time.RFC3339))
	}
	if err := o.printLockAction(m, LockAction{LockInfo: info, FDBLockCleared: cleared}, func(w io.Writer) error {
		if _, err := ops.Fprintf(w, "lock on %s/%s released by %s%s\n", m.Namespace, m.Cluster, m.ID, held); err != nil {
			return err
		}
		return printNotes(w, unpaused, fdbNote)
	}); err != nil {
		return err
	}
	return fdbErr
}

// clearOwnFDBLock clears the operator's lock in the database where the cluster uses it and
// this tool holds it (ops.OperatorControl.ClearOwnOperatorLock): with the Lease released no run
// of this tool acts, so the lock is one a run killed outright left. The Lease stays released
// when this fails; the error says the lock expires by itself.
func (o *LockOptions) clearOwnFDBLock(ctx context.Context) (*ClearedFDBLock, error) {
	ctl, err := o.operatorControl(o.clients, o.found)
	if err != nil {
		return nil, fmt.Errorf("the lock is released, but the operator's lock key was not checked: %w", err)
	}
	if ctl == nil {
		return nil, nil
	}
	h, err := ctl.ClearOwnOperatorLock(ctx, o.found)
	if err != nil {
		return nil, fmt.Errorf("the lock is released, but the operator's lock key held as %s was not cleared (it expires by itself; see lock status): %w",
			ctl.OperatorLockOwner(), err)
	}
	if h == nil {
		return nil, nil
	}
	return &ClearedFDBLock{Owner: h.Owner, Start: h.Start.UTC(), End: h.End.UTC(), operator: ctl.OperatorLocks(ctx, o.found, false, time.Now()).Operator}, nil
}

// recordLockEvent records a change of the lock or deny list as an Event on the cluster's
// Lease (`kubectl describe lease dbops-CLUSTER`, `kubectl get events`), as operations record
// theirs; a failure to record is a warning, the change is made.
func (o *LockOptions) recordLockEvent(ctx context.Context, m *lock.Manager, reason string, warning bool, message string) {
	a := &ops.KubeAuditor{Client: m.Client, Clock: m.Clock, Instance: m.ID}
	obj := ops.ObjectRef{Kind: "Lease", APIVersion: "coordination.k8s.io/v1", Namespace: m.Namespace, Name: lock.LeaseName(m.Cluster), Warning: warning}
	if m.Clock == nil {
		a.Clock = ops.RealClock{}
	}
	if err := a.Record(ctx, obj, reason, message+" (kubectl-dbops)"); err != nil {
		ops.Fprintf(o.ErrOut, "warning: could not record the %s event on lease %s/%s: %v\n", reason, m.Namespace, obj.Name, err)
	}
}

// titleCase upper-cases s's first letter (an event reason from a lock action).
func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// printLockAction prints what lock acquire|release did (or would do).
func (o *LockOptions) printLockAction(m *lock.Manager, a LockAction, text func(io.Writer) error) error {
	doc, err := document(a, "LockAction", m.Cluster, m.Namespace)
	if err != nil {
		return err
	}
	return o.printDocument(o.Out, doc, text)
}

// Validate checks flags without touching the API.
func (o *LockOptions) Validate() error {
	if err := o.GlobalOptions.Validate(); err != nil {
		return err
	}
	if err := o.RunFlags.Validate(); err != nil {
		return err
	}
	if o.Duration < 0 || (o.Duration > 0 && o.Duration < 10*time.Second) {
		return ops.Usagef("--duration must be at least 10s (got %s)", o.Duration)
	}
	if err := o.fleet.validate(o.GlobalOptions); err != nil {
		return err
	}
	if o.clusterSel.cmd == nil {
		// pause, continue, abort and history: no cluster selection here.
		return nil
	}
	return o.clusterSel.validate(o.GlobalOptions, &o.fleet.fleetFlags, o.Cluster)
}

// manager finds the cluster (so an unknown one is refused with exit 2)
// and returns its lock manager.
func (o *LockOptions) manager(ctx context.Context) (*lock.Manager, error) {
	cl, c, err := o.discover(ctx, o.Cluster, false)
	if err != nil {
		return nil, err
	}
	o.found, o.clients = c, cl
	id := o.ID
	if id == "" {
		if id, err = o.RunFlags.ResolveLockID(o.ConfigFlags); err != nil {
			return nil, err
		}
	}
	d := o.Duration
	if d == 0 {
		d = o.RunFlags.LockDuration
	}
	return &lock.Manager{Client: cl.Kube, Namespace: c.Namespace, Cluster: c.Name, ID: id, Duration: d, Clock: cl.Clock, Force: o.Force}, nil
}

// printNotes prints each non-empty note on its own line. A note passed as an ops.Fprintf
// argument has its trailing newline escaped to a literal `\n` (ops.PrintableArgs), so the
// newline goes in the format instead.
func printNotes(w io.Writer, notes ...string) error {
	for _, n := range notes {
		if n = strings.TrimSuffix(n, "\n"); n == "" {
			continue
		}
		if _, err := ops.Fprintf(w, "%s\n", n); err != nil {
			return err
		}
	}
	return nil
}
