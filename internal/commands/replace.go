package commands

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// ReplaceOptions holds `replace` flags.
type ReplaceOptions struct {
	// Runner runs the operation (plan, dry-run, confirm, lock, execute) with the shared
	// run flags.
	*Runner
	// g are the shared flags that pick the cluster (Runner.Clusters) and the engines' flags.
	g                *GlobalOptions
	Cluster          string
	Pods             []string
	Strategy         string
	MaxConcurrent    int
	Failed           bool
	FailureThreshold time.Duration
	Taints           []string
	// Nodes choose the pods by node (evacuate a node); an engine's own flags may choose them
	// another way (ops.ReplaceFlags: FoundationDB's --process-class).
	Nodes []string
	// NodeSelector chooses the nodes by label (kubectl-fdb cordon --node-selector): every pod
	// of the cluster on a matching node.
	NodeSelector map[string]string

	taints []ops.TaintRule
}

// NewReplaceOptions returns options bound to the shared flags.
func NewReplaceOptions(g *GlobalOptions, rf *RunFlags) *ReplaceOptions {
	return &ReplaceOptions{Runner: NewRunner(g.Factory, rf, g), g: g, Strategy: ops.StrategyReplacement, MaxConcurrent: 1,
		FailureThreshold: ops.DefaultFailureThreshold}
}

// NewReplaceCmd builds `replace CLUSTER [POD...]`.
func NewReplaceCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewReplaceOptions(g, rf)
	cmd := &cobra.Command{
		Use:   "replace CLUSTER [POD...] [--strategy replacement|deletion] [--failed]",
		Short: "Replace members: move their data away, recreate them with fresh volumes, let them rejoin",
		Long: `Replace pods of the cluster, named or chosen with --failed.

--strategy replacement (default) moves the data away first, then deletes the
pod and its PVCs so the StatefulSet creates both fresh, and waits until the
new member has joined and holds data again. CrateDB: the node is excluded
from shard allocation (added to the existing exclusion list), its shards
drain to zero, pod and PVCs are deleted, the node rejoins sys.nodes, only
this exclusion is dropped and the cluster must be green again. etcd: member
repair (remove, fresh PVC, add as a learner, promote). Replicated: stop is
run first (a failing stop does not prevent the replacement), then the pod
is given its role back (primary with the running primaries' DNS names, or,
when it was the only primary, the first primary is elected by sequence
number; secondary with the primaries' names). Generic: pod and PVCs
are recreated and the pod must be Ready on a new PVC. Changes to a PVC spec
can only be rolled out this way.

--strategy deletion deletes the pod only; it comes back on its PVC and must
be Ready and pass the engine's health gates (as in a rolling restart).

--failed picks the candidates by condition: not Ready or Pending for longer
than --failure-threshold, a PVC missing, not a member of the database cluster
(CrateDB: not in sys.nodes; etcd: no member), or on a node carrying a taint
given with --taint KEY[=DURATION] for at least DURATION. --dry-run lists the
candidates with the reason for each. --max-concurrent N replaces up to N pods
at once (a batch); the next batch starts once the previous one is back.`,
		Example: `  kubectl dbops replace myetcd myetcd-2 --dry-run
  kubectl dbops replace mycrate crate-data-hot-mycrate-1 --yes
  kubectl dbops replace mycrate --failed --taint node.kubernetes.io/unreachable=30m --dry-run
  kubectl dbops replace web --failed --max-concurrent 2 --yes`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return ops.Usagef("missing CLUSTER argument: usage: %s", cmd.UseLine())
			}
			if strings.TrimSpace(args[0]) == "" {
				return ops.Usagef("CLUSTER must not be empty")
			}
			return nil
		},
		ValidArgsFunction: completePods(g),
		RunE:              o.Runner.runE(o),
	}
	f := cmd.Flags()
	f.StringVar(&o.Strategy, "strategy", o.Strategy, "How to replace: "+strings.Join(ops.ReplaceStrategies, "|")+" (replacement = fresh PVC; deletion = pod only)")
	f.IntVar(&o.MaxConcurrent, "max-concurrent", o.MaxConcurrent, "Replace at most this many pods at once")
	f.BoolVar(&o.Failed, "failed", false, "Choose the pods by condition instead of by name (see --failure-threshold, --taint)")
	f.DurationVar(&o.FailureThreshold, "failure-threshold", o.FailureThreshold, "With --failed: how long a pod must be not Ready or Pending")
	f.StringArrayVar(&o.Taints, "taint", nil, "With --failed: pick pods on nodes with this taint, KEY[=DURATION] (taint older than DURATION; repeatable)")
	f.StringSliceVar(&o.Nodes, "node", nil, "Choose every pod of the cluster on these nodes: evacuate them (comma-separated or repeated)")
	f.StringToStringVar(&o.NodeSelector, "node-selector", nil, "Choose every pod of the cluster on the nodes with these labels, key=value[,key=value] (evacuate them)")
	_ = cmd.RegisterFlagCompletionFunc("strategy", cobra.FixedCompletions(ops.ReplaceStrategies, cobra.ShellCompDirectiveNoFileComp))
	g.addEngineFlags("replace", f)
	return cmd
}

