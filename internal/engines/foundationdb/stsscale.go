package foundationdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// stsScale scales an FDB StatefulSet (FoundationDB's Kubernetes sample, no operator): the engine
// does what the operator would. Down, highest ordinals first: gate, exclude the leaving
// processes by locality_instance_id (the pod name) and wait until they hold no role, move the
// coordinators off them, lower replicas, delete their PVCs, include them again. Up: raise
// replicas and wait for the new processes to report.
type stsScale struct {
	e    *Engine
	c    *ops.Cluster
	g    *ops.NodeGroup
	from int32 // replicas as planned (the highest ordinal still to handle + 1 on a resume)
	to   int32
	// away are the pods fdbcli must not run in: those leaving or being replaced.
	away []string
}

// localities are the exclusion keys of pods (fdbcli `exclude locality_instance_id:<pod>`).
func localities(pods []string) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = "locality_instance_id:" + p
	}
	return out
}

// planScaleStatefulSet plans `scale --replicas N` on the foundationdb-statefulset layout.
func (e *Engine) planScaleStatefulSet(ctx context.Context, c *ops.Cluster, req ops.ScaleRequest) (*ops.Plan, error) {
	if len(req.Remove) > 0 {
		return nil, ops.Usagef("--remove names FoundationDBCluster process groups; a FoundationDB StatefulSet scales down from its highest ordinals")
	}
	if req.Replicas == nil || req.Masters != nil || len(req.Data) > 0 || req.Primaries != nil || len(req.Processes) > 0 {
		return nil, ops.Usagef("a FoundationDB StatefulSet scales with --replicas N (--processes is for FoundationDBClusters)")
	}
	if len(c.Groups) != 1 || ops.StatefulSetName(c.Groups[0]) == "" {
		return nil, ops.Usagef("scale --replicas needs one FoundationDB StatefulSet; %s/%s has %d node groups (use --selector to pick one)", c.Namespace, c.Name, len(c.Groups))
	}
	g := c.Groups[0]
	to := *req.Replicas
	cli := e.cli()
	st, _, err := e.StatusFrom(ctx, cli, c, nil)
	if err != nil {
		return nil, ops.Preconditionf("cannot read the database's status to plan the scale: %v", err)
	}
	mode := "double"
	if st.Cluster.Configuration != nil && st.Cluster.Configuration.RedundancyMode != "" {
		mode = st.Cluster.Configuration.RedundancyMode
	}
	// Storage team size and log replication are the mode's replicas
	// (fdbclient/DatabaseConfiguration.cpp); fewer processes cannot hold a team.
	if m := minimumCount(mode, "storage"); int(to) < m {
		return nil, ops.Preconditionf("--replicas %d is below the %d processes redundancy mode %s needs (storage team size); refusing to scale", to, m, mode)
	}
	// Each coordinator needs its own process: fewer pods than coordinators would shrink the
	// coordination quorum below what the cluster was set up to survive.
	if n := len(st.Client.Coordinators.Coordinators); int(to) < n {
		return nil, ops.Preconditionf("--replicas %d leaves fewer processes than the cluster's %d coordinators (each needs its own process); refusing to scale", to, n)
	}
	from := g.Desired
	// A resumed run: pods or exclusions of ordinals at or above the target are still to handle.
	for _, p := range g.Pods {
		if int32(p.Ordinal) >= from {
			from = int32(p.Ordinal) + 1
		}
	}
	for _, x := range st.Exclusions() {
		if pod, ok := strings.CutPrefix(x, "locality_instance_id:"+ops.StatefulSetName(g)+"-"); ok {
			if n, err := strconv.Atoi(pod); err == nil && int32(n) >= from {
				from = int32(n) + 1
			}
		}
	}
	s := &stsScale{e: e, c: c, g: g, from: from, to: to}
	s.away = s.leaving()
	p := ops.NewPlan("scale", c, ops.EngineFoundationDB, fmt.Sprintf("--replicas %d", to))
	switch {
	case to < from:
		s.planDown(p, st)
	case to > g.Desired:
		s.planUp(p)
	}
	return p, nil
}

func (s *stsScale) leaving() []string {
	var out []string
	for n := s.from - 1; n >= s.to; n-- {
		out = append(out, fmt.Sprintf("%s-%d", ops.StatefulSetName(s.g), n))
	}
	return out
}

func (s *stsScale) target() string { return "StatefulSet/" + ops.StatefulSetName(s.g) }

