package cratedbsim

import (
	"slices"
	"strings"
)

// Statements parsed by CrateDB's grammar (crate/crate SqlBaseParser.g4) rather than matched
// against shapes:
//
//	CREATE USER name [WITH (property = expr [, ...])]               #createUser
//	ALTER USER name SET (property = expr [, ...])                   #alterUser
//	DROP USER [IF EXISTS] name                                      #dropUser
//	SET GLOBAL [PERSISTENT | TRANSIENT] name {= | TO} expr [, ...]  #setGlobal
//	RESET GLOBAL name [, ...]                                       #resetGlobal
//	CREATE TABLE [IF NOT EXISTS] qname (element [, ...])
//	  [PARTITIONED BY (column)] [CLUSTERED [BY (column)] [INTO n SHARDS]]
//	  [WITH (property = expr [, ...])]                              #createTable
//
// Users accept only the "password" property (UserActions of CrateDB: anything else is
// "\"x\" is not a valid user property"); SET GLOBAL accepts only exposed, runtime-changeable
// settings (CrateSettings.checkIfRuntimeSetting); CREATE TABLE accepts the table settings the
// model has (number_of_replicas) and refuses others.

// prepareGrammar parses the statements above and SELECT. ok is false when toks start with
// none of them.
func prepareGrammar(toks []token) (*plan, bool, error) {
	p := &tokParser{toks: toks}
	first, _ := p.peek()
	second, _ := p.peekAt(1)
	if first.kind != tkWord {
		return nil, false, nil
	}
	var pl *plan
	var err error
	switch {
	case first.text == "select":
		var s *selectStmt
		if s, err = parseSelect(p); err == nil {
			pl, err = planSelect(s, simTable)
		}
	case second.kind == tkWord && second.text == "user" && (first.text == "create" || first.text == "alter" || first.text == "drop"):
		var st *userStmt
		if st, err = parseUser(p); err == nil {
			pl = planUser(st)
		}
	case first.text == "set" && second.kind == tkWord && second.text == "global":
		var st *setGlobalStmt
		if st, err = parseSetGlobal(p); err == nil {
			pl = planSetGlobal(st)
		}
	case first.text == "reset" && second.kind == tkWord && second.text == "global":
		var names []string
		if names, err = parseResetGlobal(p); err == nil {
			pl = planResetGlobal(names)
		}
	case first.text == "update":
		var st *updateStmt
		if st, err = parseUpdate(p); err == nil {
			pl, err = planUpdate(st)
		}
	case first.text == "create" && second.kind == tkWord && second.text == "table":
		pl, err = parseCreateTable(p)
	default:
		return nil, false, nil
	}
	return pl, true, err
}

func parseUser(p *tokParser) (*userStmt, error) {
	switch p.toks[0].text {
	case "create":
		return parseCreateUser(p)
	case "alter":
		return parseAlterUser(p)
	}
	return parseDropUser(p)
}

// property is one "name = expr" of genericProperties.
type property struct {
	name string
	val  expr
}

// properties parses '(' ident = expr [, ...] ')'.
func (p *tokParser) properties() ([]property, error) {
	if err := p.expectPunct("("); err != nil {
		return nil, err
	}
	var out []property
	for {
		name, err := p.qname()
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
		out = append(out, property{name: name, val: v})
		if !p.punct(",") {
			break
		}
	}
	return out, p.expectPunct(")")
}

func (p *tokParser) end() error {
	if !p.done() {
		return p.mismatch("<EOF>")
	}
	return nil
}

// value evaluates a constant expression: a literal, a parameter or an array of them.
func (x *execCtx) value(e expr) (any, error) {
	switch e.(type) {
	case literal, paramRef, arrayLit:
		ev := &evaluator{x: x}
		return ev.eval(e, nil)
	}
	return nil, errIllegal("Can only use literals or parameters as values, got '%s'", e.sql())
}

// text evaluates a constant to its text, NULL as ok == false.
func (x *execCtx) text(e expr) (string, bool, error) {
	v, err := x.value(e)
	if err != nil || v == nil {
		return "", false, err
	}
	switch v := v.(type) {
	case string:
		return v, true, nil
	case []any, []string:
		return "", false, errIllegal("Cannot use an array as a value here: '%s'", e.sql())
	}
	return literal{v: v}.sql(), true, nil
}

func userPassword(props []property) (expr, error) {
	var pw expr
	for _, pr := range props {
		if pr.name != "password" {
			return nil, errIllegal("\"%s\" is not a valid user property", pr.name)
		}
		pw = pr.val
	}
	return pw, nil
}

func addParams(params map[int]uint32, props []property) {
	for _, pr := range props {
		collectParams(pr.val, params)
	}
}

