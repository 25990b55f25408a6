package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Permission is one RBAC verb on one resource, as a step needs it.
type Permission struct {
	Verb        string `json:"verb"`
	Group       string `json:"group,omitempty"`
	Resource    string `json:"resource"`
	Subresource string `json:"subresource,omitempty"`
}

// String renders the permission as RBAC rules name it: "delete pods",
// "create pods/exec", "update statefulsets.apps".
func (p Permission) String() string {
	r := p.Resource
	if p.Group != "" {
		r += "." + p.Group
	}
	if p.Subresource != "" {
		r += "/" + p.Subresource
	}
	return p.Verb + " " + r
}

// Need builds Permissions for several verbs on one resource.
func Need(group, resource, subresource string, verbs ...string) []Permission {
	out := make([]Permission, 0, len(verbs))
	for _, v := range verbs {
		out = append(out, Permission{Verb: v, Group: group, Resource: resource, Subresource: subresource})
	}
	return out
}

// Permissions every run needs besides its steps': the lock Lease (taken,
// renewed with the journal, released) and the audit Events.
var (
	LockNeeds  = Need("coordination.k8s.io", "leases", "", "get", "create", "update")
	AuditNeeds = Need("", "events", "", "create")
	// PodWaitNeeds: steps that change pods wait for them with watches.
	PodWaitNeeds = Need("", "pods", "", "get", "list", "watch")
)

// NeedFor is one permission and the step (or purpose) that needs it.
type NeedFor struct {
	Permission
	For string
}

// Needs returns every permission the plan's steps declare plus extra, each
// once, with the first step that needs it, in plan order.
func (p *Plan) Needs(extra []NeedFor) []NeedFor {
	var out []NeedFor
	seen := map[Permission]bool{}
	add := func(perm Permission, why string) {
		if !seen[perm] {
			seen[perm] = true
			out = append(out, NeedFor{Permission: perm, For: why})
		}
	}
	for _, n := range extra {
		add(n.Permission, n.For)
	}
	for i, s := range p.Steps {
		for _, perm := range s.Needs {
			add(perm, fmt.Sprintf("step %d (%s)", i+1, s.Target))
		}
	}
	return out
}

// AccessChecker answers whether the caller may do something, as the API
// server would decide it.
type AccessChecker interface {
	Allowed(ctx context.Context, namespace string, p Permission) (allowed bool, err error)
}

// SelfAccessReview asks the API server with SelfSubjectAccessReviews, which
// every authenticated user may create.
type SelfAccessReview struct {
	Client kubernetes.Interface
}

// Allowed implements AccessChecker.
func (r SelfAccessReview) Allowed(ctx context.Context, namespace string, p Permission) (bool, error) {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: p.Verb, Group: p.Group,
			Resource: p.Resource, Subresource: p.Subresource}}}
	res, err := r.Client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("checking permission to %s: %w", p, err)
	}
	return res.Status.Allowed, nil
}

// RulesReview answers from one SelfSubjectRulesReview per namespace: the rules the
// authorizers list for the caller there (kubectl auth can-i --list reads the same). Only an
// allow is taken from them — RBAC is purely additive, so a rule that allows p is the answer the
// API server gives — and everything else goes to Fallback (SelfSubjectAccessReviews): a
// permission no rule grants, and every question when the review is incomplete (an authorizer
// such as a webhook could not list its rules). A dozen reviews before a run become one.
type RulesReview struct {
	Client   kubernetes.Interface
	Fallback AccessChecker

	mu    sync.Mutex
	rules map[string]*rulesAnswer
}

type rulesAnswer struct {
	done  chan struct{}
	rules []authorizationv1.ResourceRule
	ok    bool // complete and readable
}

// Allowed implements AccessChecker.
func (r *RulesReview) Allowed(ctx context.Context, namespace string, p Permission) (bool, error) {
	r.mu.Lock()
	if r.rules == nil {
		r.rules = map[string]*rulesAnswer{}
	}
	a, asked := r.rules[namespace]
	if !asked {
		a = &rulesAnswer{done: make(chan struct{})}
		r.rules[namespace] = a
	}
	r.mu.Unlock()
	if !asked {
		review := &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace}}
		res, err := r.Client.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, review, metav1.CreateOptions{})
		if err == nil && !res.Status.Incomplete && res.Status.EvaluationError == "" {
			a.rules, a.ok = res.Status.ResourceRules, true
		}
		close(a.done)
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return false, fmt.Errorf("checking permission to %s: %w", p, context.Cause(ctx))
	}
	if a.ok && rulesAllow(a.rules, p) {
		return true, nil
	}
	return r.Fallback.Allowed(ctx, namespace, p)
}

