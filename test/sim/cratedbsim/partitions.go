package cratedbsim

import (
	"encoding/base32"
	"maps"
	"strings"
)

// Partitioned tables and table allocation filters, after CrateDB:
//   - A partitioned table (CREATE TABLE ... PARTITIONED BY (col)) holds no shards itself; each
//     distinct value of col gets a partition when a row with it is inserted, with the table's
//     current shards, number_of_replicas and routing settings (docs/general/ddl/partitioned-tables.rst).
//     information_schema.tables lists the table (its settings are the template for new
//     partitions), information_schema.table_partitions each partition with its own settings.
//   - ALTER TABLE t SET (...) changes the table and every existing partition, ALTER TABLE ONLY t
//     SET (...) only the template, ALTER TABLE t PARTITION (col = v) SET (...) one partition
//     (docs/sql/statements/alter-table.rst), so a partition can keep number_of_replicas the
//     table no longer shows.
//   - Table settings routing.allocation.{require,include,exclude}.<attr> restrict the nodes a
//     copy may live on (docs/sql/statements/create-table.rst; Elasticsearch's
//     FilterAllocationDecider and DiscoveryNodeFilters, which CrateDB's server keeps): require:
//     every attribute matches, include: some attribute matches, exclude: none matches; values
//     are comma separated with '*' wildcards. A copy on a node the filters no longer allow is
//     moved, like a copy on an excluded node, when a node can take it.
//     Only the built-in attributes _name, _id, _host and _ip are modelled.

// oidJSON is the type CrateDB's PostgreSQL protocol uses for OBJECT values (PGTypes: json).
const oidJSON uint32 = 114

// partitionIdent derives an opaque partition ident from the partition value. CrateDB's
// PartitionName encodes the values in base32 too; clients read idents, they do not compute
// them.
func partitionIdent(value string) string {
	enc := base32.HexEncoding.WithPadding(base32.NoPadding)
	return "0" + strings.ToLower(enc.EncodeToString([]byte(value)))
}

// partitionKey is the model's key for a partition of table parent.
func partitionKey(parent, ident string) string { return parent + "/" + ident }

// filterAttrs are the node attributes filters can name in the model.
func (n *simNode) filterAttr(attr string) (string, bool) {
	switch attr {
	case "_name":
		return n.name, true
	case "_id":
		return n.id, true
	case "_host":
		return n.hostname, true
	case "_ip", "_host_ip", "_publish_ip":
		return n.ip, true
	}
	return "", false
}

