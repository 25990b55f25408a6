package cratedb

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// A master-eligible node leaves CrateDB's voting configuration only once the elected master
// has published its departure and shrunk the configuration; until then it still counts, and
// a master needs a majority of that configuration (docs/procedures.md, CrateDB: Scale).
// Removing several at once (a StatefulSet with Parallel pod management deletes every pod
// above the new size together) can take that majority away for good. So master-eligible
// nodes go one at a time, each only while every other one is up.

// isMasterEligible tells whether g's nodes can be elected master.
func isMasterEligible(g *ops.NodeGroup) bool { return g.Role == ops.RoleMaster || g.MasterEligible }

// holdsData tells whether g's nodes hold shards: data groups do, and a master group does
// unless its pods set -Cnode.data=false (CrateDB's default is true).
func holdsData(g *ops.NodeGroup) bool {
	if g.Role != ops.RoleMaster || ops.StatefulSetOf(g) == nil {
		return true
	}
	c := crateContainerOf(&ops.StatefulSetOf(g).Spec.Template.Spec)
	if c == nil {
		return true
	}
	v, ok := settingsOf(c)["node.data"]
	if !ok {
		return true
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	return err != nil || b
}

// votingSize is the size of the voting configuration CrateDB keeps with n master-eligible
// nodes, all up (auto-shrink: the largest odd number up to n, at least 3 once there are 3).
func votingSize(n int) int {
	if n < 3 {
		return n
	}
	if n%2 == 0 {
		return n - 1
	}
	return n
}

// keepsQuorum tells whether removing one of n master-eligible nodes, all up, leaves a
// majority of the voting configuration even when the removed node is one of its voters.
func keepsQuorum(n int) bool {
	k := votingSize(n)
	return (k-1)*2 > k
}

// masterRemoval is one master-eligible node a shrink removes.
type masterRemoval struct {
	r       resize
	ordinal int32
	pod     string
	node    string
	// remainingPods and remainingNodes are the master-eligible pods and their nodes that
	// stay when this one goes.
	remainingPods  []string
	remainingNodes []string
}

// masterRemovals splits a shrink of a master-eligible group into one removal per node,
// highest ordinal first, with the master-eligible nodes that remain after each.
func masterRemovals(c *ops.Cluster, nodes *nodeMap, r resize, target map[string]int32) []masterRemoval {
	var others []string
	for _, g := range c.Groups {
		if g == r.g || !isMasterEligible(g) {
			continue
		}
		for i := range min(g.Desired, target[g.Name]) {
			others = append(others, fmt.Sprintf("%s-%d", ops.StatefulSetName(g), i))
		}
	}
	name := func(pod string) string {
		if pn := nodes.pods[pod]; pn != nil && pn.Name != "" {
			return pn.Name
		}
		return ""
	}
	var out []masterRemoval
	for i := r.from - 1; i >= r.to; i-- {
		mr := masterRemoval{r: r, ordinal: i, pod: fmt.Sprintf("%s-%d", ops.StatefulSetName(r.g), i)}
		mr.node = name(mr.pod)
		if idx := int(i - r.to); mr.node == "" && idx < len(r.nodes) {
			mr.node = r.nodes[idx]
		}
		mr.remainingPods = append(r.pods(0, i), others...)
		for _, p := range mr.remainingPods {
			mr.remainingNodes = append(mr.remainingNodes, name(p))
		}
		out = append(out, mr)
	}
	return out
}

// checkMasterRemoval refuses a removal that could leave the cluster without a master: every
// remaining master-eligible pod Ready with its node in sys.nodes, a master elected, and the
// remaining nodes a majority of the voting configuration.
func (e *Engine) checkMasterRemoval(ctx context.Context, sc *ops.StepContext, c *ops.Cluster, mr masterRemoval) error {
	why := fmt.Sprintf("cannot remove master-eligible node %s (pod %s)", mr.node, mr.pod)
	const rule = "CrateDB elects a master only with a majority of its voting configuration, and a removed node stays in it until the master has shrunk it; bring it back before scaling"
	pods, err := ops.GetPods(ctx, sc, e.client, c.Namespace, mr.remainingPods)
	if err != nil {
		return err
	}
	for _, p := range mr.remainingPods {
		if pod := pods[p]; pod == nil || !ops.PodReady(pod) {
			return ops.Refusef(ops.ReasonPodNotReady, "%s: master-eligible pod %s/%s is not Ready; %s", why, c.Namespace, p, rule)
		}
	}
	rows, err := e.readNodes(ctx, c, nil)
	if err != nil {
		return err
	}
	for i, n := range mr.remainingNodes {
		if n == "" || !slices.ContainsFunc(rows, func(r nodeRow) bool { return r.Name == n }) {
			label := "the node of pod " + mr.remainingPods[i]
			if n != "" {
				label = "node " + n + " (pod " + mr.remainingPods[i] + ")"
			}
			return ops.Refusef(ops.ReasonQuorumAtRisk, "%s: master-eligible %s is not in sys.nodes; %s", why, label, rule)
		}
	}
	res, err := e.session(c).query(ctx, nil, sqlMasterNode)
	if err != nil {
		return sqlErr(sqlMasterNode, err)
	}
	if cellString(res, 0) == "" {
		return ops.Refusef(ops.ReasonQuorumAtRisk, "%s: no master is elected; wait for the cluster to elect one", why)
	}
	if n := len(mr.remainingNodes) + 1; !keepsQuorum(n) {
		return ops.Refusef(ops.ReasonQuorumAtRisk, "%s: with %d master-eligible nodes the voting configuration has %d, and %d of them would not be a majority",
			why, n, votingSize(n), votingSize(n)-1)
	}
	return nil
}

// liveReplicas reads a StatefulSet's spec.replicas.
func (e *Engine) liveReplicas(ctx context.Context, c *ops.Cluster, g *ops.NodeGroup) (int32, error) {
	s, err := e.client.AppsV1().StatefulSets(c.Namespace).Get(ctx, ops.StatefulSetName(g), metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("reading StatefulSet %s/%s: %w", c.Namespace, ops.StatefulSetName(g), err)
	}
	if s.Spec.Replicas == nil {
		return 1, nil
	}
	return *s.Spec.Replicas, nil
}

// masterRemovalStep removes one master-eligible node: checked, the StatefulSet lowered by
// one, then the pod gone, the node out of sys.nodes (the master published its departure)
// and green with the same master HealthChecks times in a row before the next removal.
func (e *Engine) masterRemovalStep(c *ops.Cluster, mr masterRemoval) *ops.Step {
	g := mr.r.g
	s := &ops.Step{ID: fmt.Sprintf("replicas/%s/%d", g.Name, mr.ordinal), Group: g.Name, Target: "statefulset/" + ops.StatefulSetName(g), Mutating: true,
		Description: fmt.Sprintf("remove master-eligible node %s: scale %s from %d to %d, wait for it to leave and for a stable master", mr.node, g.Name, mr.ordinal+1, mr.ordinal),
		Preconditions: []string{
			"every remaining master-eligible node up (pod Ready, in sys.nodes) and a master elected",
			"the remaining master-eligible nodes are a majority of the voting configuration",
		},
		Details: []string{
			"remaining master-eligible nodes: " + strings.Join(mr.remainingNodes, ", "),
			fmt.Sprintf("spec.replicas: %d -> %d (a patch of spec.replicas alone)", mr.ordinal+1, mr.ordinal),
			"wait: pod " + mr.pod + " gone (watch)",
			fmt.Sprintf("wait: node %s out of sys.nodes, its departure published (%s)", mr.node, sqlNodes),
			fmt.Sprintf("wait: green with the same master %d times in a row (%s)", e.cfg.HealthChecks, sqlMasterNode),
		},
	}
	s.Precheck = func(ctx context.Context, sc *ops.StepContext) (bool, error) {
		n, err := e.liveReplicas(ctx, c, g)
		if err != nil {
			return false, err
		}
		if n <= mr.ordinal {
			// Resumed after the replicas were lowered: the verify still waits.
			return false, nil
		}
		if err := e.checkMasterRemoval(ctx, sc, c, mr); err != nil {
			return false, err
		}
		total, _, err := e.liveTotals(ctx, c)
		if err != nil {
			return false, err
		}
		h, err := e.readHealth(ctx, c, total, nil)
		if err != nil {
			return false, err
		}
		if h.Nodes != total || h.MasterNode == "" {
			// A departure not yet published (a resumed run): wait for it to settle.
			if err := e.greenStable(ctx, sc, c, total, true); err != nil {
				return false, err
			}
			return false, e.checkMasterRemoval(ctx, sc, c, mr)
		}
		return false, nil
	}
	s.Action = func(ctx context.Context, sc *ops.StepContext) error {
		changed, err := setReplicas(ctx, e.client, c.Namespace, g, mr.ordinal)
		if err != nil {
			return err
		}
		if changed {
			sc.Audit(ctx, stsRef(c, g), "DbopsScale", fmt.Sprintf("removed master-eligible node %s: scaled node group %s from %d to %d replicas", mr.node, g.Name, mr.ordinal+1, mr.ordinal))
		}
		return nil
	}
	s.Verify = func(ctx context.Context, sc *ops.StepContext) error {
		sc.Progress(0, 1, "pods", "waiting for pod "+mr.pod+" to be gone")
		if _, err := ops.WaitPod(ctx, sc, e.client, c.Namespace, mr.pod, func(p *corev1.Pod) (bool, error) { return p == nil, nil }); err != nil {
			return err
		}
		if mr.node != "" {
			if err := e.waitNodes(ctx, sc, c, []string{mr.node}, false, []string{mr.pod}); err != nil {
				return err
			}
		}
		total, _, err := e.liveTotals(ctx, c)
		if err != nil {
			return err
		}
		return e.greenStable(ctx, sc, c, total, true)
	}
	return s
}
