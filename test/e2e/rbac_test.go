//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// readmeRBAC returns the Role and ClusterRole of the README's RBAC section, as a user would
// copy them: the test proves the documented Role, not a copy of it.
func readmeRBAC(t *testing.T) (*rbacv1.Role, *rbacv1.ClusterRole) {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## RBAC\n")
	if !ok {
		t.Fatal("README has no RBAC section")
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("README's RBAC section has no yaml block")
	}
	var role rbacv1.Role
	var cr rbacv1.ClusterRole
	for _, doc := range strings.Split(block, "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("README RBAC yaml: %v", err)
		}
		var target any
		switch meta.Kind {
		case "Role":
			target = &role
		case "ClusterRole":
			target = &cr
		default:
			t.Fatalf("README RBAC yaml: unexpected kind %q", meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
			t.Fatalf("README RBAC yaml (%s): %v", meta.Kind, err)
		}
	}
	if len(role.Rules) == 0 || len(cr.Rules) == 0 {
		t.Fatalf("README RBAC: role %d rules, cluster role %d rules", len(role.Rules), len(cr.Rules))
	}
	return &role, &cr
}

// rbacUser binds the README's Role (in ns) and ClusterRole to a new user name, which the
// CLI then acts as with --as (the test bed's admin may impersonate).
type rbacUser struct {
	t      *testing.T
	tb     *testbed.Testbed // whose API server the user is bound in
	ns     string
	name   string
	role   *rbacv1.Role
	client kubernetes.Interface // as the user, for access reviews
}

// newRBACUser is newRBACUserIn the shared bed.
func newRBACUser(t *testing.T, ns string) *rbacUser { return newRBACUserIn(t, bed, ns) }

// newRBACUserIn binds the README's Role and ClusterRole to a new user in tb's API server and
// waits until its authorizer has seen them (so that a later setRules probe that wants false
// is not satisfied by bindings the authorizer has not seen yet).
func newRBACUserIn(t *testing.T, tb *testbed.Testbed, ns string) *rbacUser {
	t.Helper()
	role, cr := readmeRBAC(t)
	u := &rbacUser{t: t, tb: tb, ns: ns, name: "dbops-e2e-" + ns}
	ctx := t.Context()
	role.Namespace, role.Name = ns, "kubectl-dbops"
	created, err := tb.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Role: %v", err)
	}
	u.role = created
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u.name}}
	if _, err := tb.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubectl-dbops"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}, Subjects: subject}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RoleBinding: %v", err)
	}
	cr.Name = "kubectl-dbops-nodes-" + ns
	if _, err := tb.Client.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ClusterRole: %v", err)
	}
	if _, err := tb.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cr.Name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name}, Subjects: subject}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ClusterRoleBinding: %v", err)
	}
	t.Cleanup(func() {
		_ = tb.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), cr.Name, metav1.DeleteOptions{})
		_ = tb.Client.RbacV1().ClusterRoles().Delete(context.Background(), cr.Name, metav1.DeleteOptions{})
	})
	rc := rest.CopyConfig(tb.RESTConfig)
	rc.Impersonate = rest.ImpersonationConfig{UserName: u.name}
	if u.client, err = kubernetes.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	// One permission of each binding: the Role's and the ClusterRole's.
	u.await(ops.Permission{Verb: "get", Resource: "pods"}, true)
	u.await(ops.Permission{Verb: "list", Resource: "nodes"}, true)
	return u
}

// allowed asks the API server, as the user, whether it may do p in the namespace.
func (u *rbacUser) allowed(p ops.Permission) bool {
	u.t.Helper()
	res, err := u.client.AuthorizationV1().SelfSubjectAccessReviews().Create(u.t.Context(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: u.ns, Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource}}}, metav1.CreateOptions{})
	if err != nil {
		u.t.Fatalf("access review: %v", err)
	}
	return res.Status.Allowed
}

// setRules replaces the Role's rules and waits until the API server's authorizer agrees that
// probe is allowed (or not, per want).
func (u *rbacUser) setRules(rules []rbacv1.PolicyRule, probe ops.Permission, want bool) {
	u.t.Helper()
	r, err := u.tb.Client.RbacV1().Roles(u.ns).Get(u.t.Context(), u.role.Name, metav1.GetOptions{})
	if err != nil {
		u.t.Fatal(err)
	}
	r.Rules = rules
	if _, err := u.tb.Client.RbacV1().Roles(u.ns).Update(u.t.Context(), r, metav1.UpdateOptions{}); err != nil {
		u.t.Fatal(err)
	}
	u.await(probe, want)
}

// await waits until the API server's authorizer agrees that probe is allowed (or not, per
// want): RBAC changes reach the authorizer through a watch.
func (u *rbacUser) await(probe ops.Permission, want bool) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.t.Context(), 30*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return u.allowed(probe) == want, nil
	}); err != nil {
		u.t.Fatalf("the authorizer did not pick up the RBAC change (%s allowed=%v): %v", probe, want, err)
	}
}

// without returns rules minus one verb of one resource.
func without(rules []rbacv1.PolicyRule, p ops.Permission) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	res := p.Resource
	if p.Subresource != "" {
		res += "/" + p.Subresource
	}
	for _, r := range rules {
		if !slices.Contains(r.APIGroups, p.Group) || !slices.Contains(r.Resources, res) {
			out = append(out, *r.DeepCopy())
			continue
		}
		// Split the resource off its rule, without the verb.
		rest := *r.DeepCopy()
		rest.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(s string) bool { return s == res })
		if len(rest.Resources) > 0 {
			out = append(out, rest)
		}
		verbs := slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == p.Verb })
		if len(verbs) > 0 {
			out = append(out, rbacv1.PolicyRule{APIGroups: []string{p.Group}, Resources: []string{res}, Verbs: verbs})
		}
	}
	return out
}

