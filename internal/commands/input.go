package commands

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// ErrorLine is how main (and the tests, the same way) prints a command's
// error: one line, every control character escaped, whatever the error
// quotes (a cluster name, another operator's lock reason, a joined list of
// per-pod failures).
func ErrorLine(err error) string {
	if _, shown := errors.AsType[shownError](err); shown {
		return ""
	}
	if ops.ExitCode(err) == ops.ExitPaused {
		// Asked for (--pause-after), not a failure.
		return "paused: " + ops.Printable(err.Error())
	}
	return "error: " + ops.Printable(err.Error())
}

// checkInput refuses control and formatting characters in every flag value
// (from the command line, DBOPS_* variables or the config file) and every
// argument: they could forge or hide output lines wherever the value is
// shown later, here or in another operator's terminal. The message names
// the flag but not its value, which may be a credential (--token).
func checkInput(cmd *cobra.Command, args []string) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		vals := []string{f.Value.String()}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			vals = sv.GetSlice()
		}
		for _, v := range vals {
			if e := ops.CheckPrintable("--"+f.Name, v); e != nil {
				err = e
				return
			}
		}
	})
	if err != nil {
		return err
	}
	for i, a := range args {
		if e := ops.CheckPrintable("argument "+strconv.Itoa(i+1), a); e != nil {
			return e
		}
	}
	return nil
}

// checkExplicitlyEmpty refuses a flag given with an empty value (--id "",
// --license-secret ""): for these flags empty would silently mean the
// default (the shared lock identity, no license), which is not what the
// user asked for. pflag's Changed tells an explicit value from a missing one.
func checkExplicitlyEmpty(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if err != nil || !slices.Contains([]string{"string", "stringArray", "stringSlice"}, f.Value.Type()) {
			return
		}
		if slices.Contains(emptyAllowed, f.Name) {
			return
		}
		vals := []string{f.Value.String()}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			vals = sv.GetSlice()
			if len(vals) == 0 {
				vals = []string{""}
			}
		}
		for _, v := range vals {
			if strings.TrimSpace(v) == "" {
				err = ops.Usagef("--%s was given an empty value; give a value or leave the flag out", f.Name)
				return
			}
		}
	})
	return err
}

// emptyAllowed are string flags for which an explicit "" has a meaning of
// its own (kubectl's: --namespace "" is the context's namespace, and so on).
var emptyAllowed = []string{"reason", "cache-dir"}

// checkKubeconfigFiles refuses a --kubeconfig (or KUBECONFIG entry given
// alone) that does not exist: clientcmd reports it as a plain error,
// which would exit 1 like a failed operation.
func (o *Factory) checkKubeconfigFiles() error {
	if o.ConfigFlags.KubeConfig == nil || *o.ConfigFlags.KubeConfig == "" {
		return nil
	}
	path := *o.ConfigFlags.KubeConfig
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return ops.Usagef("kubeconfig %s does not exist", path)
		}
		return ops.Usagef("kubeconfig %s: %v", path, err)
	}
	return nil
}

// setupKlog keeps client-go's klog output (port-forward errors, retries)
// off stderr unless -v asks for it, as kubectl does; -v N shows it at
// verbosity N (API requests from 6).
func setupKlog(verbosity int, errOut io.Writer) error {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	for k, v := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL",
		"v": strconv.Itoa(max(verbosity, 0))} {
		if err := fs.Set(k, v); err != nil {
			return fmt.Errorf("configuring klog: %w", err)
		}
	}
	if verbosity <= 0 {
		klog.SetOutput(io.Discard)
		return nil
	}
	klog.SetOutput(errOut)
	return nil
}

// flagNeeds lists flags that only mean something together with another:
// given alone they would be silently ignored (a --failure-threshold without
// --failed once let `replace` act on a healthy pod as if asked to).
var flagNeeds = []struct{ flag, needs, why string }{
	{"failure-threshold", "failed", "it picks pods by how long they have failed"},
	{"taint", "failed", "it picks pods by their node's taints"},
	{"pg-port", "pg-host", "without --pg-host the port-forward goes to the pod's port 5432"},
}

// checkFlagDependencies refuses a flag given without the one it needs.
func checkFlagDependencies(g *GlobalOptions) error {
	for _, d := range flagNeeds {
		if g.flagGiven(d.flag) && !g.flagGiven(d.needs) {
			return ops.Usagef("--%s only applies with --%s (%s)", d.flag, d.needs, d.why)
		}
	}
	// The engines' own checks: their flags' values and dependencies.
	return g.validateEngineFlags()
}
