package replicated

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// bookkeepingTimeout bounds the label patch and audit event after a command
// finished: they must not be lost to a Ctrl-C arriving just then.
const bookkeepingTimeout = 15 * time.Second

// Journal keys. Decisions are stored before the command runs, so a re-run
// after a crash continues with the same pod instead of choosing again.
const (
	keyFailed = "replicated.failed"
)

func slotKey(role string, k int) string { return fmt.Sprintf("replicated.slot/%s/%d", role, k) }
func demoteKey(k int) string            { return fmt.Sprintf("replicated.demote/%d", k) }
func restartRoleKey(pod string) string  { return "replicated.restart-role/" + pod }
func bookkeeping(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), bookkeepingTimeout)
}

// failedSet reads the pods this run marked failed.
func failedSet(sc *ops.StepContext) map[string]bool {
	out := map[string]bool{}
	for _, p := range strings.Split(sc.Get(keyFailed), ",") {
		if p != "" {
			out[p] = true
		}
	}
	return out
}

func addFailed(ctx context.Context, sc *ops.StepContext, pod string) error {
	f := failedSet(sc)
	if f[pod] {
		return nil
	}
	f[pod] = true
	list := make([]string, 0, len(f))
	for p := range f {
		list = append(list, p)
	}
	slices.Sort(list)
	return sc.Set(ctx, keyFailed, strings.Join(list, ","))
}

// roleCommand picks the command and arguments that give pod role.
func roleCommand(s *site, cfg *Config, role string, primaries []string) (string, []string) {
	if role == RoleSecondary {
		return CmdSecondary, s.dnsNames(primaries)
	}
	if len(primaries) == 0 {
		if cfg.Has(CmdSeed) {
			return CmdSeed, nil
		}
		return CmdPrimary, nil
	}
	return CmdPrimary, s.dnsNames(primaries)
}

// eligible lists the members that may take role: Ready, below the desired
// size, not failed (label or this run) and not already holding it (or, for
// secondaries, any role).
func eligible(ms []member, role string, desired int, failed map[string]bool) []member {
	var out []member
	for _, m := range ms {
		switch {
		case m.Ordinal >= desired, !m.Ready, m.Deleting, m.Role == RoleFailed, failed[m.Name], m.Role == RolePrimary:
			continue
		case role == RoleSecondary && m.Role == RoleSecondary:
			continue
		}
		out = append(out, m)
	}
	return out
}

func find(ms []member, name string) (member, bool) {
	i := slices.IndexFunc(ms, func(m member) bool { return m.Name == name })
	if i < 0 {
		return member{}, false
	}
	return ms[i], true
}

// fillStep starts one more member with role, so that k hold it.
func (e *Engine) fillStep(s *site, cfg *Config, role string, k, of, desired int, planned string, plannedSeq seq) *ops.Step {
	var desc string
	cmd, _ := roleCommand(s, cfg, role, nil)
	switch {
	case role == RolePrimary && k == 1:
		desc = fmt.Sprintf("start the first primary: run %s on the pod with the highest sequence number (planned: %s, sequence %s)", cmd, planned, plannedSeq)
	case role == RolePrimary:
		desc = fmt.Sprintf("start primary %d of %d: run primary with the running primaries' DNS names on the pod with the highest remaining sequence number (planned: %s, sequence %s)",
			k, of, planned, plannedSeq)
	default:
		desc = fmt.Sprintf("start secondary %d of %d: run secondary with the primaries' DNS names (planned: %s, sequence %s)", k, of, planned, plannedSeq)
	}
	target := "pod/" + planned
	if planned == "" {
		target = "pod/?"
	}
	return &ops.Step{
		ID: fmt.Sprintf("%s/%d", role, k), Group: s.sts, Target: target, Mutating: true, Description: desc,
		Preconditions: []string{fmt.Sprintf("StatefulSet %s has exactly %d pods, none Pending", s.sts, desired)},
		Details: []string{
			fmt.Sprintf("then label the pod %s=%s", LabelRole, role),
			fmt.Sprintf("if the command fails: label it %s=%s, run stop (delete the pod if stop fails too) and try the next candidate", LabelRole, RoleFailed),
		},
		Precheck: func(ctx context.Context, sc *ops.StepContext) (bool, error) {
			ms, err := e.members(ctx, sc, s)
			if err != nil {
				return false, err
			}
			if err := checkSettled(s, ms, desired); err != nil {
				return false, err
			}
			return len(withRole(ms, role, desired)) >= k, nil
		},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			return e.fill(ctx, sc, s, cfg, role, k, desired)
		},
	}
}