// rolePermissions lists every verb on every resource of rules.
func rolePermissions(rules []rbacv1.PolicyRule) []ops.Permission {
	var out []ops.Permission
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				name, sub, _ := strings.Cut(res, "/")
				for _, v := range r.Verbs {
					out = append(out, ops.Permission{Verb: v, Group: g, Resource: name, Subresource: sub})
				}
			}
		}
	}
	return out
}

// TestRBACReadmeRoleIsSufficient runs every command of a generic cluster as a user bound to
// exactly the README's Role and ClusterRole, starting on a cluster without a Lease; then, with
// each verb of the Role removed in turn, a rolling restart and a replacement either still
// succeed (the verb is for other engines or commands) or are refused before the lock with exit 6
// and one line naming the verb and the resource, leaving no Lease held.
func TestRBACReadmeRoleIsSufficient(t *testing.T) {
	ns := newNamespace(t)
	createDBCluster(t, ns, "web", 2)
	u := newRBACUser(t, ns)
	env := cliEnv(t)
	as := func(args ...string) []string { return append(args, "-n", ns, "--as", u.name) }
	leaseUpdate := ops.Permission{Verb: "update", Group: "coordination.k8s.io", Resource: "leases"}

	t.Run("no lease and no update leases", func(t *testing.T) {
		u.setRules(without(u.role.Rules, leaseUpdate), leaseUpdate, false)
		res := runCLI(t, env, as("restart", "web", "--rolling", "--yes")...)
		if res.Code != ops.ExitForbidden || strings.Count(res.Stderr, "\n") != 1 ||
			!strings.Contains(res.Stderr, "you may not update leases.coordination.k8s.io (for the cluster lock)") {
			t.Fatalf("want exit 6 naming update leases: %s", res)
		}
		if _, err := bed.Client.CoordinationV1().Leases(ns).Get(t.Context(), "dbops-web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a Lease was left behind by the refused run: %v", err)
		}
		u.setRules(u.role.Rules, leaseUpdate, true)
	})

	t.Run("every command under the README Role", func(t *testing.T) {
		for _, args := range [][]string{
			{"status", "web"},
			{"lock", "status", "web"},
			{"deny", "list", "web"},
			{"restart", "web", "--rolling", "--yes"},
			{"lock", "acquire", "web", "--reason", "rbac e2e"},
			{"lock", "status", "web"},
			{"lock", "release", "web"},
			{"deny", "add", "web", "bob@example", "--reason", "rbac e2e"},
			{"deny", "allow", "web", "bob@example"},
			{"replace", "web", "web-1", "--strategy", "deletion", "--yes"},
			{"replace", "web", "web-0", "--yes"},
			{"status", "web", "-o", "json"},
			// --logs reads pods/log, which the README's Role grants: no warning, logs in the bundle.
			{"report", "web", "-f", filepath.Join(t.TempDir(), "web.zip"), "--logs"},
		} {
			res := runCLI(t, env, as(args...)...)
			if res.Code != 0 {
				t.Fatalf("under the README Role: %s", res)
			}
			if strings.Contains(res.Stderr, "forbidden") || strings.Contains(res.Stdout, "forbidden") || strings.Contains(res.Stderr, "you may not") {
				t.Errorf("a request was forbidden: %s", res)
			}
		}
	})

	t.Run("each verb removed", func(t *testing.T) {
		var needed, unneeded []string
		for _, p := range rolePermissions(u.role.Rules) {
			u.setRules(without(u.role.Rules, p), p, false)
			res := runCLI(t, env, as("restart", "web", "--rolling", "--yes")...)
			if res.Code == 0 {
				// Not needed by a restart: a replacement (fresh PVC) may need it.
				res = runCLI(t, env, as("replace", "web", "web-0", "--yes")...)
			}
			switch res.Code {
			case 0:
				unneeded = append(unneeded, p.String())
			case ops.ExitForbidden:
				needed = append(needed, p.String())
				res2 := strings.TrimSuffix(res.Stderr, "\n")
				if strings.Contains(res2, "\n") || !strings.Contains(res2, p.Verb) || !strings.Contains(res2, p.Resource) {
					t.Errorf("without %s: the refusal is not one line naming the verb and resource: %q", p, res.Stderr)
				}
			default:
				t.Errorf("without %s: want exit 0 or 6: %s", p, res)
			}
			l, err := bed.Client.CoordinationV1().Leases(ns).Get(t.Context(), "dbops-web", metav1.GetOptions{})
			if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				t.Errorf("without %s: the lock is left held by %s", p, *l.Spec.HolderIdentity)
			}
			u.setRules(u.role.Rules, p, true)
		}
		t.Logf("rolling restart and replace need: %s", strings.Join(needed, ", "))
		t.Logf("rolling restart and replace (generic engine) do without: %s", strings.Join(unneeded, ", "))
		for _, must := range []string{"delete pods", "watch pods", "update leases.coordination.k8s.io", "create leases.coordination.k8s.io",
			"create events", "delete persistentvolumeclaims"} {
			if !slices.Contains(needed, must) {
				t.Errorf("removing %s did not make the restart refuse; needed: %v", must, needed)
			}
		}
	})
}
