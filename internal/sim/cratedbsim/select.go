package cratedbsim

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// virtualTable is a system table answered by the generic "SELECT cols FROM t [WHERE c = v]
// [ORDER BY c] [LIMIT n]" handler.
type virtualTable struct {
	cols []column
	rows func(m *model) [][]any
}

func virtualTables() map[string]virtualTable {
	return map[string]virtualTable{
		"sys.nodes": {
			cols: []column{{"id", oidVarchar}, {"name", oidVarchar}, {"hostname", oidVarchar}},
			rows: func(m *model) [][]any {
				var out [][]any
				for _, n := range m.upNodes() {
					out = append(out, []any{n.id, n.name, n.pod})
				}
				return out
			},
		},
		"sys.cluster": {
			cols: []column{{"id", oidVarchar}, {"name", oidVarchar}, {"master_node", oidVarchar}},
			rows: func(m *model) [][]any {
				var master any
				if id := m.masterID(); id != "" {
					master = id
				}
				return [][]any{{"cratedb-simulator", "crate", master}}
			},
		},
		"sys.node_checks": {
			cols: []column{{"id", oidInt4}, {"acknowledged", oidBool}, {"passed", oidBool}, {"severity", oidInt4}, {"description", oidVarchar}},
			rows: func(m *model) [][]any {
				return [][]any{{int32(1), m.checkAcked, m.expectedNodesPassed(), int32(3),
					"The value of the cluster setting 'gateway.expected_data_nodes' does not match the actual number of data nodes in the cluster."}}
			},
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
			cols: []column{{"grantee", oidVarchar}, {"class", oidVarchar}, {"ident", oidVarchar}, {"state", oidVarchar}, {"type", oidVarchar}},
			rows: func(m *model) [][]any {
				var out [][]any
				for _, name := range slices.Sorted(maps.Keys(m.users)) {
					if !m.users[name].granted {
						continue
					}
					for _, typ := range allPrivileges() {
						out = append(out, []any{name, "CLUSTER", nil, "GRANT", typ})
					}
				}
				return out
			},
		},
		"sys.health": {
			cols: []column{{"table_schema", oidVarchar}, {"table_name", oidVarchar}, {"health", oidVarchar}, {"severity", oidInt2}, {"missing_shards", oidInt4}, {"underreplicated_shards", oidInt4}},
			rows: func(m *model) [][]any {
				var out [][]any
				for _, t := range m.sortedTables() {
					sev, missing, under := m.tableHealth(t)
					schema, name, _ := strings.Cut(t.name, ".")
					out = append(out, []any{schema, name, [...]string{"", "GREEN", "YELLOW", "RED"}[sev], int16(sev), int32(missing), int32(under)})
				}
				return out
			},
		},
		"information_schema.tables": {
			cols: []column{{"table_schema", oidVarchar}, {"table_name", oidVarchar}, {"number_of_shards", oidInt4}, {"number_of_replicas", oidVarchar}},
			rows: func(m *model) [][]any {
				var out [][]any
				for _, t := range m.sortedTables() {
					schema, name, _ := strings.Cut(t.name, ".")
					out = append(out, []any{schema, name, int32(t.shards), t.replicas})
				}
				return out
			},
		},
	}
}

