package commands

import (
	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// fleetClusterArg is the CLUSTER argument of resume: required, except with a fleet
// file (--fleet), whose clusters (clusters:, targets[].clusters) then name each target's
// cluster, so that one fleet can hold clusters of different names (and engines) per context.
func fleetClusterArg(cmd *cobra.Command, args []string) error {
	if len(args) == 0 && cmd.Flags().Changed("fleet") {
		return nil
	}
	return clusterArg(cmd, args)
}

// argClusters is the argument's cluster for fleetFlags.targets: none when the fleet file
// names them.
func argClusters(cluster string) []string {
	if cluster == "" {
		return nil
	}
	return []string{cluster}
}

// requireClusters refuses (exit 2, before any API call) a fleet without a CLUSTER argument
// whose file names no cluster for some target: restart and resume act on named clusters only.
func requireClusters(file string, ts []fleet.Target) error {
	for _, t := range ts {
		if t.Cluster == "" {
			return ops.Usagef("fleet file %s names no cluster for context %s (namespace %s): give the CLUSTER argument, or clusters: in the file (for every context, or in its targets: entry)",
				file, t.Context, t.Namespace)
		}
	}
	return nil
}
