package commands

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// Output formats accepted by -o.
var outputFormats = []string{"text", "json", "yaml"}

// Clients are the API handles a command works with. Tests inject fakes.
type Clients struct {
	Kube   kubernetes.Interface
	Config *rest.Config
	// Clock is the API server's clock (local clock corrected by the Date
	// header of its responses); lock expiry is judged by it.
	Clock ops.Clock
	// Requests counts the API requests sent through Config (nil: not counted).
	Requests *kube.RequestCounter
}

// ClientsFunc builds Clients; GlobalOptions.NewClients defaults to one that
// reads the kubeconfig through cli-runtime's ConfigFlags.
type ClientsFunc func() (*Clients, error)

// GlobalOptions are the flags every command shares. One instance is bound to
// the root command's persistent flags and handed to each subcommand.
type GlobalOptions struct {
	ConfigFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	DryRun       bool
	Output       string
	Yes          bool
	NoTUI        bool
	Timeout      time.Duration
	LockID       string
	LockDuration time.Duration
	// WaitForLock waits for a held lock instead of exit 3 (negative: as long as the timeout allows).
	WaitForLock    time.Duration
	DisableLocks   bool
	Engine         string
	Selector       string
	IgnoreOperator bool
	// Verbosity is -v: client-go's klog output at this level (0 = none).
	Verbosity int
	// CrateDB holds the CrateDB engine's flags (bound by the commands that
	// use them) and test seams.
	CrateDB *CrateDBOptions
	// ReplicatedExec replaces exec into pods for the replicated engine
	// (tests); nil = through the API server.
	ReplicatedExec ReplicatedExecer

	// Dependencies, replaceable in tests.
	NewClients ClientsFunc
	// IsTerminal reports whether stdin and stdout are terminals (TUI and
	// confirmation prompts only happen then).
	IsTerminal func() bool
	// Getenv reads the environment (BOOTSTRAP_TIMEOUT, NO_COLOR...).
	Getenv func(string) string
	// ConfigFile is the viper config file path; empty = default location.
	ConfigFile string

	viper   *viper.Viper
	clients *Clients
	// given holds the flags set on the command line (pflag's Changed), for
	// checks that depend on an explicit choice.
	given map[string]bool
}

// flagGiven reports whether --name was on the command line.
func (o *GlobalOptions) flagGiven(name string) bool { return o.given[name] }

// NewGlobalOptions returns options with production dependencies.
func NewGlobalOptions(streams genericiooptions.IOStreams) *GlobalOptions {
	o := &GlobalOptions{
		ConfigFlags:  genericclioptions.NewConfigFlags(true),
		IOStreams:    streams,
		Output:       "text",
		LockDuration: 10 * time.Minute,
		Getenv:       os.Getenv,
		CrateDB:      NewCrateDBOptions(),
		viper:        viper.New(),
	}
	o.IsTerminal = func() bool { return isTerminal(streams.In) && isTerminal(streams.Out) }
	o.NewClients = o.defaultClients
	return o
}

// AddFlags binds the shared flags.
func (o *GlobalOptions) AddFlags(fs *pflag.FlagSet) {
	o.ConfigFlags.AddFlags(fs)
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun, "Print the plan computed from live state and change nothing")
	fs.StringVarP(&o.Output, "output", "o", o.Output, "Output format: text|json|yaml (json streams NDJSON events for operations)")
	fs.BoolVarP(&o.Yes, "yes", "y", o.Yes, "Do not ask for confirmation (required for destructive commands without a terminal)")
	fs.BoolVar(&o.NoTUI, "no-tui", o.NoTUI, "Print plain progress lines even on a terminal")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "Bound the whole operation (0 = the command's default)")
	fs.StringVar(&o.LockID, "lock-id", o.LockID, "Lock ID to act as (default <kubeconfig user>@<API host>; env DBOPS_LOCK_ID)")
	fs.DurationVar(&o.LockDuration, "lock-duration", o.LockDuration, "How long the cluster lock is held before it must be renewed")
	fs.DurationVar(&o.WaitForLock, "wait-for-lock", o.WaitForLock, "Wait up to this long for a lock held by someone else instead of failing with exit 3 (alone: as long as --timeout allows)")
	fs.Lookup("wait-for-lock").NoOptDefVal = "-1s"
	fs.BoolVar(&o.DisableLocks, "disable-locks", o.DisableLocks, "EMERGENCY ONLY: run without the cluster lock (loud warning and audit event)")
	fs.StringVar(&o.Engine, "engine", o.Engine, "Database engine, overriding detection: "+strings.Join(ops.KnownEngines, "|"))
	fs.StringVarP(&o.Selector, "selector", "l", o.Selector, "Label selector picking the cluster's StatefulSets explicitly")
	fs.BoolVar(&o.IgnoreOperator, "ignore-operator", o.IgnoreOperator, "Act on StatefulSets owned by an operator (it may fight the changes)")
	fs.IntVarP(&o.Verbosity, "v", "v", o.Verbosity, "Log level of client-go's messages on stderr (6 shows API requests; 0 = none)")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "Config file (default $XDG_CONFIG_HOME/kubectl-dbops/config.yaml)")
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
	if !slices.Contains(outputFormats, o.Output) {
		return ops.Usagef("unknown output format %q; allowed: %s", o.Output, strings.Join(outputFormats, ", "))
	}
	if o.Engine != "" && !slices.Contains(ops.KnownEngines, o.Engine) {
		return ops.Usagef("unknown engine %q; allowed: %s", o.Engine, strings.Join(ops.KnownEngines, ", "))
	}
	if o.Timeout < 0 {
		return ops.Usagef("--timeout must not be negative (got %s)", o.Timeout)
	}
	if o.LockDuration < 10*time.Second {
		return ops.Usagef("--lock-duration must be at least 10s (got %s)", o.LockDuration)
	}
	return nil
}

