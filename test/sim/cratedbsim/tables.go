package cratedbsim

import (
	"strings"
)

// The remaining statements the simulator runs, by CrateDB's grammar (SqlBaseParser.g4):
//
//	DROP TABLE [IF EXISTS] table                                            #dropTable
//	ALTER TABLE {ONLY table | table [PARTITION (column = expr)]} SET (property = expr [, ...])
//	                                                                        #alterTableProperties
//	INSERT INTO table [(column [, ...])] VALUES (expr [, ...]) [, ...]      #insert
//	BEGIN [WORK | TRANSACTION], COMMIT [WORK | TRANSACTION], END            #begin, #commit
//	REFRESH TABLE table [, ...]                                             #refreshTable
//	SET LICENSE 'key'                                                       (until 5.3)
//
// Table rows are not kept: an INSERT matters only for the partition it creates.

// prepareTableStatement parses the statements above; ok false when toks are none of them.
func prepareTableStatement(toks []token) (*plan, bool, error) {
	p := &tokParser{toks: toks}
	first, _ := p.peek()
	second, _ := p.peekAt(1)
	if first.kind != tkWord {
		return nil, false, nil
	}
	isWord := func(t token, w string) bool { return t.kind == tkWord && t.text == w }
	var pl *plan
	var err error
	switch {
	case first.text == "drop" && isWord(second, "table"):
		pl, err = parseDropTable(p)
	case first.text == "alter" && isWord(second, "table"):
		pl, err = parseAlterTable(p)
	case first.text == "insert" && isWord(second, "into"):
		pl, err = parseInsert(p)
	case first.text == "begin" || first.text == "commit" || first.text == "end":
		p.pos++
		if !p.word("work") {
			p.word("transaction")
		}
		if err = p.end(); err == nil {
			verb := strings.ToUpper(first.text)
			if verb == "END" {
				verb = "COMMIT"
			}
			pl = &plan{run: func(*execCtx) (*result, error) { return done(verb, 0), nil }}
		}
	case first.text == "refresh" && isWord(second, "table"):
		p.pos += 2
		for {
			if _, err = p.qname(); err != nil || !p.punct(",") {
				break
			}
		}
		if err == nil {
			err = p.end()
		}
		pl = &plan{run: func(*execCtx) (*result, error) { return done("REFRESH", 1), nil }}
	case first.text == "set" && isWord(second, "license"):
		pl, err = parseSetLicense(p)
	default:
		return nil, false, nil
	}
	return pl, true, err
}

// qualified names a table in the default schema doc unless a schema is given.
func qualified(name string) string {
	if !strings.Contains(name, ".") {
		return "doc." + name
	}
	return name
}

