package commands

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Cluster selection (#39): `-l SELECTOR` without a CLUSTER argument picks, in each target of a
// fleet (its namespace, or every namespace with -A), the clusters whose labels match; `list -l`
// does the same in one context too.
//
// A cluster's labels are the labels that all its workload objects carry with the same value:
// the StatefulSets that `list` groups into the cluster (clusterNameOf: the dbops.io/cluster
// label, the CrateDB operator's name label, else the StatefulSet's own name) and, for a cluster
// an operator runs without StatefulSets, the engine's resource (a FoundationDBCluster). A label
// on only some of a cluster's StatefulSets is not the cluster's. With a CLUSTER argument, -l
// keeps its meaning of picking that cluster's StatefulSets (discovery.Options.Selector).

// clusterSelect are the flags that select clusters over a fleet without naming one.
type clusterSelect struct {
	AllNamespaces bool
	// sel is -l when it selects clusters (no CLUSTER argument); nil otherwise.
	sel labels.Selector
	// cmd names the command in messages.
	cmd *cobra.Command
}

func (cs *clusterSelect) addFlags(cmd *cobra.Command) {
	cs.cmd = cmd
	cmd.Flags().BoolVarP(&cs.AllNamespaces, "all-namespaces", "A", false,
		"Fleet: every namespace of each context (with -l, the matching clusters; with CLUSTER, the clusters of that name)")
}

// parseClusterSelector parses -l, refusing bad syntax before any API call.
func parseClusterSelector(s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, ops.Usagef("bad selector -l %q: %s; allowed: key=value, key!=value, key in (a,b), key notin (a,b), key, !key", s, oneLineErr(err))
	}
	return sel, nil
}

// validate checks the selection of a command that takes a CLUSTER argument: the argument, or, over a fleet, -l to select the clusters instead; -A only over a
// fleet. No API call.
func (cs *clusterSelect) validate(g *GlobalOptions, ff *fleetFlags, cluster string) error {
	var sel labels.Selector
	if g.Selector != "" {
		var err error
		if sel, err = parseClusterSelector(g.Selector); err != nil {
			return err
		}
	}
	fleetOn := ff.active(g)
	switch {
	// A fleet file may name the clusters instead (requireClusters checks it names every target's).
	case cluster == "" && (!fleetOn || sel == nil) && ff.File == "":
		return ops.Usagef("missing CLUSTER argument: usage: %s (over a fleet, -l SELECTOR selects the clusters instead: --contexts 'prod-*' -l tier=db)", cs.cmd.UseLine())
	case cs.AllNamespaces && !fleetOn:
		return ops.Usagef("-A applies to a fleet (--context A,B, --contexts or --fleet); in one context name the namespace with -n")
	case cs.AllNamespaces && g.ConfigFlags.Namespace != nil && *g.ConfigFlags.Namespace != "":
		return ops.Usagef("give -n or -A, not both")
	}
	cs.sel = nil
	if cluster == "" {
		cs.sel = sel
	}
	return nil
}

// selecting reports whether the targets' clusters are found by listing (-l without CLUSTER, or -A).
func (cs *clusterSelect) selecting() bool { return cs.sel != nil || cs.AllNamespaces }

// targets are the fleet's targets: the cluster of the argument, else (-l) the targets whose
// clusters the selector picks. A fleet file naming clusters and -l selecting them is exit 2.
func (cs *clusterSelect) targets(g *GlobalOptions, ff *fleetFlags, cluster string) ([]fleet.Target, error) {
	var clusters []string
	if cluster != "" {
		clusters = []string{cluster}
	}
	ts, err := ff.targets(g, clusters, cs.AllNamespaces)
	if err != nil {
		return nil, err
	}
	if cs.sel == nil {
		return ts, nil
	}
	for i, t := range ts {
		if t.Cluster != "" {
			return nil, ops.Usagef("fleet file %s names cluster %q and -l %q selects clusters; give one of them", ff.File, t.Cluster, g.Selector)
		}
		ts[i].Selector = g.Selector
	}
	return ts, nil
}

