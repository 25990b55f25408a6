package commands

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// flagError makes cobra's flag parsing errors exit 2 like every other
// usage error.
func flagError(cmd *cobra.Command, err error) error {
	return ops.Usagef("%v (see %s --help)", err, cmd.CommandPath())
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return ops.Usagef("%s takes no arguments, got %q", cmd.CommandPath(), strings.Join(args, " "))
	}
	return nil
}

// clusterArg requires exactly one CLUSTER argument.
func clusterArg(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return ops.Usagef("missing CLUSTER argument: usage: %s", cmd.UseLine())
	case len(args) > 1:
		return ops.Usagef("%s takes one CLUSTER argument, got %d (%s)", cmd.CommandPath(), len(args), strings.Join(args, " "))
	case strings.TrimSpace(args[0]) == "":
		return ops.Usagef("CLUSTER must not be empty")
	}
	return nil
}

// rangeArgs requires between min and max arguments, naming them.
func rangeArgs(min, max int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return ops.Usagef("%s expects %s, got %d argument(s): usage: %s", cmd.CommandPath(), names, len(args), cmd.UseLine())
		}
		return nil
	}
}
