package commands

import (
	"context"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// RunFlags are the shared flags of a run: dry-run, confirmation, view, bounds and the lock.
// One instance is bound to the root command's persistent flags (the same names, config keys
// and DBOPS_* variables as every shared flag); each mutating command's Runner holds it, and a
// command that only reads one of them (lock: --lock-id, status --watch: --timeout) is handed
// it explicitly.
type RunFlags struct {
	DryRun       bool
	Yes          bool
	NoTUI        bool
	Timeout      time.Duration
	LockID       string
	LockDuration time.Duration
	// WaitForLock waits for a held lock instead of exit 3 (negative: as long as the timeout allows).
	WaitForLock  time.Duration
	DisableLocks bool
}

// NewRunFlags returns the defaults.
func NewRunFlags() *RunFlags { return &RunFlags{LockDuration: 10 * time.Minute} }

// AddFlags binds the run flags.
func (o *RunFlags) AddFlags(fs *pflag.FlagSet) {
	fs.Var(dryRunValue{&o.DryRun}, "dry-run", `"client" (or alone): print the plan computed from live state and change nothing; "none": run`)
	fs.Lookup("dry-run").NoOptDefVal = "client"
	fs.BoolVarP(&o.Yes, "yes", "y", o.Yes, "Do not ask for confirmation (required for destructive commands without a terminal)")
	fs.BoolVar(&o.NoTUI, "no-tui", o.NoTUI, "Print plain progress lines even on a terminal")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, timeoutUsage())
	fs.StringVar(&o.LockID, "lock-id", o.LockID, "Lock ID to act as (default <kubeconfig user>@<API host>; env DBOPS_LOCK_ID)")
	fs.DurationVar(&o.LockDuration, "lock-duration", o.LockDuration, "How long the cluster lock is held before it must be renewed")
	fs.DurationVar(&o.WaitForLock, "wait-for-lock", o.WaitForLock, "Wait up to this long for a lock held by someone else instead of failing with exit 3 (alone: as long as --timeout allows)")
	fs.Lookup("wait-for-lock").NoOptDefVal = "-1s"
	fs.BoolVar(&o.DisableLocks, "disable-locks", o.DisableLocks, "EMERGENCY ONLY: run without the cluster lock (loud warning and audit event)")
}

// Validate checks the run flags without touching the API.
func (o *RunFlags) Validate() error {
	if o.Timeout < 0 {
		return ops.Usagef("--timeout must not be negative (got %s)", o.Timeout)
	}
	if o.LockDuration < 10*time.Second {
		return ops.Usagef("--lock-duration must be at least 10s (got %s)", o.LockDuration)
	}
	return nil
}

// ResolveLockID returns --lock-id, or <user>@<host> from the kubeconfig of cf.
func (o *RunFlags) ResolveLockID(cf *genericclioptions.ConfigFlags) (string, error) {
	if o.LockID != "" {
		return o.LockID, nil
	}
	raw, err := cf.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return "", kubeconfigError(err)
	}
	ctxName, as := "", ""
	if cf.Context != nil {
		ctxName = *cf.Context
	}
	if cf.Impersonate != nil {
		as = *cf.Impersonate
	}
	// --user, --cluster and -s override the context's user and server for the requests: the
	// ID names those, not the context's.
	if name := ctxName; name != "" || raw.CurrentContext != "" {
		if name == "" {
			name = raw.CurrentContext
		}
		if kctx := raw.Contexts[name]; kctx != nil {
			kctx = kctx.DeepCopy()
			if cf.AuthInfoName != nil && *cf.AuthInfoName != "" {
				kctx.AuthInfo = *cf.AuthInfoName
			}
			if cf.ClusterName != nil && *cf.ClusterName != "" {
				kctx.Cluster = *cf.ClusterName
			}
			if cf.APIServer != nil && *cf.APIServer != "" {
				// -s: the server given, whatever cluster entry the context names.
				const given = "\x00--server"
				if raw.Clusters == nil {
					raw.Clusters = map[string]*clientcmdapi.Cluster{}
				}
				raw.Clusters[given] = &clientcmdapi.Cluster{Server: *cf.APIServer}
				kctx.Cluster = given
			}
			raw.Contexts[name] = kctx
		}
	}
	id, err := lock.IDFromKubeconfig(raw, ctxName, as)
	if err != nil {
		// No context (in-cluster credentials, say): the ID names only the
		// user, or "anonymous".
		id = lock.DefaultID(as, "")
	}
	// The ID goes into the Lease, Events and other operators' messages.
	if err := ops.CheckPrintable("the lock ID derived from the kubeconfig user and server (pass --lock-id)", id); err != nil {
		return "", err
	}
	return id, nil
}

// unfinishedJournal reads the journal on the cluster's lock without taking
// it; nil when there is none, it is finished, or it cannot be read (the
// executor reads it again under the lock anyway).
func (o *RunFlags) unfinishedJournal(ctx context.Context, cl *Clients, c *ops.Cluster) *ops.Journal {
	j, _ := journalOf(o.lockState(ctx, cl, c))
	return j
}

// lockState reads the cluster's lock without taking it; nil when locks are disabled or it
// cannot be read. A read askAhead started is used, once it is in.
func (o *RunFlags) lockState(ctx context.Context, cl *Clients, c *ops.Cluster) *lock.State {
	if o.DisableLocks {
		return nil
	}
	return cl.readLock(ctx, c.Namespace, c.Name).wait(ctx)
}