// Namespace is the namespace from -n or the kubeconfig context.
func (o *GlobalOptions) Namespace() (string, error) {
	if err := o.checkContext(); err != nil {
		return "", err
	}
	ns, _, err := o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", kubeconfigError(err)
	}
	return ns, nil
}

// Clients returns the API clients, built once.
func (o *GlobalOptions) Clients() (*Clients, error) {
	if o.clients != nil {
		return o.clients, nil
	}
	c, err := o.NewClients()
	if err != nil {
		return nil, err
	}
	o.clients = c
	return c, nil
}

func (o *GlobalOptions) defaultClients() (*Clients, error) {
	if err := o.checkContext(); err != nil {
		return nil, err
	}
	clock := &lock.ServerClock{}
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, kubeconfigError(err)
	}
	cfg = rest.CopyConfig(cfg)
	// client-go's default of 5 requests/s paced restarts by the client,
	// not by the database (journal saves are a GET and an UPDATE each).
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 20, 40
	}
	cfg.Wrap(clock.WrapTransport)
	// Count every request (shown at -v and in the done event's apiRequests).
	requests := &kube.RequestCounter{}
	cfg.Wrap(requests.WrapTransport)
	cfg.UserAgent = "kubectl-dbops/" + Version
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return &Clients{Kube: kc, Config: cfg, Clock: clock, Requests: requests}, nil
}

// ResolveLockID returns --lock-id, or <user>@<host> from the kubeconfig.
func (o *GlobalOptions) ResolveLockID() (string, error) {
	if o.LockID != "" {
		return o.LockID, nil
	}
	raw, err := o.ConfigFlags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return "", kubeconfigError(err)
	}
	ctxName := raw.CurrentContext
	if o.ConfigFlags.Context != nil && *o.ConfigFlags.Context != "" {
		ctxName = *o.ConfigFlags.Context
	}
	user, host := "", ""
	if kctx := raw.Contexts[ctxName]; kctx != nil {
		user = kctx.AuthInfo
		if cl := raw.Clusters[kctx.Cluster]; cl != nil {
			host = cl.Server
		}
	}
	if o.ConfigFlags.Impersonate != nil && *o.ConfigFlags.Impersonate != "" {
		user = *o.ConfigFlags.Impersonate
	}
	if u, err := url.Parse(host); err == nil && u.Host != "" {
		host = u.Host
	}
	id := lock.DefaultID(user, host)
	// The ID goes into the Lease, Events and other operators' messages.
	if err := ops.CheckPrintable("the lock ID derived from the kubeconfig user and server (pass --lock-id)", id); err != nil {
		return "", err
	}
	return id, nil
}

// checkContext refuses a --context the kubeconfig does not have, naming
// the ones it has (clientcmd reports it only as plain text).
func (o *GlobalOptions) checkContext() error {
	if err := o.checkKubeconfigFiles(); err != nil {
		return err
	}
	if o.ConfigFlags.Context == nil || *o.ConfigFlags.Context == "" {
		return nil
	}
	raw, err := o.ConfigFlags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return kubeconfigError(err)
	}
	want := *o.ConfigFlags.Context
	if _, ok := raw.Contexts[want]; ok {
		return nil
	}
	names := make([]string, 0, len(raw.Contexts))
	for n := range raw.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	allowed := strings.Join(names, ", ")
	if allowed == "" {
		allowed = "none: the kubeconfig has no contexts"
	}
	return ops.Usagef("kubeconfig has no context %q; allowed: %s", want, allowed)
}

// kubeconfigError turns kubeconfig problems (wrong context, no config) into
// usage errors with one clear line.
func kubeconfigError(err error) error {
	switch {
	case clientcmd.IsContextNotFound(err):
		return &ops.CodedError{Kind: ops.ErrUsage, Msg: fmt.Sprintf("kubeconfig: %v (see: kubectl config get-contexts)", err), Err: err}
	case clientcmd.IsEmptyConfig(err), clientcmd.IsConfigurationInvalid(err):
		return &ops.CodedError{Kind: ops.ErrUsage, Msg: fmt.Sprintf("kubeconfig: %v", err), Err: err}
	default:
		return fmt.Errorf("kubeconfig: %w", err)
	}
}

// commandContext carries main's signal cancellation into Run methods.
func commandContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
