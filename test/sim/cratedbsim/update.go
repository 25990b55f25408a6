package cratedbsim

import (
	"slices"
	"strings"
)

// UPDATE by CrateDB's grammar (SqlBaseParser.g4 #update):
//
//	UPDATE table SET column = expr [, ...] [WHERE cond]
//
// Of the system tables only sys.node_checks takes an UPDATE, and only of its acknowledged
// column (docs/admin/system-information.rst of crate/crate: "acknowledged ... can be updated");
// the WHERE is evaluated over its rows like a SELECT's, and the row count is the rows matched.

type updateStmt struct {
	table   string
	assigns []assignment
	where   expr
	params  map[int]uint32
}

func parseUpdate(p *tokParser) (*updateStmt, error) {
	p.pos++
	name, err := p.qname()
	if err != nil {
		return nil, err
	}
	if err := p.expectWord("set"); err != nil {
		return nil, err
	}
	st := &updateStmt{table: name, params: map[int]uint32{}}
	for {
		col, err := p.settingName()
		if err != nil {
			return nil, err
		}
		if err := p.expectPunct("="); err != nil {
			return nil, err
		}
		v, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		collectParams(v, st.params)
		st.assigns = append(st.assigns, assignment{name: col, val: v})
		if !p.punct(",") {
			break
		}
	}
	if p.word("where") {
		if st.where, err = p.parseExpr(); err != nil {
			return nil, err
		}
		collectParams(st.where, st.params)
	}
	return st, p.end()
}

func planUpdate(st *updateStmt) (*plan, error) {
	if st.table != "sys.node_checks" {
		if _, ok := simTable(st.table); ok {
			return nil, errUnsupported("UPDATE of " + st.table)
		}
		return nil, errRelationUnknown(st.table)
	}
	vt, _ := simTable(st.table)
	ev := &evaluator{cols: vt.cols}
	for _, a := range st.assigns {
		if _, err := resolveColumn(vt.cols, colRef{base: a.name}); err != nil {
			return nil, err
		}
		if a.name != "acknowledged" {
			return nil, errUnsupported("UPDATE of sys.node_checks." + a.name)
		}
	}
	if st.where != nil {
		if err := ev.check(st.where); err != nil {
			return nil, err
		}
	}
	// Parameters take their type from the column they are assigned to or compared with.
	params := map[int]uint32{}
	for _, a := range st.assigns {
		if pr, ok := a.val.(paramRef); ok {
			params[pr.idx] = paramOID(ev.typeOf(colRef{base: a.name}))
		}
	}
	if st.where != nil {
		ev.inferParams(st.where, params)
	}
	for i, o := range st.params {
		if _, typed := params[i]; !typed {
			params[i] = o
		}
	}
	idCol := slices.IndexFunc(vt.cols, func(c column) bool { return c.name == "id" })
	nodeCol := slices.IndexFunc(vt.cols, func(c column) bool { return c.name == "node_id" })
	run := func(x *execCtx) (*result, error) {
		if err := x.requirePrivilege(); err != nil {
			return nil, err
		}
		v, err := x.value(st.assigns[len(st.assigns)-1].val)
		if err != nil {
			return nil, err
		}
		ack, ok := v.(bool)
		if !ok {
			// CrateDB casts text to boolean: t, true, f, false, any case.
			switch s, _ := v.(string); strings.ToLower(s) {
			case "t", "true":
				ack, ok = true, true
			case "f", "false":
				ack, ok = false, true
			}
		}
		if !ok {
			return nil, errIllegal("Cannot cast value '%v' to type boolean", v)
		}
		ev := &evaluator{cols: vt.cols, x: x}
		n := int64(0)
		for _, r := range vt.rows(x.m) {
			if st.where != nil {
				ok, err := ev.eval(st.where, r)
				if err != nil {
					return nil, err
				}
				if ok != true {
					continue
				}
			}
			for _, node := range x.m.upNodes() {
				if node.id != r[nodeCol] {
					continue
				}
				if node.acked == nil {
					node.acked = map[int]bool{}
				}
				node.acked[int(r[idCol].(int32))] = ack
			}
			n++
		}
		return done("UPDATE", n), nil
	}
	return &plan{run: run, params: paramList(params)}, nil
}