func parseDropTable(p *tokParser) (*plan, error) {
	p.pos += 2
	ifExists := false
	if p.word("if") {
		if err := p.expectWord("exists"); err != nil {
			return nil, err
		}
		ifExists = true
	}
	qn, err := p.qname()
	if err != nil {
		return nil, err
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	name := qualified(qn)
	run := func(x *execCtx) (*result, error) {
		if err := x.requirePrivilege(); err != nil {
			return nil, err
		}
		if t := x.m.tables[name]; t == nil || t.parent != "" {
			if ifExists {
				return done("DROP", 0), nil
			}
			return nil, errRelationUnknown(name)
		}
		x.m.dropTable(name)
		x.mutated = true
		return done("DROP", 1), nil
	}
	return &plan{run: run}, nil
}

func parseAlterTable(p *tokParser) (*plan, error) {
	p.pos += 2
	only := p.word("only")
	qn, err := p.qname()
	if err != nil {
		return nil, err
	}
	name := qualified(qn)
	var partCol string
	var partVal expr
	if !only && p.word("partition") {
		if err := p.expectPunct("("); err != nil {
			return nil, err
		}
		if partCol, err = p.ident(); err != nil {
			return nil, err
		}
		if err := p.expectPunct("="); err != nil {
			return nil, err
		}
		if partVal, err = p.parseExpr(); err != nil {
			return nil, err
		}
		if p.punct(",") {
			return nil, errUnsupported("partitions by more than one column")
		}
		if err := p.expectPunct(")"); err != nil {
			return nil, err
		}
	}
	if p.word("reset") {
		return nil, errUnsupported("ALTER TABLE ... RESET")
	}
	if err := p.expectWord("set"); err != nil {
		return nil, err
	}
	props, err := p.properties()
	if err != nil {
		return nil, err
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	params := map[int]uint32{}
	addParams(params, props)
	if partVal != nil {
		collectParams(partVal, params)
	}
	run := func(x *execCtx) (*result, error) {
		if err := x.requirePrivilege(); err != nil {
			return nil, err
		}
		t := x.m.tables[name]
		if t == nil || t.parent != "" {
			return nil, errRelationUnknown(name)
		}
		if partVal != nil {
			val, ok, err := x.text(partVal)
			if err != nil {
				return nil, err
			}
			if !ok {
				val = ""
			}
			if !t.partitioned {
				return nil, errIllegal("table '%s' is not partitioned", name)
			}
			if partCol != t.partitionedBy {
				return nil, errIllegal("\"%s\" is no known partition column", partCol)
			}
			part := x.m.tables[partitionKey(name, partitionIdent(val))]
			if part == nil {
				return nil, &SQLError{SQLState: "42P01", HTTPStatus: 404, Code: 4046,
					Message: "PartitionUnknownException[No partition for table '" + name + "' with ident '" + partitionIdent(val) + "' exists]"}
			}
			t, only = part, true
		}
		for _, pr := range props {
			val, ok, err := x.text(pr.val)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, errIllegal("Cannot set table setting '%s' to NULL", pr.name)
			}
			if err := tableSetting(x, t, pr.name, val, only); err != nil {
				return nil, err
			}
		}
		return done("ALTER", -1), nil
	}
	return &plan{run: run, params: paramList(params)}, nil
}

func parseInsert(p *tokParser) (*plan, error) {
	p.pos += 2
	qn, err := p.qname()
	if err != nil {
		return nil, err
	}
	name := qualified(qn)
	var cols []string
	if p.punct("(") {
		for {
			c, err := p.ident()
			if err != nil {
				return nil, err
			}
			cols = append(cols, c)
			if !p.punct(",") {
				break
			}
		}
		if err := p.expectPunct(")"); err != nil {
			return nil, err
		}
	}
	if err := p.expectWord("values"); err != nil {
		return nil, err
	}
	params := map[int]uint32{}
	var rowsIn [][]expr
	for {
		if err := p.expectPunct("("); err != nil {
			return nil, err
		}
		var row []expr
		for {
			e, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			collectParams(e, params)
			row = append(row, e)
			if !p.punct(",") {
				break
			}
		}
		if err := p.expectPunct(")"); err != nil {
			return nil, err
		}
		if len(cols) > 0 && len(row) != len(cols) {
			return nil, errIllegal("Number of target columns (%d) of insert statement doesn't match number of source columns (%d)", len(cols), len(row))
		}
		rowsIn = append(rowsIn, row)
		if !p.punct(",") {
			break
		}
	}
	if p.word("on") || p.word("returning") {
		return nil, errUnsupported("INSERT ... ON CONFLICT / RETURNING")
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	run := func(x *execCtx) (*result, error) {
		if err := x.requirePrivilege(); err != nil {
			return nil, err
		}
		t := x.m.tables[name]
		if t == nil || t.parent != "" {
			return nil, errRelationUnknown(name)
		}
		col := -1
		for i, c := range cols {
			if t.partitioned && c == t.partitionedBy {
				col = i
			}
		}
		for _, row := range rowsIn {
			if col < 0 {
				continue
			}
			v, ok, err := x.text(row[col])
			if err != nil {
				return nil, err
			}
			if !ok {
				v = ""
			}
			x.m.addPartition(t, v)
			x.mutated = true
		}
		return done("INSERT", int64(len(rowsIn))), nil
	}
	return &plan{run: run, params: paramList(params)}, nil
}

func parseSetLicense(p *tokParser) (*plan, error) {
	p.pos += 2
	e, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	params := map[int]uint32{}
	collectParams(e, params)
	run := func(x *execCtx) (*result, error) {
		if x.version.AtLeast(5, 3) {
			// Removed in 5.3: the parser no longer knows the statement.
			return nil, errParse("line 1:5: mismatched input 'LICENSE' expecting {'SESSION', 'LOCAL', 'GLOBAL', 'TRANSACTION', 'SESSION_CHARACTERISTICS', 'TIME'}")
		}
		if err := x.requirePrivilege(); err != nil {
			return nil, err
		}
		key, ok, err := x.text(e)
		if err != nil {
			return nil, err
		}
		if !ok || strings.TrimSpace(key) == "" {
			return nil, errIllegal("license key must not be empty")
		}
		x.m.license = true
		x.mutated = true
		return done("SET", 1), nil
	}
	return &plan{run: run, params: paramList(params)}, nil
}
