package commands

import (
	"context"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// engineNeeds are the permissions of API calls that engines make inside
// their steps and health gates (exec for crash and etcdctl, port-forwards
// for PostgreSQL, StatefulSet updates and replica patches, ConfigMap updates, pod labels), by engine
// and operation. Steps built by internal/ops declare their own Needs; the
// engines' steps do not yet, so their calls are listed here from the
// engines' code. An entry too short makes a run stop half-way for lack of
// RBAC; too long refuses a user who could have run it.
var engineNeeds = map[string]map[string][]ops.Permission{
	ops.EngineCrateDB: {
		"restart":   need(needExec(), portForward(), secretsGet()),
		"scale":     need(needExec(), portForward(), secretsGet(), ops.Need("apps", "statefulsets", "", "update", "patch"), ops.PodWaitNeeds),
		"bootstrap": need(needExec(), portForward(), secretsGet(), ops.PodWaitNeeds),
		"replace":   need(needExec(), portForward(), secretsGet(), ops.PodWaitNeeds),
	},
	ops.EngineEtcd: {
		"restart": need(needExec()),
		"scale": need(needExec(), ops.Need("apps", "statefulsets", "", "patch"), ops.Need("", "configmaps", "", "get", "create", "update"),
			ops.Need("", "persistentvolumeclaims", "", "get", "list", "delete"), ops.PodWaitNeeds),
		"replace": need(needExec(), ops.Need("", "configmaps", "", "get", "create", "update"),
			ops.Need("", "persistentvolumeclaims", "", "get", "list", "delete"), ops.Need("", "pods", "", "delete"), ops.PodWaitNeeds),
	},
	ops.EngineReplicated: {
		"bootstrap": need(needExec(), ops.Need("", "pods", "", "patch", "delete"), ops.PodWaitNeeds),
		"restart":   need(needExec(), ops.Need("", "pods", "", "patch")),
		"scale":     need(needExec(), ops.Need("", "pods", "", "patch", "delete"), ops.Need("apps", "statefulsets", "", "patch"), ops.PodWaitNeeds),
		"replace":   need(needExec(), ops.Need("", "pods", "", "patch", "delete"), ops.PodWaitNeeds),
	},
}

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
	for _, p := range engineNeeds[plan.Engine][plan.Operation] {
		extra = append(extra, ops.NeedFor{Permission: p, For: plan.Engine + " " + plan.Operation})
	}
	return ops.CheckPermissions(ctx, cl.access(), plan.Namespace, plan.Needs(extra))
}

// likelyRunNeeds are what checkPermissions will probably ask after planning operation (the
// lock, the audit trail, the engine's calls, pod deletes and waits): asked ahead, with the
// planning check, so that check finds its answers there.
func likelyRunNeeds(disableLocks bool, engine, operation string) []ops.Permission {
	var out []ops.Permission
	if !disableLocks {
		out = append(out, ops.LockNeeds...)
	}
	out = append(out, ops.AuditNeeds...)
	out = append(out, engineNeeds[engine][operation]...)
	out = append(out, ops.PodWaitNeeds...)
	return append(out, ops.Need("", "pods", "", "delete")...)
}

// planNeeds are what computing a plan from live state reads, by engine:
// CrateDB connects through a port-forward to a Ready pod (after a get of
// the pod) with the system password from its Secret, etcd and replicated
// apps run read-only commands in the pods. Checked first, so a missing
// `get pods` is named as such instead of surfacing as "no Ready pod".
func (g *GlobalOptions) planNeeds(engine string) []ops.Permission {
	base := ops.Need("", "pods", "", "get", "list")
	switch engine {
	case ops.EngineCrateDB:
		base = append(base, secretsGet()...)
		if pf, ok := g.engineFlagsOf(engine).(interface{ PortForwards() bool }); !ok || pf.PortForwards() {
			base = append(base, portForward()...)
		}
	case ops.EngineEtcd, ops.EngineReplicated:
		base = append(base, needExec()...)
	}
	return base
}

// checkPlanPermissions is the RBAC check before planning (dry-run too). Unless this is a dry
// run, what running operation will probably need is asked at the same time.
func (g *Runner) checkPlanPermissions(ctx context.Context, cl *Clients, c *ops.Cluster, operation string) error {
	var needs []ops.NeedFor
	for _, p := range g.Clusters.planNeeds(c.Engine) {
		needs = append(needs, ops.NeedFor{Permission: p, For: "planning from live state"})
	}
	if !g.DryRun && operation != "" {
		cl.access().Prefetch(ctx, c.Namespace, likelyRunNeeds(g.DisableLocks, c.Engine, operation))
	}
	return ops.CheckPermissions(ctx, cl.access(), c.Namespace, needs)
}
