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
		"sys.cluster": {
			cols:      []column{{"id", oidVarchar}, {"name", oidVarchar}, {"master_node", oidVarchar}},
			stateless: true,
			rows: func(m *model) [][]any {
				var master any
				if id := m.masterID(); id != "" {
					master = id
				}
				return [][]any{{"cratedb-simulator", "crate", master}}
			},
		},
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
	// Projection: col, col, ... or count(*); a column may be subscripted (version['number']).
	var projs []string
	countStar := false
	distinct := "" // count(DISTINCT col)
	countEq := -1  // count(*) = N, a boolean
	proj := toks[1:fromIdx]
	if len(proj) >= 2 && proj[0].text == "(" && proj[len(proj)-1].text == ")" && proj[1].text == "count" {
		proj = proj[1 : len(proj)-1]
	}
	if len(proj) == 6 && proj[0].text == "count" && proj[1].text == "(" && proj[2].text == "*" && proj[3].text == ")" && proj[4].text == "=" && proj[5].kind == tkNumber {
		n, err := strconv.Atoi(proj[5].text)
		if err != nil {
			return nil, false
		}
		countEq = n
	} else if len(proj) == 4 && proj[0].text == "count" && proj[1].text == "(" && proj[2].text == "*" && proj[3].text == ")" {
		countStar = true
	} else if len(proj) >= 5 && proj[0].text == "count" && proj[1].text == "(" && proj[2].kind == tkWord && proj[2].text == "distinct" {
		name, n := readColumn(proj[3:])
		if n == 0 || len(proj) != 3+n+1 || proj[3+n].text != ")" {
			return nil, false
		}
		distinct = name
	} else {
		for len(proj) > 0 {
			name, n := readColumn(proj)
			if n == 0 {
				return nil, false
			}
			projs = append(projs, name)
			proj = proj[n:]
			if len(proj) > 0 {
				if proj[0].kind != tkPunct || proj[0].text != "," {
					return nil, false
				}
				proj = proj[1:]
			}
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

	// WHERE col = value [AND col = value ...]
	var caps []capture
	var where []int
	if len(rest) > 0 && rest[0].text == "where" {
		rest = rest[1:]
		for {
			name, n := readColumn(rest)
			if n == 0 || len(rest) < n+2 || rest[n].text != "=" {
				return nil, false
			}
			col := colIdx(name)
			if col < 0 {
				return nil, false
			}
			vn := matchPlaceholder(phValue, rest[n+1:])
			if vn == 0 {
				return nil, false
			}
			where = append(where, col)
			caps = append(caps, capture{kind: phValue, toks: rest[n+1 : n+1+vn]})
			rest = rest[n+1+vn:]
			if len(rest) == 0 || rest[0].kind != tkWord || rest[0].text != "and" {
				break
			}
			rest = rest[1:]
		}
	}
	order, desc := -1, false
	if len(rest) >= 3 && rest[0].text == "order" && rest[1].text == "by" {
		name, n := readColumn(rest[2:])
		order = colIdx(name)
		if n == 0 || order < 0 {
			return nil, false
		}
		rest = rest[2+n:]
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
	distinctCol := -1
	if countStar {
		outCols = []column{{"count(*)", oidInt8}}
	} else if countEq >= 0 {
		outCols = []column{{"(count(*) = " + strconv.Itoa(countEq) + ")", oidBool}}
	} else if distinct != "" {
		if distinctCol = colIdx(distinct); distinctCol < 0 {
			return nil, false
		}
		outCols = []column{{"count(DISTINCT " + distinct + ")", oidInt8}}
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
		for k, col := range where {
			want, err := x.str(k)
			if err != nil {
				return nil, err
			}
			all = slices.DeleteFunc(all, func(r []any) bool { return fmt.Sprint(r[col]) != want })
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
		if countEq >= 0 {
			return rows(outCols, []any{len(all) == countEq}), nil
		}
		if distinctCol >= 0 {
			// NULLs are not counted, as in SQL.
			seen := map[string]bool{}
			for _, r := range all {
				if r[distinctCol] != nil {
					seen[fmt.Sprint(r[distinctCol])] = true
				}
			}
			return rows(outCols, []any{int64(len(seen))}), nil
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
	return &plan{cols: outCols, params: params, run: run, caps: caps, stateless: vt.stateless}, true
}

// readColumn reads a column reference: a name, optionally followed by ['key'] subscripts.
func readColumn(toks []token) (string, int) {
	if len(toks) == 0 || (toks[0].kind != tkWord && toks[0].kind != tkQuoted) {
		return "", 0
	}
	name := toks[0].text
	n := 1
	for n+2 < len(toks) && toks[n].text == "[" && toks[n+1].kind == tkString && toks[n+2].text == "]" {
		name += "['" + toks[n+1].text + "']"
		n += 3
	}
	return name, n
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
		if _, ok := runtimeSettings()[key]; ok {
			v = x.m.setting(key)
		}
		return rows(cols, []any{v}), nil
	}
	return &plan{cols: cols, run: run}, true
}