// clusterLabels reads the clusters of ns ("" = every namespace) with their labels (see the
// top of this file): the StatefulSets as list groups them (through kube: list's memo lets its
// discovery reuse this read), and the resources of rs (the engines' resource recognizers)
// where they may be listed.
func clusterLabels(ctx context.Context, cl *Clients, kube kubernetes.Interface, ns string, rs []ops.ResourceRecognizer) ([]namespacedName, map[namespacedName]labels.Set, error) {
	list, err := kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing StatefulSets: %w", err)
	}
	var names []namespacedName
	sets := map[namespacedName]labels.Set{}
	merge := func(n namespacedName, ls map[string]string) {
		have, ok := sets[n]
		if !ok {
			names = append(names, n)
			sets[n] = maps.Clone(labels.Set(ls))
			if sets[n] == nil {
				sets[n] = labels.Set{}
			}
			return
		}
		// Only the labels every object of the cluster carries, with the same value.
		for k, v := range have {
			if w, ok := ls[k]; !ok || w != v {
				delete(have, k)
			}
		}
	}
	for i := range list.Items {
		merge(namespacedName{list.Items[i].Namespace, clusterNameOf(&list.Items[i])}, list.Items[i].Labels)
	}
	if cl.Dynamic != nil {
		for _, r := range rs {
			ul, err := cl.Dynamic.Resource(r.Resource()).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				// Not installed, or not listable: no clusters of that kind (as operatorClusterNames).
				continue
			}
			for _, u := range ul.Items {
				merge(namespacedName{u.GetNamespace(), u.GetName()}, u.GetLabels())
			}
		}
	}
	return sortedNames(names), sets, nil
}

// selectClusters are the clusters of ns ("" = every namespace) whose labels match sel (nil:
// every cluster) and, when name is given, of that name.
func selectClusters(ctx context.Context, cl *Clients, kube kubernetes.Interface, ns string, sel labels.Selector, name string, rs []ops.ResourceRecognizer) ([]namespacedName, error) {
	names, sets, err := clusterLabels(ctx, cl, kube, ns, rs)
	if err != nil {
		return nil, err
	}
	var out []namespacedName
	for _, n := range names {
		if (name == "" || n.Name == name) && (sel == nil || sel.Matches(sets[n])) {
			out = append(out, n)
		}
	}
	return out, nil
}

// noClusterSelected is the error of a target where the selection found no cluster.
func noClusterSelected(ns, name, selector string) error {
	where := fmt.Sprintf("namespace %q", ns)
	if ns == "" {
		where = "any namespace"
	}
	var what []string
	if name != "" {
		what = append(what, fmt.Sprintf("named %q", name))
	}
	if selector != "" {
		what = append(what, fmt.Sprintf("whose labels match -l %q", selector))
	}
	return ops.Usagef("no database cluster in %s %s (a cluster's labels are those on all its StatefulSets, or on its operator resource)", where, strings.Join(what, " and "))
}

// targetClusters are the clusters of target t (read with tg, the target's options): its own
// when it names one in one namespace; else those its selection finds, none being an error.
func targetClusters(ctx context.Context, tg *GlobalOptions, t fleet.Target, sel labels.Selector) ([]namespacedName, error) {
	if t.Cluster != "" && t.Namespace != "" {
		return []namespacedName{{t.Namespace, t.Cluster}}, nil
	}
	cl, err := tg.Clients()
	if err != nil {
		return nil, err
	}
	found, err := selectClusters(ctx, cl, cl.Kube, t.Namespace, sel, t.Cluster, ops.ResourceRecognizers(tg.recognizers()))
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, noClusterSelected(t.Namespace, t.Cluster, t.Selector)
	}
	return found, nil
}

