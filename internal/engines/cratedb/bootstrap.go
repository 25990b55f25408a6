package cratedb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// BootstrapRequest is what `bootstrap` asks of the engine.
type BootstrapRequest = ops.BootstrapRequest

// UserRequest is one --user NAME=SECRET[/KEY].
type UserRequest = ops.UserRequest

// bootstrapArgs renders the request canonically (journal key); no secret values.
func bootstrapArgs(r BootstrapRequest) string {
	var parts []string
	if !r.License.IsZero() {
		parts = append(parts, "--license-secret "+r.License.String())
	}
	for _, u := range r.Users {
		parts = append(parts, "--user "+u.Name+"="+u.Password.String())
	}
	return strings.Join(parts, " ")
}

// crashOutputMax bounds how much of crash's output an error quotes.
const crashOutputMax = 300

// PlanBootstrap implements ops.Bootstrapper. Every Secret is read here, so
// a missing one refuses the run before anything changes.
func (e *Engine) PlanBootstrap(ctx context.Context, c *ops.Cluster, req ops.BootstrapRequest) (*ops.Plan, error) {
	if e.execer == nil {
		return nil, errors.New("cratedb bootstrap: no exec client")
	}
	eligible := masterEligible(c)
	if eligible == nil || len(eligible.Pods) == 0 {
		return nil, ops.Preconditionf("cluster %s/%s has no master-eligible pod to run crash in", c.Namespace, c.Name)
	}
	sysPW, err := e.systemPassword(ctx, c)
	if err != nil {
		return nil, err
	}
	spec := specOf(eligible)
	crashUser, err := e.crashUser(spec)
	if err != nil {
		return nil, err
	}
	cr := &crasher{e: e, c: c, g: eligible, argv: e.crashBase(spec, crashUser)}
	// The version decides SET LICENSE and the already-exists error. On a
	// re-run the system user can read it now; on a first run crash reads
	// it when the steps run (a plan writes nothing, so runs no crash).
	if rows, err := e.readNodes(ctx, c, nil); err == nil {
		if v, err := clusterVersion(rows); err == nil && v.known() {
			cr.version = v
		}
	} else {
		_ = e.session(c).close(ctx)
	}
	license := ""
	if !req.License.IsZero() {
		if license, err = e.secret(ctx, c.Namespace, req.License, "license (--license-secret)"); err != nil {
			return nil, err
		}
	}
	// Bad input is refused before any Secret is read.
	seen := map[string]bool{}
	for _, u := range req.Users {
		if u.Name == SystemUser {
			return nil, ops.Usagef("--user %s: the system user is created by bootstrap itself (its password is --system-password-secret)", u.Name)
		}
		if seen[u.Name] {
			return nil, ops.Usagef("--user %s given twice", u.Name)
		}
		seen[u.Name] = true
	}
	pws := make([]string, len(req.Users))
	for i, u := range req.Users {
		if pws[i], err = e.secret(ctx, c.Namespace, u.Password, "password of user "+u.Name); err != nil {
			return nil, err
		}
	}
	secrets := append([]string{sysPW, license}, pws...)

	p := ops.NewPlan("bootstrap", c, ops.EngineCrateDB, bootstrapArgs(req))
	stsRef := ops.ObjectRef{Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: c.Namespace, Name: ops.StatefulSetName(eligible)}
	if ops.StatefulSetOf(eligible) != nil {
		stsRef.UID = string(ops.StatefulSetOf(eligible).UID)
	}
	via := fmt.Sprintf("via: %s < STATEMENT (on stdin, never in the command line; container %s)", strings.Join(cr.argv, " "), crateContainer)
	pre := fmt.Sprintf("a Ready pod of master-eligible group %s (container %s)", eligible.Name, crateContainer)

	switch {
	case license != "" && cr.version.known() && cr.version.atLeast(noLicenseFrom.major, noLicenseFrom.minor):
		p.Notes = append(p.Notes, fmt.Sprintf("--license-secret is ignored: CrateDB %s has no licenses (SET LICENSE exists only before 5.3)", cr.version))
	case license != "":
		cond := ""
		if !cr.version.known() {
			cond = " (only if the version, read first with crash, is below 5.3; from 5.3 on --license-secret is ignored)"
		}
		p.Steps = append(p.Steps, &ops.Step{
			ID: "license", Group: eligible.Name, Target: "cluster/" + c.Name, Mutating: true,
			Description:   "set the license first (more nodes than a free license allows)" + cond,
			Preconditions: []string{pre},
			Details:       []string{via, "SET LICENSE '***'; -> expect SET OK"},
			Action: func(ctx context.Context, sc *ops.StepContext) error {
				v, err := cr.clusterVersion(ctx)
				if err != nil {
					return err
				}
				if v.atLeast(noLicenseFrom.major, noLicenseFrom.minor) {
					sc.Waiting(fmt.Sprintf("--license-secret ignored: CrateDB %s has no licenses (SET LICENSE exists only before 5.3)", v))
					return nil
				}
				if _, err := cr.run(ctx, crashSetLicense(license), "SET OK", secrets); err != nil {
					return fmt.Errorf("setting the license: %w", err)
				}
				sc.Audit(ctx, stsRef, "DbopsSetLicense", "set the CrateDB license")
				return nil
			},
		})
	}

	sysStep := &ops.Step{
		ID: "user/" + SystemUser, Group: eligible.Name, Target: "user/" + SystemUser, Mutating: true,
		Description:   "create the system user (or set its password) and grant all privileges",
		Preconditions: []string{pre},
		Details: []string{
			via,
			`CREATE USER "system" WITH (password = '***'); -> expect CREATE OK`,
			`  on ` + cr.alreadyExists() + `: ALTER USER "system" SET (password = '***'); -> expect ALTER OK`,
			`GRANT ALL PRIVILEGES TO "system"; -> expect GRANT OK`,
		},
	}
	// Done when the password logs in and the grants are there: checking
	// needs the very connection the next steps use.
	sysStep.Precheck = func(ctx context.Context, sc *ops.StepContext) (bool, error) {
		return e.userReady(ctx, c, SystemUser), nil
	}
	sysStep.Action = func(ctx context.Context, sc *ops.StepContext) error {
		if _, err := cr.clusterVersion(ctx); err != nil {
			return err
		}
		out, err := cr.run(ctx, crashCreateUser(SystemUser, sysPW), "CREATE OK", secrets)
		if err != nil {
			if !strings.Contains(out, cr.alreadyExists()) {
				return fmt.Errorf("creating user system: %w", err)
			}
			if _, err := cr.run(ctx, crashAlterUser(SystemUser, sysPW), "ALTER OK", secrets); err != nil {
				return fmt.Errorf("setting the password of user system: %w", err)
			}
			sc.Audit(ctx, stsRef, "DbopsAlterUser", "set the password of CrateDB user system")
		} else {
			sc.Audit(ctx, stsRef, "DbopsCreateUser", "created CrateDB user system")
		}
		if _, err := cr.run(ctx, crashGrantAll(SystemUser), "GRANT OK", secrets); err != nil {
			return fmt.Errorf("granting privileges to user system: %w", err)
		}
		sc.Audit(ctx, stsRef, "DbopsGrant", "granted all privileges to CrateDB user system")
		// A connection opened before the password changed may be stale.
		_ = e.session(c).close(ctx)
		return nil
	}
	p.Steps = append(p.Steps, sysStep)

	for i, u := range req.Users {
		u, pw := u, pws[i]
		st := &ops.Step{
			ID: "user/" + u.Name, Target: "user/" + u.Name, Mutating: true,
			Description:   "create the user if missing and grant all privileges (as system, over PostgreSQL)",
			Preconditions: []string{"user system can log in"},
			Details: []string{
				sqlUserExists + "  -- $1 = " + quoteLiteral(u.Name),
				sqlCreateUserParam(u.Name) + "  -- if missing; $1 = " + redacted + " (Secret " + u.Password.String() + ")",
				sqlGrantAll(u.Name),
			},
		}
		st.Precheck = func(ctx context.Context, sc *ops.StepContext) (bool, error) {
			exists, err := e.userExists(ctx, c, u.Name)
			if err != nil {
				return false, err
			}
			return exists && e.hasAllPrivileges(ctx, c, u.Name), nil
		}
		st.Action = func(ctx context.Context, sc *ops.StepContext) error {
			s := e.session(c)
			exists, err := e.userExists(ctx, c, u.Name)
			if err != nil {
				return err
			}
			if !exists {
				q := sqlCreateUserParam(u.Name)
				if err := s.exec(ctx, nil, q, pw); err != nil {
					return sqlErr(q, redactErr(err, secrets...))
				}
				sc.Audit(ctx, stsRef, "DbopsCreateUser", "created CrateDB user "+u.Name)
			}
			q := sqlGrantAll(u.Name)
			if err := s.exec(ctx, nil, q); err != nil {
				return sqlErr(q, err)
			}
			sc.Audit(ctx, stsRef, "DbopsGrant", "granted all privileges to CrateDB user "+u.Name)
			return nil
		}
		p.Steps = append(p.Steps, st)
	}
	return p, nil
}

