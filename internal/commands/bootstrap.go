package commands

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/cratedb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// BootstrapOptions holds `bootstrap` flags.
type BootstrapOptions struct {
	*GlobalOptions
	Cluster       string
	LicenseSecret string
	Users         []string

	license cratedb.SecretRef
	users   []cratedb.UserRequest
}

// NewBootstrapOptions returns options bound to the shared flags.
func NewBootstrapOptions(g *GlobalOptions) *BootstrapOptions {
	return &BootstrapOptions{GlobalOptions: g}
}

// NewBootstrapCmd builds `bootstrap CLUSTER`.
func NewBootstrapCmd(g *GlobalOptions) *cobra.Command {
	o := NewBootstrapOptions(g)
	cmd := &cobra.Command{
		Use:   "bootstrap CLUSTER [--license-secret NAME[/KEY]] [--user NAME=SECRET[/KEY]]...",
		Short: "Prepare a new cluster: license, system user, application users",
		Long: `Bootstrap a freshly created cluster. For CrateDB: set the license (if given)
first, create the "system" user with the password from its Secret (or set the
password when it exists) and grant it all privileges, then connect as system
and create each --user that is missing, with all privileges.

Passwords and the license are read from Kubernetes Secrets only and never
printed; plans show them as '***'. Every step is idempotent: a second run
changes nothing. Bounded by --timeout, else BOOTSTRAP_TIMEOUT seconds, else
1800 s.`,
		Example: `  # See the plan (secrets redacted) without changing anything
  kubectl dbops bootstrap mycrate --user app=app-db-password --dry-run

  # License from Secret crate-license (key "license"), two users, no prompt
  kubectl dbops bootstrap mycrate --license-secret crate-license \
    --user app=app-db-password --user grafana=grafana-db/pw --yes`,
		Args:              clusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd)
		},
	}
	cmd.Flags().StringVar(&o.LicenseSecret, "license-secret", "", "Secret NAME[/KEY] (default key license) holding the license to set first")
	cmd.Flags().StringArrayVar(&o.Users, "user", nil, "User to create as NAME=SECRET[/KEY] (default key password); repeatable")
	g.CrateDB.AddConnFlags(cmd.Flags())
	return cmd
}

// Complete fills in arguments.
func (o *BootstrapOptions) Complete(args []string) error {
	o.Cluster = args[0]
	return nil
}

// Validate checks flags without touching the API.
func (o *BootstrapOptions) Validate() error {
	if err := o.GlobalOptions.Validate(); err != nil {
		return err
	}
	if err := o.CrateDB.Validate(); err != nil {
		return err
	}
	o.license, o.users = cratedb.SecretRef{}, nil
	if o.LicenseSecret != "" {
		ref, err := cratedb.ParseSecretRef("--license-secret", o.LicenseSecret, cratedb.DefaultLicenseKey)
		if err != nil {
			return err
		}
		o.license = ref
	}
	seen := map[string]bool{}
	for _, u := range o.Users {
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
		ref, err := cratedb.ParseSecretRef("--user "+name, secret, cratedb.DefaultPasswordKey)
		if err != nil {
			return err
		}
		o.users = append(o.users, cratedb.UserRequest{Name: name, Password: ref})
	}
	return nil
}

// Run discovers, plans and executes the bootstrap.
func (o *BootstrapOptions) Run(cmd *cobra.Command) error {
	ctx := commandContext(cmd)
	cl, c, err := o.discover(ctx, o.Cluster, true)
	if err != nil {
		return err
	}
	eng, err := o.engine(cl, c)
	if err != nil {
		return err
	}
	defer closeEngine(ctx, eng)
	b, ok := eng.(ops.Bootstrapper)
	if !ok {
		return ops.Usagef("engine %s (cluster %s) has no bootstrap procedure", eng.Name(), c.Name)
	}
	timeout, err := o.timeoutOr("BOOTSTRAP_TIMEOUT", defaultBootstrapTimeout)
	if err != nil {
		return err
	}
	var req any
	switch c.Engine {
	case ops.EngineCrateDB:
		req = cratedb.BootstrapRequest{License: o.license, Users: o.users, Command: commandLine(cmd, o.Cluster)}
	default:
		return ops.Usagef("engine %s (cluster %s) has no bootstrap procedure", eng.Name(), c.Name)
	}
	plan, err := b.PlanBootstrap(ctx, c, req)
	if err != nil {
		return err
	}
	return o.execute(ctx, cl, c, plan, timeout)
}
