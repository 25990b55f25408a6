package replicated

import (
	"context"
	"fmt"
	"strconv"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// PlanRestart plans a rolling restart: pods without a role first, then
// secondaries, primaries last, one at a time; each is given its role again
// (its command run with the primaries' DNS names) before the next.
func (e *Engine) PlanRestart(ctx context.Context, c *ops.Cluster, opts ops.RestartOptions) (*ops.Plan, error) {
	// Roles are given back one pod at a time; batches would stop several
	// members at once.
	if (opts.Mode != "" && opts.Mode != ops.ModePod) || opts.BatchSize > 1 {
		return nil, ops.Usagef("replicated clusters restart one pod at a time (secondaries first, primaries last); --mode %s is not supported", opts.Mode)
	}
	pr, err := e.prepare(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	roles := map[string]string{}
	for _, m := range pr.ms {
		roles[m.Name] = m.Role
	}
	if len(withRole(pr.ms, RoleSecondary, 1<<30)) > 0 && !pr.cfg.Has(CmdSecondary) {
		return nil, ops.Usagef("replicated configuration: pods are secondaries but no secondary command is configured to start them again after the restart")
	}
	rr := &ops.RollingRestart{Client: e.Client, Gate: &restartGate{e: e, s: pr.s, cfg: pr.cfg, roles: roles}}
	p, err := rr.Plan(c, ops.EngineReplicated, opts)
	if err != nil {
		return nil, err
	}
	p.Notes = append(p.Notes, rolesNote(pr.ms), "secondaries restart first, primaries last; each pod is given its role again before the next")
	return p, nil
}

// restartGate remembers each pod's role before it is deleted and gives it
// back once the new pod is Ready.
type restartGate struct {
	e     *Engine
	s     *site
	cfg   *Config
	roles map[string]string
}

// StepRank implements ops.RestartOrderer: steps holding only secondaries (or pods without
// a role) go first, steps holding a primary last — in zone and batch modes too.
func (g *restartGate) StepRank(pods []ops.Pod) int {
	rank := 0
	for _, p := range pods {
		switch g.roles[p.Name] {
		case RoleSecondary:
			rank = max(rank, 1)
		case RolePrimary:
			rank = max(rank, 2)
		}
	}
	return rank
}

// Describe implements ops.RestartGate.
func (g *restartGate) Describe(p ops.Pod) ([]string, []string) {
	switch g.roles[p.Name] {
	case RolePrimary:
		return nil, []string{"after: run primary with the other primaries' DNS names and label it " + LabelRole + "=" + RolePrimary}
	case RoleSecondary:
		return nil, []string{"after: run secondary with the primaries' DNS names and label it " + LabelRole + "=" + RoleSecondary}
	}
	return nil, nil
}

// Before implements ops.RestartGate: the role is journaled, because the
// recreated pod no longer carries the label.
func (g *restartGate) Before(ctx context.Context, sc *ops.StepContext, p ops.Pod) error {
	if sc.Get(restartRoleKey(p.Name)) != "" {
		return nil
	}
	role := g.roles[p.Name]
	if role == "" {
		role = "none"
	}
	return sc.Set(ctx, restartRoleKey(p.Name), role)
}

// After implements ops.RestartGate.
func (g *restartGate) After(ctx context.Context, sc *ops.StepContext, p ops.Pod) error {
	role := sc.Get(restartRoleKey(p.Name))
	if role != RolePrimary && role != RoleSecondary {
		return nil
	}
	return g.e.giveRole(ctx, sc, g.s, g.cfg, p.Name, role, "restart")
}

// giveRole runs role's command in pod, a recreated member, with the DNS
// names of the other running primaries, and labels it; after is what
// recreated it (for messages). A failing command marks the pod failed.
func (e *Engine) giveRole(ctx context.Context, sc *ops.StepContext, s *site, cfg *Config, pod, role, after string) error {
	ms, err := e.members(ctx, sc, s)
	if err != nil {
		return err
	}
	m, ok := find(ms, pod)
	if !ok {
		return fmt.Errorf("pod %s vanished after its %s", pod, after)
	}
	if m.Role == role {
		return nil
	}
	var others []string
	for _, o := range withRole(ms, RolePrimary, 1<<30) {
		if o.Name != pod {
			others = append(others, o.Name)
		}
	}
	cmd, args := CmdPrimary, s.dnsNames(others)
	if role == RoleSecondary {
		if len(others) == 0 {
			return ops.Preconditionf("no running primary to start secondary %s against after its %s", pod, after)
		}
		cmd = CmdSecondary
	}
	sc.Waiting(fmt.Sprintf("running %s in %s", cmd, pod))
	if _, _, err := e.run(ctx, sc, s, cfg, cmd, pod, args); err != nil {
		if ctx.Err() == nil {
			bctx, cancel := bookkeeping(ctx)
			if e.setRole(bctx, sc, s, pod, RoleFailed) == nil {
				sc.Audit(bctx, s.podRef(m), "DbopsReplicatedFailed", fmt.Sprintf("%v after the %s; pod %s marked failed", err, after, pod))
			}
			cancel()
		}
		return fmt.Errorf("giving %s its role %s back after the %s: %w", pod, role, after, err)
	}
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	if err := e.setRole(bctx, sc, s, pod, role); err != nil {
		return err
	}
	sc.Audit(bctx, s.podRef(m), "DbopsReplicatedRole", fmt.Sprintf("ran %s in pod %s after its %s; it is %s again", cmd, pod, after, role))
	return nil
}

// Health reports each member's role, sequence number and status command
// output.
func (e *Engine) Health(ctx context.Context, c *ops.Cluster) (*ops.Health, error) {
	s, err := newSite(c)
	if err != nil {
		return &ops.Health{Status: "unknown", Message: err.Error()}, nil
	}
	cfg, cerr := e.config(c, nil)
	if cerr != nil {
		cfg = &Config{Primaries: DefaultPrimaries, Commands: map[string]*Command{}}
	}
	s.container = cfg.Container
	ms, err := e.members(ctx, nil, s)
	if err != nil {
		return nil, err
	}
	h := &ops.Health{Table: &ops.Table{Title: "Members", Columns: []string{"POD", "ROLE", "SEQUENCE", "STATUS"}},
		Details: map[string]string{}}
	for _, m := range ms {
		role := m.Role
		if role == "" {
			role = "-"
		}
		sq := "-"
		if cfg.Has(CmdSequence) && m.Ready {
			q, err := e.sequence(ctx, s, cfg, m.Name)
			switch {
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case err != nil:
				sq = "invalid"
			default:
				sq = q.String()
			}
		}
		status := "Ready"
		if !m.Ready {
			status = "not Ready"
		}
		if cfg.Has(CmdStatus) && m.Ready {
			out, _, err := e.run(ctx, nil, s, cfg, CmdStatus, m.Name, nil)
			if err != nil {
				status = "status failed: " + shortErr(err)
			} else if l := lastLine(out); l != "" {
				status = l
			}
		}
		h.Table.Rows = append(h.Table.Rows, []string{m.Name, role, sq, status})
	}
	prim := len(withRole(ms, RolePrimary, 1<<30))
	sec := len(withRole(ms, RoleSecondary, 1<<30))
	failed := len(withRole(ms, RoleFailed, 1<<30))
	h.Details["primaries"] = strconv.Itoa(prim)
	h.Details["wantPrimaries"] = strconv.Itoa(int(cfg.Primaries))
	h.Details["secondaries"] = strconv.Itoa(sec)
	h.Details["failed"] = strconv.Itoa(failed)
	switch {
	case prim == 0:
		h.Status = "no-primary"
	case prim == int(cfg.Primaries) && failed == 0 && (!cfg.Has(CmdSecondary) || prim+sec == len(ms)):
		h.Status = "healthy"
	default:
		h.Status = "degraded"
	}
	h.Message = fmt.Sprintf("%d primaries (want %d), %d secondaries, %d failed", prim, cfg.Primaries, sec, failed)
	if cerr != nil {
		h.Message += "; configuration: " + cerr.Error()
	}
	return h, nil
}
