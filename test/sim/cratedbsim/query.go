package cratedbsim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// SELECT over the simulator's system tables, parsed by CrateDB's querySpec rule
// (SqlBaseParser.g4):
//
//	SELECT [DISTINCT] item [, ...] [FROM table] [WHERE cond] [GROUP BY expr [, ...]]
//	  [ORDER BY expr [ASC|DESC] [, ...]] [LIMIT n]
//
// and evaluated as CrateDB evaluates it: three-valued logic (NULL compares to nothing), an
// unknown table is RelationUnknown, an unknown column ColumnUnknownException, a column neither
// grouped nor aggregated next to an aggregate is refused, aggregates over no rows give one
// row (count 0, max NULL). Joins, subqueries, HAVING and UNION are refused as unsupported.

type selectItem struct {
	e     expr
	label string
}

type orderItem struct {
	e    expr
	desc bool
}

type selectStmt struct {
	distinct bool
	items    []selectItem
	table    string // "" for SELECT without FROM
	where    expr
	groupBy  []expr
	orderBy  []orderItem
	limit    int
}

// oidFloat8 is double precision, the type of a decimal literal.
const oidFloat8 uint32 = 701

// errColumnUnknown is CrateDB's ColumnUnknownException (io.crate.exceptions).
func errColumnUnknown(name string) *SQLError {
	return &SQLError{SQLState: "42703", HTTPStatus: 404, Code: 4043,
		Message: fmt.Sprintf("ColumnUnknownException[Column %s unknown]", name)}
}

// errSchemaUnknown is CrateDB's SchemaUnknownException.
func errSchemaUnknown(name string) *SQLError {
	return &SQLError{SQLState: "3F000", HTTPStatus: 404, Code: 4045,
		Message: fmt.Sprintf("SchemaUnknownException[Schema '%s' unknown]", name)}
}

func parseSelect(p *tokParser) (*selectStmt, error) {
	if err := p.expectWord("select"); err != nil {
		return nil, err
	}
	s := &selectStmt{limit: -1}
	if p.word("distinct") {
		s.distinct = true
	} else {
		p.word("all")
	}
	for {
		if p.punct("*") {
			return nil, errUnsupported("SELECT *")
		}
		e, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		it := selectItem{e: e, label: outputName(e)}
		if p.word("as") {
			if it.label, err = p.ident(); err != nil {
				return nil, err
			}
		} else if t, ok := p.peek(); ok && (t.kind == tkQuoted || (t.kind == tkWord && !reserved(t.text))) {
			it.label = t.text
			p.pos++
		}
		s.items = append(s.items, it)
		if !p.punct(",") {
			break
		}
	}
	if p.word("from") {
		name, err := p.qname()
		if err != nil {
			return nil, err
		}
		if !strings.Contains(name, ".") {
			name = "doc." + name
		}
		s.table = name
		if t, ok := p.peek(); ok && ((t.kind == tkPunct && t.text == ",") || (t.kind == tkWord && (t.text == "join" || t.text == "as" || t.text == "cross" || t.text == "inner" || t.text == "left"))) {
			return nil, errUnsupported("joins and aliased relations")
		}
	}
	if p.word("where") {
		e, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		s.where = e
	}
	if p.word("group") {
		if err := p.expectWord("by"); err != nil {
			return nil, err
		}
		for {
			e, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			s.groupBy = append(s.groupBy, e)
			if !p.punct(",") {
				break
			}
		}
	}
	if p.word("having") {
		return nil, errUnsupported("HAVING")
	}
	if p.word("order") {
		if err := p.expectWord("by"); err != nil {
			return nil, err
		}
		for {
			e, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			it := orderItem{e: e}
			if p.word("desc") {
				it.desc = true
			} else {
				p.word("asc")
			}
			s.orderBy = append(s.orderBy, it)
			if !p.punct(",") {
				break
			}
		}
	}
	if p.word("limit") {
		t, ok := p.peek()
		if !ok || t.kind != tkNumber {
			return nil, p.mismatch("an integer")
		}
		p.pos++
		n, err := strconv.Atoi(t.text)
		if err != nil {
			return nil, errParse("line 1:1: invalid LIMIT '%s'", t.text)
		}
		s.limit = n
	}
	if !p.done() {
		return nil, p.mismatch("<EOF>")
	}
	return s, nil
}

