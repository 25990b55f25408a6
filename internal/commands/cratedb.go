package commands

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/cratedb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// CrateDBOptions are the CrateDB engine's flags, shared by the commands
// that talk to the database, and its test seams.
type CrateDBOptions struct {
	PGHost               string
	PGPort               int
	PGSSLMode            string
	PGCASecret           string
	SystemPasswordSecret string
	HealthChecks         int
	HealthInterval       time.Duration
	StableFor            time.Duration
	AllowRollingUpdate   bool
	CrashUser            string

	// PollInterval paces database polls (0 = engine default); tests only.
	PollInterval time.Duration
	// Connector replaces the port-forward/pgx path (tests use cratedbtest's fake; exec
	// into pods is the Factory's Exec, as for every engine).
	Connector cratedb.Connector
}

// NewCrateDBOptions returns the defaults.
func NewCrateDBOptions() *CrateDBOptions {
	return &CrateDBOptions{PGSSLMode: "auto",
		HealthChecks: cratedb.DefaultHealthChecks, HealthInterval: cratedb.DefaultHealthInterval, StableFor: cratedb.DefaultStableFor}
}

// AddConnFlags binds how to reach the database.
func (o *CrateDBOptions) AddConnFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.PGHost, "pg-host", o.PGHost, "CrateDB: connect to this PostgreSQL host directly (inside the cluster) instead of port-forwarding to a pod")
	fs.Var((*portValue)(&o.PGPort), "pg-port", "CrateDB: PostgreSQL port with --pg-host (default: the crate container's, else 5432)")
	fs.StringVar(&o.PGSSLMode, "pg-sslmode", o.PGSSLMode, "CrateDB: TLS mode: "+strings.Join(cratedb.SSLModes(), "|")+" (auto: require, or verify-ca with --pg-ca-secret, when the StatefulSet sets -Cssl.psql.enabled=true, else disable)")
	fs.StringVar(&o.PGCASecret, "pg-ca-secret", o.PGCASecret, "CrateDB: Secret NAME[/KEY] (default key ca.crt) with the CA for verify-ca|verify-full")
	fs.StringVar(&o.SystemPasswordSecret, "system-password-secret", o.SystemPasswordSecret, "CrateDB: Secret NAME[/KEY] (default key password) with the system user's password (default user-system-<cluster>)")
}

// portValue is an int flag that takes TCP ports only: 0 is not "the default" when given (the
// default is the flag left out), so --pg-port 0 is bad input, refused while parsing, before
// anything reads or writes the cluster.
type portValue int

func (p *portValue) String() string { return strconv.Itoa(int(*p)) }
func (p *portValue) Type() string   { return "int" }
func (p *portValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("a port is a number between 1 and 65535")
	}
	*p = portValue(n)
	return nil
}

// AddHealthFlags binds the health gate of restarts, replacements and
// master-eligible removals.
func (o *CrateDBOptions) AddHealthFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.HealthChecks, "health-checks", o.HealthChecks, "CrateDB: green health checks in a row (the crate-operator's rule) before a replaced pod counts as back, or (scale) with the same master before the next master-eligible node goes; for restart, giving it or --health-interval selects this rule instead of the evidence gate (--stable-for)")
	fs.DurationVar(&o.HealthInterval, "health-interval", o.HealthInterval, "CrateDB: time between those health checks")
}

// AddRestartGateFlags binds the evidence gate of restarts.
func (o *CrateDBOptions) AddRestartGateFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.StableFor, "stable-for", o.StableFor, "CrateDB: a restarted pod counts as back once its node rejoined, allocation is all, every table green and no shard initializing or relocating, held this long (the evidence gate; not with --health-checks/--health-interval)")
}

// AddBootstrapFlags binds what only bootstrap uses.
func (o *CrateDBOptions) AddBootstrapFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.CrashUser, "crash-user", o.CrashUser, "CrateDB: user crash logs in as inside the pod (default: the user of the StatefulSet's local trust entry of host-based auth, else crash's default)")
}

// AddScaleFlags binds what only scale uses.
func (o *CrateDBOptions) AddScaleFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.AllowRollingUpdate, "allow-rolling-update", o.AllowRollingUpdate, "CrateDB: change the gateway arguments of StatefulSets whose updateStrategy is not OnDelete, although their controller then restarts every pod by itself (refused otherwise)")
}

