package cratedbsim

import (
	"fmt"
	"strconv"
	"strings"
)

// A recursive-descent parser for the part of CrateDB's grammar the simulator evaluates
// (crate/crate libs/sql-parser/src/main/antlr/SqlBaseParser.g4): booleanExpression (NOT,
// AND, OR), predicated (comparison, quantified comparison "= ANY (...)", [NOT] IN (...),
// IS [NOT] NULL) and primaryExpression (literals, parameters, ARRAY[...] / [...], column
// references with subscripts, function calls, current_user and friends, parenthesised
// expressions, "::type" casts). A statement that leaves this grammar is a SQLParseException,
// as in CrateDB; a well-formed one the simulator does not model is refused too, but with a
// message that says so.

// expr is a parsed expression.
type expr interface{ sql() string }

type (
	// colRef names a column: base plus ['key'] subscripts.
	colRef struct {
		base string
		path []string
	}
	literal  struct{ v any }
	paramRef struct {
		idx   int
		array bool // cast to an array type or used as ANY's operand
	}
	arrayLit struct{ elems []expr }
	funcCall struct {
		name     string
		star     bool
		distinct bool
		args     []expr
	}
	// special is current_user, current_schema, user or session_user.
	special struct{ name string }
	binOp   struct {
		op   string // = <> != < <= > >= and or
		l, r expr
	}
	notOp  struct{ e expr }
	isNull struct {
		e   expr
		not bool
	}
	inList struct {
		e    expr
		list []expr
		not  bool
	}
	anyCmp struct {
		e   expr
		op  string
		arr expr
	}
)

func (c colRef) name() string {
	var b strings.Builder
	b.WriteString(c.base)
	for _, p := range c.path {
		b.WriteString("['" + p + "']")
	}
	return b.String()
}

func (c colRef) sql() string { return c.name() }