var (
	execNeed = ops.Need("", "pods", "exec", "create")
	stsNeed  = ops.Need("apps", "statefulsets", "", "get", "patch")
	pvcNeed  = ops.Need("", "persistentvolumeclaims", "", "get", "delete")
)

func (s *stsScale) planDown(p *ops.Plan, st *Status) {
	leaving := s.leaving()
	p.Steps = append(p.Steps, &ops.Step{ID: "gate", Target: s.target(), Needs: execNeed,
		Description: "wait until the database is available and healthy (status json: data healthy, fully recovered)",
		Verify:      s.waitHealthy})
	p.Steps = append(p.Steps, s.excludeSteps("", s.target(), st, leaving, false)...)
	p.Steps = append(p.Steps, &ops.Step{ID: "replicas", Target: s.target(), Mutating: true, Needs: append(stsNeed, ops.Need("", "pods", "", "get", "list", "watch")...),
		Description: fmt.Sprintf("lower replicas %d -> %d (resourceVersion precondition; a StatefulSet resized by someone else since the plan is refused) and wait until %s are gone", s.g.Desired, s.to, strings.Join(leaving, ", ")),
		Action:      s.setReplicas,
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			for _, pod := range leaving {
				if err := waitGone(ctx, sc, s.e, s.c.Namespace, pod); err != nil {
					return err
				}
			}
			return nil
		}})
	var pvcs []string
	for _, pod := range leaving {
		pvcs = append(pvcs, s.pvcNames(pod)...)
	}
	if len(pvcs) > 0 {
		p.Steps = append(p.Steps, &ops.Step{ID: "pvcs", Target: s.target(), Mutating: true, Needs: pvcNeed,
			Description: "delete the PVCs of the removed pods (" + strings.Join(pvcs, ", ") + "): their data has moved away, and a later scale up must start empty",
			Action: func(ctx context.Context, sc *ops.StepContext) error {
				for _, name := range pvcs {
					if err := kube.CheckWriteGuard(ctx); err != nil {
						return err
					}
					err := s.e.client.CoreV1().PersistentVolumeClaims(s.c.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
					if err != nil && !apierrors.IsNotFound(err) {
						return fmt.Errorf("deleting PVC %s/%s: %w", s.c.Namespace, name, err)
					}
				}
				return nil
			},
			Verify: func(ctx context.Context, sc *ops.StepContext) error {
				return pollUntil(ctx, s.e, sc, func() (bool, string, error) {
					for _, name := range pvcs {
						_, err := s.e.client.CoreV1().PersistentVolumeClaims(s.c.Namespace).Get(ctx, name, metav1.GetOptions{})
						if err == nil {
							return false, "PVC " + name + " to be deleted", nil
						}
						if !apierrors.IsNotFound(err) {
							return false, "", err
						}
					}
					return true, "", nil
				})
			}})
	}
	p.Steps = append(p.Steps, s.includeStep("", s.target(), leaving))
}

