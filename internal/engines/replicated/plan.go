package replicated

import (
	"context"
	"fmt"
	"strings"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// prepared is what every plan starts from.
type prepared struct {
	s   *site
	cfg *Config
	ms  []member
}

// prepare resolves the configuration and checks it before anything is run
// (exit 2 without a single exec), then reads the pods.
func (e *Engine) prepare(ctx context.Context, c *ops.Cluster, primaries *int32) (*prepared, error) {
	s, err := newSite(c)
	if err != nil {
		return nil, err
	}
	var extra *Layer
	if primaries != nil {
		if *primaries < 0 {
			return nil, ops.Usagef("--primaries must not be negative, got %d", *primaries)
		}
		extra = PrimariesLayer(*primaries, "--primaries")
	}
	cfg, err := e.config(c, extra)
	if err != nil {
		return nil, err
	}
	if err := cfg.Require(CmdSequence, CmdPrimary); err != nil {
		return nil, err
	}
	s.container = cfg.Container
	ms, err := e.members(ctx, nil, s)
	if err != nil {
		return nil, err
	}
	return &prepared{s: s, cfg: cfg, ms: ms}, nil
}

func seqNote(ms []member, seqs map[string]seq) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		parts = append(parts, m.Name+"="+seqs[m.Name].String())
	}
	return "sequence numbers: " + strings.Join(parts, ", ")
}

func rolesNote(ms []member) string {
	var parts []string
	for _, r := range []string{RolePrimary, RoleSecondary, RoleFailed} {
		if l := names(withRole(ms, r, 1<<30)); len(l) > 0 {
			parts = append(parts, r+": "+strings.Join(l, ", "))
		}
	}
	for _, m := range ms {
		if m.Stale != "" {
			parts = append(parts, fmt.Sprintf("not trusted: %s (label %s)", m.Name, m.Stale))
		}
	}
	if len(parts) == 0 {
		return "roles: none yet"
	}
	return "roles: " + strings.Join(parts, "; ")
}

// PlanBootstrap plans starting the roles of a new cluster: the first
// primary (seed) on the highest sequence number, further primaries, then
// secondaries, one at a time.
func (e *Engine) PlanBootstrap(ctx context.Context, c *ops.Cluster, r ops.BootstrapRequest) (*ops.Plan, error) {
	pr, err := e.prepare(ctx, c, r.Primaries)
	if err != nil {
		return nil, err
	}
	s, cfg := pr.s, pr.cfg
	n, p := s.desired, int(cfg.Primaries)
	if p < 1 {
		return nil, ops.Usagef("bootstrap needs at least 1 primary, got %d", p)
	}
	if p > n {
		return nil, ops.Usagef("%d primaries wanted but StatefulSet %s has %d replicas; scale it first or lower --primaries", p, s.sts, n)
	}
	if err := checkSettled(s, pr.ms, n); err != nil {
		return nil, err
	}
	seqs, err := e.sequences(ctx, s, cfg, names(pr.ms), true)
	if err != nil {
		return nil, err
	}
	plan := ops.NewPlan("bootstrap", c, ops.EngineReplicated, fmt.Sprintf("--primaries %d", p))
	plan.Destructive = true
	plan.Notes = append(plan.Notes, seqNote(pr.ms, seqs), rolesNote(pr.ms))
	e.planRoles(plan, s, cfg, pr.ms, seqs, n, p)
	if len(plan.Steps) == 0 {
		plan.Notes = append(plan.Notes, fmt.Sprintf("already %d primaries and every other pod in its role", p))
	}
	return plan, nil
}