// outputName is the column name CrateDB reports for an unaliased item: the expression as
// written, a comparison in parentheses ("(count(*) = 1)"), DISTINCT in capitals.
func outputName(e expr) string { return e.sql() }

// isAggregate reports whether e is an aggregate call.
func isAggregate(e expr) bool {
	f, ok := e.(funcCall)
	if !ok {
		return false
	}
	switch f.name {
	case "count", "max", "min", "sum":
		return true
	}
	return false
}

// hasAggregate reports whether e contains an aggregate.
func hasAggregate(e expr) bool {
	if isAggregate(e) {
		return true
	}
	switch e := e.(type) {
	case binOp:
		return hasAggregate(e.l) || hasAggregate(e.r)
	case notOp:
		return hasAggregate(e.e)
	case isNull:
		return hasAggregate(e.e)
	case inList:
		return hasAggregate(e.e)
	case anyCmp:
		return hasAggregate(e.e)
	}
	return false
}

// tableSchema resolves a column reference against a table's declared columns: an exact
// column (possibly declared with subscripts, "node['name']"), a subscript into an object
// column, or an object assembled from declared subcolumns ("node").
type colResolution struct {
	idx  int      // declared column, -1 for an assembled object
	path []string // subscripts into the declared object column
	subs []int    // for an assembled object: the declared subcolumns
	oid  uint32
}

func resolveColumn(cols []column, c colRef) (colResolution, error) {
	name := c.name()
	for i, col := range cols {
		if col.name == name {
			return colResolution{idx: i, oid: col.oid}, nil
		}
	}
	// A subscript into a declared object column.
	for k := len(c.path) - 1; k >= 0; k-- {
		prefix := colRef{base: c.base, path: c.path[:k]}.name()
		for i, col := range cols {
			if col.name == prefix && col.oid == oidJSON {
				return colResolution{idx: i, path: c.path[k:], oid: oidVarchar}, nil
			}
		}
	}
	var subs []int
	for i, col := range cols {
		if strings.HasPrefix(col.name, name+"[") {
			subs = append(subs, i)
		}
	}
	if len(subs) > 0 {
		return colResolution{idx: -1, subs: subs, oid: oidJSON}, nil
	}
	return colResolution{}, errColumnUnknown(name)
}

