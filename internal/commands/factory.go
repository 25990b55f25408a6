package commands

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// Clients are the API handles a command works with. Tests inject fakes.
type Clients struct {
	Kube   kubernetes.Interface
	Config *rest.Config
	// Dynamic reads custom resources discovery looks at (the CrateDB operator's CrateDB
	// resource, for the order of its data node groups); nil: not read.
	Dynamic dynamic.Interface
	// Clock is the API server's clock (local clock corrected by the Date
	// header of its responses); lock expiry is judged by it.
	Clock ops.Clock
	// Requests counts the API requests sent through Config (nil: not counted).
	Requests *kube.RequestCounter

	accessCache *ops.CachedAccess

	lockMu    sync.Mutex
	lockReads map[string]*lockRead // by namespace/cluster (readLock)
	// answered, when set, tells when the first request had its answer (askAhead waits for it).
	answered *firstAnswer
}

// firstAnswer closes done once the first request sent through its transport has an answer,
// or failed: the connection to the API server is up (or will not be). Requests sent ahead wait
// for it, because requests sent together before a connection exists each dial their own (a
// TLS handshake each, on both sides), which slowed a run's first answer from 5 to 20 ms.
type firstAnswer struct {
	once sync.Once
	done chan struct{}
}

func newFirstAnswer() *firstAnswer { return &firstAnswer{done: make(chan struct{})} }

func (f *firstAnswer) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		f.once.Do(func() { close(f.done) })
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// waitAnswered returns once the first request had its answer (at once without a transport
// to watch, as with a fake clientset), or when ctx ends.
func (cl *Clients) waitAnswered(ctx context.Context) {
	if cl.answered == nil {
		return
	}
	select {
	case <-cl.answered.done:
	case <-ctx.Done():
	}
}

// access is the command's access checker: SelfSubjectAccessReviews, each asked once.
func (cl *Clients) access() *ops.CachedAccess {
	if cl.accessCache == nil {
		cl.accessCache = &ops.CachedAccess{Checker: &ops.RulesReview{Client: cl.Kube, Fallback: ops.SelfAccessReview{Client: cl.Kube}}}
	}
	return cl.accessCache
}

// ClientsFunc builds Clients; Factory.NewClients defaults to one that
// reads the kubeconfig through cli-runtime's ConfigFlags.
type ClientsFunc func() (*Clients, error)

// Factory is what commands are built from, as kubectl's cmdutil.Factory:
// the kubeconfig flags and the API clients made from them, the streams,
// the environment and the engines' external dependencies. Tests replace
// its fields.
type Factory struct {
	ConfigFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	// NewClients builds the API clients (default: from the kubeconfig).
	NewClients ClientsFunc
	// IsTerminal reports whether stdin and stdout are terminals (TUI and
	// confirmation prompts only happen then).
	IsTerminal func() bool
	// Getenv reads the environment (BOOTSTRAP_TIMEOUT, NO_COLOR...).
	Getenv func(string) string
	// Exec runs commands in pods for every engine (EngineDeps.deps hands it to
	// the engines' constructors); nil = through the API server
	// (kube.APIExecutor). Tests inject a fake here.
	Exec kube.Executor
	// Engines are the engines commands can build, in help order; an engine
	// is added by adding its kind here (see docs/architecture.md).
	Engines []EngineKind
	// ContextClients, when set, builds the API clients of one kubeconfig context of a fleet
	// (ForContext); nil: from the kubeconfig. Tests give each context its own fakes.
	ContextClients func(context string) (*Clients, error)
	// WrapFleetTarget, when set, runs each target of a mutating fleet command in place of
	// run (the target's single-cluster run): tests observe or replace a target's run. nil: run.
	WrapFleetTarget func(ctx context.Context, t fleet.Target, stop <-chan struct{}, run func() error) error

	// FleetAfter, when set, times a fleet's --pause-between-clusters (fleet.Pacing.After):
	// tests give a clock of their own. nil: time's.
	FleetAfter func(time.Duration) <-chan time.Time

	// fleetStop is a fleet target's stop (fleet.RunFunc) for a command run inside it that
	// does not take its runner from the fleet (resume --fleet): its executor's Pacing.Stop.
	fleetStop <-chan struct{}
	// fleetRun is the fleet run a command run inside a fleet target belongs to: the journal's
	// request records it (GlobalOptions.request). fleetStart, when set, is the fleet run's
	// command that resume --fleet starts on a target the run never started (fleet_run.go).
	fleetRun   *ops.FleetRun
	fleetStart *ops.Request
	// fleetSink is a fleet target's sink when the fleet is shown in its terminal UI
	// (fleet_view.go): the target's run sends its events there, tagged with the target,
	// instead of to a printer of its own. nil: the run's own view.
	fleetSink ops.Sink

	clients *Clients
}

// NewFactory returns a factory with production dependencies.
func NewFactory(streams genericiooptions.IOStreams) *Factory {
	f := &Factory{
		ConfigFlags: genericclioptions.NewConfigFlags(true),
		IOStreams:   streams,
		Getenv:      os.Getenv,
	}
	f.IsTerminal = func() bool { return isTerminal(streams.In) && isTerminal(streams.Out) }
	f.Engines = builtinEngines()
	f.NewClients = f.defaultClients
	return f
}

// ForContext is a factory for one kubeconfig context of a fleet (internal/fleet): the
// same kubeconfig file, impersonation and timeout, streams and dependencies, with Context
// set and no -n (each target names its namespace). Flags that would override every
// context's cluster or user (--server, --user, --token, TLS files) are not carried over.
// Its clients are built on first use, from that context.
func (o *Factory) ForContext(name string) *Factory {
	cf := genericclioptions.NewConfigFlags(true)
	if src := o.ConfigFlags; src != nil {
		cf.KubeConfig = copyPtr(src.KubeConfig)
		cf.Impersonate = copyPtr(src.Impersonate)
		cf.ImpersonateUID = copyPtr(src.ImpersonateUID)
		cf.ImpersonateGroup = copyPtr(src.ImpersonateGroup)
		cf.Timeout = copyPtr(src.Timeout)
	}
	cf.Context = &name
	nf := &Factory{
		ConfigFlags: cf,
		IOStreams:   o.IOStreams,
		IsTerminal:  o.IsTerminal,
		Getenv:      o.Getenv,
		Exec:        o.Exec,
		Engines:     o.Engines,

		ContextClients: o.ContextClients,
	}
	nf.NewClients = nf.defaultClients
	if o.ContextClients != nil {
		nf.NewClients = func() (*Clients, error) { return o.ContextClients(name) }
	}
	return nf
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Namespace is the namespace from -n or the kubeconfig context.
func (o *Factory) Namespace() (string, error) {
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
func (o *Factory) Clients() (*Clients, error) {
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

func (o *Factory) defaultClients() (*Clients, error) {
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
	answered := newFirstAnswer()
	cfg.Wrap(answered.WrapTransport)
	cfg.UserAgent = "kubectl-dbops/" + Version
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return &Clients{Kube: kc, Config: cfg, Dynamic: dyn, Clock: clock, Requests: requests, answered: answered}, nil
}

// checkContext refuses a --context the kubeconfig does not have, naming
// the ones it has (clientcmd reports it only as plain text).
func (o *Factory) checkContext() error {
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
