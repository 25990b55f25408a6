package cratedbsim

import (
	"fmt"
	"net/http"
	"strings"
)

// PostgreSQL type OIDs used in RowDescription and ParameterDescription. CrateDB reports
// text columns as varchar.
const (
	oidBool      uint32 = 16
	oidInt8      uint32 = 20
	oidInt2      uint32 = 21
	oidInt4      uint32 = 23
	oidFloat4    uint32 = 700
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
	// stateless statements work before the cluster state is recovered (sys.nodes,
	// sys.cluster, sys.node_checks); the others are blocked then.
	stateless bool
}

// execCtx is what a statement handler works with. The model is locked while it runs.
type execCtx struct {
	m    *model
	user string
	args []any
	// version is the version of the node that runs the statement.
	version Version
	// mutated is set by handlers that change state worth persisting.
	mutated bool
}

// statements prepares statements for a Sim. It holds nothing today; it stays a type so that
// the Sim, its tests and the wire protocols share one entry point.
type statements struct{}

func newStatements() *statements { return &statements{} }

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
	if p, ok, err := prepareTableStatement(toks); ok {
		return p, err
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
