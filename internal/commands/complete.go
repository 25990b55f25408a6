package commands

import (
	"sort"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/discovery"
)

// registerCompletions adds completion for the shared flags' enumerations.
func registerCompletions(root *cobra.Command, g *GlobalOptions) {
	fixed := func(vals ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return vals, cobra.ShellCompDirectiveNoFileComp
		}
	}
	_ = root.RegisterFlagCompletionFunc("output", fixed(outputFormats...))
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
		list, err := cl.Kube.AppsV1().StatefulSets(ns).List(commandContext(cmd), metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		seen := map[string]bool{}
		for _, s := range list.Items {
			name := s.Labels[discovery.LabelCluster]
			switch {
			case name != "":
			case strings.HasPrefix(s.Name, "crate-") && s.Labels["app.kubernetes.io/name"] != "":
				name = s.Labels["app.kubernetes.io/name"]
			default:
				name = s.Name
			}
			seen[name] = true
		}
		out := make([]string, 0, len(seen))
		for n := range seen {
			out = append(out, n)
		}
		sort.Strings(out)
		return out, cobra.ShellCompDirectiveNoFileComp
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
