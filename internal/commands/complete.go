package commands

import (
	"context"
	"slices"
	"sort"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// registerCompletions adds completion for the shared flags' enumerations.
func registerCompletions(root *cobra.Command, g *GlobalOptions, rf *RunFlags) {
	fixed := func(vals ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return vals, cobra.ShellCompDirectiveNoFileComp
		}
	}
	_ = root.RegisterFlagCompletionFunc("output", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		if cmd.Annotations[annotationDocument] == "true" {
			return documentFormats(), cobra.ShellCompDirectiveNoFileComp
		}
		return outputFormats, cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("context", completeContexts(g))
	_ = root.RegisterFlagCompletionFunc("engine", fixed(ops.KnownEngines...))
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		cl, err := g.Clients()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list, err := cl.Kube.CoreV1().Namespaces().List(commandContext(cmd), metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, n := range list.Items {
			out = append(out, n.Name)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}

// completeContexts offers the kubeconfig's context names (--context, and a fleet's --contexts).
func completeContexts(g *GlobalOptions) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		raw, err := g.ForContext("").ConfigFlags.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		out := make([]string, 0, len(raw.Contexts))
		for name := range raw.Contexts {
			out = append(out, name)
		}
		sort.Strings(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeClusters offers cluster names found in the namespace: dbops
// labels, CrateDB operator names and plain StatefulSets.
func completeClusters(g *GlobalOptions) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cl, err := g.Clients()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ns, err := g.Namespace()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		found, err := clusterNames(commandContext(cmd), cl.Kube, ns)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		out := make([]string, 0, len(found))
		for _, f := range found {
			out = append(out, f.Name)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completePods offers, after the CLUSTER argument, the cluster's pods not
// already named (replace CLUSTER POD...).
func completePods(g *GlobalOptions) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	clusters := completeClusters(g)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return clusters(cmd, args, toComplete)
		}
		_, c, err := g.discover(commandContext(cmd), args[0], false)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, p := range c.AllPods() {
			if !slices.Contains(args[1:], p.Name) {
				out = append(out, p.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeDenied offers, after the CLUSTER argument, the IDs on the
// cluster's deny list (deny allow CLUSTER ID).
func completeDenied(g *GlobalOptions, rf *RunFlags) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	clusters := completeClusters(g)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			return clusters(cmd, args, toComplete)
		case 1:
		default:
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx := commandContext(cmd)
		m, err := completionLock(ctx, g, rf, args[0])
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list, err := m.DenyList(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		out := make([]string, 0, len(list))
		for _, d := range list {
			out = append(out, d.ID)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeHolder offers, after the CLUSTER argument, the lock ID holding
// the cluster's lock (deny add CLUSTER ID, lock release --id).
func completeHolder(g *GlobalOptions, rf *RunFlags) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx := commandContext(cmd)
		m, err := completionLock(ctx, g, rf, args[0])
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		st, err := m.Status(ctx)
		if err != nil || st.Holder == "" {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return []string{st.Holder}, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeGroups offers the node groups of the cluster named in args.
func completeGroups(g *GlobalOptions) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		_, c, err := g.discover(commandContext(cmd), args[0], false)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return c.GroupNames(), cobra.ShellCompDirectiveNoFileComp
	}
}

// completionLock is the lock manager of cluster, for completions that read
// its deny list or holder.
func completionLock(ctx context.Context, g *GlobalOptions, rf *RunFlags, cluster string) (*lock.Manager, error) {
	o := NewLockOptions(g, rf)
	o.Cluster = cluster
	return o.manager(ctx)
}