// planSelect checks s against the tables and builds its plan.
func planSelect(s *selectStmt, lookup func(string) (virtualTable, bool)) (*plan, error) {
	var vt virtualTable
	if s.table != "" {
		var ok bool
		vt, ok = lookup(s.table)
		if !ok {
			schema, _, _ := strings.Cut(s.table, ".")
			if !slices.Contains([]string{"sys", "doc", "information_schema", "pg_catalog", "blob"}, schema) {
				return nil, errSchemaUnknown(schema)
			}
			return nil, errRelationUnknown(s.table)
		}
	} else {
		vt = virtualTable{stateless: true, rows: func(*model) [][]any { return [][]any{{}} }}
	}
	ev := &evaluator{cols: vt.cols}
	// Check every column reference now: CrateDB's analyzer refuses them before running.
	check := func(e expr) error { return ev.check(e) }
	for _, it := range s.items {
		if err := check(it.e); err != nil {
			return nil, err
		}
	}
	if s.where != nil {
		if err := check(s.where); err != nil {
			return nil, err
		}
		if hasAggregate(s.where) {
			return nil, errIllegal("Aggregate functions are not allowed in WHERE")
		}
	}
	// GROUP BY and ORDER BY may name an output by position (1-based) or by its label.
	resolveOut := func(e expr) (expr, error) {
		if l, ok := e.(literal); ok {
			if n, ok := l.v.(int32); ok {
				if n < 1 || int(n) > len(s.items) {
					return nil, errIllegal("ordinal %d out of range", n)
				}
				return s.items[n-1].e, nil
			}
		}
		if c, ok := e.(colRef); ok && len(c.path) == 0 {
			for _, it := range s.items {
				if it.label == c.base && it.label != it.e.sql() {
					return it.e, nil
				}
			}
		}
		return e, check(e)
	}
	groups := make([]expr, 0, len(s.groupBy))
	for _, g := range s.groupBy {
		e, err := resolveOut(g)
		if err != nil {
			return nil, err
		}
		if hasAggregate(e) {
			return nil, errIllegal("Aggregate functions are not allowed in GROUP BY")
		}
		groups = append(groups, e)
	}
	orders := make([]orderItem, 0, len(s.orderBy))
	for _, o := range s.orderBy {
		e, err := resolveOut(o.e)
		if err != nil {
			return nil, err
		}
		orders = append(orders, orderItem{e: e, desc: o.desc})
	}
	aggregated := len(groups) > 0
	for _, it := range s.items {
		aggregated = aggregated || hasAggregate(it.e)
	}
	if aggregated {
		grouped := func(e expr) bool {
			return slices.ContainsFunc(groups, func(g expr) bool { return g.sql() == e.sql() })
		}
		for _, e := range append(itemExprs(s.items), orderExprs(orders)...) {
			if bad := ungrouped(e, grouped); bad != nil {
				return nil, errIllegal("'%s' must appear in the GROUP BY clause or be used in an aggregation function", bad.sql())
			}
		}
	}
	cols := make([]column, len(s.items))
	for i, it := range s.items {
		cols[i] = column{name: it.label, oid: ev.typeOf(it.e)}
	}
	params := map[int]uint32{}
	if s.where != nil {
		ev.inferParams(s.where, params)
		collectParams(s.where, params)
	}
	for _, e := range itemExprs(s.items) {
		collectParams(e, params)
	}
	run := func(x *execCtx) (*result, error) {
		ev := &evaluator{cols: vt.cols, x: x}
		var src [][]any
		for _, r := range vt.rows(x.m) {
			if s.where != nil {
				v, err := ev.eval(s.where, r)
				if err != nil {
					return nil, err
				}
				if b, _ := v.(bool); !b {
					continue
				}
			}
			src = append(src, r)
		}
		type outRow struct {
			vals []any
			keys []any // ORDER BY values
		}
		var out []outRow
		emit := func(rowsOf [][]any) error {
			vals := make([]any, len(s.items))
			for i, it := range s.items {
				v, err := ev.evalGroup(it.e, rowsOf)
				if err != nil {
					return err
				}
				vals[i] = v
			}
			keys := make([]any, len(orders))
			for i, o := range orders {
				v, err := ev.evalGroup(o.e, rowsOf)
				if err != nil {
					return err
				}
				keys[i] = v
			}
			out = append(out, outRow{vals: vals, keys: keys})
			return nil
		}
		switch {
		case len(groups) > 0:
			var order []string
			byKey := map[string][][]any{}
			for _, r := range src {
				var kb strings.Builder
				for _, g := range groups {
					v, err := ev.eval(g, r)
					if err != nil {
						return nil, err
					}
					fmt.Fprintf(&kb, "%T:%v\x00", v, v)
				}
				k := kb.String()
				if _, ok := byKey[k]; !ok {
					order = append(order, k)
				}
				byKey[k] = append(byKey[k], r)
			}
			for _, k := range order {
				if err := emit(byKey[k]); err != nil {
					return nil, err
				}
			}
		case aggregated:
			if err := emit(src); err != nil {
				return nil, err
			}
		default:
			for _, r := range src {
				if err := emit([][]any{r}); err != nil {
					return nil, err
				}
			}
		}
		if s.distinct {
			seen := map[string]bool{}
			out = slices.DeleteFunc(out, func(r outRow) bool {
				k := fmt.Sprintf("%#v", r.vals)
				if seen[k] {
					return true
				}
				seen[k] = true
				return false
			})
		}
		if len(orders) > 0 {
			sort.SliceStable(out, func(i, j int) bool {
				for k, o := range orders {
					c := compareForSort(out[i].keys[k], out[j].keys[k])
					if c == 0 {
						continue
					}
					if o.desc {
						return c > 0
					}
					return c < 0
				}
				return false
			})
		}
		if s.limit >= 0 && len(out) > s.limit {
			out = out[:s.limit]
		}
		res := make([][]any, len(out))
		for i, r := range out {
			res[i] = r.vals
		}
		return rows(cols, res...), nil
	}
	return &plan{cols: cols, params: paramList(params), run: run, stateless: vt.stateless}, nil
}

