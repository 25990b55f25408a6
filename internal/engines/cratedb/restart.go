package cratedb

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// restartGate wraps each pod restart: hold allocation to primaries, and
// once the pod is back, wait for its node, re-enable allocation and wait
// for green N times in a row.
type restartGate struct {
	e *Engine
	c *ops.Cluster
	// nodes is the pod -> node mapping read when planning, before any pod
	// is deleted: a node's name is stable per pod in every layout, and
	// the recreated pod is recognised again from its own facts.
	nodes *nodeMap
	// mode is the restart's --mode; batches are the steps of more than one
	// pod, as planned, for the preflight's shard check (batch.go).
	mode    string
	batches [][]ops.Pod

	mu sync.Mutex
	// statementsAt is the session's statement count when each pod's restart began.
	statementsAt map[string]int64
}

// gateKey marks, in the journal, a pod whose Before ran but whose After
// has not finished: a resumed run must still re-enable allocation.
func gateKey(pod string) string { return "cratedb.gate/" + pod }

func (g *restartGate) node(p ops.Pod) string { return g.nodes.label(p.Name) }

// Describe implements ops.RestartGate.
func (g *restartGate) Describe(p ops.Pod) ([]string, []string) {
	n := g.e.cfg.HealthChecks
	settle := fmt.Sprintf("wait: %s in sys.nodes, every node in, allocation all, green, a master, no shard INITIALIZING or RELOCATING, held for %s (%s; %s; %s; %s; %s)",
		g.node(p), g.e.cfg.StableFor, sqlNodes, sqlAllocEnable, sqlMaxSeverity, sqlMasterNode, sqlShardsBusy)
	if g.e.cfg.GreenInARow {
		settle = fmt.Sprintf("wait: green %d times in a row, %s apart (the crate-operator's rule; %s; %s; %s)", n, g.e.cfg.HealthInterval, sqlNodeCount, sqlMaxSeverity, sqlMasterNode)
	}
	return []string{"a database connection through another Ready pod"},
		[]string{
			sqlAllocPrimaries,
			fmt.Sprintf("wait: %s back in sys.nodes (%s; matched to the new pod by -Cnode.name, hostname and IP)", g.node(p), sqlNodes),
			sqlAllocReset,
			settle,
		}
}

// Before implements ops.RestartGate.
func (g *restartGate) Before(ctx context.Context, sc *ops.StepContext, p ops.Pod) error {
	g.startStatements(p.Name)
	// Durable before allocation changes: normally staged by the step's Prepare and written
	// with the step before's "done" (or the run's first write), else written now.
	if sc.Get(gateKey(p.Name)) == "" {
		if err := sc.Set(ctx, gateKey(p.Name), "pending"); err != nil {
			return err
		}
	}
	// Never talk through the pod about to be deleted.
	if err := g.e.execDB(ctx, sc, g.c, []string{p.Name}, sqlAllocPrimaries); err != nil {
		return sqlErr(sqlAllocPrimaries, err)
	}
	sc.Audit(ctx, podRef(g.c, p), "DbopsAllocationPrimaries",
		fmt.Sprintf("set cluster.routing.allocation.enable=primaries before restarting pod %s", p.Name))
	return nil
}

// After implements ops.RestartGate.
func (g *restartGate) After(ctx context.Context, sc *ops.StepContext, p ops.Pod) error {
	e := g.e
	sc.Waiting(fmt.Sprintf("waiting for %s to rejoin (sys.nodes)", g.node(p)))
	names, err := e.waitPodNodes(ctx, sc, g.c, []string{p.Name}, nil)
	if err != nil {
		return err
	}
	node := names[0]
	// Node names are stable per pod in every layout seen; a change is
	// worth saying (the cluster treats it as a node that left and a new one).
	if prior := g.nodes.pods[p.Name]; prior != nil && prior.Name != "" && prior.Name != node {
		sc.Waiting(fmt.Sprintf("pod %s came back as node %s (was %s)", p.Name, node, prior.Name))
	}
	if err := e.execDB(ctx, sc, g.c, nil, sqlAllocReset); err != nil {
		return sqlErr(sqlAllocReset, err)
	}
	sc.Audit(ctx, livePodRef(sc, g.e.client, g.c, p), "DbopsAllocationEnabled",
		fmt.Sprintf("reset cluster.routing.allocation.enable after pod %s rejoined as %s", p.Name, node))
	if e.cfg.GreenInARow {
		err = e.greenInARow(ctx, sc, g.c, expectedNodes(g.c))
	} else {
		err = e.waitSettled(ctx, sc, g.c, p.Name)
	}
	if err != nil {
		return err
	}
	// Written with the step's "done": a crash before that re-runs this (idempotent) gate.
	sc.Stage(gateKey(p.Name), "")
	if n, ok := g.statementsSince(p.Name); ok {
		sc.Progress(n, n, "statements", fmt.Sprintf("%d SQL statements for pod %s (allocation, rejoin and settle checks)", n, p.Name))
	}
	return nil
}