// fill runs role's command on the best candidate until one succeeds or no
// candidate is left.
func (e *Engine) fill(ctx context.Context, sc *ops.StepContext, s *site, cfg *Config, role string, k, desired int) error {
	key := slotKey(role, k)
	for {
		ms, err := e.members(ctx, sc, s)
		if err != nil {
			return err
		}
		if len(withRole(ms, role, desired)) >= k {
			return nil
		}
		primaries := names(withRole(ms, RolePrimary, desired))
		if role == RoleSecondary && len(primaries) == 0 {
			return ops.Preconditionf("no running primary to start secondaries against; run bootstrap first")
		}
		cands := eligible(ms, role, desired, failedSet(sc))
		m, ok := find(cands, sc.Get(key))
		if !ok {
			if len(cands) == 0 {
				failed := slices.Sorted(mapsKeys(failedSet(sc)))
				return ops.Preconditionf("no candidate left for %s %d (failed this run: %s); the failure is recorded and running members are left as they are",
					role, k, orNone(failed))
			}
			seqs, err := e.sequences(ctx, s, cfg, names(cands), false)
			if err != nil {
				return err
			}
			m = rank(cands, seqs)[0]
			if err := sc.Set(ctx, key, m.Name); err != nil {
				return err
			}
			sc.Waiting(fmt.Sprintf("chose %s for %s %d (sequence %s)", m.Name, role, k, seqs[m.Name]))
		}
		cmd, args := roleCommand(s, cfg, role, primaries)
		sc.Waiting(fmt.Sprintf("running %s in %s", cmd, m.Name))
		_, _, runErr := e.run(ctx, sc, s, cfg, cmd, m.Name, args)
		if runErr == nil {
			bctx, cancel := bookkeeping(ctx)
			err := e.setRole(bctx, sc, s, m.Name, role)
			if err == nil {
				sc.Audit(bctx, s.podRef(m), "DbopsReplicatedRole", fmt.Sprintf("ran %s in pod %s; it is now %s", cmd, m.Name, role))
			}
			cancel()
			return err
		}
		if ctx.Err() != nil {
			return runErr
		}
		if err := e.fail(ctx, sc, s, cfg, m, runErr); err != nil {
			return err
		}
		if err := sc.Set(ctx, key, ""); err != nil {
			return err
		}
	}
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// fail marks m failed and excluded, then cleans up: stop, or when stop
// fails (or is not configured) delete the pod and wait for its new
// incarnation.
func (e *Engine) fail(ctx context.Context, sc *ops.StepContext, s *site, cfg *Config, m member, cause error) error {
	if err := addFailed(ctx, sc, m.Name); err != nil {
		return err
	}
	if podStopped(cause) {
		// Its pod was deleted to end the command: there is nothing left to
		// label or stop; the journal excludes it for the rest of the run.
		bctx, cancel := bookkeeping(ctx)
		sc.Audit(bctx, s.podRef(m), "DbopsReplicatedFailed", fmt.Sprintf("%v; pod %s excluded", cause, m.Name))
		cancel()
		sc.Waiting(fmt.Sprintf("%v; %s excluded, waiting for its new pod", cause, m.Name))
		if err := e.waitRecreated(ctx, sc, s, m.Name, m.UID); err != nil {
			return fmt.Errorf("waiting for failed pod %s to be recreated: %w", m.Name, err)
		}
		return nil
	}
	bctx, cancel := bookkeeping(ctx)
	err := e.setRole(bctx, sc, s, m.Name, RoleFailed)
	if err == nil {
		sc.Audit(bctx, s.podRef(m), "DbopsReplicatedFailed", fmt.Sprintf("%v; pod %s marked failed and excluded", cause, m.Name))
	}
	cancel()
	if err != nil {
		return err
	}
	sc.Waiting(fmt.Sprintf("%v; %s marked failed, cleaning up", cause, m.Name))
	why := "no stop command is configured"
	if cfg.Has(CmdStop) {
		_, _, serr := e.run(ctx, sc, s, cfg, CmdStop, m.Name, nil)
		if serr == nil {
			bctx, cancel := bookkeeping(ctx)
			sc.Audit(bctx, s.podRef(m), "DbopsReplicatedStop", fmt.Sprintf("ran stop in failed pod %s", m.Name))
			cancel()
			return nil
		}
		if ctx.Err() != nil {
			return serr
		}
		why = serr.Error()
	}
	sc.Waiting(fmt.Sprintf("%s; deleting pod %s for the StatefulSet to recreate it", why, m.Name))
	if err := e.recreate(ctx, sc, s, m.Name, m.UID); err != nil {
		return fmt.Errorf("recreating failed pod %s: %w", m.Name, err)
	}
	bctx, cancel = bookkeeping(ctx)
	sc.Audit(bctx, s.podRef(m), "DbopsReplicatedRecreate", fmt.Sprintf("deleted failed pod %s (%s); the StatefulSet recreated it", m.Name, why))
	cancel()
	return nil
}

// demoteStep stops primaries until at most k are left: lowest sequence
// number first, ties to the highest ordinal.
func (e *Engine) demoteStep(s *site, cfg *Config, k, desired int, planned string, plannedSeq seq) *ops.Step {
	return &ops.Step{
		ID: fmt.Sprintf("demote/%d", k), Group: s.sts, Target: "pod/" + planned, Mutating: true,
		Description: fmt.Sprintf("leave %d primaries: run stop on the primary with the lowest sequence number (planned: %s, sequence %s) and remove its role", k, planned, plannedSeq),
		Details:     []string{fmt.Sprintf("if stop fails: label it %s=%s and delete the pod for the StatefulSet to recreate it", LabelRole, RoleFailed)},
		Precheck: func(ctx context.Context, sc *ops.StepContext) (bool, error) {
			ms, err := e.members(ctx, sc, s)
			if err != nil {
				return false, err
			}
			return len(withRole(ms, RolePrimary, desired)) <= k, nil
		},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			key := demoteKey(k)
			for {
				ms, err := e.members(ctx, sc, s)
				if err != nil {
					return err
				}
				prim := withRole(ms, RolePrimary, desired)
				if len(prim) <= k {
					return nil
				}
				m, ok := find(prim, sc.Get(key))
				if !ok {
					seqs, err := e.sequences(ctx, s, cfg, names(prim), false)
					if err != nil {
						return err
					}
					m = stopOrder(prim, seqs)[0]
					if err := sc.Set(ctx, key, m.Name); err != nil {
						return err
					}
				}
				if err := e.stopMember(ctx, sc, s, cfg, m, true); err != nil {
					return err
				}
			}
		},
	}
}