func (e *Engine) userExists(ctx context.Context, c *ops.Cluster, name string) (bool, error) {
	rows, err := e.session(c).query(ctx, nil, sqlUserExists, name)
	if err != nil {
		return false, sqlErr(sqlUserExists, err)
	}
	return cellBool(rows, 0), nil
}

// hasAllPrivileges reports a user holding ALL PRIVILEGES. When
// sys.privileges cannot be read (a server without it) an existing user
// counts as granted: bootstrap granted it when it created it, and a second
// run must not write.
func (e *Engine) hasAllPrivileges(ctx context.Context, c *ops.Cluster, name string) bool {
	rows, err := e.session(c).query(ctx, nil, sqlPrivileges, name)
	if err != nil {
		return ctx.Err() == nil
	}
	return cellInt(rows, 0) >= allPrivilegeTypes
}

// userReady reports whether the system user logs in with its Secret's
// password and holds all privileges. Failures just mean "not yet".
func (e *Engine) userReady(ctx context.Context, c *ops.Cluster, name string) bool {
	exists, err := e.userExists(ctx, c, name)
	if err != nil || !exists {
		_ = e.session(c).close(ctx)
		return false
	}
	return e.hasAllPrivileges(ctx, c, name)
}

// crasher runs crash in a Ready pod of a master-eligible group.
type crasher struct {
	e    *Engine
	c    *ops.Cluster
	g    *ops.NodeGroup
	argv []string
	// version is the cluster's, once known.
	version version
}

