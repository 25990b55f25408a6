// Package commands holds the cobra commands of kubectl-dbops. Each command
// has an Options struct (NewXOptions, Complete, Validate, Run) whose
// dependencies are fields, so tests drive commands with fake clients.
package commands

import (
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
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
	return newRootCmd(streams, NewRunFlags(), configure...)
}

// newRootCmd is NewRootCmd over the run flags rf (a fleet target's resume gets a copy of the
// fleet's).
func newRootCmd(streams genericiooptions.IOStreams, rf *RunFlags, configure ...func(*GlobalOptions)) *cobra.Command {
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
		Example: `  # Which clusters are here, and how are they?
  kubectl dbops list -n prod
  kubectl dbops status mycrate -n prod

  # See the plan of a rolling restart, then run it
  kubectl dbops restart mycrate --rolling --dry-run
  kubectl dbops restart mycrate --rolling

  # In a pipeline: no prompt, NDJSON events, wait for health afterwards
  kubectl dbops scale mycrate --data hot=6 --yes -o json
  kubectl dbops wait mycrate --for=healthy --timeout 15m`,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl dbops",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			g.given = map[string]bool{}
			g.documentOutput = cmd.Annotations[annotationDocument] == "true"
			cmd.Flags().Visit(func(f *pflag.Flag) { g.given[f.Name] = true })
			g.flagEngines = engineClaims(cmd)
			if err := setupKlog(g.Verbosity, g.ErrOut); err != nil {
				return err
			}
			// Before the config file is read (its path is a flag) and again
			// after, for values from DBOPS_* variables and the file.
			if err := checkInput(cmd, args); err != nil {
				return err
			}
			if err := g.LoadConfig(cmd); err != nil {
				return err
			}
			// Again: -v may come from DBOPS_V or the config file. Before any client is
			// built, as client-go decides on logging requests when it builds its transport.
			if err := setupKlog(g.Verbosity, g.ErrOut); err != nil {
				return err
			}
			if err := checkInput(cmd, args); err != nil {
				return err
			}
			if err := checkExplicitlyEmpty(cmd); err != nil {
				return err
			}
			return checkFlagDependencies(g)
		},
		// Without a RunE cobra prints the help and exits 0 for an unknown
		// command; it is bad usage (exit 2).
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownSubcommand(cmd, args[0])
			}
			return cmd.Help()
		},
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	g.AddFlags(cmd.PersistentFlags())
	rf.AddFlags(cmd.PersistentFlags())
	cmd.SetFlagErrorFunc(flagError)

	status := NewStatusCmd(g, rf)
	g.addEngineFlags("status", status.Flags())
	wait := NewWaitCmd(g, rf)
	g.addEngineFlags("wait", wait.Flags())
	explain := NewExplainCmd(g, rf)
	g.addEngineFlags("explain", explain.Flags())
	report := NewReportCmd(g, rf)
	g.addEngineFlags("report", report.Flags())
	cmd.AddCommand(
		status,
		explain,
		report,
		NewListCmd(g, rf),
		wait,
		NewRestartCmd(g, rf),
		NewBootstrapCmd(g, rf),
		NewScaleCmd(g, rf),
		NewReplaceCmd(g, rf),
		NewResumeCmd(g, rf),
		NewLockCmd(g, rf),
		NewDenyCmd(g, rf),
		NewControlCmd(g, rf, ops.ControlPause),
		NewControlCmd(g, rf, ops.ControlContinue),
		NewControlCmd(g, rf, ops.ControlAbort),
		NewHistoryCmd(g, rf),
		NewVersionCmd(g, rf),
	)
	g.claimCommandFlags(cmd)
	cmd.SetUsageFunc(g.engineUsage(cmd.UsageFunc()))
	registerCompletions(cmd, g, rf)
	refuseUnknownShells(cmd)
	return cmd
}

// unknownSubcommand is the one-line refusal of a command name cmd does not
// have, listing the ones it has.
func unknownSubcommand(cmd *cobra.Command, name string) error {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return ops.Usagef("unknown command %q for %q; allowed: %s", name, cmd.CommandPath(), strings.Join(names, ", "))
}

// refuseUnknownShells makes `completion SHELL` with a shell cobra does not
// support exit 2 instead of printing the help with exit 0.
func refuseUnknownShells(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownSubcommand(cmd, args[0])
			}
			return cmd.Help()
		}
	}
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	return term.IsTerminal(int(f.Fd()))
}
