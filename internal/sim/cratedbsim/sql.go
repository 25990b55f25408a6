package cratedbsim

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// PostgreSQL type OIDs used in RowDescription and ParameterDescription. CrateDB reports
// text columns as varchar.
const (
	oidBool      uint32 = 16
	oidInt8      uint32 = 20
	oidInt2      uint32 = 21
	oidInt4      uint32 = 23
	oidText      uint32 = 25
	oidVarchar   uint32 = 1043
	oidTextArray uint32 = 1009
)

type column struct {
	name string
	oid  uint32
}

// result is the outcome of one statement.
type result struct {
	cols []column
	rows [][]any
	// verb is the command tag's first word (SELECT, CREATE, SET, ...); the tag is
	// "<verb> <rowcount>".
	verb     string
	rowcount int64
}

func (r *result) tag() string {
	if r.verb == "SELECT" {
		return fmt.Sprintf("SELECT %d", len(r.rows))
	}
	return fmt.Sprintf("%s %d", r.verb, r.rowcount)
}

// SQLError is an error as CrateDB reports it: a message such as
// "RoleAlreadyExistsException[Role 'x' already exists]", a PostgreSQL SQLSTATE and the HTTP
// status and CrateDB error code of the HTTP endpoint.
type SQLError struct {
	SQLState   string
	HTTPStatus int
	Code       int
	Message    string
}

func (e *SQLError) Error() string { return e.Message }

func errParse(format string, args ...any) *SQLError {
	return &SQLError{SQLState: "42601", HTTPStatus: http.StatusBadRequest, Code: 4000,
		Message: "SQLParseException[" + fmt.Sprintf(format, args...) + "]"}
}

func errIllegal(format string, args ...any) *SQLError {
	return &SQLError{SQLState: "22023", HTTPStatus: http.StatusBadRequest, Code: 4000,
		Message: "IllegalArgumentException[" + fmt.Sprintf(format, args...) + "]"}
}

// errRoleExists and errRoleUnknown follow CrateDB's rename of users to roles in 5.6
// (UserAlreadyExistsException became RoleAlreadyExistsException).
func errRoleExists(name string, v Version) *SQLError {
	msg := fmt.Sprintf("RoleAlreadyExistsException[Role '%s' already exists]", name)
	if !v.AtLeast(5, 6) {
		msg = fmt.Sprintf("UserAlreadyExistsException[User '%s' already exists]", name)
	}
	return &SQLError{SQLState: "42710", HTTPStatus: http.StatusConflict, Code: 4099, Message: msg}
}

func errRoleUnknown(name string, v Version) *SQLError {
	msg := fmt.Sprintf("RoleUnknownException[Role '%s' does not exist]", name)
	if !v.AtLeast(5, 6) {
		msg = fmt.Sprintf("UserUnknownException[User '%s' does not exist]", name)
	}
	return &SQLError{SQLState: "42704", HTTPStatus: http.StatusNotFound, Code: 40410, Message: msg}
}

// errStateNotRecovered is CrateDB's answer while the gateway has not recovered the cluster
// state (GatewayService.STATE_NOT_RECOVERED_BLOCK).
func errStateNotRecovered() *SQLError {
	return &SQLError{SQLState: "XX000", HTTPStatus: http.StatusServiceUnavailable, Code: 5035,
		Message: "ClusterBlockException[blocked by: [SERVICE_UNAVAILABLE/1/state not recovered / initialized];]"}
}

// errNoMaster is the answer while no master is elected.
func errNoMaster() *SQLError {
	return &SQLError{SQLState: "XX000", HTTPStatus: http.StatusServiceUnavailable, Code: 5031,
		Message: "MasterNotDiscoveredException[null]"}
}

func errRelationExists(name string) *SQLError {
	return &SQLError{SQLState: "42P07", HTTPStatus: http.StatusConflict, Code: 4093,
		Message: fmt.Sprintf("RelationAlreadyExists[Relation '%s' already exists.]", name)}
}

func errRelationUnknown(name string) *SQLError {
	return &SQLError{SQLState: "42P01", HTTPStatus: http.StatusNotFound, Code: 4041,
		Message: fmt.Sprintf("RelationUnknown[Relation '%s' unknown]", name)}
}

func errPrivilege(user string) *SQLError {
	return &SQLError{SQLState: "42501", HTTPStatus: http.StatusUnauthorized, Code: 4011,
		Message: fmt.Sprintf("MissingPrivilegeException[Missing 'AL' privilege for user '%s']", user)}
}

func errAuth(user string) *SQLError {
	return &SQLError{SQLState: "28P01", HTTPStatus: http.StatusUnauthorized, Code: 4010,
		Message: fmt.Sprintf("password authentication failed for user \"%s\"", user)}
}

