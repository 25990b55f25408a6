package cratedb

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

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Flags are the CrateDB engine's command-line flags (config keys and DBOPS_* variables of the
// same names), bound per verb by AddFlags, and its test seams. One instance serves every
// command of a process.
type Flags struct {
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
	// LicenseSecret and Users are bootstrap's --license-secret and --user.
	LicenseSecret string
	Users         []string

	// license and users are LicenseSecret and Users parsed by Validate.
	license SecretRef
	users   []UserRequest

	// PollInterval paces database polls (0 = engine default); tests only.
	PollInterval time.Duration
	// Connector replaces the port-forward/pgx path (tests use cratedbtest's fake; exec
	// into pods is the commands' Exec, as for every engine).
	Connector Connector
}

// NewFlags returns the defaults.
func NewFlags() *Flags {
	return &Flags{PGSSLMode: "auto", HealthChecks: DefaultHealthChecks, HealthInterval: DefaultHealthInterval, StableFor: DefaultStableFor}
}

// AddFlags binds the flags verb reads: how to reach the database for every verb that talks
// to it, the health gates for the verbs that wait on it, and each verb's own.
func (f *Flags) AddFlags(verb string, fs *pflag.FlagSet) {
	switch verb {
	case "status", "wait", "explain", "report":
		f.addConnFlags(fs)
	case "bootstrap":
		fs.StringVar(&f.LicenseSecret, "license-secret", "", "Secret NAME[/KEY] (default key license) holding the license to set first")
		fs.StringArrayVar(&f.Users, "user", nil, "User to create as NAME=SECRET[/KEY] (default key password); repeatable")
		f.addConnFlags(fs)
		fs.StringVar(&f.CrashUser, "crash-user", f.CrashUser, "CrateDB: user crash logs in as inside the pod (default: the user of the StatefulSet's local trust entry of host-based auth, else crash's default)")
	case "restart":
		f.addHealthFlags(fs)
		fs.DurationVar(&f.StableFor, "stable-for", f.StableFor, "CrateDB: a restarted pod counts as back once its node rejoined, allocation is all, every table green and no shard initializing or relocating, held this long (the evidence gate; not with --health-checks/--health-interval)")
		f.addConnFlags(fs)
	case "replace":
		f.addHealthFlags(fs)
		f.addConnFlags(fs)
	case "scale":
		f.addConnFlags(fs)
		fs.BoolVar(&f.AllowRollingUpdate, "allow-rolling-update", f.AllowRollingUpdate, "CrateDB: change the gateway arguments of StatefulSets whose updateStrategy is not OnDelete, although their controller then restarts every pod by itself (refused otherwise)")
		f.addHealthFlags(fs)
	}
}

// addConnFlags binds how to reach the database.
func (f *Flags) addConnFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.PGHost, "pg-host", f.PGHost, "CrateDB: connect to this PostgreSQL host directly (inside the cluster) instead of port-forwarding to a pod")
	fs.Var((*portValue)(&f.PGPort), "pg-port", "CrateDB: PostgreSQL port with --pg-host (default: the crate container's, else 5432)")
	fs.StringVar(&f.PGSSLMode, "pg-sslmode", f.PGSSLMode, "CrateDB: TLS mode: "+strings.Join(SSLModes(), "|")+" (auto: require, or verify-ca with --pg-ca-secret, when the StatefulSet sets -Cssl.psql.enabled=true, else disable)")
	fs.StringVar(&f.PGCASecret, "pg-ca-secret", f.PGCASecret, "CrateDB: Secret NAME[/KEY] (default key ca.crt) with the CA for verify-ca|verify-full")
	fs.StringVar(&f.SystemPasswordSecret, "system-password-secret", f.SystemPasswordSecret, "CrateDB: Secret NAME[/KEY] (default key password) with the system user's password (default user-system-<cluster>)")
}