// stopMember runs stop in m and removes its role. When stop fails, m is
// marked failed; with recreate its pod is deleted and recreated.
func (e *Engine) stopMember(ctx context.Context, sc *ops.StepContext, s *site, cfg *Config, m member, recreate bool) error {
	sc.Waiting("running stop in " + m.Name)
	_, _, err := e.run(ctx, sc, s, cfg, CmdStop, m.Name, nil)
	if err == nil {
		bctx, cancel := bookkeeping(ctx)
		defer cancel()
		if err := e.setRole(bctx, sc, s, m.Name, ""); err != nil {
			return err
		}
		sc.Audit(bctx, s.podRef(m), "DbopsReplicatedStop", fmt.Sprintf("ran stop in pod %s (was %s)", m.Name, m.Role))
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	if err := addFailed(ctx, sc, m.Name); err != nil {
		return err
	}
	if podStopped(err) {
		// The timed-out stop ended with its pod: nothing left to label.
		bctx, cancel := bookkeeping(ctx)
		sc.Audit(bctx, s.podRef(m), "DbopsReplicatedFailed", fmt.Sprintf("%v; pod %s excluded", err, m.Name))
		cancel()
		if !recreate {
			return nil
		}
		if rerr := e.waitRecreated(ctx, sc, s, m.Name, m.UID); rerr != nil {
			return fmt.Errorf("waiting for pod %s to be recreated after stop timed out: %w", m.Name, rerr)
		}
		return nil
	}
	bctx, cancel := bookkeeping(ctx)
	lerr := e.setRole(bctx, sc, s, m.Name, RoleFailed)
	if lerr == nil {
		sc.Audit(bctx, s.podRef(m), "DbopsReplicatedFailed", fmt.Sprintf("%v; pod %s marked failed", err, m.Name))
	}
	cancel()
	if lerr != nil {
		return lerr
	}
	if !recreate {
		sc.Waiting(fmt.Sprintf("%v; %s is removed by the scale-down anyway", err, m.Name))
		return nil
	}
	sc.Waiting(fmt.Sprintf("%v; deleting pod %s for the StatefulSet to recreate it", err, m.Name))
	if rerr := e.recreate(ctx, sc, s, m.Name, m.UID); rerr != nil {
		return fmt.Errorf("recreating pod %s after stop failed: %w", m.Name, rerr)
	}
	bctx, cancel = bookkeeping(ctx)
	sc.Audit(bctx, s.podRef(m), "DbopsReplicatedRecreate", fmt.Sprintf("deleted pod %s (stop failed); the StatefulSet recreated it", m.Name))
	cancel()
	return nil
}

// stopBeyondStep stops the role of a pod the scale-down will remove.
func (e *Engine) stopBeyondStep(s *site, cfg *Config, m member) *ops.Step {
	return &ops.Step{
		ID: "stop/" + m.Name, Group: s.sts, Target: "pod/" + m.Name, Mutating: true,
		Description: fmt.Sprintf("run stop on %s %s before the StatefulSet removes it", m.Role, m.Name),
		Precheck: func(ctx context.Context, sc *ops.StepContext) (bool, error) {
			p, err := e.getPod(ctx, sc, s, m.Name)
			if err != nil {
				return false, err
			}
			return p == nil || (p.Labels[LabelRole] != RolePrimary && p.Labels[LabelRole] != RoleSecondary), nil
		},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			p, err := e.getPod(ctx, sc, s, m.Name)
			if err != nil || p == nil {
				return err
			}
			cur := m
			cur.UID, cur.Role = p.UID, p.Labels[LabelRole]
			return e.stopMember(ctx, sc, s, cfg, cur, false)
		},
	}
}

