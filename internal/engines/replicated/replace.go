package replicated

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// replaceRoleKey journals the role a pod had before its replacement: the
// recreated pod carries no role label, so a re-run after a crash reads it
// from here.
func replaceRoleKey(pod string) string { return "replicated.replace-role/" + pod }

// replaceRestoredKey marks a pod whose role was given back, so a re-run
// does not run the role command a second time.
func replaceRestoredKey(pod string) string { return "replicated.replace-restored/" + pod }

// roleNone is journaled for a pod that had no role (or was failed): it is
// replaced and left without one.
const roleNone = "none"

// PlanReplacement implements ops.PodReplacer: per pod, run stop (a failing
// stop does not prevent the replacement), delete the pod and its PVCs, wait
// for it to be Ready on new PVCs, then give it its role back.
func (e *Engine) PlanReplacement(ctx context.Context, c *ops.Cluster, req ops.ReplaceRequest) (*ops.Plan, error) {
	// Roles are given back one pod at a time, as in a rolling restart:
	// replacing several members at once could take every primary away.
	if req.MaxConcurrent > 1 {
		return nil, ops.Usagef("replicated clusters replace one pod at a time; --max-concurrent must be 1, got %d", req.MaxConcurrent)
	}
	pr, err := e.prepare(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	roles := map[string]string{}
	for _, m := range pr.ms {
		roles[m.Name] = m.Role
	}
	for _, name := range req.Pods {
		if roles[name] == RoleSecondary && !pr.cfg.Has(CmdSecondary) {
			return nil, ops.Usagef("replicated configuration: %s is a secondary but no secondary command is configured to start it again after the replacement", name)
		}
	}
	h := &replaceHooks{e: e, s: pr.s, cfg: pr.cfg, roles: roles}
	p, err := (&ops.Replacement{Client: e.Client, Hooks: h}).Plan(c, ops.EngineReplicated, req)
	if err != nil {
		return nil, err
	}
	p.Notes = append(p.Notes, rolesNote(pr.ms))
	if !pr.cfg.Has(CmdStop) {
		p.Notes = append(p.Notes, "no stop command is configured: members are deleted without being stopped first")
	}
	return p, nil
}

// replaceHooks stop a member before its replacement and give it its role
// back after.
type replaceHooks struct {
	e   *Engine
	s   *site
	cfg *Config
	// roles are the labels at plan time, shown in the plan; at run time
	// the live label (then the journal) is what counts.
	roles map[string]string
}

// Before implements ops.ReplaceHooks: journal the role, run stop.
func (h *replaceHooks) Before(_ *ops.Cluster, batch []ops.Pod) []*ops.Step {
	out := make([]*ops.Step, 0, len(batch))
	for _, p := range batch {
		details := []string{"journal the pod's role (" + orDash(h.roles[p.Name]) + ") so a re-run gives it back"}
		if h.cfg.Has(CmdStop) {
			details = append(details, "if stop fails (or the pod is not running): go on, the pod is deleted anyway")
		}
		desc := fmt.Sprintf("run stop in %s before it is replaced", p.Name)
		if !h.cfg.Has(CmdStop) {
			desc = fmt.Sprintf("remember the role of %s before it is replaced (no stop command configured)", p.Name)
		}
		out = append(out, &ops.Step{
			ID: "replace/stop/" + p.Name, Group: h.s.sts, Target: "pod/" + p.Name, Mutating: true,
			Description: desc, Details: details,
			Action: func(ctx context.Context, sc *ops.StepContext) error {
				return h.rememberRole(ctx, sc, p.Name)
			},
			Verify: func(ctx context.Context, sc *ops.StepContext) error {
				return h.stop(ctx, sc, p.Name)
			},
		})
	}
	return out
}

// rememberRole journals the pod's live role once; a re-run keeps the first
// value, because by then the pod may have been recreated without a label.
func (h *replaceHooks) rememberRole(ctx context.Context, sc *ops.StepContext, pod string) error {
	if sc.Get(replaceRoleKey(pod)) != "" {
		return nil
	}
	live, err := h.e.getPod(ctx, sc, h.s, pod)
	if err != nil {
		return err
	}
	role := roleNone
	if live != nil {
		if r := live.Labels[LabelRole]; r == RolePrimary || r == RoleSecondary {
			role = r
		}
	}
	return sc.Set(ctx, replaceRoleKey(pod), role)
}

// stop runs stop in the pod. A failure is reported and ignored: the pod
// and its data are deleted next, which stops the member for good.
func (h *replaceHooks) stop(ctx context.Context, sc *ops.StepContext, pod string) error {
	if !h.cfg.Has(CmdStop) {
		return nil
	}
	live, err := h.e.getPod(ctx, sc, h.s, pod)
	if err != nil || live == nil {
		return err
	}
	m := member{Name: pod, UID: live.UID, Role: live.Labels[LabelRole]}
	if live.DeletionTimestamp != nil || live.Status.Phase != corev1.PodRunning {
		// No exec is possible into a pod that is not running.
		sc.Waiting(fmt.Sprintf("pod %s is %s, not running: not stopping it, it is replaced anyway", pod, live.Status.Phase))
		return nil
	}
	sc.Waiting("running stop in " + pod)
	if _, _, err := h.e.run(ctx, sc, h.s, h.cfg, CmdStop, pod, nil); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("stopping %s before its replacement: %w", pod, err)
		}
		bctx, cancel := bookkeeping(ctx)
		defer cancel()
		sc.Waiting(fmt.Sprintf("%v; replacing %s anyway", err, pod))
		sc.Audit(bctx, h.s.podRef(m), "DbopsReplicatedStopFailed", fmt.Sprintf("%v; pod %s is replaced anyway", err, pod))
		return nil
	}
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	// A stopped member holds no role; the label would claim it still does
	// until the pod is gone.
	if err := h.e.setRole(bctx, sc, h.s, pod, ""); err != nil {
		return err
	}
	sc.Audit(bctx, h.s.podRef(m), "DbopsReplicatedStop", fmt.Sprintf("ran stop in pod %s (was %s) before replacing it", pod, orDash(m.Role)))
	return nil
}