// userStmt is CREATE, ALTER or DROP USER.
type userStmt struct {
	verb     string // CREATE, ALTER, DROP
	name     string
	pw       expr // nil when not given
	ifExists bool
	params   map[int]uint32
}

func parseCreateUser(p *tokParser) (*userStmt, error) {
	p.pos += 2
	name, err := p.ident()
	if err != nil {
		return nil, err
	}
	var props []property
	if p.word("with") {
		if props, err = p.properties(); err != nil {
			return nil, err
		}
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	pwExpr, err := userPassword(props)
	if err != nil {
		return nil, err
	}
	params := map[int]uint32{}
	addParams(params, props)
	return &userStmt{verb: "CREATE", name: name, pw: pwExpr, params: params}, nil
}

func planUser(st *userStmt) *plan {
	switch st.verb {
	case "CREATE":
		return planCreateUser(st)
	case "ALTER":
		return planAlterUser(st)
	}
	return planDropUser(st)
}

func planCreateUser(st *userStmt) *plan {
	name, pwExpr := st.name, st.pw
	run := func(x *execCtx) (*result, error) {
		if err := x.requirePrivilege(); err != nil {
			return nil, err
		}
		if _, ok := x.m.users[name]; ok {
			return nil, errRoleExists(name, x.version)
		}
		u := &user{name: name}
		if pwExpr != nil {
			pw, ok, err := x.text(pwExpr)
			if err != nil {
				return nil, err
			}
			if ok {
				u.pwHash = hashPassword(pw)
			}
		}
		x.m.users[name] = u
		x.mutated = true
		return done("CREATE", 1), nil
	}
	return &plan{run: run, params: paramList(st.params)}
}

func parseAlterUser(p *tokParser) (*userStmt, error) {
	p.pos += 2
	name, err := p.ident()
	if err != nil {
		return nil, err
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
	pwExpr, err := userPassword(props)
	if err != nil {
		return nil, err
	}
	if pwExpr == nil {
		return nil, p.mismatch("a property")
	}
	params := map[int]uint32{}
	addParams(params, props)
	return &userStmt{verb: "ALTER", name: name, pw: pwExpr, params: params}, nil
}

func planAlterUser(st *userStmt) *plan {
	name, pwExpr := st.name, st.pw
	run := func(x *execCtx) (*result, error) {
		// A user may change their own password; others need AL.
		if name != x.user {
			if err := x.requirePrivilege(); err != nil {
				return nil, err
			}
		}
		u := x.m.users[name]
		if u == nil {
			return nil, errRoleUnknown(name, x.version)
		}
		pw, ok, err := x.text(pwExpr)
		if err != nil {
			return nil, err
		}
		if ok {
			u.pwHash = hashPassword(pw)
		} else {
			u.pwHash = "" // password = NULL removes it
		}
		x.mutated = true
		return done("ALTER", 1), nil
	}
	return &plan{run: run, params: paramList(st.params)}
}

func parseDropUser(p *tokParser) (*userStmt, error) {
	p.pos += 2
	ifExists := false
	if p.word("if") {
		if err := p.expectWord("exists"); err != nil {
			return nil, err
		}
		ifExists = true
	}
	name, err := p.ident()
	if err != nil {
		return nil, err
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	return &userStmt{verb: "DROP", name: name, ifExists: ifExists}, nil
}

func planDropUser(st *userStmt) *plan {
	name, ifExists := st.name, st.ifExists
	run := func(x *execCtx) (*result, error) {
		if err := x.requirePrivilege(); err != nil {
			return nil, err
		}
		u := x.m.users[name]
		if u == nil {
			if ifExists {
				return done("DROP", 0), nil
			}
			return nil, errRoleUnknown(name, x.version)
		}
		if u.superuser {
			return nil, errIllegal("cannot drop a superuser '%s'", name)
		}
		delete(x.m.users, name)
		x.mutated = true
		return done("DROP", 1), nil
	}
	return &plan{run: run}
}

// settingName parses a setting's name: a dotted name of identifiers, one quoted identifier
// holding the dotted name, or a column with subscripts (stats['enabled']).
func (p *tokParser) settingName() (string, error) {
	t, ok := p.peek()
	if !ok || !(t.kind == tkQuoted || (t.kind == tkWord && !reserved(t.text))) {
		return "", p.mismatch("a setting name")
	}
	name, err := p.qname()
	if err != nil {
		return "", err
	}
	for p.punct("[") {
		k, ok := p.peek()
		if !ok || k.kind != tkString {
			return "", p.mismatch("a string")
		}
		p.pos++
		name += "." + k.text
		if err := p.expectPunct("]"); err != nil {
			return "", err
		}
	}
	return name, nil
}

type assignment struct {
	name string
	val  expr
}

// setGlobalStmt is SET GLOBAL.
type setGlobalStmt struct {
	persistent bool
	as         []assignment
	params     map[int]uint32
}

func parseSetGlobal(p *tokParser) (*setGlobalStmt, error) {
	p.pos += 2
	persistent := false
	switch {
	case p.word("persistent"):
		persistent = true
	case p.word("transient"):
	}
	var as []assignment
	params := map[int]uint32{}
	for {
		name, err := p.settingName()
		if err != nil {
			return nil, err
		}
		if !p.punct("=") && !p.word("to") {
			return nil, p.mismatch("{'=', 'TO'}")
		}
		v, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		collectParams(v, params)
		as = append(as, assignment{name: name, val: v})
		if !p.punct(",") {
			break
		}
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	// Names are checked when the statement is analysed, before it runs.
	for _, a := range as {
		if err := checkSettable(a.name); err != nil {
			return nil, err
		}
	}
	return &setGlobalStmt{persistent: persistent, as: as, params: params}, nil
}

// values evaluates and validates the assigned values.
func (st *setGlobalStmt) values(x *execCtx) ([]string, error) {
	vals := make([]string, len(st.as))
	for i, a := range st.as {
		v, ok, err := x.text(a.val)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errIllegal("Cannot set setting '%s' to NULL, use RESET GLOBAL", a.name)
		}
		if vals[i], err = normalizeSetting(a.name, v); err != nil {
			return nil, err
		}
	}
	return vals, nil
}

func planSetGlobal(st *setGlobalStmt) *plan {
	as, persistent := st.as, st.persistent
	run := func(x *execCtx) (*result, error) {
		if err := x.requirePrivilege(); err != nil {
			return nil, err
		}
		vals, err := st.values(x)
		if err != nil {
			return nil, err
		}
		target := x.m.transient
		if persistent {
			target = x.m.persistent
		}
		for i, a := range as {
			target[a.name] = vals[i]
		}
		x.m.allocate()
		x.mutated = true
		return done("SET", 1), nil
	}
	return &plan{run: run, params: paramList(st.params)}
}

// checkSettable accepts a runtime setting by its full name (SET GLOBAL sets leaves).
func checkSettable(name string) error {
	names, err := resolveSettingNames(name)
	if err != nil {
		return err
	}
	if len(names) != 1 || names[0] != name {
		// A prefix takes an object value in CrateDB, which the simulator does not model.
		return errUnsupported("setting a group of settings ('" + name + "') at once")
	}
	return nil
}

// normalizeSetting validates a value as the setting's parser does.
func normalizeSetting(key, val string) (string, error) {
	switch key {
	case settingAllocationEnable:
		val = strings.ToLower(val)
		if !slices.Contains([]string{"all", "primaries", "new_primaries", "none"}, val) {
			return "", errIllegal("Illegal allocation.enable value [%s]", strings.ToUpper(val))
		}
	case settingRebalanceEnable:
		val = strings.ToLower(val)
		if !slices.Contains([]string{"all", "primaries", "replicas", "none"}, val) {
			return "", errIllegal("Illegal rebalance.enable value [%s]", strings.ToUpper(val))
		}
	case settingAllocationExclude:
		var names []string
		for _, n := range strings.Split(val, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
		val = strings.Join(names, ",")
	}
	return val, nil
}

// parseResetGlobal returns every setting the statement resets.
func parseResetGlobal(p *tokParser) ([]string, error) {
	p.pos += 2
	var names []string
	for {
		name, err := p.settingName()
		if err != nil {
			return nil, err
		}
		covered, err := resolveSettingNames(name)
		if err != nil {
			return nil, err
		}
		names = append(names, covered...)
		if !p.punct(",") {
			break
		}
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	return names, nil
}

func planResetGlobal(names []string) *plan {
	run := func(x *execCtx) (*result, error) {
		if err := x.requirePrivilege(); err != nil {
			return nil, err
		}
		// RESET clears the transient and the persistent value.
		for _, n := range names {
			delete(x.m.transient, n)
			delete(x.m.persistent, n)
		}
		x.m.allocate()
		x.mutated = true
		return done("RESET", 1), nil
	}
	return &plan{run: run}
}

// skipParens consumes a balanced parenthesised group (the table elements, which the model
// does not keep) and returns its top-level comma-separated parts.
func (p *tokParser) skipParens() ([][]token, error) {
	if err := p.expectPunct("("); err != nil {
		return nil, err
	}
	var parts [][]token
	start := p.pos
	depth := 1
	for ; p.pos < len(p.toks); p.pos++ {
		t := p.toks[p.pos]
		if t.kind != tkPunct {
			continue
		}
		switch t.text {
		case "(":
			depth++
		case ")":
			depth--
			if depth == 0 {
				parts = append(parts, p.toks[start:p.pos])
				p.pos++
				return parts, nil
			}
		case ",":
			if depth == 1 {
				parts = append(parts, p.toks[start:p.pos])
				start = p.pos + 1
			}
		}
	}
	return nil, p.mismatch("')'")
}

func parseCreateTable(p *tokParser) (*plan, error) {
	p.pos += 2
	ifNotExists := false
	if p.word("if") {
		if err := p.expectWord("not"); err != nil {
			return nil, err
		}
		if err := p.expectWord("exists"); err != nil {
			return nil, err
		}
		ifNotExists = true
	}
	qn, err := p.qname()
	if err != nil {
		return nil, err
	}
	name := qn
	if !strings.Contains(name, ".") {
		name = "doc." + name
	}
	elems, err := p.skipParens()
	if err != nil {
		return nil, err
	}
	var columns []string
	for _, e := range elems {
		if len(e) == 0 {
			return nil, errParse("line 1:1: mismatched input ')' expecting a table element")
		}
		if e[0].kind == tkQuoted || e[0].kind == tkWord {
			columns = append(columns, e[0].text)
		}
	}
	var shardsExpr expr
	partitionedBy := ""
	var props []property
	for {
		switch {
		case p.word("partitioned"):
			if partitionedBy != "" {
				return nil, p.mismatch("<EOF>")
			}
			if err := p.expectWord("by"); err != nil {
				return nil, err
			}
			if err := p.expectPunct("("); err != nil {
				return nil, err
			}
			if partitionedBy, err = p.ident(); err != nil {
				return nil, err
			}
			if p.punct(",") {
				return nil, errUnsupported("partitioning by more than one column")
			}
			if err := p.expectPunct(")"); err != nil {
				return nil, err
			}
			if !slices.Contains(columns, partitionedBy) {
				return nil, errColumnUnknown(partitionedBy)
			}
			continue
		case p.word("clustered"):
			if p.word("by") {
				if err := p.expectPunct("("); err != nil {
					return nil, err
				}
				col, err := p.ident()
				if err != nil {
					return nil, err
				}
				if !slices.Contains(columns, col) {
					return nil, errColumnUnknown(col)
				}
				if err := p.expectPunct(")"); err != nil {
					return nil, err
				}
			}
			if p.word("into") {
				if shardsExpr, err = p.parsePrimary(); err != nil {
					return nil, err
				}
				if err := p.expectWord("shards"); err != nil {
					return nil, err
				}
			}
			continue
		case p.word("with"):
			if props, err = p.properties(); err != nil {
				return nil, err
			}
		}
		break
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	var replicasExpr expr
	for _, pr := range props {
		if pr.name != "number_of_replicas" {
			return nil, errUnsupported("table setting '" + pr.name + "'")
		}
		replicasExpr = pr.val
	}
	params := map[int]uint32{}
	addParams(params, props)
	if shardsExpr != nil {
		collectParams(shardsExpr, params)
	}
	run := func(x *execCtx) (*result, error) {
		if err := x.requirePrivilege(); err != nil {
			return nil, err
		}
		shards, replicas := int64(4), "0-1"
		if shardsExpr != nil {
			s, ok, err := x.text(shardsExpr)
			if err != nil {
				return nil, err
			}
			n, isNum := toFloat(s)
			if !ok || !isNum || n != float64(int64(n)) {
				return nil, errIllegal("invalid number '%s'", s)
			}
			shards = int64(n)
		}
		if replicasExpr != nil {
			r, ok, err := x.text(replicasExpr)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, errIllegal("number_of_replicas must not be NULL")
			}
			replicas = r
		}
		if shards < 1 || shards > 1000 {
			return nil, errIllegal("number of shards must be between 1 and 1000, got %d", shards)
		}
		if err := validateReplicas(replicas); err != nil {
			return nil, err
		}
		if x.m.tables[name] != nil {
			if ifNotExists {
				return done("CREATE", 0), nil
			}
			return nil, errRelationExists(name)
		}
		if partitionedBy != "" {
			x.m.tables[name] = &table{name: name, shards: int(shards), replicas: replicas, partitioned: true, partitionedBy: partitionedBy}
		} else {
			x.m.createTable(name, int(shards), replicas)
		}
		x.mutated = true
		return done("CREATE", 1), nil
	}
	return &plan{run: run, params: paramList(params)}, nil
}