// simTable looks a table up among the simulator's system tables.
func simTable(name string) (virtualTable, bool) {
	vt, ok := virtualTables()[name]
	return vt, ok
}

func itemExprs(items []selectItem) []expr {
	out := make([]expr, len(items))
	for i, it := range items {
		out[i] = it.e
	}
	return out
}

func orderExprs(items []orderItem) []expr {
	out := make([]expr, len(items))
	for i, it := range items {
		out[i] = it.e
	}
	return out
}

// ungrouped returns a column reference of e that is neither grouped nor inside an aggregate.
func ungrouped(e expr, grouped func(expr) bool) expr {
	if grouped(e) || isAggregate(e) {
		return nil
	}
	switch e := e.(type) {
	case colRef:
		return e
	case binOp:
		if b := ungrouped(e.l, grouped); b != nil {
			return b
		}
		return ungrouped(e.r, grouped)
	case notOp:
		return ungrouped(e.e, grouped)
	case isNull:
		return ungrouped(e.e, grouped)
	case inList:
		return ungrouped(e.e, grouped)
	case anyCmp:
		return ungrouped(e.e, grouped)
	case funcCall:
		for _, a := range e.args {
			if b := ungrouped(a, grouped); b != nil {
				return b
			}
		}
	}
	return nil
}

// evaluator evaluates expressions over rows of one table.
type evaluator struct {
	cols []column
	x    *execCtx
}

func (ev *evaluator) check(e expr) error {
	switch e := e.(type) {
	case colRef:
		_, err := resolveColumn(ev.cols, e)
		return err
	case funcCall:
		switch e.name {
		case "count":
			if e.star {
				return nil
			}
			if len(e.args) != 1 {
				return errUnknownFunction(e)
			}
		case "max", "min", "sum":
			if e.star || e.distinct || len(e.args) != 1 {
				return errUnknownFunction(e)
			}
		default:
			return errUnknownFunction(e)
		}
		for _, a := range e.args {
			if hasAggregate(a) {
				return errIllegal("Aggregate function calls cannot be nested '%s'", e.sql())
			}
			if err := ev.check(a); err != nil {
				return err
			}
		}
	case binOp:
		if err := ev.check(e.l); err != nil {
			return err
		}
		return ev.check(e.r)
	case notOp:
		return ev.check(e.e)
	case isNull:
		return ev.check(e.e)
	case inList:
		if err := ev.check(e.e); err != nil {
			return err
		}
		for _, x := range e.list {
			if err := ev.check(x); err != nil {
				return err
			}
		}
	case anyCmp:
		if err := ev.check(e.e); err != nil {
			return err
		}
		return ev.check(e.arr)
	case arrayLit:
		for _, x := range e.elems {
			if err := ev.check(x); err != nil {
				return err
			}
		}
	case special:
		if e.name == "current_role" {
			return errUnsupported("current_role")
		}
	}
	return nil
}

func errUnknownFunction(f funcCall) *SQLError {
	return &SQLError{SQLState: "42883", HTTPStatus: 404, Code: 4047,
		Message: fmt.Sprintf("UnsupportedFunctionException[Unknown function: %s]", f.sql())}
}

// typeOf is the PostgreSQL type an expression reports.
func (ev *evaluator) typeOf(e expr) uint32 {
	switch e := e.(type) {
	case colRef:
		r, err := resolveColumn(ev.cols, e)
		if err != nil {
			return oidVarchar
		}
		return r.oid
	case literal:
		switch e.v.(type) {
		case int32:
			return oidInt4
		case int64:
			return oidInt8
		case bool:
			return oidBool
		case float64:
			return oidFloat8
		}
		return oidVarchar
	case funcCall:
		if e.name == "count" {
			return oidInt8
		}
		if e.name == "sum" {
			return oidInt8
		}
		return ev.typeOf(e.args[0])
	case binOp, notOp, isNull, inList, anyCmp:
		return oidBool
	}
	return oidVarchar
}