// rulesAllow is RBAC's rule evaluation for a request without a resource name
// (k8s.io/kubernetes pkg/apis/rbac/v1 evaluation_helpers.go: VerbMatches, APIGroupMatches,
// ResourceMatches).
func rulesAllow(rules []authorizationv1.ResourceRule, p Permission) bool {
	combined := p.Resource
	if p.Subresource != "" {
		combined += "/" + p.Subresource
	}
	for _, rule := range rules {
		if len(rule.ResourceNames) > 0 {
			continue // granted for some names only; a run acts on others too
		}
		if !slices.Contains(rule.Verbs, "*") && !slices.Contains(rule.Verbs, p.Verb) {
			continue
		}
		if !slices.Contains(rule.APIGroups, "*") && !slices.Contains(rule.APIGroups, p.Group) {
			continue
		}
		for _, res := range rule.Resources {
			if res == "*" || res == combined || (p.Subresource != "" && res == "*/"+p.Subresource) {
				return true
			}
		}
	}
	return false
}

// CachedAccess is an AccessChecker that asks each question once per command and can ask
// ahead (Prefetch): the checks before planning and before the lock then cost one round of
// reviews, not two. Errors are not kept: a question that failed is asked again.
type CachedAccess struct {
	Checker AccessChecker

	mu      sync.Mutex
	answers map[accessQuestion]*accessAnswer
}

type accessQuestion struct {
	namespace string
	Permission
}

type accessAnswer struct {
	done    chan struct{}
	allowed bool
	err     error
}

// Allowed implements AccessChecker: the answer given before, the one on its way, or a new one.
func (c *CachedAccess) Allowed(ctx context.Context, namespace string, p Permission) (bool, error) {
	q := accessQuestion{namespace, p}
	c.mu.Lock()
	if c.answers == nil {
		c.answers = map[accessQuestion]*accessAnswer{}
	}
	a, asked := c.answers[q]
	if !asked {
		a = &accessAnswer{done: make(chan struct{})}
		c.answers[q] = a
	}
	c.mu.Unlock()
	if asked {
		select {
		case <-a.done:
		case <-ctx.Done():
			return false, fmt.Errorf("checking permission to %s: %w", p, context.Cause(ctx))
		}
		if a.err == nil {
			return a.allowed, nil
		}
		return c.Checker.Allowed(ctx, namespace, p) // that attempt failed: ask again
	}
	a.allowed, a.err = c.Checker.Allowed(ctx, namespace, p)
	if a.err != nil {
		c.mu.Lock()
		delete(c.answers, q)
		c.mu.Unlock()
	}
	close(a.done)
	return a.allowed, a.err
}

// Prefetch asks the questions a later check will probably ask, without waiting for the
// answers (ctx bounds them); a later Allowed waits for the one on its way.
// The returned wait returns once these questions are answered or given up (ctx ended): call
// it before the command ends, so that none outlives the command that asked (they use its
// client).
func (c *CachedAccess) Prefetch(ctx context.Context, namespace string, perms []Permission) (wait func()) {
	var wg sync.WaitGroup
	for _, p := range perms {
		wg.Go(func() { _, _ = c.Allowed(ctx, namespace, p) })
	}
	return wg.Wait
}

// CheckPermissions refuses, with one line naming every missing verb and
// resource and what needs it, when the caller lacks a permission in needs.
// It runs before the lock is taken, so a run never stops half-way (or
// leaves the lock held) for lack of RBAC.
func CheckPermissions(ctx context.Context, ac AccessChecker, namespace string, needs []NeedFor) error {
	// Asked all at once (a dozen reviews one after the other cost a dozen round trips before
	// every run); the answers keep the order of needs.
	allowed := make([]bool, len(needs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(accessReviewsInFlight)
	for i, n := range needs {
		g.Go(func() error {
			ok, err := ac.Allowed(gctx, namespace, n.Permission)
			allowed[i] = ok
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var missing []string
	for i, n := range needs {
		if !allowed[i] {
			missing = append(missing, fmt.Sprintf("%s (for %s)", n.Permission, n.For))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return Forbiddenf("permission denied in namespace %s: you may not %s; see the RBAC section of the README",
		namespace, strings.Join(missing, ", "))
}

// accessReviewsInFlight bounds the reviews CheckPermissions sends at once: below the client's
// burst (internal/commands/factory.go), so they are not throttled.
const accessReviewsInFlight = 16

// SortedPermissions returns perms ordered for stable output.
func SortedPermissions(perms []Permission) []Permission {
	out := slices.Clone(perms)
	slices.SortFunc(out, func(a, b Permission) int { return strings.Compare(a.String(), b.String()) })
	return out
}