// Complete takes the cluster and pod arguments.
func (o *ReplaceOptions) Complete(_ *cobra.Command, args []string) error {
	o.Cluster = args[0]
	o.Pods = nil
	for _, p := range args[1:] {
		o.Pods = append(o.Pods, strings.TrimSpace(p))
	}
	return nil
}

// Validate checks arguments without touching the API.
func (o *ReplaceOptions) Validate() error {
	if !slices.Contains(ops.ReplaceStrategies, o.Strategy) {
		return ops.Usagef("unknown --strategy %q; allowed: %s", o.Strategy, strings.Join(ops.ReplaceStrategies, ", "))
	}
	if o.MaxConcurrent < 1 {
		return ops.Usagef("--max-concurrent must be 1 or more, got %d", o.MaxConcurrent)
	}
	for _, p := range o.Pods {
		if p == "" {
			return ops.Usagef("POD must not be empty")
		}
	}
	choices, engineWays := 0, ""
	for _, set := range []bool{len(o.Pods) > 0, o.Failed, o.engineChoice(), len(o.Nodes) > 0, len(o.NodeSelector) > 0} {
		if set {
			choices++
		}
	}
	for _, rf := range o.replaceFlags() {
		if name := rf.PodChoiceFlag(); name != "" {
			engineWays += "--" + name + ", "
		}
	}
	switch {
	case o.Failed && len(o.Pods) > 0:
		return ops.Usagef("name pods or use --failed, not both (got %s)", strings.Join(o.Pods, " "))
	case choices > 1:
		return ops.Usagef("choose the pods one way: POD names, --failed, %s--node or --node-selector, not several", engineWays)
	case choices == 0:
		return ops.Usagef("replace needs POD names or --failed (or %s--node, --node-selector): usage: replace CLUSTER [POD...] [--failed]", engineWays)
	}
	if len(o.NodeSelector) > 0 {
		if _, err := labels.ValidatedSelectorFromSet(o.NodeSelector); err != nil {
			return ops.Usagef("--node-selector: %v", err)
		}
	}
	for _, v := range o.Nodes {
		if strings.TrimSpace(v) == "" {
			return ops.Usagef("--node values must not be empty")
		}
	}
	for _, rf := range o.replaceFlags() {
		if err := rf.CheckReplace(o.Strategy); err != nil {
			return err
		}
	}
	if o.FailureThreshold <= 0 {
		return ops.Usagef("--failure-threshold must be positive, got %s", o.FailureThreshold)
	}
	o.taints = nil
	for _, t := range o.Taints {
		r, err := ops.ParseTaintRule(t)
		if err != nil {
			return err
		}
		o.taints = append(o.taints, r)
	}
	return nil
}

// args renders the request canonically for the journal: a re-run of the
// same request resumes it.
func (o *ReplaceOptions) args(pods []string) string {
	return fmt.Sprintf("--strategy %s --max-concurrent %d --pods %s", o.Strategy, o.MaxConcurrent, strings.Join(pods, ","))
}

