// Package commands holds the cobra commands of kubectl-dbops. Each command
// has an Options struct (NewXOptions, Complete, Validate, Run) whose
// dependencies are fields, so tests drive commands with fake clients.
package commands

import (
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Build information, set by the linker (see .goreleaser.yaml and Makefile).
var (
	Version = "dev"
	Commit  = "none"
	Date    = "unknown"
)

// NewRootCmd builds the command tree. main passes real streams; tests pass
// buffers and replace GlobalOptions dependencies through configure.
func NewRootCmd(streams genericiooptions.IOStreams, configure ...func(*GlobalOptions)) *cobra.Command {
	g := NewGlobalOptions(streams)
	for _, f := range configure {
		f(g)
	}
	cmd := &cobra.Command{
		Use:   "kubectl-dbops",
		Short: "Operate stateful database clusters on Kubernetes by hand, safely",
		Long: `kubectl dbops runs the careful procedures database operators run in their
reconcile loops - bootstrap, scale, rolling restart, replace - from your own
kubeconfig, under a per-cluster lock, with a dry-run plan, a live terminal UI
and plain or JSON output for pipelines.`,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl dbops",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.LoadConfig(cmd)
		},
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	g.AddFlags(cmd.PersistentFlags())
	cmd.SetFlagErrorFunc(flagError)

	status := NewStatusCmd(g)
	g.CrateDB.AddConnFlags(status.Flags())
	cmd.AddCommand(
		status,
		NewRestartCmd(g),
		NewBootstrapCmd(g),
		NewScaleCmd(g),
		NewReplaceCmd(g),
		NewLockCmd(g),
		NewDenyCmd(g),
		NewVersionCmd(g),
	)
	registerCompletions(cmd, g)
	return cmd
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	return term.IsTerminal(int(f.Fd()))
}
