package commands

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Conditions `wait --for` accepts.
var waitConditions = []string{"ready", "healthy", "unlocked"}

// DefaultWaitTimeout bounds `wait` when --timeout is not given.
const DefaultWaitTimeout = 10 * time.Minute

// WaitOptions holds `wait` flags. It reads the status as `status` does.
type WaitOptions struct {
	*StatusOptions
	For string
}

// NewWaitOptions returns options bound to the shared flags.
func NewWaitOptions(g *GlobalOptions, rf *RunFlags) *WaitOptions {
	return &WaitOptions{StatusOptions: NewStatusOptions(g, rf)}
}

// NewWaitCmd builds `wait CLUSTER --for=...`.
func NewWaitCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewWaitOptions(g, rf)
	cmd := &cobra.Command{
		Use:   "wait CLUSTER --for=ready|healthy|unlocked",
		Short: "Wait until a cluster is ready, healthy or unlocked (reads only; for CI steps and runbooks)",
		Long: `Wait until a condition holds for the cluster, then exit 0; exit 4 when --timeout
(default 10m) passes first, naming what was still missing. Reads only.

  ready     every node group has its desired number of pods, all Ready
  healthy   ready, and the database reports itself healthy (CrateDB green,
            etcd healthy with quorum and no learner, replicated healthy,
            FoundationDB healthy, fully recovered and no maintenance zone)
  unlocked  nobody holds the cluster's lock (a lock that expired counts as free)

Kubernetes changes are watched (pods, StatefulSets, the lock's Lease); the
database's health, which changes without one, is read again with backoff.

Over a fleet (--contexts, --context A,B or --fleet) every target is waited for,
--max-parallel at once, each bounded by --timeout; lines are prefixed with the
target, and each target that did not reach the condition is named on one
ERROR line (the exit code is the worst target's). Without CLUSTER, -l selects
the clusters of each target by their labels (-A: in every namespace).`,
		Example: `  # In a pipeline, after a deploy
  kubectl dbops wait mycrate --for=healthy --timeout 15m

  # Before starting maintenance: wait for someone else's operation to end
  kubectl dbops wait mycrate --for=unlocked

  # Every cluster labelled tier=db in the contexts prod-*, two contexts at a time
  kubectl dbops wait --for=healthy --contexts 'prod-*' -l tier=db --max-parallel 2`,
		Args:              optionalClusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              runOptions(o),
	}
	cmd.Flags().StringVar(&o.For, "for", "", "The condition: "+strings.Join(waitConditions, ", "))
	_ = cmd.RegisterFlagCompletionFunc("for", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return waitConditions, cobra.ShellCompDirectiveNoFileComp
	})
	o.fleet.addFlags(cmd, g)
	o.sel.addFlags(cmd)
	return cmd
}

// Complete fills in arguments.
func (o *WaitOptions) Complete(_ *cobra.Command, args []string) error {
	o.Cluster = firstArg(args)
	return nil
}

// Validate checks flags without touching the API.
func (o *WaitOptions) Validate() error {
	if err := o.GlobalOptions.Validate(); err != nil {
		return err
	}
	if err := o.RunFlags.Validate(); err != nil {
		return err
	}
	if o.RunFlags.DryRun {
		return ops.Usagef("--dry-run does not apply to wait (it never changes anything)")
	}
	if !slices.Contains(waitConditions, o.For) {
		if o.For == "" {
			return ops.Usagef("wait needs --for; allowed: %s", strings.Join(waitConditions, ", "))
		}
		return ops.Usagef("unknown --for %q; allowed: %s", o.For, strings.Join(waitConditions, ", "))
	}
	if err := o.fleet.validate(o.GlobalOptions); err != nil {
		return err
	}
	return o.sel.validate(o.GlobalOptions, &o.fleet, o.Cluster)
}

// Run waits for the condition (over a fleet, for every target).
func (o *WaitOptions) Run(cmd *cobra.Command) error {
	ctx := commandContext(cmd)
	if o.fleet.active(o.GlobalOptions) {
		return o.runFleet(ctx)
	}
	return o.waitFor(ctx)
}

// runFleet waits for the condition on every cluster of the fleet's targets, --max-parallel
// targets at once, each cluster's wait bounded by --timeout on its own. Its lines are
// prefixed with the cluster's target; each target that did not reach the condition (or could
// not be read) is named on its own ERROR line, and the exit code is the worst target's.
func (o *WaitOptions) runFleet(ctx context.Context) error {
	ts, err := o.sel.targets(o.GlobalOptions, &o.fleet, o.Cluster)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	rs := runFleetClusterReads(ctx, o.GlobalOptions, &o.fleet, ts, o.sel.sel, func(ctx context.Context, _ int, cg *GlobalOptions, ct fleet.Target) error {
		prefix := "[" + ct.String() + "] "
		out := &targetWriter{mu: &mu, w: o.Out, prefix: prefix}
		errOut := &targetWriter{mu: &mu, w: o.ErrOut, prefix: prefix}
		cg.IOStreams = genericiooptions.IOStreams{In: o.In, Out: out, ErrOut: errOut}
		wo := &WaitOptions{StatusOptions: &StatusOptions{GlobalOptions: cg, RunFlags: o.RunFlags, Cluster: ct.Cluster}, For: o.For}
		err := wo.waitFor(ctx)
		_ = out.flush()
		_ = errOut.flush()
		return err
	})
	if ctx.Err() != nil {
		return &ops.CodedError{Kind: ops.ErrInterrupted, Msg: fmt.Sprintf("interrupted while waiting for the fleet's clusters to be %s", o.For)}
	}
	reportTargetErrors(o.GlobalOptions, rs)
	return fleetFailure(rs)
}