// prepareSimpleSelect recognises SELECT settings[...] FROM sys.cluster and the generic
// single-table selects over virtualTables.
func prepareSimpleSelect(toks []token) (*plan, bool) {
	if len(toks) < 4 || toks[0].kind != tkWord || toks[0].text != "select" {
		return nil, false
	}
	if p, ok := prepareSettingsSelect(toks); ok {
		return p, true
	}
	fromIdx := slices.IndexFunc(toks, func(t token) bool { return t.kind == tkWord && t.text == "from" })
	if fromIdx < 2 || fromIdx+1 >= len(toks) {
		return nil, false
	}
	// Projection: col, col, ... or count(*).
	var projs []string
	countStar := false
	proj := toks[1:fromIdx]
	if len(proj) == 4 && proj[0].text == "count" && proj[1].text == "(" && proj[2].text == "*" && proj[3].text == ")" {
		countStar = true
	} else {
		for i, t := range proj {
			if i%2 == 1 {
				if t.kind != tkPunct || t.text != "," {
					return nil, false
				}
				continue
			}
			if t.kind != tkWord && t.kind != tkQuoted {
				return nil, false
			}
			projs = append(projs, t.text)
		}
	}
	rest := toks[fromIdx+1:]
	n := matchPlaceholder(phIdent, rest)
	if n == 0 {
		return nil, false
	}
	tableName := identName(rest[:n])
	vt, ok := virtualTables()[tableName]
	if !ok {
		return nil, false
	}
	rest = rest[n:]
	colIdx := func(name string) int { return slices.IndexFunc(vt.cols, func(c column) bool { return c.name == name }) }

	var caps []capture
	where := -1
	if len(rest) >= 4 && rest[0].text == "where" {
		where = colIdx(rest[1].text)
		if where < 0 || rest[2].text != "=" {
			return nil, false
		}
		vn := matchPlaceholder(phValue, rest[3:])
		if vn == 0 {
			return nil, false
		}
		caps = append(caps, capture{kind: phValue, toks: rest[3 : 3+vn]})
		rest = rest[3+vn:]
	}
	order, desc := -1, false
	if len(rest) >= 3 && rest[0].text == "order" && rest[1].text == "by" {
		order = colIdx(rest[2].text)
		if order < 0 {
			return nil, false
		}
		rest = rest[3:]
		if len(rest) > 0 && (rest[0].text == "asc" || rest[0].text == "desc") {
			desc = rest[0].text == "desc"
			rest = rest[1:]
		}
	}
	limit := -1
	if len(rest) == 2 && rest[0].text == "limit" && rest[1].kind == tkNumber {
		limit, _ = strconv.Atoi(rest[1].text)
		rest = nil
	}
	if len(rest) != 0 {
		return nil, false
	}

	var outCols []column
	var idx []int
	if countStar {
		outCols = []column{{"count(*)", oidInt8}}
	} else {
		for _, p := range projs {
			i := colIdx(p)
			if i < 0 {
				return nil, false
			}
			idx = append(idx, i)
			outCols = append(outCols, vt.cols[i])
		}
	}
	params, err := paramTypes(caps)
	if err != nil {
		return nil, false
	}
	run := func(x *execCtx) (*result, error) {
		all := vt.rows(x.m)
		if where >= 0 {
			want, err := x.str(0)
			if err != nil {
				return nil, err
			}
			all = slices.DeleteFunc(all, func(r []any) bool { return fmt.Sprint(r[where]) != want })
		}
		if order >= 0 {
			sort.SliceStable(all, func(i, j int) bool {
				a, b := fmt.Sprint(all[i][order]), fmt.Sprint(all[j][order])
				if desc {
					return a > b
				}
				return a < b
			})
		}
		if limit >= 0 && len(all) > limit {
			all = all[:limit]
		}
		if countStar {
			return rows(outCols, []any{int64(len(all))}), nil
		}
		out := make([][]any, 0, len(all))
		for _, r := range all {
			row := make([]any, len(idx))
			for k, i := range idx {
				row[k] = r[i]
			}
			out = append(out, row)
		}
		return rows(outCols, out...), nil
	}
	return &plan{cols: outCols, params: params, run: run, caps: caps}, true
}

// prepareSettingsSelect handles SELECT settings['a']['b']... FROM sys.cluster.
func prepareSettingsSelect(toks []token) (*plan, bool) {
	if toks[1].kind != tkWord || toks[1].text != "settings" {
		return nil, false
	}
	var path []string
	i := 2
	for i+2 < len(toks) && toks[i].text == "[" && toks[i+1].kind == tkString && toks[i+2].text == "]" {
		path = append(path, toks[i+1].text)
		i += 3
	}
	tail := toks[i:]
	if len(path) == 0 || len(tail) != 4 || tail[0].text != "from" || tail[1].text != "sys" || tail[2].text != "." || tail[3].text != "cluster" {
		return nil, false
	}
	var name strings.Builder
	name.WriteString("settings")
	for _, p := range path {
		name.WriteString("['" + p + "']")
	}
	cols := []column{{name.String(), oidVarchar}}
	key := strings.Join(path, ".")
	run := func(x *execCtx) (*result, error) {
		var v any
		switch key {
		case settingAllocationEnable, settingAllocationExclude:
			v = x.m.setting(key)
		default:
			if s, ok := x.m.settings[key]; ok {
				v = s
			}
		}
		return rows(cols, []any{v}), nil
	}
	return &plan{cols: cols, run: run}, true
}
