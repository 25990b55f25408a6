package cratedbsim

import (
	"maps"
	"slices"
	"strings"
)

// virtualTable is a system table SELECT evaluates (query.go). Columns may be declared with
// subscripts ("node['name']"): a reference to their prefix ("node") reads the object they
// form, and a subscript into an oidJSON column reads into its value.
type virtualTable struct {
	cols []column
	rows func(m *model) [][]any
	// stateless tables answer before the cluster state is recovered.
	stateless bool
}

func virtualTables() map[string]virtualTable {
	return map[string]virtualTable{
		"sys.nodes": {
			cols: []column{{"id", oidVarchar}, {"name", oidVarchar}, {"hostname", oidVarchar},
				{"rest_url", oidVarchar}, {"version['number']", oidVarchar}, {"attributes", oidJSON}},
			stateless: true,
			rows: func(m *model) [][]any {
				var out [][]any
				for _, n := range m.upNodes() {
					out = append(out, []any{n.id, n.name, n.hostname, n.ip + ":4200", n.version.String(), n.attributes()})
				}
				// Nodes that stopped but whose departure the master has not noticed yet.
				for _, g := range m.liveGhosts() {
					out = append(out, []any{g.id, g.name, g.hostname, g.ip + ":4200", g.version.String(), map[string]any{}})
				}
				// Voting nodes that stopped, until the master published their departure.
				for _, g := range m.leaving {
					if !slices.ContainsFunc(m.liveGhosts(), func(x ghost) bool { return x.id == g.id }) {
						out = append(out, []any{g.id, g.name, g.hostname, g.ip + ":4200", g.version.String(), map[string]any{}})
					}
				}
				return out
			},
		},
		"sys.cluster":     clusterVirtualTable(),
		"sys.shards":      shardsVirtualTable(),
		"sys.allocations": allocationsVirtualTable(),
		"sys.node_checks": {
			cols: []column{{"id", oidInt4}, {"node_id", oidVarchar}, {"description", oidVarchar},
				{"severity", oidInt4}, {"passed", oidBool}, {"acknowledged", oidBool}},
			stateless: true,
			rows:      func(m *model) [][]any { return m.nodeCheckRows() },
		},
		"sys.users": {
			cols: []column{{"name", oidVarchar}, {"superuser", oidBool}},
			rows: func(m *model) [][]any {
				var out [][]any
				for _, name := range slices.Sorted(maps.Keys(m.users)) {
					out = append(out, []any{name, m.users[name].superuser})
				}
				return out
			},
		},
		"sys.privileges": {
			cols: []column{{"class", oidVarchar}, {"grantee", oidVarchar}, {"grantor", oidVarchar}, {"ident", oidVarchar}, {"state", oidVarchar}, {"type", oidVarchar}},
			rows: func(m *model) [][]any { return m.privilegeRows() },
		},
		"sys.health": {
			cols: []column{{"table_schema", oidVarchar}, {"table_name", oidVarchar}, {"health", oidVarchar}, {"severity", oidInt2}, {"missing_shards", oidInt4}, {"underreplicated_shards", oidInt4}},
			rows: func(m *model) [][]any {
				var out [][]any
				for _, t := range m.sortedTables() {
					if t.partitioned {
						continue // its partitions hold its shards
					}
					sev, missing, under := m.tableHealth(t)
					schema, name := t.schemaName()
					out = append(out, []any{schema, name, [...]string{"", "GREEN", "YELLOW", "RED"}[sev], int16(sev), int32(missing), int32(under)})
				}
				return out
			},
		},
		"information_schema.tables":           tablesVirtualTable(),
		"information_schema.table_partitions": partitionsVirtualTable(),
	}
}

// clusterVirtualTable is sys.cluster: its id, name, master and settings, each runtime setting
// a leaf of the settings object (settings['cluster']['routing']['allocation']['enable']), so
// that a name CrateDB does not expose is an unknown column.
func clusterVirtualTable() virtualTable {
	keys := slices.Sorted(maps.Keys(runtimeSettings()))
	cols := []column{{"id", oidVarchar}, {"name", oidVarchar}, {"master_node", oidVarchar}}
	for _, k := range keys {
		var b strings.Builder
		b.WriteString("settings")
		for _, p := range strings.Split(k, ".") {
			b.WriteString("['" + p + "']")
		}
		cols = append(cols, column{b.String(), settingOID(k)})
	}
	return virtualTable{cols: cols, stateless: true, rows: func(m *model) [][]any {
		var master any
		if id := m.masterID(); id != "" {
			master = id
		}
		row := []any{"cratedb-simulator", "crate", master}
		for _, k := range keys {
			row = append(row, typedSetting(settingOID(k), m.setting(k)))
		}
		return [][]any{row}
	}}
}

// shardsVirtualTable is sys.shards: one row per assigned shard copy (docs/admin/system-information.rst
// of crate/crate), routing_state STARTED, INITIALIZING (a copy being built, state RECOVERING)
// or RELOCATING (a started copy whose replacement is being built elsewhere); partition_ident
// is ” for a table that is not partitioned. size (BIGINT, "the current size in bytes") is
// Config.ShardSize for a started copy and the bytes received so far for a copy being built
// (recovery.go); 0 when the model keeps no sizes (ShardSize unset: instant recoveries).
// recovery['size'] (same doc: "used": "Total number of bytes in the shard", "recovered":
// "Number of bytes recovered. Includes both existing and re-used bytes", "reused": "Number
// of bytes re-used from a local copy", all BIGINT) is the copy's last recovery: a copy
// being built has used = ShardSize and recovered = the bytes received so far; a started
// copy's recovery is done (recovered = used). reused is 0: the simulator recovers whole
// shards (recovery.go).
func shardsVirtualTable() virtualTable {
	cols := []column{{"schema_name", oidVarchar}, {"table_name", oidVarchar}, {"partition_ident", oidVarchar},
		{"id", oidInt4}, {"primary", oidBool}, {"routing_state", oidVarchar}, {"state", oidVarchar},
		{"node['id']", oidVarchar}, {"node['name']", oidVarchar}, {"size", oidInt8},
		{"recovery['size']['used']", oidInt8}, {"recovery['size']['recovered']", oidInt8}, {"recovery['size']['reused']", oidInt8}}
	return virtualTable{cols: cols, rows: func(m *model) [][]any {
		ids := map[string]string{}
		for _, n := range m.upNodes() {
			ids[n.name] = n.id
		}
		var out [][]any
		for _, t := range m.sortedTables() {
			schema, name := t.schemaName()
			for id, copies := range t.copies {
				relocating := map[string]bool{}
				for _, c := range copies {
					if c.relocatingFrom != "" {
						relocating[c.relocatingFrom] = true
					}
				}
				for _, c := range copies {
					routing, state := "STARTED", "STARTED"
					switch {
					case !c.started:
						routing, state = "INITIALIZING", "RECOVERING"
					case relocating[c.node]:
						routing = "RELOCATING"
					}
					var nodeID any
					if v, ok := ids[c.node]; ok {
						nodeID = v
					}
					size := m.shardSize
					if !c.started {
						size = int64(c.recovered)
					}
					out = append(out, []any{schema, name, t.ident, int32(id), c.primary, routing, state, nodeID, c.node, size,
						m.shardSize, size, int64(0)})
				}
			}
		}
		return out
	}}
}