// startStatements notes the session's statement count as pod's restart begins.
func (g *restartGate) startStatements(pod string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.statementsAt == nil {
		g.statementsAt = map[string]int64{}
	}
	g.statementsAt[pod] = g.e.session(g.c).statements.Load()
}

// statementsSince is how many statements the session sent since pod's restart began (false
// when this run did not begin it, e.g. a resumed gate).
func (g *restartGate) statementsSince(pod string) (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.statementsAt[pod]
	if !ok {
		return 0, false
	}
	delete(g.statementsAt, pod)
	return g.e.session(g.c).statements.Load() - at, true
}

// wrapPrecheck makes a step that an earlier, interrupted run completed up
// to the pod's return still finish the gate (re-enable allocation, wait
// for green) before it counts as done. It does so whether or not the gate's
// mark is still in the journal: that run may have stopped anywhere between
// the delete and the gate's end, and the gate's After is idempotent.
func (g *restartGate) wrapPrecheck(s *ops.Step, p ops.Pod) {
	inner := s.Precheck
	s.Precheck = func(ctx context.Context, sc *ops.StepContext) (bool, error) {
		done, err := inner(ctx, sc)
		if err != nil || !done {
			return done, err
		}
		if err := g.After(ctx, sc, p); err != nil {
			return false, g.resetAfter(ctx, sc, err)
		}
		return true, nil
	}
}

// resetOnFailure wraps a restart step so that when its Action or Verify
// fails, or the run is interrupted, while a pod's gate holds allocation at
// primaries, allocation is re-enabled before the error goes up: a cluster
// must never be left unable to re-replicate because this tool stopped.
func (g *restartGate) resetOnFailure(s *ops.Step) {
	wrap := func(inner func(context.Context, *ops.StepContext) error) func(context.Context, *ops.StepContext) error {
		if inner == nil {
			return nil
		}
		return func(ctx context.Context, sc *ops.StepContext) error {
			return g.resetAfter(ctx, sc, inner(ctx, sc))
		}
	}
	s.Action = wrap(s.Action)
	s.Verify = wrap(s.Verify)
}

// resetAfter re-enables allocation when err is set and a gate is pending.
func (g *restartGate) resetAfter(ctx context.Context, sc *ops.StepContext, err error) error {
	if err == nil || !g.pending(sc) {
		return err
	}
	// The step's context may be cancelled already. The wait has its own bound: the end of
	// the pod's grace period, which a decommissioning preStop hook may use in full.
	g.waitDeletedGone(context.WithoutCancel(ctx), sc)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), allocResetTimeout)
	defer cancel()
	if rerr := g.e.execDB(rctx, sc, g.c, nil, sqlAllocReset); rerr != nil {
		// One line: the step's error, then what is left to do by hand.
		return fmt.Errorf("%w; shard allocation is still 'primaries', re-enable it with %s (that failed too: %v)", err, sqlAllocReset, rerr)
	}
	sc.Audit(rctx, ops.ObjectRef{Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: g.c.Namespace, Name: ops.StatefulSetName(g.c.Groups[0])},
		"DbopsAllocationEnabled", "reset cluster.routing.allocation.enable after a failed or interrupted restart step")
	return fmt.Errorf("%w (shard allocation was re-enabled)", err)
}

