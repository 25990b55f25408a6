package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// StatusAPIVersion versions the `status -o json|yaml` schema.
const StatusAPIVersion = "dbops.io/v1alpha1"

// ClusterStatus is the documented `status -o json|yaml` schema.
type ClusterStatus struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Context is the kubeconfig context of the cluster (fleet mode only).
	Context string       `json:"context,omitempty"`
	Cluster *ops.Cluster `json:"cluster"`
	Lock    *lock.State  `json:"lock"`
	Health  *ops.Health  `json:"health"`
	// Warnings lists what could not be read (e.g. lock RBAC), so partial
	// status is still shown.
	Warnings []string `json:"warnings,omitempty"`
}

// StatusOptions holds `status` flags.
type StatusOptions struct {
	*GlobalOptions
	// RunFlags are the shared run flags this command reads (--dry-run, the lock's, --timeout).
	RunFlags  *RunFlags
	Cluster   string
	NoHeaders bool
	// Watch re-prints the status whenever it changes (--watch).
	Watch bool
	// wide: -o wide, the text view with more columns (pod UIDs, IPs, PVCs).
	wide  bool
	fleet fleetFlags
	sel   clusterSelect
}

// NewStatusOptions returns options bound to the shared flags.
func NewStatusOptions(g *GlobalOptions, rf *RunFlags) *StatusOptions {
	return &StatusOptions{GlobalOptions: g, RunFlags: rf}
}

// NewStatusCmd builds `status CLUSTER`.
func NewStatusCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewStatusOptions(g, rf)
	cmd := &cobra.Command{
		Use:         "status CLUSTER",
		Annotations: documentAnnotations(),
		Short:       "Show node groups, pods, lock, deny list, interrupted operations and health",
		Example: `  kubectl dbops status mycrate -n prod
  kubectl dbops status mycrate -o json | jq .lock.holder

  # What a running operation waits on and its ETA, from any terminal (the journal on the lock)
  kubectl dbops status mycrate -o json | jq '.lock.journal | {blocked, eta}'

  # Follow a restart from another terminal; one JSON document per change
  kubectl dbops status mycrate --watch -o json --timeout 30m

  # The cluster orders in every context named prod-*
  kubectl dbops status orders --contexts 'prod-*' -n db

  # Every cluster labelled tier=db in any namespace of the contexts prod-* (no CLUSTER)
  kubectl dbops status --contexts 'prod-*' -A -l tier=db`,
		Args:              optionalClusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              runOptions(o),
	}
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "Leave out the tables' column headers (-o text)")
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "After the status, print it again each time it changes (watches pods, StatefulSets, the lock and operator resources; FoundationDB health is re-read every 2s) until Ctrl-C or --timeout; exit 0")
	o.fleet.addFlags(cmd, g)
	o.sel.addFlags(cmd)
	return cmd
}

// Complete fills in arguments.
func (o *StatusOptions) Complete(_ *cobra.Command, args []string) error {
	o.Cluster = firstArg(args)
	return nil
}

// Validate checks flags without touching the API.
func (o *StatusOptions) Validate() error {
	if o.Output == "wide" {
		// kubectl's -o wide: the text view with more columns.
		o.Output, o.wide = "text", true
	}
	if err := o.GlobalOptions.Validate(); err != nil {
		return err
	}
	if err := o.RunFlags.Validate(); err != nil {
		return err
	}
	if o.RunFlags.DryRun {
		return ops.Usagef("--dry-run does not apply to status (it never changes anything)")
	}
	if err := o.fleet.validate(o.GlobalOptions); err != nil {
		return err
	}
	if err := o.sel.validate(o.GlobalOptions, &o.fleet, o.Cluster); err != nil {
		return err
	}
	if o.Watch && o.fleet.active(o.GlobalOptions) {
		return ops.Usagef("--watch follows one cluster in one context; leave out --contexts, --fleet or the --context list")
	}
	return nil
}

// Run reads and prints the status (and, with --watch, each change).
func (o *StatusOptions) Run(cmd *cobra.Command) error {
	ctx := commandContext(cmd)
	if o.Watch {
		return o.watch(ctx)
	}
	if o.fleet.active(o.GlobalOptions) {
		return o.runFleet(ctx)
	}
	st, err := o.collect(ctx)
	if err != nil {
		return err
	}
	return o.print(st)
}