// clusterTarget is the target of one cluster of t.
func clusterTarget(t fleet.Target, n namespacedName) fleet.Target {
	return fleet.Target{Context: t.Context, Namespace: n.Namespace, Cluster: n.Name}
}

// runFleetClusterReads runs read, a read-only command's work for one cluster, over every
// cluster of every target (at most --max-parallel targets at once; a target's clusters one
// after the other). read gets the cluster's options (its context's clients, -n its namespace;
// -l cleared when it selected the cluster, so that discovery finds the cluster by name) and
// the target's index. A target fails when its clusters cannot be listed, when it selects none,
// or when one of its clusters fails (the others are still read).
func runFleetClusterReads(ctx context.Context, g *GlobalOptions, ff *fleetFlags, ts []fleet.Target, sel labels.Selector,
	read func(ctx context.Context, i int, cg *GlobalOptions, ct fleet.Target) error) []fleet.Result {
	pool := newClientsPool(g)
	return runFleetReads(ctx, ff, ts, func(ctx context.Context, t fleet.Target, _ <-chan struct{}) error {
		i := indexOf(ts, t)
		found, err := targetClusters(ctx, fleetTargetOptions(g, pool, t), t, sel)
		if err != nil {
			return err
		}
		selected := t.Cluster == "" || t.Namespace == ""
		var errs []error
		for _, n := range found {
			ct := clusterTarget(t, n)
			cg := fleetTargetOptions(g, pool, ct)
			if t.Cluster == "" {
				cg.Selector = ""
			}
			if err := read(ctx, i, cg, ct); err != nil {
				if ctx.Err() != nil {
					return err
				}
				if selected {
					err = fmt.Errorf("%s/%s: %w", n.Namespace, n.Name, err)
				}
				errs = append(errs, err)
			}
		}
		if len(errs) == 1 {
			return errs[0]
		}
		return errors.Join(errs...)
	})
}

// selectFleetClusters turns a mutating fleet's selecting targets into one target per cluster
// before anything starts. Every target must answer: a target whose clusters cannot be listed,
// or that selects none, is reported on its own line and nothing starts (a fleet write never
// runs on a guess of what the selection meant there).
func selectFleetClusters(ctx context.Context, g *GlobalOptions, ff *fleetFlags, ts []fleet.Target, sel labels.Selector) ([]fleet.Target, error) {
	pool := newClientsPool(g)
	per := make([][]fleet.Target, len(ts))
	rs := runFleetReads(ctx, ff, ts, func(ctx context.Context, t fleet.Target, _ <-chan struct{}) error {
		found, err := targetClusters(ctx, fleetTargetOptions(g, pool, t), t, sel)
		if err != nil {
			return err
		}
		i := indexOf(ts, t)
		for _, n := range found {
			per[i] = append(per[i], clusterTarget(t, n))
		}
		return nil
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := fleetFailure(rs); err != nil {
		reportTargetErrors(g, rs)
		return nil, fmt.Errorf("selecting the clusters, nothing was started: %w", err)
	}
	var out []fleet.Target
	for _, p := range per {
		for _, t := range p {
			if indexOf(out, t) < 0 {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// optionalClusterArg takes zero or one CLUSTER argument: none only over a fleet with -l
// (clusterSelect.validate says so once the flags are known).
func optionalClusterArg(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return clusterArg(cmd, args)
}

// firstArg is args[0], or "" without arguments.
func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// selectedTargetFlags are the recorded flags of a target the selection found, without the
// selection's: its journal names the cluster and its namespace, and a resume with -A would take
// every namespace, with -l (when it selected: bySelector) pick StatefulSets by it (-l's meaning
// with a CLUSTER).
func selectedTargetFlags(fs []ops.RequestFlag, bySelector bool) []ops.RequestFlag {
	var out []ops.RequestFlag
	for _, f := range fs {
		if (!bySelector || f.Name != "selector") && f.Name != "all-namespaces" {
			out = append(out, f)
		}
	}
	return out
}
