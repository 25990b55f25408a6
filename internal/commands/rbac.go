package commands

import (
	"context"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func need(lists ...[]ops.Permission) []ops.Permission {
	var out []ops.Permission
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func needExec() []ops.Permission    { return ops.Need("", "pods", "exec", "create") }
func portForward() []ops.Permission { return ops.Need("", "pods", "portforward", "create") }
func secretsGet() []ops.Permission  { return ops.Need("", "secrets", "", "get") }

// checkPermissions is the RBAC preflight of a run: the lock, the audit
// Events, every step's declared needs and the engine's, checked with
// SelfSubjectAccessReviews before the lock is taken.
func (g *Runner) checkPermissions(ctx context.Context, cl *Clients, plan *ops.Plan) error {
	if len(plan.Steps) == 0 {
		return nil
	}
	var extra []ops.NeedFor
	if !g.DisableLocks {
		for _, p := range ops.LockNeeds {
			extra = append(extra, ops.NeedFor{Permission: p, For: "the cluster lock"})
		}
	}
	for _, p := range ops.AuditNeeds {
		extra = append(extra, ops.NeedFor{Permission: p, For: "the audit trail"})
	}
	for _, p := range g.runNeeds(plan.Engine, plan.Operation) {
		extra = append(extra, ops.NeedFor{Permission: p, For: plan.Engine + " " + plan.Operation})
	}
	return ops.CheckPermissions(ctx, cl.access(), plan.Namespace, plan.Needs(extra))
}

// likelyRunNeeds are what checkPermissions will probably ask after planning operation (the
// lock, the audit trail, the engine's calls, pod deletes and waits): asked ahead, with the
// planning check, so that check finds its answers there.
func likelyRunNeeds(disableLocks bool, engineNeeds []ops.Permission) []ops.Permission {
	var out []ops.Permission
	if !disableLocks {
		out = append(out, ops.LockNeeds...)
	}
	out = append(out, ops.AuditNeeds...)
	out = append(out, engineNeeds...)
	out = append(out, ops.PodWaitNeeds...)
	return append(out, ops.Need("", "pods", "", "delete")...)
}

// planNeeds are what computing a plan from live state reads, by engine (EngineKind.PlanNeeds:
// CrateDB connects through a port-forward to a Ready pod with the system password from its
// Secret, etcd and replicated apps run read-only commands in the pods). Checked first, so a
// missing `get pods` is named as such instead of surfacing as "no Ready pod".
func (g *GlobalOptions) planNeeds(engine string) []ops.Permission {
	base := ops.Need("", "pods", "", "get", "list")
	for _, k := range g.Engines {
		if k.Name == engine && k.PlanNeeds != nil {
			base = append(base, k.PlanNeeds(g.engineFlagsOf(k.Name))...)
		}
	}
	return base
}

// runNeeds are the permissions of the API calls engine's steps and gates make for operation
// (EngineKind.RunNeeds).
func (f *Factory) runNeeds(engine, operation string) []ops.Permission {
	for _, k := range f.Engines {
		if k.Name == engine {
			return k.RunNeeds[operation]
		}
	}
	return nil
}

// checkPlanPermissions is the RBAC check before planning (dry-run too). Unless this is a dry
// run, what running operation will probably need is asked at the same time.
func (g *Runner) checkPlanPermissions(ctx context.Context, cl *Clients, c *ops.Cluster, operation string) error {
	var needs []ops.NeedFor
	for _, p := range g.Clusters.planNeeds(c.Engine) {
		needs = append(needs, ops.NeedFor{Permission: p, For: "planning from live state"})
	}
	if !g.DryRun && operation != "" {
		// Asked at the same time as needs, so waiting costs no round trip of its own; joined
		// here so that no review outlives the command (they used its client after it ended).
		defer cl.access().Prefetch(ctx, c.Namespace, likelyRunNeeds(g.DisableLocks, g.runNeeds(c.Engine, operation)))()
	}
	return ops.CheckPermissions(ctx, cl.access(), c.Namespace, needs)
}
