package cratedb

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// What a drain waits on, named (issue 41: blocked-on names the object): a started copy on a
// node being drained is one CrateDB could not move; sys.allocations says why, per node that
// refused it (docs/procedures.md, CrateDB, "What a waiting drain is blocked on").
const (
	sqlStuckShards = `SELECT table_schema, table_name, partition_ident, shard_id, node_id, current_state, explanation, decisions FROM sys.allocations WHERE current_state = 'STARTED'`
	// hintAllocations is the generic way to see why shards stay.
	hintAllocations = "see why a shard stays: SELECT table_schema, table_name, shard_id, explanation FROM sys.allocations"
)

// stuckShard is a copy that cannot leave a node a drain empties.
type stuckShard struct {
	schema, table, partition string
	shard                    int64
	node                     string
	explanation              string
	// refusals are the other nodes' explanations of why they do not take it, by node name.
	refusals map[string][]string
}

// on names the object: table, shard and the node it cannot leave.
func (s *stuckShard) on() string {
	t := "table " + s.schema + "." + s.table
	if s.partition != "" {
		t += " partition " + s.partition
	}
	return fmt.Sprintf("%s shard %d on node %s (%s)", t, s.shard, s.node, s.explanation)
}

// settingRef finds the setting a decider's explanation cites: "[name=value]".
var settingRef = regexp.MustCompile(`\[((?:cluster|index)\.[a-z0-9_.]+)=([^\]]*)\]`)

// toUnblock is one sentence: free disk or raise the watermark when every refusal is a disk
// watermark, else the first refusal with its setting, else where to look.
func (s *stuckShard) toUnblock() string {
	var full []string
	var setting, value, first string
	for _, n := range slices.Sorted(maps.Keys(s.refusals)) {
		for _, why := range s.refusals[n] {
			if first == "" {
				first = n + ": " + why
			}
			if m := settingRef.FindStringSubmatch(why); m != nil && strings.HasPrefix(m[1], "cluster.routing.allocation.disk.watermark.") {
				if !slices.Contains(full, n) {
					full = append(full, n)
				}
				setting, value = m[1], m[2]
			}
		}
	}
	if len(full) > 0 && len(full) == len(s.refusals) {
		return fmt.Sprintf("free disk on %s (above %s = %s), or raise that setting: SET GLOBAL TRANSIENT \"%s\" = '<higher>'",
			strings.Join(full, ", "), setting, value, setting)
	}
	if first != "" {
		return "the other nodes refuse it (" + first + "); change what they cite, or " + hintAllocations
	}
	return hintAllocations
}

// stuckShard reads sys.allocations for a started copy on one of leaving (node names) that
// CrateDB does not move: the first by table and shard, nil when there is none.
func (e *Engine) stuckShard(ctx context.Context, c *ops.Cluster, avoid, leaving []string) (*stuckShard, error) {
	nodes, err := e.readNodes(ctx, c, avoid)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, n := range nodes {
		names[n.ID] = n.Name
	}
	rows, err := e.session(c).query(ctx, avoid, sqlStuckShards)
	if err != nil {
		return nil, sqlErr(sqlStuckShards, err)
	}
	var out []*stuckShard
	for _, r := range rows {
		if len(r) < 8 {
			continue
		}
		node := names[toString(r[4])]
		if !slices.Contains(leaving, node) {
			continue
		}
		s := &stuckShard{schema: toString(r[0]), table: toString(r[1]), partition: toString(r[2]), shard: toInt(r[3]), node: node,
			explanation: toString(r[6]), refusals: map[string][]string{}}
		ds, _ := r[7].([]any)
		for _, d := range ds {
			m, ok := d.(map[string]any)
			if !ok || toString(m["node_name"]) == node {
				continue
			}
			var whys []string
			list, _ := m["explanations"].([]any)
			for _, w := range list {
				if x := toString(w); x != "" {
					whys = append(whys, x)
				}
			}
			if len(whys) > 0 {
				s.refusals[toString(m["node_name"])] = whys
			}
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, nil
	}
	slices.SortFunc(out, func(a, b *stuckShard) int {
		return cmp.Or(cmp.Compare(a.schema, b.schema), cmp.Compare(a.table, b.table), cmp.Compare(a.partition, b.partition), cmp.Compare(a.shard, b.shard))
	})
	return out[0], nil
}