// print writes one status document in the -o format.
func (o *StatusOptions) print(st *ClusterStatus) error {
	doc, err := document(st, "ClusterStatus", st.Cluster.Name, st.Cluster.Namespace)
	if err != nil {
		return err
	}
	return o.printDocument(o.Out, doc, func(w io.Writer) error {
		return writeStatusText(w, st, o.clockNow(), o.NoHeaders, o.wide)
	})
}

// runFleet reads the status of the cluster in every target of the fleet, at most
// --max-parallel at once; a target that cannot be read is reported on its own line naming its
// context, the others are printed (text: one status each, headed by its context; -o json|yaml:
// a ClusterStatusList whose items carry their context), and the exit code is the worst target's.
func (o *StatusOptions) runFleet(ctx context.Context) error {
	ts, err := o.sel.targets(o.GlobalOptions, &o.fleet, o.Cluster)
	if err != nil {
		return err
	}
	type item struct {
		st  *ClusterStatus
		now time.Time
	}
	per := make([][]item, len(ts))
	var mu sync.Mutex
	rs := runFleetClusterReads(ctx, o.GlobalOptions, &o.fleet, ts, o.sel.sel, func(ctx context.Context, i int, cg *GlobalOptions, ct fleet.Target) error {
		so := &StatusOptions{GlobalOptions: cg, RunFlags: o.RunFlags, Cluster: ct.Cluster, NoHeaders: o.NoHeaders, wide: o.wide}
		st, err := so.collect(ctx)
		if err != nil {
			return err
		}
		st.Context = ct.Context
		mu.Lock()
		per[i] = append(per[i], item{st, so.clockNow()})
		mu.Unlock()
		return nil
	})
	return printFleetItems(ctx, o.GlobalOptions, per, rs, "ClusterStatusList", "ClusterStatus", o.Cluster,
		func(it item) *ClusterStatus { return it.st }, func(st *ClusterStatus) string { return st.Cluster.Name },
		func(w io.Writer, it item) error {
			if _, err := ops.Fprintf(w, "Context:  %s\n", it.st.Context); err != nil {
				return err
			}
			return writeStatusText(w, it.st, it.now, o.NoHeaders, o.wide)
		})
}

func (o *StatusOptions) clockNow() time.Time {
	if o.clients != nil && o.clients.Clock != nil {
		return o.clients.Clock.Now()
	}
	return time.Now()
}

func (o *StatusOptions) collect(ctx context.Context) (*ClusterStatus, error) {
	cl, c, err := o.discover(ctx, o.Cluster, false)
	if err != nil {
		return nil, err
	}
	st := &ClusterStatus{APIVersion: StatusAPIVersion, Kind: "ClusterStatus", Cluster: c}
	id, err := o.RunFlags.ResolveLockID(o.ConfigFlags)
	if err != nil {
		return nil, err
	}
	lm := &lock.Manager{Client: cl.Kube, Namespace: c.Namespace, Cluster: c.Name, ID: id, Duration: o.RunFlags.LockDuration, Clock: cl.Clock}
	if ls, err := lm.Status(ctx); err != nil {
		st.Warnings = append(st.Warnings, fmt.Sprintf("lock: %v", err))
	} else {
		st.Lock = ls
	}
	if eng, err := o.engine(ctx, cl, c); err == nil {
		h, err := eng.Health(ctx, c)
		switch {
		case err != nil && errors.Is(err, context.Canceled):
			return nil, err
		case err != nil:
			st.Warnings = append(st.Warnings, fmt.Sprintf("health: %v", err))
		default:
			st.Health = h
		}
	} else {
		st.Warnings = append(st.Warnings, err.Error())
	}
	return st, nil
}