// replaceFlags are the engines' own replace flags (ops.ReplaceFlags), in registry order.
func (o *ReplaceOptions) replaceFlags() []ops.ReplaceFlags {
	var out []ops.ReplaceFlags
	for _, k := range o.g.Engines {
		if rf, ok := o.g.engineFlagsOf(k.Name).(ops.ReplaceFlags); ok {
			out = append(out, rf)
		}
	}
	return out
}

// engineChoice reports whether an engine's own flag chooses the pods.
func (o *ReplaceOptions) engineChoice() bool {
	return slices.ContainsFunc(o.replaceFlags(), ops.ReplaceFlags.PodChoiceGiven)
}

// picks: the pods are chosen by a condition or selector, so an interrupted run's choice is
// kept (replaced pods no longer match, or new ones do).
func (o *ReplaceOptions) picks() bool {
	return o.Failed || o.engineChoice() || len(o.Nodes) > 0 || len(o.NodeSelector) > 0
}

// Run discovers, chooses the pods, plans and executes the replacement.
func (o *ReplaceOptions) Run(cmd *cobra.Command) error {
	return o.runOperation(commandContext(cmd), operation{req: o.g.request(cmd, o.Cluster, o.Pods...), defaultTimeout: defaultRestartTimeout,
		check: o.checkPods, plan: o.plan})
}

// checkPods refuses named pods that are not the cluster's.
func (o *ReplaceOptions) checkPods(c *ops.Cluster) error {
	for _, g := range c.Groups {
		if g.Owner.PodName(0) == "" {
			// An owner that names its pods itself (an operator's resource) owns the pods: names may be pods or the operator's own
			// (FoundationDB's process groups); the engine resolves and checks them.
			return nil
		}
	}
	for _, name := range o.Pods {
		if _, p := c.Pod(name); p == nil {
			var names []string
			for _, p := range c.AllPods() {
				names = append(names, p.Name)
			}
			return ops.Usagef("pod %q is not part of cluster %s/%s; %s", name, c.Namespace, c.Name, ops.Allowed(name, names))
		}
	}
	return nil
}

// plan chooses the pods (named, the interrupted run's, or by condition)
// and asks the engine; with --failed and no candidate it says so and
// returns no plan.
func (o *ReplaceOptions) plan(ctx context.Context, cl *Clients, c *ops.Cluster, eng ops.Engine, request *ops.Request) (*ops.Plan, error) {
	pods, reasons := o.Pods, map[string]string{}
	var journal *ops.Journal
	if j := o.unfinishedJournal(ctx, cl, c); j != nil && j.Request.Same(request) {
		journal = j
	}
	if o.picks() {
		// Replaced pods look healthy again and a pod being replaced may not
		// look failed yet (or, chosen by class or node, is gone and replaced
		// by another), so an interrupted run resumes with the pods it chose,
		// not with a fresh choice.
		if j := journal; j != nil && len(j.Request.Picked) > 0 {
			pods = slices.Clone(j.Request.Picked)
			for _, p := range pods {
				reasons[p] = "chosen by the interrupted run being resumed"
			}
		}
	}
	if o.Failed && len(pods) == 0 {
		mc, _ := eng.(ops.MemberChecker)
		cands, err := ops.FindFailed(ctx, cl.Kube, c, ops.FailedOptions{Threshold: o.FailureThreshold, Taints: o.taints, Now: cl.Clock.Now()}, mc)
		if err != nil {
			return nil, err
		}
		if len(cands) == 0 {
			_, err := fmt.Fprintf(o.Out, "nothing to replace in %s/%s: no pod meets a failure condition\n", c.Namespace, c.Name)
			return nil, err
		}
		pods = nil
		for _, cand := range cands {
			pods = append(pods, cand.Pod)
			reasons[cand.Pod] = cand.Reason
		}
	}
	if len(pods) == 0 && (o.engineChoice() || len(o.Nodes) > 0 || len(o.NodeSelector) > 0) {
		var err error
		if pods, err = o.selectPods(ctx, cl, eng, c, reasons); err != nil || len(pods) == 0 {
			return nil, err
		}
	}
	if o.picks() {
		request.Picked = pods
	}
	req := ops.ReplaceRequest{Pods: pods, Strategy: o.Strategy, MaxConcurrent: o.MaxConcurrent, Reasons: reasons,
		Args: o.args(pods), Journal: journal}
	if rf, ok := o.g.engineFlagsOf(c.Engine).(ops.ReplaceFlags); ok {
		rf.FillReplace(&req)
	}
	return planReplace(ctx, eng, c, req, o.engineNames())
}