// evalGroup evaluates e for a group of rows: aggregates over them, the rest on the first.
func (ev *evaluator) evalGroup(e expr, group [][]any) (any, error) {
	if isAggregate(e) {
		return ev.aggregate(e.(funcCall), group)
	}
	switch b := e.(type) {
	case binOp:
		if hasAggregate(b) {
			l, err := ev.evalGroup(b.l, group)
			if err != nil {
				return nil, err
			}
			r, err := ev.evalGroup(b.r, group)
			if err != nil {
				return nil, err
			}
			return applyBinary(b.op, l, r), nil
		}
	case notOp:
		if hasAggregate(b) {
			v, err := ev.evalGroup(b.e, group)
			if err != nil {
				return nil, err
			}
			return not3(v), nil
		}
	}
	var row []any
	if len(group) > 0 {
		row = group[0]
	}
	return ev.eval(e, row)
}

func (ev *evaluator) aggregate(f funcCall, group [][]any) (any, error) {
	if f.name == "count" && f.star {
		return int64(len(group)), nil
	}
	var vals []any
	for _, r := range group {
		v, err := ev.eval(f.args[0], r)
		if err != nil {
			return nil, err
		}
		if v != nil { // aggregates skip NULLs
			vals = append(vals, v)
		}
	}
	switch f.name {
	case "count":
		if f.distinct {
			seen := map[string]bool{}
			for _, v := range vals {
				seen[fmt.Sprintf("%T:%v", v, v)] = true
			}
			return int64(len(seen)), nil
		}
		return int64(len(vals)), nil
	case "max", "min":
		var best any
		for _, v := range vals {
			if best == nil {
				best = v
				continue
			}
			c, ok := compare(v, best)
			if ok && ((f.name == "max" && c > 0) || (f.name == "min" && c < 0)) {
				best = v
			}
		}
		return best, nil
	case "sum":
		if len(vals) == 0 {
			return nil, nil
		}
		var sum int64
		for _, v := range vals {
			n, ok := toFloat(v)
			if !ok {
				return nil, errIllegal("Cannot sum '%v'", v)
			}
			sum += int64(n)
		}
		return sum, nil
	}
	return nil, errUnknownFunction(f)
}

// eval evaluates a scalar expression on one row (nil for SELECT without FROM).
func (ev *evaluator) eval(e expr, row []any) (any, error) {
	switch e := e.(type) {
	case literal:
		return e.v, nil
	case paramRef:
		if e.idx >= len(ev.x.args) {
			return nil, errIllegal("no value given for parameter $%d", e.idx+1)
		}
		return ev.x.args[e.idx], nil
	case special:
		if e.name == "current_schema" {
			return "doc", nil
		}
		return ev.x.user, nil
	case colRef:
		r, err := resolveColumn(ev.cols, e)
		if err != nil {
			return nil, err
		}
		if r.idx < 0 {
			obj := map[string]any{}
			prefix := e.name()
			for _, i := range r.subs {
				setPath(obj, subscriptPath(strings.TrimPrefix(ev.cols[i].name, prefix)), row[i])
			}
			return obj, nil
		}
		v := row[r.idx]
		for _, k := range r.path {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, nil
			}
			v = m[k]
		}
		return v, nil
	case arrayLit:
		out := make([]any, len(e.elems))
		for i, x := range e.elems {
			v, err := ev.eval(x, row)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case binOp:
		l, err := ev.eval(e.l, row)
		if err != nil {
			return nil, err
		}
		r, err := ev.eval(e.r, row)
		if err != nil {
			return nil, err
		}
		return applyBinary(e.op, l, r), nil
	case notOp:
		v, err := ev.eval(e.e, row)
		if err != nil {
			return nil, err
		}
		return not3(v), nil
	case isNull:
		v, err := ev.eval(e.e, row)
		if err != nil {
			return nil, err
		}
		return (v == nil) != e.not, nil
	case inList:
		v, err := ev.eval(e.e, row)
		if err != nil {
			return nil, err
		}
		var res any = false
		for _, x := range e.list {
			w, err := ev.eval(x, row)
			if err != nil {
				return nil, err
			}
			res = or3(res, applyBinary("=", v, w))
		}
		if e.not {
			return not3(res), nil
		}
		return res, nil
	case anyCmp:
		v, err := ev.eval(e.e, row)
		if err != nil {
			return nil, err
		}
		a, err := ev.eval(e.arr, row)
		if err != nil {
			return nil, err
		}
		elems, err := arrayValues(a)
		if err != nil {
			return nil, err
		}
		if elems == nil && a == nil {
			return nil, nil
		}
		var res any = false
		for _, w := range elems {
			res = or3(res, applyBinary(e.op, v, w))
		}
		return res, nil
	case funcCall:
		return nil, errIllegal("aggregate '%s' outside an aggregation", e.sql())
	}
	return nil, errUnsupported(fmt.Sprintf("expression %s", e.sql()))
}