// Validate checks the flags without touching the API.
func (o *CrateDBOptions) Validate() error {
	if !slices.Contains(cratedb.SSLModes(), o.PGSSLMode) {
		return ops.Usagef("unknown --pg-sslmode %q; allowed: %s", o.PGSSLMode, strings.Join(cratedb.SSLModes(), ", "))
	}
	if o.PGPort < 0 || o.PGPort > 65535 {
		return ops.Usagef("--pg-port must be between 1 and 65535, got %d", o.PGPort)
	}
	if o.HealthChecks < 1 {
		return ops.Usagef("--health-checks must be at least 1, got %d", o.HealthChecks)
	}
	if o.HealthInterval <= 0 {
		return ops.Usagef("--health-interval must be positive, got %s", o.HealthInterval)
	}
	if o.StableFor <= 0 {
		return ops.Usagef("--stable-for must be positive, got %s", o.StableFor)
	}
	if _, err := o.refs(); err != nil {
		return err
	}
	return nil
}

type crateRefs struct{ ca, system cratedb.SecretRef }

func (o *CrateDBOptions) refs() (crateRefs, error) {
	var r crateRefs
	var err error
	if o.PGCASecret != "" {
		if r.ca, err = cratedb.ParseSecretRef("--pg-ca-secret", o.PGCASecret, "ca.crt"); err != nil {
			return r, err
		}
	}
	if o.SystemPasswordSecret != "" {
		if r.system, err = cratedb.ParseSecretRef("--system-password-secret", o.SystemPasswordSecret, cratedb.DefaultPasswordKey); err != nil {
			return r, err
		}
	}
	return r, nil
}

// crateConfig is the CrateDB engine's settings from the flags. The CA Secret is
// read here, before any plan or lock: the connection that needs it may
// only be opened by a step.
func (g *GlobalOptions) crateConfig(ctx context.Context, cl *Clients, c *ops.Cluster) (cratedb.Config, error) {
	o := g.CrateDB
	if err := o.Validate(); err != nil {
		return cratedb.Config{}, err
	}
	// --health-checks/--health-interval select the crate-operator's rule for restarts.
	greenInARow := g.flagGiven("health-checks") || g.flagGiven("health-interval")
	if greenInARow && g.flagGiven("stable-for") {
		return cratedb.Config{}, ops.Usagef("--stable-for is the evidence gate's; --health-checks/--health-interval select the crate-operator's rule instead: give one or the other")
	}
	refs, _ := o.refs()
	if !refs.ca.IsZero() {
		if err := checkSecretKey(ctx, cl, c.Namespace, refs.ca, "--pg-ca-secret"); err != nil {
			return cratedb.Config{}, err
		}
	}
	conn := o.Connector
	if conn == nil {
		conn = &cratedb.PGConnector{Client: cl.Kube, RestConfig: cl.Config, Host: o.PGHost, Port: o.PGPort,
			SSLMode: o.PGSSLMode, CA: refs.ca}
	}
	// crash's scheme and port come from the StatefulSet (-Cssl.http.enabled,
	// the container's ports), not from flags.
	return cratedb.Config{Connector: conn, SystemPassword: refs.system,
		HealthChecks: o.HealthChecks, HealthInterval: o.HealthInterval, PollInterval: o.PollInterval,
		GreenInARow: greenInARow, StableFor: o.StableFor,
		AllowRollingUpdate: o.AllowRollingUpdate, CrashUser: o.CrashUser}, nil
}

// closeEngine ends an engine's database connections, if it keeps any.
func closeEngine(ctx context.Context, eng ops.Engine) {
	if c, ok := eng.(ops.Closer); ok {
		_ = c.Close(context.WithoutCancel(ctx))
	}
}

// checkSecretKey reads ref and refuses a missing Secret or an empty or
// missing key, naming both; the value is not kept.
func checkSecretKey(ctx context.Context, cl *Clients, ns string, ref cratedb.SecretRef, what string) error {
	s, err := cl.Kube.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return ops.Usagef("%s: Secret %s/%s not found (wanted key %q)", what, ns, ref.Name, ref.Key)
	case err != nil:
		return fmt.Errorf("%s: reading Secret %s/%s: %w", what, ns, ref.Name, err)
	}
	if len(s.Data[ref.Key]) == 0 && s.StringData[ref.Key] == "" {
		return ops.Usagef("%s: Secret %s/%s has no key %q (or it is empty)", what, ns, ref.Name, ref.Key)
	}
	return nil
}