// plan is a statement recognised by prepare, ready to run with arguments.
type plan struct {
	// cols are the result columns; nil for statements that return no rows.
	cols []column
	// params are the parameter type OIDs, by parameter index.
	params []uint32
	run    func(x *execCtx) (*result, error)
	caps   []capture
	// variant is the index of the pattern that matched, for IF [NOT] EXISTS forms.
	variant int
	// stateless statements work before the cluster state is recovered (sys.nodes,
	// sys.cluster, sys.node_checks); the others are blocked then.
	stateless bool
}

// execCtx is what a statement handler works with. The model is locked while it runs.
type execCtx struct {
	m       *model
	user    string
	caps    []capture
	variant int
	args    []any
	// version is the version of the node that runs the statement.
	version Version
	// mutated is set by handlers that change state worth persisting.
	mutated bool
}

type stmtDef struct {
	patterns  []string
	cols      []column
	stateless bool
	run       func(x *execCtx) (*result, error)
	// lexed patterns, filled once by newStatements
	lexed [][]token
}

// statements is the catalogue of statement shapes the simulator answers, built per Sim so
// that no package-level state is mutable.
type statements struct {
	defs []*stmtDef
}

func newStatements() *statements {
	defs := statementDefs()
	for _, d := range defs {
		for _, p := range d.patterns {
			toks, err := lex(p)
			if err != nil {
				panic(fmt.Sprintf("cratedbsim: bad statement pattern %q: %v", p, err))
			}
			d.lexed = append(d.lexed, toks)
		}
	}
	return &statements{defs: defs}
}

// prepare recognises a statement. Unknown statements yield a SQLParseException.
func (s *statements) prepare(sql string) (*plan, error) {
	parts := splitStatements(sql)
	if len(parts) != 1 {
		return nil, errParse("expected exactly one statement, got %d", len(parts))
	}
	toks, err := lex(parts[0])
	if err != nil {
		return nil, errParse("line 1:1: %v", err)
	}
	if p, ok, err := prepareGrammar(toks); ok {
		return p, err
	}
	for _, d := range s.defs {
		for variant, pat := range d.lexed {
			caps, ok := match(pat, toks)
			if !ok {
				continue
			}
			p := &plan{cols: d.cols, run: d.run, caps: caps, variant: variant, stateless: d.stateless}
			p.params, err = paramTypes(caps)
			if err != nil {
				return nil, err
			}
			return p, nil
		}
	}
	if p, ok, err := preparePrivilegeStatement(toks); ok {
		return p, err
	}
	first := ""
	if len(toks) > 0 {
		first = toks[0].text
		if toks[0].kind != tkWord {
			first = ""
		}
	}
	return nil, errParse("line 1:1: statement not supported by the CrateDB simulator (starts with '%s')", first)
}

func paramTypes(caps []capture) ([]uint32, error) {
	var params []uint32
	for _, c := range caps {
		idx, ok := paramIndex(c.toks[0])
		if !ok {
			continue
		}
		if idx >= 1000 {
			return nil, errParse("parameter $%d out of range", idx+1)
		}
		for len(params) <= idx {
			params = append(params, oidText)
		}
		switch c.kind {
		case phBool:
			params[idx] = oidBool
		case phInt:
			params[idx] = oidInt8
		case phArray:
			params[idx] = oidTextArray
		default:
			params[idx] = oidText
		}
	}
	return params, nil
}

func (x *execCtx) arg(t token) (any, error) {
	idx, _ := paramIndex(t)
	if idx >= len(x.args) {
		return nil, errIllegal("no value given for parameter $%d", idx+1)
	}
	return x.args[idx], nil
}

// str returns capture i as a string (NULL is an error).
func (x *execCtx) str(i int) (string, error) {
	c := x.caps[i]
	t := c.toks[0]
	switch t.kind {
	case tkString, tkNumber:
		return t.text, nil
	case tkPunct:
		return "-" + c.toks[1].text, nil
	case tkWord:
		if t.text == "null" {
			return "", errIllegal("value must not be NULL")
		}
		return t.text, nil
	case tkParam:
		v, err := x.arg(t)
		if err != nil {
			return "", err
		}
		switch v := v.(type) {
		case string:
			return v, nil
		case nil:
			return "", errIllegal("value must not be NULL")
		default:
			return fmt.Sprint(v), nil
		}
	}
	return identName(c.toks), nil
}

func (x *execCtx) boolean(i int) (bool, error) {
	t := x.caps[i].toks[0]
	if t.kind == tkParam {
		v, err := x.arg(t)
		if err != nil {
			return false, err
		}
		b, ok := v.(bool)
		if !ok {
			return false, errIllegal("parameter $%s must be a boolean", t.text)
		}
		return b, nil
	}
	return t.text == "true", nil
}