// PlanScale plans `scale --replicas N [--primaries P]`: stop the roles of
// pods the scale-down removes, resize the StatefulSet and wait, then stop
// extra primaries and start missing primaries and secondaries.
func (e *Engine) PlanScale(ctx context.Context, c *ops.Cluster, req ops.ScaleRequest) (*ops.Plan, error) {
	if req.Masters != nil || len(req.Data) > 0 {
		return nil, ops.Usagef("replicated clusters scale with --replicas N and/or --primaries P only")
	}
	pr, err := e.prepare(ctx, c, req.Primaries)
	if err != nil {
		return nil, err
	}
	s, cfg := pr.s, pr.cfg
	from := s.desired
	n := from
	if req.Replicas != nil {
		n = int(*req.Replicas)
	}
	if n < 1 {
		return nil, ops.Usagef("--replicas must be at least 1, got %d", n)
	}
	p := int(cfg.Primaries)
	if p > n {
		return nil, ops.Usagef("%d primaries wanted but only %d replicas; lower --primaries or raise --replicas", p, n)
	}
	if err := checkSettled(s, pr.ms, from); err != nil {
		return nil, err
	}
	seqs, err := e.sequences(ctx, s, cfg, names(pr.ms), true)
	if err != nil {
		return nil, err
	}
	plan := ops.NewPlan("scale", c, ops.EngineReplicated, fmt.Sprintf("--replicas %d --primaries %d", n, p))
	plan.Destructive = n < from
	plan.Notes = append(plan.Notes, seqNote(pr.ms, seqs), rolesNote(pr.ms))

	// Pods the scale-down removes: stop their roles first, highest ordinal first.
	for i := len(pr.ms) - 1; i >= 0; i-- {
		m := pr.ms[i]
		if m.Ordinal < n || (m.Role != RolePrimary && m.Role != RoleSecondary) {
			continue
		}
		if !cfg.Has(CmdStop) {
			plan.Notes = append(plan.Notes, fmt.Sprintf("%s %s is removed without stop (no stop command configured)", m.Role, m.Name))
			continue
		}
		plan.Steps = append(plan.Steps, e.stopBeyondStep(s, cfg, m))
	}
	if n != from {
		plan.Steps = append(plan.Steps, e.replicasStep(s, from, n))
	}
	// The members after resizing: new pods have no role and no number yet.
	var after []member
	for _, m := range pr.ms {
		if m.Ordinal < n {
			after = append(after, m)
		}
	}
	for o := from; o < n; o++ {
		after = append(after, member{Name: s.podName(o), Ordinal: o, Ready: true})
		seqs[s.podName(o)] = seq{Note: "new pod"}
	}
	if p == 0 && len(withRole(after, RoleSecondary, n)) > 0 {
		return nil, ops.Usagef("--primaries 0 would leave secondaries %s without a primary; keep at least 1 primary",
			strings.Join(names(withRole(after, RoleSecondary, n)), ", "))
	}
	if len(withRole(after, RolePrimary, n)) > p {
		if !cfg.Has(CmdStop) {
			return nil, ops.Usagef("replicated configuration: lowering the number of primaries to %d needs the stop command (replicated.commands.stop)", p)
		}
		plan.Destructive = true
	}
	e.planRoles(plan, s, cfg, after, seqs, n, p)
	if len(plan.Steps) == 0 {
		plan.Notes = append(plan.Notes, fmt.Sprintf("already %d pods with %d primaries and every other pod in its role", n, p))
	}
	return plan, nil
}

// planRoles appends the role steps, simulating them on the plan-time state
// to show which pod each step is expected to pick. Steps count members, so
// a re-run skips what an earlier run finished.
func (e *Engine) planRoles(plan *ops.Plan, s *site, cfg *Config, ms []member, seqs map[string]seq, n, p int) {
	sim := make([]member, len(ms))
	copy(sim, ms)
	set := func(name, role string) {
		for i := range sim {
			if sim[i].Name == name {
				sim[i].Role = role
			}
		}
	}
	none := map[string]bool{}
	for cp := len(withRole(sim, RolePrimary, n)); cp > p; cp-- {
		m := stopOrder(withRole(sim, RolePrimary, n), seqs)[0]
		plan.Steps = append(plan.Steps, e.demoteStep(s, cfg, cp-1, n, m.Name, seqs[m.Name]))
		set(m.Name, "")
	}
	for k := len(withRole(sim, RolePrimary, n)) + 1; k <= p; k++ {
		planned := ""
		if c := rank(eligible(sim, RolePrimary, n, none), seqs); len(c) > 0 {
			planned = c[0].Name
			set(planned, RolePrimary)
		}
		plan.Steps = append(plan.Steps, e.fillStep(s, cfg, RolePrimary, k, p, n, planned, seqs[planned]))
	}
	if !cfg.Has(CmdSecondary) || p == 0 {
		if p < n {
			plan.Notes = append(plan.Notes, "no secondary command configured: pods that are not primaries keep no role")
		}
		return
	}
	want := n - p - len(withRole(sim, RoleFailed, n))
	for k := len(withRole(sim, RoleSecondary, n)) + 1; k <= want; k++ {
		planned := ""
		if c := rank(eligible(sim, RoleSecondary, n, none), seqs); len(c) > 0 {
			planned = c[0].Name
			set(planned, RoleSecondary)
		}
		plan.Steps = append(plan.Steps, e.fillStep(s, cfg, RoleSecondary, k, want, n, planned, seqs[planned]))
	}
}