// waitFor waits for the condition on the one cluster.
func (o *WaitOptions) waitFor(ctx context.Context) error {
	timeout := o.RunFlags.Timeout
	if timeout == 0 {
		timeout = DefaultWaitTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, c, err := o.discover(wctx, o.Cluster, false)
	if err != nil {
		return err
	}
	changed, stop, err := watchNamespace(wctx, cl.Kube, c.Namespace)
	if err != nil {
		return o.ended(ctx, timeout, "", fmt.Errorf("watching %s/%s: %w", c.Namespace, c.Name, err))
	}
	defer stop()
	// The database's health changes without a Kubernetes change: read again with backoff.
	const firstRecheck, maxRecheck = 250 * time.Millisecond, 5 * time.Second
	recheck := firstRecheck
	last := ""
	for {
		select {
		case <-changed: // this read sees what it announced
		default:
		}
		st, err := o.collect(wctx)
		missing := ""
		switch {
		case err != nil && wctx.Err() != nil:
			return o.ended(ctx, timeout, last, err)
		case err != nil:
			missing = "status not readable: " + err.Error()
		default:
			missing = waitMissing(o.For, st)
		}
		if missing == "" {
			_, err := ops.Fprintf(o.Out, "%s/%s is %s\n", c.Namespace, c.Name, o.For)
			return err
		}
		if missing != last {
			last = missing
			ops.Fprintf(o.ErrOut, "waiting for %s/%s to be %s: %s\n", c.Namespace, c.Name, o.For, missing)
			recheck = firstRecheck
		}
		var tick <-chan time.Time
		timer := time.NewTimer(recheck)
		if o.For == "healthy" {
			tick = timer.C
			recheck = min(2*recheck, maxRecheck)
		}
		select {
		case <-wctx.Done():
			timer.Stop()
			return o.ended(ctx, timeout, last, wctx.Err())
		case <-changed:
		case <-tick:
		}
		timer.Stop()
	}
}

// ended is the error of a wait that stopped before its condition held.
func (o *WaitOptions) ended(ctx context.Context, timeout time.Duration, missing string, err error) error {
	if ctx.Err() != nil {
		return &ops.CodedError{Kind: ops.ErrInterrupted, Msg: fmt.Sprintf("interrupted while waiting for %s to be %s", o.Cluster, o.For)}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		if missing == "" {
			missing = "not read yet"
		}
		return &ops.CodedError{Kind: ops.ErrTimeout, Msg: fmt.Sprintf("%s is not %s after %s: %s", o.Cluster, o.For, timeout, missing)}
	}
	return err
}

// waitMissing says what keeps cond from holding on st ("" when it holds).
func waitMissing(cond string, st *ClusterStatus) string {
	switch cond {
	case "unlocked":
		if st.Lock == nil {
			return "the lock could not be read"
		}
		if st.Lock.Held {
			return fmt.Sprintf("locked by %s (%s) until %s", st.Lock.Holder, dash(st.Lock.Operation), st.Lock.Expires.UTC().Format(time.RFC3339))
		}
		return ""
	case "ready", "healthy":
		var not []string
		for _, g := range st.Cluster.Groups {
			if g.Ready != g.Desired || g.Current != g.Desired {
				not = append(not, fmt.Sprintf("group %s %d/%d Ready", g.Name, g.Ready, g.Desired))
			}
			for _, p := range g.Pods {
				if !p.Ready {
					not = append(not, "pod "+p.Name+" not Ready")
				}
			}
		}
		if len(not) > 0 {
			return strings.Join(not, ", ")
		}
		if cond == "ready" {
			return ""
		}
		return healthMissing(st)
	}
	return "unknown condition " + cond
}

// healthMissing says why the database is not healthy ("" when it is, or when the engine has
// no health of its own to report).
func healthMissing(st *ClusterStatus) string {
	h := st.Health
	if h == nil {
		for _, w := range st.Warnings {
			if strings.HasPrefix(w, "health:") {
				return w
			}
		}
		return ""
	}
	switch h.Status {
	case "green", "healthy":
		return ""
	}
	if h.Message != "" {
		return fmt.Sprintf("database %s: %s", h.Status, h.Message)
	}
	return "database " + h.Status
}