// replicasStep sets spec.replicas and waits for exactly n Ready pods.
func (e *Engine) replicasStep(s *site, from, n int) *ops.Step {
	verb := "raise"
	if n < from {
		verb = "lower"
	}
	return &ops.Step{
		ID: fmt.Sprintf("replicas/%d", n), Group: s.sts, Target: "statefulset/" + s.sts, Mutating: true,
		Description: fmt.Sprintf("%s replicas from %d to %d and wait for exactly %d Ready pods", verb, from, n, n),
		Precheck: func(ctx context.Context, sc *ops.StepContext) (bool, error) {
			r, err := e.replicas(ctx, s)
			if err != nil || r != n {
				return false, err
			}
			ms, err := e.members(ctx, sc, s)
			if err != nil {
				return false, err
			}
			if checkSettled(s, ms, n) != nil {
				return false, nil
			}
			return !slices.ContainsFunc(ms, func(m member) bool { return !m.Ready }), nil
		},
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			if err := e.setReplicas(ctx, s, int32(n)); err != nil {
				return err
			}
			sc.Audit(ctx, s.stsRef(), "DbopsScale", fmt.Sprintf("set replicas of StatefulSet %s to %d", s.sts, n))
			return nil
		},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			return e.waitSize(ctx, sc, s, n)
		},
	}
}