// addHealthFlags binds the health gate of restarts, replacements and master-eligible removals.
func (f *Flags) addHealthFlags(fs *pflag.FlagSet) {
	fs.IntVar(&f.HealthChecks, "health-checks", f.HealthChecks, "CrateDB: green health checks in a row (the crate-operator's rule) before a replaced pod counts as back, or (scale) with the same master before the next master-eligible node goes; for restart, giving it or --health-interval selects this rule instead of the evidence gate (--stable-for)")
	fs.DurationVar(&f.HealthInterval, "health-interval", f.HealthInterval, "CrateDB: time between those health checks")
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

// Validate checks the flags without touching the API; given reports the flags set on the
// command line.
func (f *Flags) Validate(given func(string) bool) error {
	if !slices.Contains(SSLModes(), f.PGSSLMode) {
		return ops.Usagef("unknown --pg-sslmode %q; allowed: %s", f.PGSSLMode, strings.Join(SSLModes(), ", "))
	}
	if f.PGPort < 0 || f.PGPort > 65535 {
		return ops.Usagef("--pg-port must be between 1 and 65535, got %d", f.PGPort)
	}
	if f.HealthChecks < 1 {
		return ops.Usagef("--health-checks must be at least 1, got %d", f.HealthChecks)
	}
	if f.HealthInterval <= 0 {
		return ops.Usagef("--health-interval must be positive, got %s", f.HealthInterval)
	}
	if f.StableFor <= 0 {
		return ops.Usagef("--stable-for must be positive, got %s", f.StableFor)
	}
	if _, err := f.refs(); err != nil {
		return err
	}
	if err := f.parseBootstrap(); err != nil {
		return err
	}
	// Modes that never verify the server: a CA would be read and ignored.
	if given("pg-ca-secret") && slices.Contains([]string{"disable", "require"}, f.PGSSLMode) {
		return ops.Usagef("--pg-ca-secret only applies with --pg-sslmode verify-ca or verify-full (got %s)", f.PGSSLMode)
	}
	return nil
}

// parseBootstrap parses --license-secret and --user.
func (f *Flags) parseBootstrap() error {
	f.license, f.users = SecretRef{}, nil
	if f.LicenseSecret != "" {
		ref, err := ParseSecretRef("--license-secret", f.LicenseSecret, DefaultLicenseKey)
		if err != nil {
			return err
		}
		f.license = ref
	}
	seen := map[string]bool{}
	for _, u := range f.Users {
		name, secret, ok := strings.Cut(u, "=")
		name = strings.TrimSpace(name)
		switch {
		case !ok:
			return ops.Usagef("--user %q: want NAME=SECRET[/KEY] (the password comes from a Secret, never from the command line)", u)
		case name == "":
			return ops.Usagef("--user %q: missing user name before '='", u)
		case strings.TrimSpace(secret) == "":
			return ops.Usagef("--user %q: missing Secret name after '='", u)
		case seen[name]:
			return ops.Usagef("--user %s given twice", name)
		}
		seen[name] = true
		ref, err := ParseSecretRef("--user "+name, secret, DefaultPasswordKey)
		if err != nil {
			return err
		}
		f.users = append(f.users, UserRequest{Name: name, Password: ref})
	}
	return nil
}

// FillBootstrap puts --license-secret and --user (as Validate parsed them) into r.
func (f *Flags) FillBootstrap(r *ops.BootstrapRequest) {
	r.License, r.Users = f.license, f.users
}

// PortForwards reports whether the engine reaches the database through a port-forward to a
// pod (no --pg-host), which needs its own permission.
func (f *Flags) PortForwards() bool { return f.PGHost == "" }

type secretRefs struct{ ca, system SecretRef }

func (f *Flags) refs() (secretRefs, error) {
	var r secretRefs
	var err error
	if f.PGCASecret != "" {
		if r.ca, err = ParseSecretRef("--pg-ca-secret", f.PGCASecret, "ca.crt"); err != nil {
			return r, err
		}
	}
	if f.SystemPasswordSecret != "" {
		if r.system, err = ParseSecretRef("--system-password-secret", f.SystemPasswordSecret, DefaultPasswordKey); err != nil {
			return r, err
		}
	}
	return r, nil
}

// Config is the engine's settings from the flags for cluster c. The CA Secret is read here,
// before any plan or lock: the connection that needs it may only be opened by a step.
func (f *Flags) Config(ctx context.Context, d ops.EngineDeps, c *ops.Cluster, given func(string) bool) (Config, error) {
	if err := f.Validate(given); err != nil {
		return Config{}, err
	}
	// --health-checks/--health-interval select the crate-operator's rule for restarts.
	greenInARow := given("health-checks") || given("health-interval")
	if greenInARow && given("stable-for") {
		return Config{}, ops.Usagef("--stable-for is the evidence gate's; --health-checks/--health-interval select the crate-operator's rule instead: give one or the other")
	}
	refs, _ := f.refs()
	if !refs.ca.IsZero() {
		if err := checkSecretKey(ctx, d, c.Namespace, refs.ca, "--pg-ca-secret"); err != nil {
			return Config{}, err
		}
	}
	conn := f.Connector
	if conn == nil {
		conn = &PGConnector{Client: d.Client, RestConfig: d.Config, Host: f.PGHost, Port: f.PGPort, SSLMode: f.PGSSLMode, CA: refs.ca}
	}
	// crash's scheme and port come from the StatefulSet (-Cssl.http.enabled,
	// the container's ports), not from flags.
	return Config{Connector: conn, SystemPassword: refs.system,
		HealthChecks: f.HealthChecks, HealthInterval: f.HealthInterval, PollInterval: f.PollInterval,
		GreenInARow: greenInARow, StableFor: f.StableFor,
		AllowRollingUpdate: f.AllowRollingUpdate, CrashUser: f.CrashUser}, nil
}

// checkSecretKey reads ref and refuses a missing Secret or an empty or
// missing key, naming both; the value is not kept.
func checkSecretKey(ctx context.Context, d ops.EngineDeps, ns string, ref SecretRef, what string) error {
	s, err := d.Client.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
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
