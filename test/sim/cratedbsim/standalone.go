package cratedbsim

import (
	"slices"
	"strings"
)

// The parser and evaluator for callers that keep their own state instead of a simulated
// cluster (the CrateDB engine's unit-test fake, cratedbtest): Query evaluates a
// SELECT over tables the caller supplies, ParseCommand parses a write statement into what it
// asks for. Both follow CrateDB's grammar exactly as the simulator does, so a statement the
// simulator refuses is refused here too.

// Table is a table a caller supplies to Query: column names as CrateDB reports them (a
// subscripted name such as "node['name']" declares a leaf of the object column "node"; a
// column whose values are map[string]any is an object that subscripts read into) and rows.
type Table struct {
	Columns []string
	Rows    [][]any
}

func (t Table) virtual() virtualTable {
	cols := make([]column, len(t.Columns))
	for i, name := range t.Columns {
		cols[i] = column{name: name, oid: oidVarchar}
		for _, r := range t.Rows {
			if _, ok := r[i].(map[string]any); ok {
				cols[i].oid = oidJSON
				break
			}
		}
	}
	rows := t.Rows
	return virtualTable{cols: cols, rows: func(*model) [][]any { return rows }}
}

// RuntimeSettings lists the cluster settings SET GLOBAL accepts, with their defaults.
func RuntimeSettings() map[string]string { return runtimeSettings() }

// SettingColumn is the sys.cluster column of a setting: settings['a']['b'] for "a.b".
func SettingColumn(key string) string {
	var b strings.Builder
	b.WriteString("settings")
	for _, p := range strings.Split(key, ".") {
		b.WriteString("['" + p + "']")
	}
	return b.String()
}

func oneStatement(stmt string) ([]token, error) {
	parts := splitStatements(stmt)
	if len(parts) != 1 {
		return nil, errParse("expected exactly one statement, got %d", len(parts))
	}
	toks, err := lex(parts[0])
	if err != nil {
		return nil, errParse("line 1:1: %v", err)
	}
	return toks, nil
}

// Query parses a SELECT and evaluates it over the caller's tables; table is called once
// for the relation the statement reads (ok false: it does not exist). user is current_user.
// It returns the column names and the rows.
func Query(stmt, user string, args []any, table func(name string) (Table, bool)) ([]string, [][]any, error) {
	toks, err := oneStatement(stmt)
	if err != nil {
		return nil, nil, err
	}
	p := &tokParser{toks: toks}
	s, err := parseSelect(p)
	if err != nil {
		return nil, nil, err
	}
	lookup := func(name string) (virtualTable, bool) {
		t, ok := table(name)
		if !ok {
			return virtualTable{}, false
		}
		return t.virtual(), true
	}
	pl, err := planSelect(s, lookup)
	if err != nil {
		return nil, nil, err
	}
	res, err := pl.run(&execCtx{user: user, args: args})
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, len(res.cols))
	for i, c := range res.cols {
		names[i] = c.name
	}
	return names, res.rows, nil
}

// Setting is one assignment of SET GLOBAL.
type Setting struct{ Name, Value string }

// Command is a write statement parsed by CrateDB's grammar, its values evaluated with the
// statement's arguments.
type Command struct {
	// Verb is CREATE USER, ALTER USER, DROP USER, SET GLOBAL, RESET GLOBAL, GRANT, DENY,
	// REVOKE, UPDATE or SET LICENSE.
	Verb string
	// User and Password of CREATE/ALTER/DROP USER (Password nil: none given, or NULL);
	// IfExists of DROP USER IF EXISTS.
	User     string
	Password *string
	IfExists bool
	// Persistent and Settings of SET GLOBAL (names exposed and runtime, values validated);
	// Reset: every setting RESET GLOBAL resets.
	Persistent bool
	Settings   []Setting
	Reset      []string
	// Privileges (types; all four for ALL), Class (CLUSTER, SCHEMA, TABLE, VIEW), Idents
	// (the objects; "" for CLUSTER) and Grantees of GRANT, DENY and REVOKE.
	Privileges []string
	Class      string
	Idents     []string
	Grantees   []string
	// Table, Values (by column) and Where of UPDATE: Where tells whether a row of the table
	// (given with the table's columns) matches.
	Table  string
	Values map[string]any
	Where  func(t Table, row []any) (bool, error)
	// License is SET LICENSE's key.
	License string
}

