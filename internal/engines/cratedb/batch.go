package cratedb

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// sqlStartedCopies lists where every started copy of every shard is (a relocating copy is
// still started on its source node): a batch of pods restarted together must leave each
// shard a started copy on a node outside it, or its table goes red (docs/procedures.md,
// CrateDB: batch and zone restarts).
const sqlStartedCopies = `SELECT schema_name, table_name, partition_ident, id, node['name'] FROM sys.shards WHERE routing_state IN ('STARTED', 'RELOCATING')`

// batchNodes returns the node names of a batch's pods, refusing a pod whose node is not known.
func (g *restartGate) batchNodes(pods []ops.Pod) ([]string, error) {
	var out []string
	for _, p := range pods {
		pn := g.nodes.pods[p.Name]
		if pn == nil || pn.Name == "" {
			return nil, ops.Preconditionf("cannot restart %s together with %d other pods: the CrateDB node of pod %s is not known, so whether every shard keeps a copy outside the batch cannot be checked; use --mode pod",
				p.Name, len(pods)-1, p.Name)
		}
		out = append(out, pn.Name)
	}
	return out, nil
}

// checkBatchMasters refuses a batch that holds half or more of the master-eligible pods:
// with those nodes down at once the others are no majority of the voting configuration
// (quorum.go) and the cluster has no master until they are back.
func (g *restartGate) checkBatchMasters(c *ops.Cluster, pods []ops.Pod) error {
	total := 0
	var in []string
	for _, grp := range c.Groups {
		if !isMasterEligible(grp) {
			continue
		}
		for _, p := range grp.Pods {
			total++
			if slices.ContainsFunc(pods, func(b ops.Pod) bool { return b.Name == p.Name }) {
				in = append(in, p.Name)
			}
		}
	}
	if total > 1 && (total-len(in))*2 <= total {
		return ops.Refusef(ops.ReasonQuorumAtRisk, "restarting %s together would take %d of the %d master-eligible nodes down at once, and the others are no majority of CrateDB's voting configuration: the cluster would have no master; restart them one at a time (--mode pod; replace: a lower --max-concurrent)",
			strings.Join(in, ", "), len(in), total)
	}
	return nil
}

// checkBatch refuses a batch that holds every started copy of a shard, or half or more of
// the master-eligible nodes.
func (g *restartGate) checkBatch(ctx context.Context, c *ops.Cluster, pods []ops.Pod) error {
	if err := g.checkBatchMasters(c, pods); err != nil {
		return err
	}
	nodes, err := g.batchNodes(pods)
	if err != nil {
		return err
	}
	rows, err := g.e.session(c).query(ctx, nil, sqlStartedCopies)
	if err != nil {
		return sqlErr(sqlStartedCopies, err)
	}
	type shard struct{ table, partition, id string }
	inside := map[shard][]string{}
	outside := map[shard]bool{}
	var order []shard
	for _, r := range rows {
		if len(r) < 5 {
			continue
		}
		s := shard{table: toString(r[0]) + "." + toString(r[1]), partition: toString(r[2]), id: toString(r[3])}
		node := toString(r[4])
		if _, seen := inside[s]; !seen && !outside[s] {
			order = append(order, s)
		}
		if slices.Contains(nodes, node) {
			inside[s] = append(inside[s], node)
		} else {
			outside[s] = true
		}
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	for _, s := range order {
		if outside[s] {
			continue
		}
		where := "shard " + s.id + " of table " + s.table
		if s.partition != "" {
			where += " (partition " + s.partition + ")"
		}
		return ops.Preconditionf("restarting %s together would take every started copy of %s (on %s) away and the table would go red; restart them one at a time (--mode pod; replace: a lower --max-concurrent) or give the table more replicas",
			strings.Join(names, ", "), where, strings.Join(inside[s], ", "))
	}
	return nil
}

// BeforeBatch implements ops.BatchChecker for restarts of more than one pod at once
// (--mode zone, --batch N): every shard must keep a started copy on a node outside the
// batch. A full restart (--mode all) takes the whole cluster down on purpose: its shards
// come back from the nodes' disks.
func (g *restartGate) BeforeBatch(ctx context.Context, sc *ops.StepContext, pods []ops.Pod) error {
	if g.mode == ops.ModeAll {
		return nil
	}
	if err := g.checkBatch(ctx, g.c, pods); err != nil {
		return fmt.Errorf("before restarting %d pods together: %w", len(pods), err)
	}
	return nil
}