func (x *execCtx) integer(i int) (int64, error) {
	t := x.caps[i].toks[0]
	if t.kind == tkParam {
		v, err := x.arg(t)
		if err != nil {
			return 0, err
		}
		switch v := v.(type) {
		case int64:
			return v, nil
		case string:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, errIllegal("parameter $%s must be an integer", t.text)
			}
			return n, nil
		}
		return 0, errIllegal("parameter $%s must be an integer", t.text)
	}
	n, err := strconv.ParseInt(t.text, 10, 64)
	if err != nil {
		return 0, errIllegal("%q is not an integer", t.text)
	}
	return n, nil
}

func (x *execCtx) strs(i int) ([]string, error) {
	toks := x.caps[i].toks
	t := toks[0]
	switch t.kind {
	case tkParam:
		v, err := x.arg(t)
		if err != nil {
			return nil, err
		}
		switch v := v.(type) {
		case []string:
			return v, nil
		case string:
			return parseArrayLiteral(v)
		case nil:
			return nil, nil
		}
		return nil, errIllegal("parameter $%s must be a text array", t.text)
	case tkString:
		out, err := parseArrayLiteral(t.text)
		if err != nil {
			return nil, errIllegal("%v", err)
		}
		return out, nil
	}
	var out []string
	for _, tk := range toks {
		if tk.kind == tkString || tk.kind == tkNumber {
			out = append(out, tk.text)
		}
	}
	return out, nil
}

func (x *execCtx) requirePrivilege() error {
	u := x.m.users[x.user]
	if u == nil || !u.privileged() {
		return errPrivilege(x.user)
	}
	return nil
}

func done(verb string, n int64) *result { return &result{verb: verb, rowcount: n} }

func rows(cols []column, rs ...[]any) *result { return &result{verb: "SELECT", cols: cols, rows: rs} }

// tableName qualifies a table identifier with the default schema.
func tableName(toks []token) string {
	name := identName(toks)
	if !strings.Contains(name, ".") {
		name = "doc." + name
	}
	return name
}

func statementDefs() []*stmtDef {
	return append([]*stmtDef{
		{
			patterns: []string{"SET LICENSE :v"},
			run: func(x *execCtx) (*result, error) {
				if x.version.AtLeast(5, 3) {
					// Removed in 5.3: the parser no longer knows the statement.
					return nil, errParse("line 1:5: mismatched input 'LICENSE' expecting {'SESSION', 'LOCAL', 'GLOBAL', 'TRANSACTION', 'SESSION_CHARACTERISTICS', 'TIME'}")
				}
				if err := x.requirePrivilege(); err != nil {
					return nil, err
				}
				key, err := x.str(0)
				if err != nil {
					return nil, err
				}
				if strings.TrimSpace(key) == "" {
					return nil, errIllegal("license key must not be empty")
				}
				x.m.license = true
				x.mutated = true
				return done("SET", 1), nil
			},
		},
		{
			patterns: []string{"DROP TABLE :id", "DROP TABLE IF EXISTS :id"},
			run: func(x *execCtx) (*result, error) {
				if err := x.requirePrivilege(); err != nil {
					return nil, err
				}
				name := tableName(x.caps[0].toks)
				if x.m.tables[name] == nil {
					if x.variant == 1 { // IF EXISTS
						return done("DROP", 0), nil
					}
					return nil, errRelationUnknown(name)
				}
				x.m.dropTable(name)
				x.mutated = true
				return done("DROP", 1), nil
			},
		},
		{
			patterns: []string{"ALTER TABLE :id SET (number_of_replicas = :v)"},
			run: func(x *execCtx) (*result, error) {
				if err := x.requirePrivilege(); err != nil {
					return nil, err
				}
				name := tableName(x.caps[0].toks)
				t := x.m.tables[name]
				if t == nil || t.parent != "" {
					return nil, errRelationUnknown(name)
				}
				r, err := x.str(1)
				if err != nil {
					return nil, err
				}
				if err := validateReplicas(r); err != nil {
					return nil, err
				}
				x.m.setReplicas(t, r, false)
				x.mutated = true
				return done("ALTER", -1), nil
			},
		},
		{patterns: []string{"BEGIN"}, run: func(*execCtx) (*result, error) { return done("BEGIN", 0), nil }},
		{patterns: []string{"COMMIT"}, run: func(*execCtx) (*result, error) { return done("COMMIT", 0), nil }},
		{patterns: []string{"REFRESH TABLE :id"}, run: func(*execCtx) (*result, error) { return done("REFRESH", 1), nil }},
	}, partitionStatementDefs()...)
}