// alreadyExists is the error CREATE USER gives for an existing user:
// RoleAlreadyExistsException from 5.6 on, UserAlreadyExistsException
// before; either while the version is unknown.
func (cr *crasher) alreadyExists() string {
	switch {
	case !cr.version.known():
		return "AlreadyExistsException"
	case cr.version.atLeast(5, 6):
		return "RoleAlreadyExistsException"
	default:
		return "UserAlreadyExistsException"
	}
}

var reVersion = regexp.MustCompile(`\b(\d+\.\d+\.\d+(?:-[A-Za-z0-9.]+)?)\b`)

// clusterVersion reads the lowest version['number'] of sys.nodes with
// crash (no secret in it, so on the command line).
func (cr *crasher) clusterVersion(ctx context.Context) (version, error) {
	if cr.version.known() {
		return cr.version, nil
	}
	out, err := cr.exec(ctx, append(slices.Clone(cr.argv), "-c", sqlVersions+";"), nil, nil)
	if err != nil || !strings.Contains(out, "SELECT") {
		if err == nil {
			err = errors.New("no SELECT result in crash output")
		}
		return version{}, fmt.Errorf("reading the CrateDB version: %w; output: %s", err, clip(out, crashOutputMax))
	}
	var rows []nodeRow
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "|") {
			continue
		}
		if m := reVersion.FindStringSubmatch(line); m != nil {
			rows = append(rows, nodeRow{Version: m[1]})
		}
	}
	v, err := clusterVersion(rows)
	if err != nil || !v.known() {
		return version{}, fmt.Errorf("reading the CrateDB version: no version in crash output: %s", clip(out, crashOutputMax))
	}
	cr.version = v
	return v, nil
}

// run sends one statement to crash on stdin (statements carry passwords,
// and exec command lines are recorded in API-server audit logs) and checks
// the output for want. Output is returned (and quoted in errors) with
// every secret redacted.
func (cr *crasher) run(ctx context.Context, stmt, want string, secrets []string) (string, error) {
	// Every statement sent this way writes (license, users, grants): a run that lost its lock
	// sends none.
	if err := kube.CheckWriteGuard(ctx); err != nil {
		return "", fmt.Errorf("not sending %s through crash: %w", statementVerb(stmt), err)
	}
	out, err := cr.exec(ctx, cr.argv, strings.NewReader(stmt+"\n"), secrets)
	if err == nil && strings.Contains(out, want) {
		return out, nil
	}
	if err == nil {
		err = fmt.Errorf("expected %q in crash output", want)
	}
	return out, fmt.Errorf("%w; output: %s", err, clip(out, crashOutputMax))
}

func (cr *crasher) exec(ctx context.Context, argv []string, stdin io.Reader, secrets []string) (string, error) {
	pod, err := cr.e.readyPod(ctx, cr.c, cr.g)
	if err != nil {
		return "", err
	}
	stdout, stderr, err := cr.e.execer.Exec(ctx, cr.c.Namespace, pod, crateContainer, argv, stdin)
	out := redact(string(stdout)+string(stderr), secrets...)
	if err != nil {
		return out, fmt.Errorf("crash in pod %s: %w", pod, redactErr(err, secrets...))
	}
	return out, nil
}

// redactErr keeps err (and its chain, for errors.Is) unless its text
// holds a secret; then only the redacted text survives.
func redactErr(err error, secrets ...string) error {
	if msg := redact(err.Error(), secrets...); msg != err.Error() {
		return errors.New(msg)
	}
	return err
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// readyPod returns the first Ready pod of g.
func (e *Engine) readyPod(ctx context.Context, c *ops.Cluster, g *ops.NodeGroup) (string, error) {
	for _, p := range g.Pods {
		live, err := ops.GetPod(ctx, nil, e.client, c.Namespace, p.Name)
		if err == nil && ops.PodReady(live) {
			return p.Name, nil
		}
	}
	return "", ops.Preconditionf("no Ready pod in master-eligible group %s of %s/%s", g.Name, c.Namespace, c.Name)
}

// masterEligible is the master group, else the first data group (the
// discovery marks it).
func masterEligible(c *ops.Cluster) *ops.NodeGroup {
	for _, g := range c.Groups {
		if g.MasterEligible || g.Role == ops.RoleMaster {
			return g
		}
	}
	if len(c.Groups) > 0 {
		return c.Groups[0]
	}
	return nil
}