// waitDeletedGone waits for each gated pod that is being deleted (its delete was sent: a
// step's action finishes after Ctrl-C) to be gone: allocation is held at primaries for
// exactly that, so it is not re-enabled while the node still shuts down. The pod is read
// with a GET, which sees a delete the API server has answered even before the informer does.
// Each wait lasts until the pod's deletionTimestamp (when the kubelet kills it: the end of its
// grace period) and allocResetTimeout more: crate-operator's pods run dc_util in their preStop
// hook, an ALTER CLUSTER DECOMMISSION of up to 720 s under a 1200 s grace period
// (crate-operator create.py, constants.py), and allocation must not be re-enabled under a node
// that is still decommissioning.
func (g *restartGate) waitDeletedGone(ctx context.Context, sc *ops.StepContext) {
	ns := g.c.Namespace
	for _, p := range g.c.AllPods() {
		if sc.Get(gateKey(p.Name)) == "" {
			continue
		}
		gctx, cancel := context.WithTimeout(ctx, allocResetTimeout)
		live, err := g.e.client.CoreV1().Pods(ns).Get(gctx, p.Name, metav1.GetOptions{})
		cancel()
		if err != nil || live.DeletionTimestamp == nil {
			continue // gone already, or not being deleted: nothing to wait for
		}
		until := live.DeletionTimestamp.Add(allocResetTimeout)
		if now := time.Now(); until.Before(now.Add(allocResetTimeout)) {
			until = now.Add(allocResetTimeout)
		}
		sc.Waiting(fmt.Sprintf("stopping: waiting for pod %s to finish shutting down (its grace period ends %s) before re-enabling shard allocation (at most until %s)",
			p.Name, live.DeletionTimestamp.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339)))
		wctx, cancel := context.WithDeadline(ctx, until)
		_, _ = ops.WaitPod(wctx, sc, g.e.client, ns, p.Name, func(cur *corev1.Pod) (bool, error) {
			return cur == nil || cur.UID != live.UID, nil
		}) // at the bound, allocation is re-enabled anyway
		cancel()
	}
}

// pending reports a pod whose gate set allocation to primaries and has not
// re-enabled it.
func (g *restartGate) pending(sc *ops.StepContext) bool {
	for _, p := range g.c.AllPods() {
		if sc.Get(gateKey(p.Name)) != "" {
			return true
		}
	}
	return false
}

// allocResetTimeout bounds the clean-up after a failed restart step.
const allocResetTimeout = 30 * time.Second

// greenInARow waits for HealthChecks consecutive green readings,
// HealthInterval apart; any other reading starts the count again.
func (e *Engine) greenInARow(ctx context.Context, sc *ops.StepContext, c *ops.Cluster, expected int64) error {
	return e.greenStable(ctx, sc, c, expected, false)
}

// greenStable is greenInARow; with sameMaster a change of master also starts the count
// again, so the readings show a stable master (a master-eligible node's removal).
func (e *Engine) greenStable(ctx context.Context, sc *ops.StepContext, c *ops.Cluster, expected int64, sameMaster bool) error {
	need := e.cfg.HealthChecks
	streak := 0
	last, master := "", ""
	err := e.pollDBEvery(ctx, sc, e.cfg.HealthInterval, func() (bool, error) {
		h, err := e.readHealth(ctx, c, expected, nil)
		if err != nil {
			streak = 0
			return false, err
		}
		if sameMaster && h.MasterNode != master {
			streak, master = 0, h.MasterNode
		}
		if !h.Green() {
			streak = 0
			if msg := fmt.Sprintf("cluster %s (%s); waiting for green", h.Status(), h); msg != last {
				last = msg
				sc.Waiting(msg)
			}
			return false, nil
		}
		streak++
		last = ""
		sc.Progress(int64(streak), int64(need), "checks", fmt.Sprintf("green %d/%d", streak, need))
		return streak >= need, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for green %d times in a row: %w", need, err)
	}
	return nil
}

func podRef(c *ops.Cluster, p ops.Pod) ops.ObjectRef {
	return ops.ObjectRef{Kind: "Pod", APIVersion: "v1", Namespace: c.Namespace, Name: p.Name, UID: string(p.UID)}
}

// livePodRef is podRef for the pod's live incarnation (from the run's pod informer): an event
// about a pod that came back after its restart or replacement belongs on the new UID, which
// is what `kubectl describe pod` searches by. The discovered one when the informer lacks it.
func livePodRef(sc *ops.StepContext, client kubernetes.Interface, c *ops.Cluster, p ops.Pod) ops.ObjectRef {
	ref := podRef(c, p)
	if pods := sc.PodCache(client, c.Namespace); pods != nil {
		if cur := pods.Get(p.Name); cur != nil {
			ref.UID = string(cur.UID)
		}
	}
	return ref
}