// excludeSteps exclude the leaving pods and wait until fdbcli itself reports each of their
// addresses "Successfully excluded" (status json's stored bytes show the progress meanwhile),
// then move the coordinators off them when one of them is a coordinator (st is the status
// planned from). always plans the coordinators step even when none is on them now: a batch of a
// replacement may receive a coordinator from an earlier batch (it then moves it on; otherwise
// the step finds nothing to do).
func (s *stsScale) excludeSteps(suffix, target string, st *Status, leaving []string, always bool) []*ops.Step {
	keys := strings.Join(localities(leaving), " ")
	moves := always
	for _, pod := range leaving {
		for _, pr := range st.ByInstance(pod) {
			moves = moves || st.IsCoordinator(pr.Address)
		}
	}
	// confirmed: fdbcli's exclude in this run's action already reported every address excluded.
	confirmed := false
	exclude := func(ctx context.Context) (exclusionReport, error) {
		out, errOut, err := s.runBoth(ctx, "exclude no_wait "+keys)
		if err != nil {
			return exclusionReport{}, err
		}
		r := parseExclude(out + "\n" + errOut)
		if len(r.Errors) > 0 {
			return r, fmt.Errorf("fdbcli exclude of %s: %s", strings.Join(leaving, ", "), strings.Join(r.Errors, "; "))
		}
		// fdbcli warns, and does nothing else, when it excludes a coordinator. A coordinator
		// moved onto a leaving pod since the plan would be left there when the pod goes.
		if len(r.Coordinators) > 0 && !moves {
			return r, ops.Preconditionf("fdbcli warns that %s, on a pod to remove (%s), is a coordinator, and the plan does not move coordinators (they changed since the plan): plan again",
				strings.Join(r.Coordinators, ", "), strings.Join(leaving, ", "))
		}
		return r, nil
	}
	out := []*ops.Step{{ID: "exclude" + suffix, Target: target, Mutating: true, Needs: append(execNeed, ops.Need("", "pods", "", "get")...),
		Description: "exclude " + strings.Join(leaving, ", ") + " and wait until fdbcli reports each of their processes \"Successfully excluded\" (progress from status json's roles and stored_bytes)",
		Details: []string{"fdbcli --exec 'exclude no_wait " + keys + "'",
			"confirmed from fdbcli's own report of the same command: every address of theirs \"Successfully excluded\"; \"Exclusion in progress\" waits; a pod whose process does not run (fdbcli finds no worker with its locality) is done once status json shows the data healthy without it"},
		Precheck: func(ctx context.Context, sc *ops.StepContext) (bool, error) {
			st, err := s.status(ctx)
			if err != nil {
				return false, err
			}
			if !excludedKeys(st, leaving) {
				return false, nil
			}
			// The pods gone: a run before this one lowered replicas, which it does only after
			// fdbcli confirmed the exclusion; there is nothing left for fdbcli to report on.
			if gone, err := s.podsGone(ctx, leaving); err != nil || gone {
				return gone, err
			}
			// Excluded already: the same command again changes nothing and reports.
			r, err := exclude(ctx)
			if err != nil {
				return false, err
			}
			ok, _ := exclusionDone(r, st, leaving)
			return ok, nil
		},
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			r, err := exclude(ctx)
			if err != nil {
				return err
			}
			confirmed, _ = r.confirmed()
			return nil
		},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			if confirmed {
				return nil
			}
			return pollUntil(ctx, s.e, sc, func() (bool, string, error) {
				st, err := s.status(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return false, "", ctx.Err()
					}
					return false, "status json: " + err.Error(), nil
				}
				// Data still moving, as status json shows it: no need to ask fdbcli yet.
				if done, why := drained(st, leaving); !done {
					return false, why, nil
				}
				r, err := exclude(ctx)
				if err != nil {
					if ctx.Err() != nil || errors.Is(err, ops.ErrPrecondition) {
						return false, "", err
					}
					return false, err.Error(), nil
				}
				ok, why := exclusionDone(r, st, leaving)
				return ok, why, nil
			})
		}}}
	var moving []string
	for _, pod := range leaving {
		for _, pr := range st.ByInstance(pod) {
			if st.IsCoordinator(pr.Address) {
				moving = append(moving, pod)
			}
		}
	}
	if moves {
		next := coordinatorsAfter(st, s.c, leaving, s.away)
		desc := "move the coordinators off " + strings.Join(moving, ", ") + " onto the remaining pods, lowest ordinals first"
		if len(s.away) > len(leaving) {
			desc += " (pods of later batches last)"
		}
		if len(moving) == 0 {
			desc = "move any coordinator an earlier batch left on " + strings.Join(leaving, ", ") + " onto the remaining pods (none is there now)"
		}
		out = append(out, &ops.Step{ID: "coordinators" + suffix, Target: target, Mutating: true, Needs: execNeed,
			Description: desc,
			Details:     []string{"fdbcli --exec 'coordinators " + strings.Join(next, " ") + "' (addresses read again when the step runs)"},
			Precheck: func(ctx context.Context, sc *ops.StepContext) (bool, error) {
				st, err := s.status(ctx)
				if err != nil {
					return false, err
				}
				return !coordinatorOn(st, leaving), nil
			},
			Action: func(ctx context.Context, sc *ops.StepContext) error {
				st, err := s.status(ctx)
				if err != nil {
					return err
				}
				if !coordinatorOn(st, leaving) {
					return nil
				}
				return s.run(ctx, "coordinators "+strings.Join(coordinatorsAfter(st, s.c, leaving, s.away), " "))
			},
			Verify: func(ctx context.Context, sc *ops.StepContext) error {
				return s.poll(ctx, sc, func(st *Status) (bool, string) {
					if coordinatorOn(st, leaving) {
						return false, "the coordinators to leave " + strings.Join(leaving, ", ")
					}
					return true, ""
				})
			}})
	}
	return out
}