// wildcardMatch is Elasticsearch's Regex.simpleMatch: '*' matches any run of characters.
func wildcardMatch(pattern, s string) bool {
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

func (n *simNode) matchesFilter(attr, values string) bool {
	v, ok := n.filterAttr(attr)
	if !ok {
		return false
	}
	for _, p := range strings.Split(values, ",") {
		if p = strings.TrimSpace(p); p != "" && wildcardMatch(p, v) {
			return true
		}
	}
	return false
}

// filtersAllow applies t's routing.allocation filters to n.
func (t *table) filtersAllow(n *simNode) bool {
	include := false
	hasInclude := false
	for key, vals := range t.filters {
		kind, attr, _ := strings.Cut(key, ".")
		switch kind {
		case "require":
			if !n.matchesFilter(attr, vals) {
				return false
			}
		case "include":
			hasInclude = true
			include = include || n.matchesFilter(attr, vals)
		case "exclude":
			if n.matchesFilter(attr, vals) {
				return false
			}
		}
	}
	return !hasInclude || include
}

// eligibleFor is eligible narrowed by the table's filters.
func (m *model) eligibleFor(t *table, n *simNode) bool { return m.eligible(n) && t.filtersAllow(n) }

// mustMove says whether a copy on node has to leave it: the node is excluded from allocation
// or the table's filters no longer allow it.
func (m *model) mustMove(t *table, node string) bool {
	if m.excluded(node) {
		return true
	}
	n := m.nodes[node]
	return n != nil && !t.filtersAllow(n)
}

// partitions lists the partitions of parent, sorted by ident.
func (m *model) partitions(parent string) []*table {
	var out []*table
	for _, t := range m.sortedTables() {
		if t.parent == parent {
			out = append(out, t)
		}
	}
	return out
}

// setReplicas is ALTER TABLE t SET (number_of_replicas = r): a partitioned table passes it on
// to its partitions unless only is set (ALTER TABLE ONLY).
func (m *model) setReplicas(t *table, r string, only bool) {
	t.replicas = r
	if t.partitioned && !only {
		for _, p := range m.partitions(t.name) {
			p.replicas = r
		}
	}
	m.allocate()
}

// setFilter is ALTER TABLE ... SET ("routing.allocation.<kind>.<attr>" = v); an empty value
// removes the filter.
func (m *model) setFilter(t *table, key, v string, only bool) {
	targets := []*table{t}
	if t.partitioned && !only {
		targets = append(targets, m.partitions(t.name)...)
	}
	for _, x := range targets {
		if x.filters == nil {
			x.filters = map[string]string{}
		}
		if v == "" {
			delete(x.filters, key)
		} else {
			x.filters[key] = v
		}
	}
	m.allocate()
}

// addPartition creates the partition of parent for value, as an INSERT does.
func (m *model) addPartition(parent *table, value string) {
	ident := partitionIdent(value)
	key := partitionKey(parent.name, ident)
	if m.tables[key] != nil {
		return
	}
	p := &table{name: key, parent: parent.name, ident: ident, value: value, shards: parent.shards,
		replicas: parent.replicas, copies: make([][]*shardCopy, parent.shards), anywhere: true,
		filters: maps.Clone(parent.filters)}
	m.tables[key] = p
	m.allocate()
}

// filterObjects renders t's filters as information_schema's settings['routing']['allocation']
// require, include and exclude objects.
func (t *table) filterObjects() (require, include, exclude map[string]any) {
	require, include, exclude = map[string]any{}, map[string]any{}, map[string]any{}
	for key, v := range t.filters {
		kind, attr, _ := strings.Cut(key, ".")
		switch kind {
		case "require":
			require[attr] = v
		case "include":
			include[attr] = v
		case "exclude":
			exclude[attr] = v
		}
	}
	return
}

// schemaName splits a model table name into CrateDB's schema and table (a partition reports
// its table's).
func (t *table) schemaName() (schema, name string) {
	full := t.name
	if t.parent != "" {
		full = t.parent
	}
	schema, name, ok := strings.Cut(full, ".")
	if !ok {
		return "doc", full
	}
	return schema, name
}

func tablesVirtualTable() virtualTable {
	cols := []column{{"table_schema", oidVarchar}, {"table_name", oidVarchar}, {"number_of_shards", oidInt4}, {"number_of_replicas", oidVarchar},
		{"partitioned_by", oidVarchar},
		{"settings['routing']['allocation']['require']", oidJSON}, {"settings['routing']['allocation']['include']", oidJSON}, {"settings['routing']['allocation']['exclude']", oidJSON}}
	return virtualTable{cols: cols, rows: func(m *model) [][]any {
		var out [][]any
		for _, t := range m.sortedTables() {
			if t.parent != "" {
				continue
			}
			schema, name := t.schemaName()
			var by any
			if t.partitioned {
				by = t.partitionedBy
			}
			req, inc, exc := t.filterObjects()
			out = append(out, []any{schema, name, int32(t.shards), t.replicas, by, req, inc, exc})
		}
		return out
	}}
}

func partitionsVirtualTable() virtualTable {
	cols := []column{{"table_schema", oidVarchar}, {"table_name", oidVarchar}, {"partition_ident", oidVarchar}, {"number_of_shards", oidInt4}, {"number_of_replicas", oidVarchar},
		{"settings['routing']['allocation']['require']", oidJSON}, {"settings['routing']['allocation']['include']", oidJSON}, {"settings['routing']['allocation']['exclude']", oidJSON}}
	return virtualTable{cols: cols, rows: func(m *model) [][]any {
		var out [][]any
		for _, t := range m.sortedTables() {
			if t.parent == "" {
				continue
			}
			schema, name := t.schemaName()
			req, inc, exc := t.filterObjects()
			out = append(out, []any{schema, name, t.ident, int32(t.shards), t.replicas, req, inc, exc})
		}
		return out
	}}
}

// tableSetting applies one ALTER TABLE setting to t.
func tableSetting(x *execCtx, t *table, key, val string, only bool) error {
	switch {
	case key == "number_of_replicas":
		if err := validateReplicas(val); err != nil {
			return err
		}
		x.m.setReplicas(t, val, only)
	case strings.HasPrefix(key, "routing.allocation.require.") || strings.HasPrefix(key, "routing.allocation.include.") || strings.HasPrefix(key, "routing.allocation.exclude."):
		x.m.setFilter(t, strings.TrimPrefix(key, "routing.allocation."), val, only)
	default:
		return errIllegal("Setting '%s' is not supported by the CrateDB simulator", key)
	}
	x.mutated = true
	return nil
}

// dropPartitions forgets the partitions of a dropped table.
func (m *model) dropPartitions(parent string) {
	for _, p := range m.partitions(parent) {
		m.dropTable(p.name)
	}
}
