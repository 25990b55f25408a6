package commands

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// ControlOptions holds `pause`, `continue` and `abort` flags: one command for the three
// requests a running operation honours between steps.
type ControlOptions struct {
	*LockOptions
	// Action is ops.ControlPause, ControlContinue or ControlAbort.
	Action string
}

// NewControlOptions returns options for action bound to the shared flags.
func NewControlOptions(g *GlobalOptions, rf *RunFlags, action string) *ControlOptions {
	return &ControlOptions{LockOptions: NewLockOptions(g, rf), Action: action}
}

// controlHelp is each verb's short help, long help and example.
var controlHelp = map[string][3]string{
	ops.ControlPause: {"Pause the operation running on a cluster before its next step",
		`Writes a pause request on the cluster's lock object (who, when, why; an Event on it). The
running command, in whatever terminal it runs, finishes the step in flight, then waits
before touching the next pod: it keeps the lock and keeps renewing it, and says "paused by
… at …: reason". Continue it with 'kubectl dbops continue', or stop it with 'kubectl dbops
abort'. Needs the RBAC to update the lock's Lease, nothing more. Refused (writing nothing)
when no operation is running or it is already paused.`,
		`  kubectl dbops pause mycrate --reason "checking replication lag before the next pod"`},
	ops.ControlContinue: {"Continue an operation paused with 'kubectl dbops pause'",
		`Writes a continue request on the cluster's lock object (who, when, why; an Event on it):
the paused run goes on with its next step. Refused (writing nothing) when no operation is
running or it is not paused.`,
		`  kubectl dbops continue mycrate --reason "lag is back to normal"`},
	ops.ControlAbort: {"Stop the operation running on a cluster after its step in flight",
		`Writes an abort request on the cluster's lock object (who, when, why; an Event on it). The
running command finishes the step in flight (each step puts back what it set: a FoundationDB
maintenance zone ended, CrateDB shard allocation re-enabled), starts no further step,
releases the lock and ends with outcome "aborted", exit code 7 and reason code Aborted. The
journal is kept: re-running the same command resumes. Refused (writing nothing) when no
operation is running or an abort is already requested.`,
		`  kubectl dbops abort mycrate --reason "incident: stop all maintenance"`},
}

// NewControlCmd builds `pause`, `continue` or `abort`.
func NewControlCmd(g *GlobalOptions, rf *RunFlags, action string) *cobra.Command {
	o := NewControlOptions(g, rf, action)
	h := controlHelp[action]
	cmd := &cobra.Command{
		Use:               action + " CLUSTER [--reason R]",
		Annotations:       documentAnnotations(),
		Short:             h[0],
		Long:              h[1],
		Example:           h[2],
		Args:              clusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              runOptions(o),
	}
	cmd.Flags().StringVar(&o.Reason, "reason", "", "Why (recorded on the lock object and shown by the running command)")
	return cmd
}

// Complete fills in arguments.
func (o *ControlOptions) Complete(_ *cobra.Command, args []string) error {
	o.Cluster = args[0]
	return nil
}

// Validate checks the flags without touching the API.
func (o *ControlOptions) Validate() error {
	if _, ok := controlHelp[o.Action]; !ok {
		return ops.Usagef("unknown request %q: must be pause, continue or abort", o.Action)
	}
	return o.LockOptions.Validate()
}

// ControlAction is the `pause|continue|abort -o json|yaml` document.
type ControlAction struct {
	ops.ControlRequest
	DryRun bool `json:"dryRun,omitempty"`
}

// Run writes the request on the lock, or says what it would write (--dry-run).
func (o *ControlOptions) Run(cmd *cobra.Command) error {
	ctx := commandContext(cmd)
	m, err := o.manager(ctx)
	if err != nil {
		return err
	}
	print := func(a ControlAction, text func(io.Writer) error) error {
		doc, err := document(a, "ControlAction", m.Cluster, m.Namespace)
		if err != nil {
			return err
		}
		return o.printDocument(o.Out, doc, text)
	}
	if o.RunFlags.DryRun {
		return print(ControlAction{ControlRequest: ops.ControlRequest{Action: o.Action, By: m.ID, Reason: o.Reason}, DryRun: true}, func(w io.Writer) error {
			_, err := ops.Fprintf(w, "would write a %s request on %s/%s\n", o.Action, m.Namespace, m.Cluster)
			return err
		})
	}
	var needs []ops.NeedFor
	for _, p := range ops.LockNeeds {
		needs = append(needs, ops.NeedFor{Permission: p, For: "the " + o.Action + " request on the cluster lock"})
	}
	if err := ops.CheckPermissions(ctx, o.clients.access(), m.Namespace, needs); err != nil {
		return err
	}
	req, err := m.RequestControl(ctx, o.Action, o.Reason)
	if err != nil {
		return err
	}
	reason := map[string]string{ops.ControlPause: "DbopsRunPauseRequested", ops.ControlContinue: "DbopsRunContinueRequested", ops.ControlAbort: "DbopsRunAbortRequested"}[o.Action]
	o.recordLockEvent(ctx, m, reason, o.Action != ops.ControlContinue, fmt.Sprintf("%s requested by %s", o.Action, m.ID)+reasonSuffix(o.Reason))
	return print(ControlAction{ControlRequest: *req}, func(w io.Writer) error {
		then := map[string]string{
			ops.ControlPause:    "the run waits before its next step",
			ops.ControlContinue: "the run goes on with its next step",
			ops.ControlAbort:    "the run stops after its step in flight",
		}[o.Action]
		_, err := ops.Fprintf(w, "%s requested on %s/%s by %s: %s\n", o.Action, m.Namespace, m.Cluster, m.ID, then)
		return err
	})
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}