// includeStep includes the pods again.
func (s *stsScale) includeStep(suffix, target string, leaving []string) *ops.Step {
	keys := strings.Join(localities(leaving), " ")
	return &ops.Step{ID: "include" + suffix, Target: target, Mutating: true, Needs: execNeed,
		Description: "include " + strings.Join(leaving, ", ") + " again, so that a later pod of the same name is not excluded",
		Details:     []string{"fdbcli --exec 'include " + keys + "'"},
		Precheck: func(ctx context.Context, sc *ops.StepContext) (bool, error) {
			st, err := s.status(ctx)
			if err != nil {
				return false, err
			}
			return !excludedAny(st, leaving), nil
		},
		Action: func(ctx context.Context, sc *ops.StepContext) error {
			return s.run(ctx, "include "+keys)
		},
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			return s.poll(ctx, sc, func(st *Status) (bool, string) {
				if excludedAny(st, leaving) {
					return false, "the exclusions of " + strings.Join(leaving, ", ") + " to be cleared"
				}
				return true, ""
			})
		}}
}

func (s *stsScale) planUp(p *ops.Plan) {
	var joining []string
	for n := s.g.Desired; n < s.to; n++ {
		joining = append(joining, fmt.Sprintf("%s-%d", ops.StatefulSetName(s.g), n))
	}
	p.Steps = append(p.Steps, &ops.Step{ID: "gate", Target: s.target(), Needs: execNeed,
		Description: "wait until the database is available and healthy (status json: data healthy, fully recovered)",
		Verify:      s.waitHealthy})
	p.Steps = append(p.Steps, &ops.Step{ID: "replicas", Target: s.target(), Mutating: true, Needs: stsNeed,
		Description: fmt.Sprintf("raise replicas %d -> %d (resourceVersion precondition)", s.g.Desired, s.to),
		Action:      s.setReplicas})
	p.Steps = append(p.Steps, &ops.Step{ID: "join", Target: s.target(), Needs: execNeed,
		Description: "wait until " + strings.Join(joining, ", ") + " report in status json, then the database healthy",
		Verify: func(ctx context.Context, sc *ops.StepContext) error {
			return s.poll(ctx, sc, func(st *Status) (bool, string) {
				for _, pod := range joining {
					if len(st.ByInstance(pod)) == 0 {
						return false, "the process of " + pod + " to report"
					}
				}
				if !st.Available() || !healthy(st) {
					return false, "the database to be healthy"
				}
				return true, ""
			})
		}})
}

// setReplicas writes spec.replicas with the resourceVersion read: a concurrent change of the
// StatefulSet is a conflict, read again; replicas someone else changed since the plan refuse.
func (s *stsScale) setReplicas(ctx context.Context, sc *ops.StepContext) error {
	api := s.e.client.AppsV1().StatefulSets(s.c.Namespace)
	for attempt := 0; ; attempt++ {
		cur, err := api.Get(ctx, ops.StatefulSetName(s.g), metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading StatefulSet %s/%s: %w", s.c.Namespace, ops.StatefulSetName(s.g), err)
		}
		n := stsReplicas(cur)
		switch {
		case n == s.to:
			return nil // set already (a resumed run)
		case n != s.g.Desired:
			return ops.Preconditionf("spec.replicas of StatefulSet %s/%s was changed by someone else since the plan (%d, now %d); refusing to overwrite it: plan again",
				s.c.Namespace, ops.StatefulSetName(s.g), s.g.Desired, n)
		}
		if err := kube.CheckWriteGuard(ctx); err != nil {
			return err
		}
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": cur.ResourceVersion},
			"spec":     map[string]any{"replicas": s.to},
		})
		out, err := api.Patch(ctx, ops.StatefulSetName(s.g), types.MergePatchType, patch, metav1.PatchOptions{})
		switch {
		case err == nil:
			if sc != nil { // nil in unit tests of the patch alone
				sc.Audit(ctx, ops.ObjectRef{Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: s.c.Namespace, Name: ops.StatefulSetName(s.g), UID: string(out.UID)},
					"DbopsScaleReplicas", fmt.Sprintf("set spec.replicas %d -> %d", n, s.to))
			}
			return nil
		case apierrors.IsConflict(err) && attempt < maxPatchConflicts:
			if sc != nil {
				sc.Waiting("StatefulSet changed since it was read (resourceVersion conflict): reading it again")
			}
		default:
			return fmt.Errorf("setting replicas of StatefulSet %s/%s: %w", s.c.Namespace, ops.StatefulSetName(s.g), err)
		}
	}
}