// selectPods chooses the pods of an engine's own choice (ops.ReplaceFlags: FoundationDB's
// --process-class) or --node; with no pod on the nodes it says so and chooses none.
func (o *ReplaceOptions) selectPods(ctx context.Context, cl *Clients, eng ops.Engine, c *ops.Cluster, reasons map[string]string) ([]string, error) {
	var pods []string
	for _, rf := range o.replaceFlags() {
		if !rf.PodChoiceGiven() {
			continue
		}
		chosen, why, err := rf.ChoosePods(ctx, eng, c)
		if err != nil {
			return nil, err
		}
		pods = append(pods, chosen...)
		maps.Copy(reasons, why)
	}
	nodes, why := o.Nodes, ""
	if len(o.NodeSelector) > 0 {
		// kubectl-fdb cordon --node-selector: the nodes whose labels match, then their pods.
		sel := labels.SelectorFromSet(o.NodeSelector).String()
		list, err := cl.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("listing the nodes of --node-selector %s: %w", sel, err)
		}
		nodes, why = nil, " (--node-selector "+sel+")"
		for _, n := range list.Items {
			nodes = append(nodes, n.Name)
		}
		if len(nodes) == 0 {
			_, err := fmt.Fprintf(o.Out, "nothing to replace in %s/%s: no node matches --node-selector %s\n", c.Namespace, c.Name, sel)
			return nil, err
		}
	}
	if len(nodes) > 0 {
		for _, p := range c.AllPods() {
			if slices.Contains(nodes, p.Node) {
				pods = append(pods, p.Name)
				reasons[p.Name] = "on node " + p.Node + why + " (evacuated)"
			}
		}
		if len(pods) == 0 {
			_, err := fmt.Fprintf(o.Out, "nothing to replace in %s/%s: no pod on node(s) %s\n", c.Namespace, c.Name, strings.Join(nodes, ", "))
			return nil, err
		}
	}
	return pods, nil
}

// planReplace picks the engine's way of doing the request.
//
// Engines plug in by implementing ops.PodReplacer (replacement strategy);
// deletion reuses the engine's rolling restart, so its health gates apply.
// engines are the registry's engine names, for the refusal of an engine without a replacement.
func planReplace(ctx context.Context, eng ops.Engine, c *ops.Cluster, req ops.ReplaceRequest, engines []string) (*ops.Plan, error) {
	if req.Strategy == ops.StrategyDeletion {
		// Deletion is a pod deletion whatever the engine's default restart method.
		p, err := eng.PlanRestart(ctx, c, ops.RestartOptions{Pods: req.Pods, BatchSize: req.MaxConcurrent, Method: ops.MethodPod})
		if err != nil {
			return nil, err
		}
		p.Operation, p.Args = "replace", req.Args
		for _, name := range req.Pods {
			if why := req.Reasons[name]; why != "" {
				p.Notes = append(p.Notes, name+": "+why)
			}
		}
		return p, nil
	}
	if r, ok := eng.(ops.PodReplacer); ok {
		return r.PlanReplacement(ctx, c, req)
	}
	supported := slices.DeleteFunc(slices.Clone(engines), func(name string) bool { return name == eng.Name() })
	return nil, ops.Usagef("replace --strategy replacement is not available for engine %s yet (supported: %s); --strategy deletion is",
		eng.Name(), strings.Join(supported, ", "))
}