func (l literal) sql() string {
	switch v := l.v.(type) {
	case nil:
		return "NULL"
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	return fmt.Sprint(l.v)
}

func (p paramRef) sql() string { return "$" + strconv.Itoa(p.idx+1) }

func (a arrayLit) sql() string {
	parts := make([]string, len(a.elems))
	for i, e := range a.elems {
		parts[i] = e.sql()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (f funcCall) sql() string {
	if f.star {
		return f.name + "(*)"
	}
	parts := make([]string, len(f.args))
	for i, e := range f.args {
		parts[i] = e.sql()
	}
	d := ""
	if f.distinct {
		d = "DISTINCT "
	}
	return f.name + "(" + d + strings.Join(parts, ", ") + ")"
}

func (s special) sql() string { return s.name }

func (b binOp) sql() string {
	op := b.op
	if op == "and" || op == "or" {
		op = strings.ToUpper(op)
	}
	return "(" + b.l.sql() + " " + op + " " + b.r.sql() + ")"
}

func (n notOp) sql() string { return "(NOT " + n.e.sql() + ")" }

func (n isNull) sql() string {
	if n.not {
		return "(" + n.e.sql() + " IS NOT NULL)"
	}
	return "(" + n.e.sql() + " IS NULL)"
}

func (n inList) sql() string {
	parts := make([]string, len(n.list))
	for i, e := range n.list {
		parts[i] = e.sql()
	}
	not := ""
	if n.not {
		not = "NOT "
	}
	return "(" + n.e.sql() + " " + not + "IN (" + strings.Join(parts, ", ") + "))"
}

func (a anyCmp) sql() string { return "(" + a.e.sql() + " " + a.op + " ANY(" + a.arr.sql() + "))" }

// reserved are CrateDB's reserved words that cannot be bare identifiers (a subset of
// SqlBaseLexer's reserved keywords, the ones a statement here could trip over).
func reserved(w string) bool {
	switch w {
	case "select", "from", "where", "group", "by", "order", "limit", "offset", "and", "or", "not",
		"in", "is", "null", "true", "false", "as", "having", "distinct", "all", "any", "set",
		"with", "to", "create", "drop", "alter", "table", "user", "if", "exists", "asc", "desc",
		"union", "on", "join", "case", "when", "then", "else", "end", "array", "between", "like":
		return true
	}
	return false
}

// tokParser walks a token slice.
type tokParser struct {
	toks []token
	pos  int
}

func (p *tokParser) peek() (token, bool) {
	if p.pos >= len(p.toks) {
		return token{}, false
	}
	return p.toks[p.pos], true
}

func (p *tokParser) peekAt(k int) (token, bool) {
	if p.pos+k >= len(p.toks) {
		return token{}, false
	}
	return p.toks[p.pos+k], true
}

func (p *tokParser) done() bool { return p.pos >= len(p.toks) }

// word consumes the keyword w when it is next.
func (p *tokParser) word(w string) bool {
	if t, ok := p.peek(); ok && t.kind == tkWord && t.text == w {
		p.pos++
		return true
	}
	return false
}

// punct consumes the punctuation s when it is next.
func (p *tokParser) punct(s string) bool {
	if t, ok := p.peek(); ok && t.kind == tkPunct && t.text == s {
		p.pos++
		return true
	}
	return false
}

// mismatch is CrateDB's parse error for the next token (ANTLR's "mismatched input").
func (p *tokParser) mismatch(expecting string) error {
	got := "<EOF>"
	if t, ok := p.peek(); ok {
		got = t.String()
	}
	return errParse("line 1:1: mismatched input '%s' expecting %s", got, expecting)
}

func (p *tokParser) expectWord(w string) error {
	if !p.word(w) {
		return p.mismatch("'" + strings.ToUpper(w) + "'")
	}
	return nil
}

func (p *tokParser) expectPunct(s string) error {
	if !p.punct(s) {
		return p.mismatch("'" + s + "'")
	}
	return nil
}

// ident reads one identifier: a bare word that is not reserved (lowercased) or a quoted one.
func (p *tokParser) ident() (string, error) {
	t, ok := p.peek()
	if !ok || !(t.kind == tkQuoted || (t.kind == tkWord && !reserved(t.text))) {
		return "", p.mismatch("an identifier")
	}
	p.pos++
	return t.text, nil
}

// qname reads ident ('.' ident)*.
func (p *tokParser) qname() (string, error) {
	parts := []string{}
	for {
		id, err := p.ident()
		if err != nil {
			return "", err
		}
		parts = append(parts, id)
		if !p.punct(".") {
			return strings.Join(parts, "."), nil
		}
	}
}

// parseExpr parses booleanExpression.
func (p *tokParser) parseExpr() (expr, error) { return p.parseOr() }

func (p *tokParser) parseOr() (expr, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.word("or") {
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = binOp{op: "or", l: l, r: r}
	}
	return l, nil
}

func (p *tokParser) parseAnd() (expr, error) {
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.word("and") {
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		l = binOp{op: "and", l: l, r: r}
	}
	return l, nil
}

func (p *tokParser) parseNot() (expr, error) {
	if p.word("not") {
		e, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return notOp{e: e}, nil
	}
	return p.parsePredicated()
}

func cmpOp(t token) bool {
	if t.kind != tkPunct {
		return false
	}
	switch t.text {
	case "=", "<", ">", "<=", ">=", "!=":
		return true
	}
	return false
}

func (p *tokParser) parsePredicated() (expr, error) {
	e, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	t, ok := p.peek()
	if !ok {
		return e, nil
	}
	// "<>" lexes as two tokens.
	if t.kind == tkPunct && t.text == "<" {
		if n, ok := p.peekAt(1); ok && n.kind == tkPunct && n.text == ">" {
			p.pos += 2
			return p.comparison(e, "<>")
		}
	}
	switch {
	case cmpOp(t):
		p.pos++
		return p.comparison(e, t.text)
	case t.kind == tkWord && t.text == "is":
		p.pos++
		not := p.word("not")
		if err := p.expectWord("null"); err != nil {
			return nil, err
		}
		return isNull{e: e, not: not}, nil
	case t.kind == tkWord && (t.text == "in" || t.text == "not"):
		p.pos++
		not := false
		if t.text == "not" {
			not = true
			if err := p.expectWord("in"); err != nil {
				return nil, err
			}
		}
		if err := p.expectPunct("("); err != nil {
			return nil, err
		}
		var list []expr
		for {
			x, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			list = append(list, x)
			if !p.punct(",") {
				break
			}
		}
		if err := p.expectPunct(")"); err != nil {
			return nil, err
		}
		return inList{e: e, list: list, not: not}, nil
	}
	return e, nil
}

// comparison parses the right side of "e op ...": a value or a quantified ANY/SOME (...).
func (p *tokParser) comparison(e expr, op string) (expr, error) {
	if p.word("any") || p.word("some") {
		if err := p.expectPunct("("); err != nil {
			return nil, err
		}
		arr, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		if err := p.expectPunct(")"); err != nil {
			return nil, err
		}
		if pr, ok := arr.(paramRef); ok {
			pr.array = true
			arr = pr
		}
		return anyCmp{e: e, op: op, arr: arr}, nil
	}
	if p.word("all") {
		return nil, errUnsupported("ALL (...) comparisons")
	}
	r, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	return binOp{op: op, l: e, r: r}, nil
}

// errUnsupported refuses well-formed SQL the simulator does not model.
func errUnsupported(what string) *SQLError {
	return &SQLError{SQLState: "0A000", HTTPStatus: 400, Code: 4004,
		Message: "UnsupportedFeatureException[" + what + " is not supported by the CrateDB simulator]"}
}

func (p *tokParser) parsePrimary() (expr, error) {
	e, err := p.parsePrimaryNoCast()
	if err != nil {
		return nil, err
	}
	// expr::type[ '[]' ]: the simulator keeps values as they are; an array cast marks a
	// parameter as an array.
	for p.punct("::") {
		if _, err := p.ident(); err != nil {
			return nil, err
		}
		if p.punct("[") {
			if err := p.expectPunct("]"); err != nil {
				return nil, err
			}
			if pr, ok := e.(paramRef); ok {
				pr.array = true
				e = pr
			}
		}
	}
	return e, nil
}

func (p *tokParser) parsePrimaryNoCast() (expr, error) {
	t, ok := p.peek()
	if !ok {
		return nil, p.mismatch("an expression")
	}
	switch t.kind {
	case tkString:
		p.pos++
		return literal{v: t.text}, nil
	case tkNumber:
		p.pos++
		return numberLiteral(t.text)
	case tkParam:
		p.pos++
		idx, ok := paramIndex(t)
		if !ok || idx >= 1000 {
			return nil, errParse("parameter $%s out of range", t.text)
		}
		return paramRef{idx: idx}, nil
	case tkPunct:
		switch t.text {
		case "-":
			if n, ok := p.peekAt(1); ok && n.kind == tkNumber {
				p.pos += 2
				return numberLiteral("-" + n.text)
			}
		case "(":
			p.pos++
			e, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			if err := p.expectPunct(")"); err != nil {
				return nil, err
			}
			return e, nil
		case "[":
			return p.arrayLiteral()
		}
		return nil, p.mismatch("an expression")
	case tkQuoted:
		p.pos++
		return p.subscripts(colRef{base: t.text})
	}
	switch t.text {
	case "null":
		p.pos++
		return literal{v: nil}, nil
	case "true", "false":
		p.pos++
		return literal{v: t.text == "true"}, nil
	case "array":
		if n, ok := p.peekAt(1); ok && n.kind == tkPunct && n.text == "[" {
			p.pos++
			return p.arrayLiteral()
		}
	case "current_user", "current_schema", "user", "session_user", "current_role":
		p.pos++
		return special{name: t.text}, nil
	}
	if reserved(t.text) {
		return nil, p.mismatch("an expression")
	}
	p.pos++
	if p.punct("(") {
		return p.functionArgs(t.text)
	}
	return p.subscripts(colRef{base: t.text})
}

func numberLiteral(s string) (expr, error) {
	if strings.Contains(s, ".") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, errParse("line 1:1: invalid number '%s'", s)
		}
		return literal{v: f}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, errParse("line 1:1: invalid number '%s'", s)
	}
	// An integer literal is an integer when it fits, a bigint otherwise (as in CrateDB).
	if n >= -1<<31 && n < 1<<31 {
		return literal{v: int32(n)}, nil
	}
	return literal{v: n}, nil
}

func (p *tokParser) arrayLiteral() (expr, error) {
	if err := p.expectPunct("["); err != nil {
		return nil, err
	}
	var a arrayLit
	if p.punct("]") {
		return a, nil
	}
	for {
		e, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		a.elems = append(a.elems, e)
		if !p.punct(",") {
			break
		}
	}
	if err := p.expectPunct("]"); err != nil {
		return nil, err
	}
	return a, nil
}

func (p *tokParser) subscripts(c colRef) (expr, error) {
	for p.punct("[") {
		t, ok := p.peek()
		if !ok || t.kind != tkString {
			return nil, errUnsupported("subscripts other than string keys")
		}
		p.pos++
		c.path = append(c.path, t.text)
		if err := p.expectPunct("]"); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (p *tokParser) functionArgs(name string) (expr, error) {
	f := funcCall{name: name}
	if p.punct("*") {
		f.star = true
		return f, p.expectPunct(")")
	}
	if p.punct(")") {
		return f, nil
	}
	f.distinct = p.word("distinct")
	if !f.distinct {
		p.word("all")
	}
	for {
		e, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		f.args = append(f.args, e)
		if !p.punct(",") {
			break
		}
	}
	return f, p.expectPunct(")")
}

// collectParams records each parameter's type not known yet (inferParams): a text array for
// an array parameter, text otherwise (the value is coerced where it is compared, as CrateDB's
// implicit casts do).
func collectParams(e expr, params map[int]uint32) {
	switch e := e.(type) {
	case paramRef:
		oid := oidText
		if e.array {
			oid = oidTextArray
		}
		if _, typed := params[e.idx]; !typed || oid == oidTextArray {
			params[e.idx] = oid
		}
	case arrayLit:
		for _, x := range e.elems {
			collectParams(x, params)
		}
	case funcCall:
		for _, x := range e.args {
			collectParams(x, params)
		}
	case binOp:
		collectParams(e.l, params)
		collectParams(e.r, params)
	case notOp:
		collectParams(e.e, params)
	case isNull:
		collectParams(e.e, params)
	case inList:
		collectParams(e.e, params)
		for _, x := range e.list {
			collectParams(x, params)
		}
	case anyCmp:
		collectParams(e.e, params)
		collectParams(e.arr, params)
	}
}

// paramList turns the collected types into a dense list by index.
func paramList(params map[int]uint32) []uint32 {
	n := 0
	for i := range params {
		n = max(n, i+1)
	}
	if n == 0 {
		return nil
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = oidText
		if o, ok := params[i]; ok {
			out[i] = o
		}
	}
	return out
}

// paramOID is the type a parameter takes from what it is compared with or assigned to: a
// bigint for an integer column, a boolean for a boolean one, text otherwise.
func paramOID(col uint32) uint32 {
	switch col {
	case oidInt2, oidInt4, oidInt8:
		return oidInt8
	case oidBool:
		return oidBool
	}
	return oidText
}

// inferParams types the parameters compared with a column (c = $1, $1 IN (...), c IN ($1)),
// as CrateDB types a parameter from its context.
func (ev *evaluator) inferParams(e expr, params map[int]uint32) {
	typeParam := func(x expr, other expr) {
		if p, ok := x.(paramRef); ok && !p.array {
			if _, isParam := other.(paramRef); !isParam {
				params[p.idx] = paramOID(ev.typeOf(other))
			}
		}
	}
	switch e := e.(type) {
	case binOp:
		if e.op == "and" || e.op == "or" {
			ev.inferParams(e.l, params)
			ev.inferParams(e.r, params)
			return
		}
		typeParam(e.l, e.r)
		typeParam(e.r, e.l)
	case notOp:
		ev.inferParams(e.e, params)
	case inList:
		for _, x := range e.list {
			typeParam(x, e.e)
		}
	}
}