// subscriptPath splits "['a']['b']" into its keys.
func subscriptPath(s string) []string {
	var out []string
	for _, part := range strings.Split(s, "']") {
		if k, ok := strings.CutPrefix(part, "['"); ok {
			out = append(out, k)
		}
	}
	return out
}

func setPath(m map[string]any, path []string, v any) {
	for i, k := range path {
		if i == len(path)-1 {
			m[k] = v
			return
		}
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
}

// arrayValues reads an array operand: a []string or []any parameter, an evaluated array
// literal, or PostgreSQL's '{a,b}' text form.
func arrayValues(v any) ([]any, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []any:
		return v, nil
	case []string:
		out := make([]any, len(v))
		for i, s := range v {
			out[i] = s
		}
		return out, nil
	case string:
		ss, err := parseArrayLiteral(v)
		if err != nil {
			return nil, errIllegal("%v", err)
		}
		out := make([]any, len(ss))
		for i, s := range ss {
			out[i] = s
		}
		return out, nil
	}
	return nil, errIllegal("Cannot cast '%v' to an array", v)
}

func not3(v any) any {
	b, ok := v.(bool)
	if !ok {
		return nil
	}
	return !b
}

func or3(a, b any) any {
	if a == true || b == true {
		return true
	}
	if a == nil || b == nil {
		return nil
	}
	return false
}

func and3(a, b any) any {
	if a == false || b == false {
		return false
	}
	if a == nil || b == nil {
		return nil
	}
	return true
}

func applyBinary(op string, l, r any) any {
	switch op {
	case "and":
		return and3(l, r)
	case "or":
		return or3(l, r)
	}
	if l == nil || r == nil {
		return nil
	}
	c, ok := compare(l, r)
	if !ok {
		return nil
	}
	switch op {
	case "=":
		return c == 0
	case "<>", "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	return nil
}

func toFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case int:
		return float64(v), true
	case int16:
		return float64(v), true
	case int32:
		return float64(v), true
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f, err == nil
	}
	return 0, false
}

// compare orders two non-NULL values; a number meets a string by casting the string, as
// CrateDB's implicit cast of a literal or parameter does. ok is false when they cannot meet.
func compare(a, b any) (int, bool) {
	_, as := a.(string)
	_, bs := b.(string)
	if as && bs {
		return strings.Compare(a.(string), b.(string)), true
	}
	if ab, ok := a.(bool); ok {
		bb, ok := b.(bool)
		if !ok {
			if s, isStr := b.(string); isStr {
				bb, ok = s == "true" || s == "t", s == "true" || s == "t" || s == "false" || s == "f"
			}
		}
		if !ok {
			return 0, false
		}
		switch {
		case ab == bb:
			return 0, true
		case !ab:
			return -1, true
		}
		return 1, true
	}
	if _, ok := b.(bool); ok {
		c, ok := compare(b, a)
		return -c, ok
	}
	fa, oka := toFloat(a)
	fb, okb := toFloat(b)
	if !oka || !okb || math.IsNaN(fa) || math.IsNaN(fb) {
		return 0, false
	}
	switch {
	case fa < fb:
		return -1, true
	case fa > fb:
		return 1, true
	}
	return 0, true
}

// compareForSort orders values for ORDER BY: NULLs last ascending, as CrateDB does.
func compareForSort(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	if c, ok := compare(a, b); ok {
		return c
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}