func stsReplicas(s *appsv1.StatefulSet) int32 {
	if s.Spec.Replicas == nil {
		return 1
	}
	return *s.Spec.Replicas
}

func (s *stsScale) pvcNames(pod string) []string {
	sts := ops.StatefulSetOf(s.g)
	if sts == nil {
		return nil
	}
	var out []string
	for _, t := range sts.Spec.VolumeClaimTemplates {
		out = append(out, t.Name+"-"+pod)
	}
	return out
}

// status reads status json from a Ready pod that stays.
func (s *stsScale) status(ctx context.Context) (*Status, error) {
	c, err := s.live(ctx)
	if err != nil {
		return nil, err
	}
	st, _, err := s.e.StatusFrom(ctx, s.e.cli(), c, func(p ops.Pod) bool { return slices.Contains(s.away, p.Name) })
	return st, err
}

// live is the cluster with its pods as they are now (the run's pods change as it goes).
func (s *stsScale) live(ctx context.Context) (*ops.Cluster, error) {
	// The StatefulSet's pods only (its selector), from the run's pod informer inside a run:
	// not a LIST of every pod of the namespace on each status read.
	sel := ""
	if s.g.Owner.PodSelector() != nil {
		ls, err := metav1.LabelSelectorAsSelector(s.g.Owner.PodSelector())
		if err != nil {
			return nil, fmt.Errorf("selector of StatefulSet %s/%s: %w", s.c.Namespace, ops.StatefulSetName(s.g), err)
		}
		sel = ls.String()
	}
	pods, err := ops.ListPods(ctx, nil, s.e.client, s.c.Namespace, sel)
	if err != nil {
		return nil, fmt.Errorf("listing pods of %s/%s: %w", s.c.Namespace, s.c.Name, err)
	}
	g := &ops.NodeGroup{Name: s.g.Name, Owner: s.g.Owner}
	for _, p := range pods {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil || ref.Kind != "StatefulSet" || ref.Name != ops.StatefulSetName(s.g) {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(p.Name, ops.StatefulSetName(s.g)+"-"))
		if err != nil {
			continue
		}
		g.Pods = append(g.Pods, ops.Pod{Name: p.Name, Member: p.Name, Ordinal: n, Ready: kube.PodReady(p), Deleting: p.DeletionTimestamp != nil})
	}
	slices.SortFunc(g.Pods, func(a, b ops.Pod) int { return a.Ordinal - b.Ordinal })
	return &ops.Cluster{Name: s.c.Name, Namespace: s.c.Namespace, Engine: s.c.Engine, Layout: s.c.Layout, Recognized: s.c.Recognized, Groups: []*ops.NodeGroup{g}}, nil
}

func (s *stsScale) run(ctx context.Context, cmd string) error {
	_, _, err := s.runBoth(ctx, cmd)
	return err
}

// runBoth runs fdbcli in a Ready pod that stays and returns its stdout and stderr.
func (s *stsScale) runBoth(ctx context.Context, cmd string) (string, string, error) {
	c, err := s.live(ctx)
	if err != nil {
		return "", "", err
	}
	for _, p := range ReadyPods(c, func(p ops.Pod) bool { return slices.Contains(s.away, p.Name) }) {
		// CLI.RunBoth checks the lock guard before every fdbcli write (fdbcli.go). One pod: if fdbcli refused, the database said no, and another pod would too.
		return s.e.cli().RunBoth(ctx, s.c.Namespace, p.Name, cmd)
	}
	return "", "", fmt.Errorf("no Ready pod of %s/%s to run fdbcli %q in", s.c.Namespace, s.c.Name, cmd)
}

// podsGone: none of pods exists any more.
func (s *stsScale) podsGone(ctx context.Context, pods []string) (bool, error) {
	for _, name := range pods {
		_, err := s.e.client.CoreV1().Pods(s.c.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return false, nil
		}
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("reading pod %s/%s: %w", s.c.Namespace, name, err)
		}
	}
	return true, nil
}

func (s *stsScale) waitHealthy(ctx context.Context, sc *ops.StepContext) error {
	return s.poll(ctx, sc, func(st *Status) (bool, string) {
		if !st.Available() {
			return false, "the database to be available: " + st.Problems()
		}
		if !healthy(st) {
			return false, "the database to be healthy (data state and recovery)"
		}
		return true, ""
	})
}

