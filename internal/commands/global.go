package commands

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Output formats accepted by -o.
var outputFormats = []string{"text", "json", "yaml"}

// GlobalOptions are the flags every command shares that pick and show a cluster (the run's
// own flags are RunFlags). One instance is bound to the root command's persistent flags and
// handed to each subcommand; what commands are built from (clients, streams, environment) is
// its Factory.
type GlobalOptions struct {
	*Factory

	Output         string
	Engine         string
	Selector       string
	IgnoreOperator bool
	// Verbosity is -v: client-go's klog output at this level (0 = none).
	Verbosity int
	// ConfigFile is the viper config file path; empty = default location.
	ConfigFile string

	viper *viper.Viper
	// documentOutput is set for commands that print one document (see
	// annotationDocument): they take every PrintFlags format.
	documentOutput bool
	// given holds the flags set on the command line (pflag's Changed), for
	// checks that depend on an explicit choice.
	given map[string]bool
	// engineFlags are the engines' own flags by engine name (engineFlagsOf), bound per verb
	// by addEngineFlags.
	engineFlags map[string]EngineFlags
	// flagEngines are the engines each engine flag of the command run is for (engineClaims).
	flagEngines map[string][]string
}

// GlobalOptions is how the command line finds clusters for a Runner.
var _ Clusters = (*GlobalOptions)(nil)

func (o *GlobalOptions) outputFormat() string { return o.Output }
func (o *GlobalOptions) verbosity() int       { return o.Verbosity }

// onFactory is o over f: the same flags, another kube context's clients and streams.
func (o *GlobalOptions) onFactory(f *Factory) Clusters {
	g := *o
	g.Factory = f
	return &g
}

// flagGiven reports whether --name was on the command line.
func (o *GlobalOptions) flagGiven(name string) bool { return o.given[name] }

// NewGlobalOptions returns options with production dependencies.
func NewGlobalOptions(streams genericiooptions.IOStreams) *GlobalOptions {
	return &GlobalOptions{
		Factory: NewFactory(streams),
		Output:  "text",
		viper:   viper.New(),
	}
}

// AddFlags binds the shared flags.
func (o *GlobalOptions) AddFlags(fs *pflag.FlagSet) {
	o.ConfigFlags.AddFlags(fs)
	fs.StringVarP(&o.Output, "output", "o", o.Output, "Output format: text|json|yaml; status, lock, deny and version also name|jsonpath=...|go-template=... (json streams NDJSON events for operations)")
	fs.StringVar(&o.Engine, "engine", o.Engine, "Database engine, overriding detection: "+strings.Join(ops.KnownEngines, "|"))
	fs.StringVarP(&o.Selector, "selector", "l", o.Selector, "Label selector: with a CLUSTER argument, picks the cluster's StatefulSets explicitly; without one (list, fleet commands), selects the clusters whose labels match")
	fs.BoolVar(&o.IgnoreOperator, "ignore-operator", o.IgnoreOperator, "Act on StatefulSets owned by an operator (it may fight the changes)")
	fs.IntVarP(&o.Verbosity, "v", "v", o.Verbosity, "Log level of client-go's messages on stderr (6 shows API requests; 0 = none)")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "Config file (default $XDG_CONFIG_HOME/kubectl-dbops/config.yaml)")
	o.addEngineFlags("", fs)
}

// LoadConfig applies DBOPS_* environment variables and the config file to
// every flag the user did not set: flags > env > config file > defaults.
func (o *GlobalOptions) LoadConfig(cmd *cobra.Command) error {
	v := o.viper
	path := o.ConfigFile
	if path == "" {
		if env := o.Getenv("DBOPS_CONFIG"); env != "" {
			path = env
		} else {
			path = defaultConfigPath(o.Getenv)
		}
	}
	if path != "" {
		if _, err := os.Stat(path); err == nil {
			v.SetConfigFile(path)
			if err := v.ReadInConfig(); err != nil {
				return ops.Usagef("reading config file %s: %v", path, err)
			}
			warnUnknownConfigKeys(o.ErrOut, path, v.AllKeys(), cmd.Root())
		} else if o.ConfigFile != "" {
			return ops.Usagef("config file %s: %v", path, err)
		}
	}
	var firstErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || firstErr != nil || f.Name == "config" || f.Name == "help" {
			return
		}
		// Env is read through Getenv so tests control it; viper's config
		// file values come after.
		envKey := "DBOPS_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		val, ok := o.Getenv(envKey), false
		if val != "" {
			ok = true
		} else if v.InConfig(f.Name) {
			val, ok = v.GetString(f.Name), true
			if sl := v.GetStringSlice(f.Name); len(sl) > 1 {
				val = strings.Join(sl, ",")
			}
		}
		if !ok {
			return
		}
		if err := f.Value.Set(val); err != nil {
			firstErr = ops.Usagef("invalid value %q for --%s from %s: %v", val, f.Name, sourceName(envKey, o.Getenv), err)
		}
	})
	return firstErr
}

func sourceName(envKey string, getenv func(string) string) string {
	if getenv(envKey) != "" {
		return envKey
	}
	return "the config file"
}

func defaultConfigPath(getenv func(string) string) string {
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "kubectl-dbops", "config.yaml")
}

// Validate checks the shared flags without touching the API.
func (o *GlobalOptions) Validate() error {
	if err := o.validateOutput(); err != nil {
		return err
	}
	if o.Engine != "" && !slices.Contains(o.engineNames(), o.Engine) {
		return ops.Usagef("unknown engine %q; allowed: %s", o.Engine, strings.Join(o.engineNames(), ", "))
	}
	return nil
}

// commandContext carries main's signal cancellation into Run methods.
func commandContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// timeoutUsage is --timeout's help, with each command's default (the README's global flags
// table says the same; a test checks it).
func timeoutUsage() string {
	return fmt.Sprintf("Bound the whole operation (0 = the command's default: restart %s, replace %s, bootstrap BOOTSTRAP_TIMEOUT or %s, scale SCALING_TIMEOUT or %s, status --watch none, wait %s)",
		shortDuration(defaultRollingRestartTimeout), shortDuration(defaultRestartTimeout), shortDuration(defaultBootstrapTimeout),
		shortDuration(defaultScalingTimeout), shortDuration(DefaultWaitTimeout))
}

// shortDuration prints d without zero minutes or seconds ("4h", "30m").
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