// After implements ops.ReplaceHooks: give the new member its role back.
func (h *replaceHooks) After(_ *ops.Cluster, batch []ops.Pod) []*ops.Step {
	out := make([]*ops.Step, 0, len(batch))
	for _, p := range batch {
		var desc string
		label := fmt.Sprintf("then label it %s=%s", LabelRole, h.roles[p.Name])
		switch h.roles[p.Name] {
		case RolePrimary:
			desc = fmt.Sprintf("start %s as primary again with the running primaries' DNS names (with none running: elect the first primary by sequence number, %s becomes secondary if it loses)", p.Name, p.Name)
		case RoleSecondary:
			desc = fmt.Sprintf("start %s as secondary again with the primaries' DNS names", p.Name)
		default:
			desc = fmt.Sprintf("give %s its journaled role back, if it had one", p.Name)
			label = fmt.Sprintf("then label it %s=<journaled role>", LabelRole)
		}
		out = append(out, &ops.Step{
			ID: "replace/role/" + p.Name, Group: h.s.sts, Target: "pod/" + p.Name, Mutating: true,
			Description: desc,
			Details: []string{
				label,
				fmt.Sprintf("if the command fails: label it %s=%s and stop", LabelRole, RoleFailed),
			},
			Verify: func(ctx context.Context, sc *ops.StepContext) error {
				return h.restore(ctx, sc, p.Name)
			},
		})
	}
	return out
}

// restore gives pod the role journaled before its replacement.
func (h *replaceHooks) restore(ctx context.Context, sc *ops.StepContext, pod string) error {
	role := sc.Get(replaceRoleKey(pod))
	if (role != RolePrimary && role != RoleSecondary) || sc.Get(replaceRestoredKey(pod)) != "" {
		return nil
	}
	ms, err := h.e.members(ctx, sc, h.s)
	if err != nil {
		return err
	}
	var others []string
	for _, o := range withRole(ms, RolePrimary, 1<<30) {
		if o.Name != pod && o.Ready {
			others = append(others, o.Name)
		}
	}
	if role == RolePrimary && len(others) == 0 {
		// The only primary was replaced: its fresh volume holds nothing, so
		// the slot goes by sequence number as at bootstrap.
		if err := h.elect(ctx, sc, pod); err != nil {
			return err
		}
	} else if err := h.e.giveRole(ctx, sc, h.s, h.cfg, pod, role, "replacement"); err != nil {
		return err
	}
	return sc.Set(ctx, replaceRestoredKey(pod), "1")
}

// elect fills the free first-primary slot the way bootstrap does, then
// makes pod a secondary if another member won it.
func (h *replaceHooks) elect(ctx context.Context, sc *ops.StepContext, pod string) error {
	desired, err := h.e.replicas(ctx, h.s)
	if err != nil {
		return err
	}
	if err := h.e.fill(ctx, sc, h.s, h.cfg, RolePrimary, 1, desired); err != nil {
		return fmt.Errorf("electing a primary after replacing %s: %w", pod, err)
	}
	// fill journals its choice under the slot key; a later election in
	// this run must choose afresh.
	if err := sc.Set(ctx, slotKey(RolePrimary, 1), ""); err != nil {
		return err
	}
	live, err := h.e.getPod(ctx, sc, h.s, pod)
	if err != nil {
		return err
	}
	if live == nil || live.Labels[LabelRole] != "" || !h.cfg.Has(CmdSecondary) {
		return nil
	}
	return h.e.giveRole(ctx, sc, h.s, h.cfg, pod, RoleSecondary, "replacement")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