// ParseCommand parses a write statement. user is current_user (for WHERE conditions that
// read it).
func ParseCommand(stmt, user string, args []any) (*Command, error) {
	toks, err := oneStatement(stmt)
	if err != nil {
		return nil, err
	}
	x := &execCtx{user: user, args: args}
	p := &tokParser{toks: toks}
	first, _ := p.peek()
	second, _ := p.peekAt(1)
	if first.kind != tkWord {
		return nil, p.mismatch("a statement")
	}
	switch {
	case second.kind == tkWord && second.text == "user" && (first.text == "create" || first.text == "alter" || first.text == "drop"):
		st, err := parseUser(p)
		if err != nil {
			return nil, err
		}
		c := &Command{Verb: st.verb + " USER", User: st.name, IfExists: st.ifExists}
		if st.pw != nil {
			pw, ok, err := x.text(st.pw)
			if err != nil {
				return nil, err
			}
			if ok {
				c.Password = &pw
			}
		}
		return c, nil
	case first.text == "set" && second.kind == tkWord && second.text == "global":
		st, err := parseSetGlobal(p)
		if err != nil {
			return nil, err
		}
		vals, err := st.values(x)
		if err != nil {
			return nil, err
		}
		c := &Command{Verb: "SET GLOBAL", Persistent: st.persistent}
		for i, a := range st.as {
			c.Settings = append(c.Settings, Setting{Name: a.name, Value: vals[i]})
		}
		return c, nil
	case first.text == "set" && second.kind == tkWord && second.text == "license":
		p.pos += 2
		t, ok := p.peek()
		if !ok || (t.kind != tkString && t.kind != tkParam) {
			return nil, p.mismatch("a string")
		}
		e, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if err := p.end(); err != nil {
			return nil, err
		}
		key, ok, err := x.text(e)
		if err != nil {
			return nil, err
		}
		if !ok || strings.TrimSpace(key) == "" {
			return nil, errIllegal("license key must not be empty")
		}
		return &Command{Verb: "SET LICENSE", License: key}, nil
	case first.text == "reset" && second.kind == tkWord && second.text == "global":
		names, err := parseResetGlobal(p)
		if err != nil {
			return nil, err
		}
		return &Command{Verb: "RESET GLOBAL", Reset: names}, nil
	case first.text == "update":
		st, err := parseUpdate(p)
		if err != nil {
			return nil, err
		}
		c := &Command{Verb: "UPDATE", Table: st.table, Values: map[string]any{}}
		for _, a := range st.assigns {
			v, err := x.value(a.val)
			if err != nil {
				return nil, err
			}
			c.Values[a.name] = v
		}
		c.Where = func(t Table, row []any) (bool, error) {
			if st.where == nil {
				return true, nil
			}
			ev := &evaluator{cols: t.virtual().cols, x: x}
			if err := ev.check(st.where); err != nil {
				return false, err
			}
			v, err := ev.eval(st.where, row)
			return v == true, err
		}
		return c, nil
	}
	st, ok, err := parsePrivilegeStatement(toks)
	if !ok {
		return nil, errParse("line 1:1: statement not supported by the CrateDB simulator (starts with '%s')", first.text)
	}
	if err != nil {
		return nil, err
	}
	for _, t := range st.types {
		if !slices.Contains(privilegeTypes(), t) {
			return nil, errIllegal("Unknown privilege type '%s'", t)
		}
	}
	return &Command{Verb: st.verb, Privileges: st.types, Class: st.class, Idents: st.idents, Grantees: st.names}, nil
}