// writeStatusText prints the human status view.
func writeStatusText(w io.Writer, st *ClusterStatus, now time.Time, noHeaders, wide bool) error {
	header := func(tw io.Writer, line string) {
		if !noHeaders {
			fmt.Fprintln(tw, line)
		}
	}
	c := st.Cluster
	var b strings.Builder
	ops.Fprintf(&b, "Cluster:  %s/%s (engine %s, layout %s)\n", c.Namespace, c.Name, c.Engine, c.Layout)
	if c.Operator != "" {
		ops.Fprintf(&b, "Operator: %s (mutating commands need --ignore-operator)\n", c.Operator)
	}
	if st.Health != nil {
		ops.Fprintf(&b, "Health:   %s", st.Health.Status)
		if st.Health.Message != "" {
			ops.Fprintf(&b, " (%s)", st.Health.Message)
		}
		b.WriteString("\n")
		keys := make([]string, 0, len(st.Health.Details))
		for k := range st.Health.Details {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ops.Fprintf(&b, "  %s: %s\n", k, st.Health.Details[k])
		}
	}
	writeLockText(&b, st.Lock)
	if st.Health != nil && st.Health.Table != nil {
		t := st.Health.Table
		ops.Fprintf(&b, "\n%s:\n", t.Title)
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		header(tw, "  "+strings.Join(ops.PrintableAll(t.Columns), "\t"))
		for _, r := range t.Rows {
			fmt.Fprintln(tw, "  "+strings.Join(ops.PrintableAll(r), "\t"))
		}
		tw.Flush()
	}
	b.WriteString("\nNode groups:\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	// Groups whose pods an operator's resource recreates show it instead of a StatefulSet.
	controllerCol := "STATEFULSET"
	if slices.ContainsFunc(c.Groups, func(g *ops.NodeGroup) bool { _, sts := g.Owner.(*ops.StatefulSetOwner); return !sts }) {
		controllerCol = "CONTROLLER"
	}
	header(tw, "  GROUP\t"+controllerCol+"\tROLE\tORDER\tDESIRED\tCURRENT\tREADY")
	for _, g := range c.Groups {
		role := g.Role
		if g.MasterEligible && role != ops.RoleMaster {
			role += " (master-eligible)"
		}
		ops.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%d\t%d\n", g.Name, g.Owner, role, g.Order, g.Desired, g.Current, g.Ready)
	}
	tw.Flush()
	b.WriteString("\nPods:\n")
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	if wide {
		header(tw, "  POD\tGROUP\tORDINAL\tREADY\tPHASE\tNODE\tZONE\tRESTARTS\tAGE\tUID\tPVCS")
	} else {
		header(tw, "  POD\tGROUP\tORDINAL\tREADY\tPHASE\tNODE\tZONE\tRESTARTS\tAGE")
	}
	for _, p := range c.AllPods() {
		ready := "no"
		if p.Ready {
			ready = "yes"
		}
		phase := p.Phase
		if p.Deleting {
			phase += " (terminating)"
		}
		age := "-"
		if !p.Created.IsZero() {
			age = duration.HumanDuration(now.Sub(p.Created))
		}
		ops.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s", p.Name, p.Group, p.Ordinal, ready, phase,
			dash(p.Node), dash(p.Zone), p.Restarts, age)
		if wide {
			ops.Fprintf(tw, "\t%s\t%s", dash(string(p.UID)), dash(strings.Join(p.PVCs, ",")))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, wmsg := range st.Warnings {
		ops.Fprintf(&b, "\nWARNING: %s\n", wmsg)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeLockText(b *strings.Builder, ls *lock.State) {
	if ls == nil {
		return
	}
	switch {
	case ls.Holder == "":
		b.WriteString("Lock:     free\n")
	default:
		state := "held"
		switch {
		case ls.Expired:
			state = "expired"
		case ls.HolderDenied:
			state = "held by a denied ID"
		}
		ops.Fprintf(b, "Lock:     %s by %s", state, ls.Holder)
		if ls.Operation != "" {
			ops.Fprintf(b, " (%s)", ls.Operation)
		}
		if ls.Expires != nil {
			ops.Fprintf(b, " until %s", ls.Expires.UTC().Format(time.RFC3339))
		}
		if ls.Reason != "" {
			ops.Fprintf(b, ", reason: %s", ls.Reason)
		}
		b.WriteString("\n")
	}
	if len(ls.DenyList) == 0 {
		b.WriteString("Denied:   none\n")
	}
	for _, d := range ls.DenyList {
		ops.Fprintf(b, "Denied:   %s (by %s at %s", d.ID, d.By, d.At.UTC().Format(time.RFC3339))
		if d.Reason != "" {
			ops.Fprintf(b, ": %s", d.Reason)
		}
		b.WriteString(")\n")
	}
	if j := ls.Journal; j != nil {
		switch {
		case j.State == ops.JournalSucceeded:
			ops.Fprintf(b, "Last op:  %s %s by %s succeeded %s\n", j.Operation, j.Args, j.Holder, j.Updated.UTC().Format(time.RFC3339))
		case runningNow(ls, j):
			// Its session renews the lock: someone is running it now, not a run to resume.
			ops.Fprintf(b, "Running:  %s %s by %s since %s, %d/%d steps done", j.Operation, j.Args, j.Holder,
				runStart(j).UTC().Format(time.RFC3339), len(j.Done), j.Steps)
			if j.Current != "" {
				ops.Fprintf(b, ", at %s", j.Current)
			}
			ops.Fprintf(b, " (lock renewed %s ago)\n", ls.ServerTime.Sub(*ls.Renewed).Round(time.Second))
			writeControlText(b, ls, j)
			writeBlockedText(b, j)
			if j.ETA != nil {
				ops.Fprintf(b, "ETA:      %s, estimated %s\n", j.ETA, j.ETA.At.UTC().Format(time.RFC3339))
			}
		default:
			ops.Fprintf(b, "Unfinished operation: %s %s by %s, %s at %s, %d/%d steps done",
				j.Operation, j.Args, j.Holder, j.StateText(), j.Updated.UTC().Format(time.RFC3339), len(j.Done), j.Steps)
			if j.Current != "" {
				ops.Fprintf(b, ", was at %s", j.Current)
			}
			if j.Request != nil {
				ops.Fprintf(b, "\n  resume it with: %s\n", j.Request.ResumeCommand())
			} else {
				b.WriteString("\n  re-run the same command to resume it\n")
			}
			if j.Error != "" {
				ops.Fprintf(b, "  last error: %s\n", j.Error)
			}
			writeBlockedText(b, j)
		}
	}
}

// writeControlText says whether the running operation waits in a pause (its journal says so
// once it honoured it) or a request is written and not honoured yet (the step in flight ends
// first).
func writeControlText(b *strings.Builder, ls *lock.State, j *ops.Journal) {
	switch c := ls.Control; {
	case j.Control != nil && j.Control.Action == ops.ControlPause:
		ops.Fprintf(b, "Paused:   %s; continue it with: kubectl dbops continue %s -n %s\n", j.Control.Describe(), ls.Cluster, ls.Namespace)
	case c != nil && c.Action != ops.ControlContinue:
		ops.Fprintf(b, "Steering: %s requested by %s at %s, honoured once the step in flight is done\n", c.Action, c.By, c.At.UTC().Format(time.RFC3339))
	}
}

// writeBlockedText prints what the journal's current step was last blocked on (ops.Blocked).
func writeBlockedText(b *strings.Builder, j *ops.Journal) {
	bl := j.Blocked
	if bl == nil {
		return
	}
	ops.Fprintf(b, "Blocked:  on %s (%s) since %s", bl.On, bl.Kind, bl.Since.UTC().Format(time.RFC3339))
	if !bl.GiveUpAt.IsZero() {
		ops.Fprintf(b, ", gives up at %s", bl.GiveUpAt.UTC().Format(time.RFC3339))
	}
	b.WriteString("\n")
	if bl.ToUnblock != "" {
		ops.Fprintf(b, "  to unblock: %s\n", bl.ToUnblock)
	}
	if bl.Stalled != "" {
		ops.Fprintf(b, "  %s\n", bl.Stalled)
	}
}

// runningNow reports whether j is the journal of a run that is alive now: still running, its
// holder holds the lock and renewed it within the time a live session renews it in.
func runningNow(ls *lock.State, j *ops.Journal) bool {
	return j.State == ops.JournalRunning && ls.Held && ls.Holder == j.Holder && ls.Renewed != nil &&
		ls.ServerTime.Sub(*ls.Renewed) < lock.DefaultSessionTimeout
}

// runStart is when the run that wrote j started (older journals: the operation's start).
func runStart(j *ops.Journal) time.Time {
	if !j.RunStarted.IsZero() {
		return j.RunStarted
	}
	return j.Started
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