// poll reads status json every poll interval until ok.
func (s *stsScale) poll(ctx context.Context, sc *ops.StepContext, ok func(*Status) (bool, string)) error {
	return pollUntil(ctx, s.e, sc, func() (bool, string, error) {
		st, err := s.status(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return false, "", ctx.Err()
			}
			return false, "status json: " + err.Error(), nil
		}
		done, why := ok(st)
		return done, why, nil
	})
}

// pollUntil calls f until it is done, reporting what it waits for, on a backoff from every
// (backoff.go).
func pollUntil(ctx context.Context, e *Engine, sc *ops.StepContext, f func() (bool, string, error)) error {
	bo := backoff{base: e.poll}
	last := ""
	for {
		done, why, err := f()
		if err != nil || done {
			return err
		}
		if why != last && sc != nil {
			sc.Waiting(why)
			last = why
		}
		select {
		case <-ctx.Done():
			if last != "" {
				return fmt.Errorf("waiting for %s: %w", last, ctx.Err())
			}
			return ctx.Err()
		case <-e.after(bo.next(why)):
		}
	}
}

func waitGone(ctx context.Context, sc *ops.StepContext, e *Engine, ns, pod string) error {
	waiting := false
	_, err := ops.WaitPod(ctx, sc, e.client, ns, pod, func(p *corev1.Pod) (bool, error) {
		if p != nil && sc != nil && !waiting {
			waiting = true
			sc.Waiting("pod " + pod + " to be deleted by the StatefulSet")
		}
		return p == nil, nil
	})
	return err
}

// excludedKeys: every pod's locality is in excluded_servers.
func excludedKeys(st *Status, pods []string) bool {
	ex := st.Exclusions()
	for _, k := range localities(pods) {
		if !slices.Contains(ex, k) {
			return false
		}
	}
	return true
}

// drained: each pod's processes are excluded and hold no role but coordinator (a storage role
// is gone once its data has moved away; a log once a recovery recruited logs elsewhere).
func drained(st *Status, pods []string) (bool, string) {
	for _, pod := range pods {
		for _, pr := range st.ByInstance(pod) {
			if !pr.Excluded {
				return false, "process " + pr.Address + " of " + pod + " to be excluded"
			}
			for _, r := range pr.Roles {
				if r.Role == "coordinator" {
					continue
				}
				if r.Role == "storage" {
					return false, fmt.Sprintf("%s's data to move away (%s stored)", pod, ops.FormatBytes(r.StoredBytes))
				}
				return false, pod + " to give up its " + r.Role + " role"
			}
		}
	}
	return true, ""
}

func excludedAny(st *Status, pods []string) bool {
	for _, x := range st.Exclusions() {
		if slices.Contains(localities(pods), x) {
			return true
		}
	}
	return false
}

// coordinatorOn: a coordinator runs on one of pods (by its process's address).
func coordinatorOn(st *Status, pods []string) bool {
	for _, pod := range pods {
		for _, pr := range st.ByInstance(pod) {
			if st.IsCoordinator(pr.Address) {
				return true
			}
		}
	}
	return false
}

// coordinatorsAfter keeps the coordinators that stay and adds processes of the remaining pods,
// lowest ordinal first, up to the current count (fewer when fewer pods remain). Pods in avoid
// (a replacement's later batches) are taken last, so a coordinator is not moved onto a pod that
// is about to go too.
func coordinatorsAfter(st *Status, c *ops.Cluster, leaving, avoid []string) []string {
	var keep []string
	leavingAddr := map[string]bool{}
	for _, pod := range leaving {
		for _, pr := range st.ByInstance(pod) {
			leavingAddr[pr.Address] = true
		}
	}
	for _, co := range st.Client.Coordinators.Coordinators {
		if !leavingAddr[co.Address] {
			keep = append(keep, co.Address)
		}
	}
	want := len(st.Client.Coordinators.Coordinators)
	for _, later := range []bool{false, true} {
		for _, p := range c.AllPods() {
			if len(keep) >= want {
				break
			}
			if slices.Contains(leaving, p.Name) || slices.Contains(avoid, p.Name) != later {
				continue
			}
			for _, pr := range st.ByInstance(p.Name) {
				if !slices.Contains(keep, pr.Address) && !pr.Excluded && len(keep) < want {
					keep = append(keep, pr.Address)
				}
			}
		}
	}
	return keep
}
