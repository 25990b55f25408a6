package cratedb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// What keeps shards from leaving the nodes a drain empties (docs/procedures.md, CrateDB,
// "Drains that cannot stall"): checked before the exclusion is set and on every poll of the
// drain, so a drain that cannot finish is refused or stopped instead of timing out.
const (
	sqlTableAlloc = `SELECT table_schema, table_name, number_of_shards, number_of_replicas, ` +
		`settings['routing']['allocation']['require'], settings['routing']['allocation']['include'], settings['routing']['allocation']['exclude'] ` +
		`FROM information_schema.tables`
	sqlPartitionAlloc = `SELECT table_schema, table_name, partition_ident, number_of_replicas, ` +
		`settings['routing']['allocation']['require'], settings['routing']['allocation']['include'], settings['routing']['allocation']['exclude'] ` +
		`FROM information_schema.table_partitions`
	sqlNodeAttributes = `SELECT name, attributes FROM sys.nodes`
)

// settingAwareness is not a runtime setting in CrateDB (docs/config/cluster.rst): every node
// is started with it, so it is read from the crate containers' -C arguments.
const settingAwareness = "cluster.routing.allocation.awareness.attributes"

// awarenessAttributes lists the awareness attributes the StatefulSets start their nodes with.
func awarenessAttributes(c *ops.Cluster) []string {
	var out []string
	for _, g := range c.Groups {
		if ops.StatefulSetOf(g) == nil {
			continue
		}
		ct := crateContainerOf(&ops.StatefulSetOf(g).Spec.Template.Spec)
		if ct == nil {
			continue
		}
		for _, a := range splitList(settingsOf(ct)[settingAwareness]) {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// shardUnit is a table or one partition of a partitioned table: the unit that carries its own
// number_of_replicas and allocation filters.
type shardUnit struct {
	schema, table, partition string
	replicas                 string
	// filters: "require", "include", "exclude" -> attribute -> comma separated values.
	filters map[string]map[string]string
}

func (u shardUnit) String() string {
	s := "table " + u.schema + "." + u.table
	if u.partition != "" {
		s += " partition " + u.partition
	}
	return s
}

// filterSetting names the table setting of a filter, as ALTER TABLE takes it.
func filterSetting(kind, attr, val string) string {
	return fmt.Sprintf("routing.allocation.%s.%s = '%s'", kind, attr, val)
}

// readShardUnits reads every table with shards and every partition.
func (e *Engine) readShardUnits(ctx context.Context, c *ops.Cluster, avoid []string) ([]shardUnit, error) {
	rows, err := e.queryDB(ctx, nil, c, avoid, sqlTableAlloc)
	if err != nil {
		return nil, err
	}
	var out []shardUnit
	for _, r := range rows {
		if len(r) < 7 || r[2] == nil {
			continue // a view or a system table: no shards
		}
		out = append(out, shardUnit{schema: toString(r[0]), table: toString(r[1]), replicas: toString(r[3]),
			filters: map[string]map[string]string{"require": objectStrings(r[4]), "include": objectStrings(r[5]), "exclude": objectStrings(r[6])}})
	}
	rows, err = e.queryDB(ctx, nil, c, avoid, sqlPartitionAlloc)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if len(r) < 7 {
			continue
		}
		out = append(out, shardUnit{schema: toString(r[0]), table: toString(r[1]), partition: toString(r[2]), replicas: toString(r[3]),
			filters: map[string]map[string]string{"require": objectStrings(r[4]), "include": objectStrings(r[5]), "exclude": objectStrings(r[6])}})
	}
	return out, nil
}

// objectStrings reads an OBJECT cell (JSON over pgwire) as attribute -> value.
func objectStrings(v any) map[string]string {
	out := map[string]string{}
	m, ok := v.(map[string]any)
	if !ok {
		return out
	}
	for k, x := range m {
		if s := strings.TrimSpace(toString(x)); s != "" {
			out[k] = s
		}
	}
	return out
}

// attrNode is a node as allocation filters and awareness see it: its sys.nodes row and its
// custom attributes (node.attr.*, sys.nodes.attributes).
type attrNode struct {
	nodeRow
	attrs map[string]string
}

// nodeAttr is the value of a filter attribute of a node; ok is false when the node does not
// have it.
func nodeAttr(n attrNode, attr string) (string, bool) {
	switch attr {
	case "_name":
		return n.Name, true
	case "_id":
		return n.ID, true
	case "_host":
		return n.Hostname, true
	case "_ip", "_host_ip", "_publish_ip":
		return n.RestHost, true
	}
	v, ok := n.attrs[attr]
	return v, ok
}

// simpleMatch matches s against a pattern whose only wildcard is '*', as CrateDB's node
// filters do.
func simpleMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

func attrMatches(n attrNode, attr, values string) (match, known bool) {
	v, known := nodeAttr(n, attr)
	if !known {
		return false, false
	}
	for _, p := range splitList(values) {
		if simpleMatch(p, v) {
			return true, true
		}
	}
	return false, true
}

// allows says whether u's filters let a copy live on n: every require attribute matches,
// some include attribute matches (when there are any), no exclude attribute matches. A
// require or include on an attribute the node lacks does not match (CrateDB's
// DiscoveryNodeFilters).
func (u shardUnit) allows(n attrNode) bool {
	for attr, vals := range u.filters["require"] {
		if m, _ := attrMatches(n, attr, vals); !m {
			return false
		}
	}
	if inc := u.filters["include"]; len(inc) > 0 {
		hit := false
		for attr, vals := range inc {
			m, _ := attrMatches(n, attr, vals)
			hit = hit || m
		}
		if !hit {
			return false
		}
	}
	for attr, vals := range u.filters["exclude"] {
		if m, _ := attrMatches(n, attr, vals); m {
			return false
		}
	}
	return true
}

// filterText lists u's filters, for messages.
func (u shardUnit) filterText() string {
	var out []string
	for _, kind := range []string{"require", "include", "exclude"} {
		for _, attr := range slices.Sorted(maps.Keys(u.filters[kind])) {
			out = append(out, filterSetting(kind, attr, u.filters[kind][attr]))
		}
	}
	return strings.Join(out, ", ")
}

// dataNodes are the sys.nodes rows of data-holding pods, with their attributes; remain says
// which stay: not leaving and not excluded from allocation by anyone else.
func dataNodes(c *ops.Cluster, m *nodeMap, attrs map[string]map[string]string, leaving, excluded []string) (all, remain []attrNode) {
	for _, p := range c.AllPods() {
		g := c.Group(p.Group)
		pn := m.pods[p.Name]
		if g == nil || pn == nil || pn.Row == nil || !holdsData(g) {
			continue
		}
		n := attrNode{nodeRow: *pn.Row, attrs: attrs[pn.Row.Name]}
		all = append(all, n)
		if slices.Contains(leaving, pn.Row.Name) || slices.Contains(excluded, pn.Row.Name) {
			continue
		}
		remain = append(remain, n)
	}
	return all, remain
}

// readNodeAttributes reads sys.nodes.attributes per node name; only asked when awareness or a
// filter names a custom attribute, so a version without the column is never asked.
func (e *Engine) readNodeAttributes(ctx context.Context, c *ops.Cluster, avoid []string) (map[string]map[string]string, error) {
	rows, err := e.queryDB(ctx, nil, c, avoid, sqlNodeAttributes)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, r := range rows {
		if len(r) > 1 {
			out[toString(r[0])] = objectStrings(r[1])
		}
	}
	return out, nil
}

// customAttrs reports whether a unit filters on a custom node attribute.
func customAttrs(units []shardUnit) bool {
	for _, u := range units {
		for _, f := range u.filters {
			for attr := range f {
				if _, builtin := nodeAttr(attrNode{}, attr); !builtin {
					return true
				}
			}
		}
	}
	return false
}

// awarenessFit is how many copies of a shard with copies copies the remaining nodes can hold
// under allocation awareness on attrs (CrateDB keeps Elasticsearch's
// AwarenessAllocationDecider): per attribute, at most ceil(copies / values) per value, the
// values counted over all data nodes (leaving ones included: they are still in the cluster),
// one copy per node, none on a node without the attribute. The smallest fit over the
// attributes, and the attribute that gives it.
func awarenessFit(attrs []string, all, remain []attrNode, copies int) (fit int, attr string) {
	fit = len(remain)
	for _, a := range attrs {
		values := map[string]bool{}
		for _, n := range all {
			if v, ok := n.attrs[a]; ok {
				values[v] = true
			}
		}
		perValue := (copies + max(len(values), 1) - 1) / max(len(values), 1)
		per := map[string]int{}
		for _, n := range remain {
			if v, ok := n.attrs[a]; ok {
				per[v]++
			}
		}
		f := 0
		for _, k := range per {
			f += min(k, perValue)
		}
		if f < fit {
			fit, attr = f, a
		}
	}
	return fit, attr
}

// checkDrainable refuses (exit 5) a drain of leaving that cannot finish: allocation not
// fully enabled, or a table or partition whose copies would not fit on the data nodes its
// replicas and allocation filters leave it. what starts the message ("cannot scale hot down").
func (e *Engine) checkDrainable(ctx context.Context, c *ops.Cluster, avoid []string, what string, leaving []string) error {
	// One-shot reads ride out a master election as every poll does.
	rows, err := e.queryDB(ctx, nil, c, avoid, sqlAllocEnable)
	if err != nil {
		return err
	}
	// primaries and new_primaries keep replicas where they are, none keeps everything
	// (CrateDB's EnableAllocationDecider); a node with nothing to drain needs no moves.
	if v := strings.ToLower(strings.TrimSpace(cellString(rows, 0))); len(leaving) > 0 && v != "" && v != "all" {
		return ops.Refusef(ops.ReasonPreconditionFailed, "%s: cluster.routing.allocation.enable is '%s', so shards cannot all move off %s; reset it first (RESET GLOBAL \"cluster.routing.allocation.enable\")",
			what, v, strings.Join(leaving, ", "))
	}
	rows, err = e.queryDB(ctx, nil, c, avoid, sqlExclusions)
	if err != nil {
		return err
	}
	excluded := splitList(cellString(rows, 0))
	awareness := awarenessAttributes(c)
	m, err := e.mapNodes(ctx, c, avoid)
	if err != nil {
		return err
	}
	units, err := e.readShardUnits(ctx, c, avoid)
	if err != nil {
		return err
	}
	var attrs map[string]map[string]string
	if len(awareness) > 0 || customAttrs(units) {
		if attrs, err = e.readNodeAttributes(ctx, c, avoid); err != nil {
			return err
		}
	}
	all, remain := dataNodes(c, m, attrs, leaving, excluded)
	for _, u := range units {
		n, bounded, err := replicaCount(u.replicas)
		if err != nil {
			return ops.Preconditionf("%s: %s: %v", what, u, err)
		}
		need := n + 1
		if !bounded {
			need = len(remain) + 1
		}
		var allowed []attrNode
		for _, r := range remain {
			if u.allows(r) {
				allowed = append(allowed, r)
			}
		}
		fit := len(allowed)
		if aware, attr := awarenessFit(awareness, all, allowed, need); aware < need && fit >= need {
			return ops.Refusef(ops.ReasonPreconditionFailed, "%s: %s has number_of_replicas = '%s' and cluster.routing.allocation.awareness.attributes = '%s': the data nodes that remain can hold %d of its %d copies per shard spread over the %s values; change that setting first",
				what, u, u.replicas, strings.Join(awareness, ","), aware, need, attr)
		}
		if fit >= need {
			continue
		}
		if f := u.filterText(); f != "" {
			return ops.Refusef(ops.ReasonPreconditionFailed, "%s: %s has number_of_replicas = '%s' and %s, which leave it %d of the %d data nodes that remain, and it needs %d; change that setting first",
				what, u, u.replicas, f, fit, len(remain), need)
		}
		return ops.Refusef(ops.ReasonPreconditionFailed, "%s: %s has number_of_replicas = '%s', which needs %s data nodes, and only %d would remain; lower that setting first",
			what, u, u.replicas, strconv.Itoa(need), len(remain))
	}
	return nil
}

// queryDB runs a read that must not fail on a transient error (a master election), retried
// as every poll is.
func (e *Engine) queryDB(ctx context.Context, sc *ops.StepContext, c *ops.Cluster, avoid []string, sql string, args ...any) ([][]any, error) {
	var out [][]any
	err := e.pollDB(ctx, sc, func() (bool, error) {
		rows, err := e.session(c).query(ctx, avoid, sql, args...)
		if err != nil {
			return false, err
		}
		out = rows
		return true, nil
	})
	if err != nil {
		return nil, sqlErr(sql, err)
	}
	return out, nil
}

// checkRetried runs a check whose reads must ride out transient errors (a master election at
// a step's start): a refusal ends it at once, other errors are retried as a poll's are.
func (e *Engine) checkRetried(ctx context.Context, sc *ops.StepContext, check func() error) error {
	var refusal error
	err := e.pollDB(ctx, sc, func() (bool, error) {
		err := check()
		if errors.Is(err, ops.ErrPrecondition) || errors.Is(err, ops.ErrUsage) {
			refusal = err
			return true, nil
		}
		return err == nil, err
	})
	if err != nil {
		return err
	}
	return refusal
}
