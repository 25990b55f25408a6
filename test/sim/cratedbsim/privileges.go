package cratedbsim

import (
	"maps"
	"slices"
	"strings"
)

// Privileges as CrateDB keeps them (docs/admin/privileges.rst and
// docs/sql/statements/{grant,deny,revoke}.rst of crate/crate): a user holds, per class
// (CLUSTER, SCHEMA, TABLE/VIEW) and object (ident: none for CLUSTER, the schema, the qualified
// table), a state GRANT or DENY for each type DQL, DML, DDL, AL. sys.privileges lists them, one
// row each. GRANT/DENY set the state, REVOKE removes the entry; the row count is the number of
// entries that changed. AL is a cluster privilege: it is what CREATE/DROP USER, GRANT and
// SET GLOBAL need. DENY wins over GRANT.

// privilegeTypes are the types there are, as GRANT ALL [PRIVILEGES] names them.
func privilegeTypes() []string { return []string{"AL", "DDL", "DML", "DQL"} }

// Privilege classes and states.
const (
	classCluster = "CLUSTER"
	classSchema  = "SCHEMA"
	classTable   = "TABLE"
	classView    = "VIEW"
	stateGrant   = "GRANT"
	stateDeny    = "DENY"
)

type privKey struct {
	class, ident, typ string
}

type privEntry struct {
	state, grantor string
}

// hasClusterPrivilege: a superuser has every privilege; others need typ granted, not denied,
// on the cluster.
func (u *user) hasClusterPrivilege(typ string) bool {
	if u.superuser {
		return true
	}
	e, ok := u.privs[privKey{class: classCluster, typ: typ}]
	return ok && e.state == stateGrant
}

// privilegeRows are sys.privileges' rows: class, grantee, grantor, ident, state, type.
func (m *model) privilegeRows() [][]any {
	var out [][]any
	for _, name := range slices.Sorted(maps.Keys(m.users)) {
		u := m.users[name]
		keys := slices.SortedFunc(maps.Keys(u.privs), func(a, b privKey) int {
			return strings.Compare(a.class+"\x00"+a.ident+"\x00"+a.typ, b.class+"\x00"+b.ident+"\x00"+b.typ)
		})
		for _, k := range keys {
			e := u.privs[k]
			var ident any
			if k.class != classCluster {
				ident = k.ident
			}
			out = append(out, []any{k.class, name, e.grantor, ident, e.state, k.typ})
		}
	}
	return out
}

// preparePrivilegeStatement parses GRANT, DENY and REVOKE by their grammar:
//
//	{GRANT | DENY} { ALL [PRIVILEGES] | type [, ...] } [ON {SCHEMA | TABLE | VIEW} ident [, ...]] TO name [, ...]
//	REVOKE         { ALL [PRIVILEGES] | type [, ...] } [ON {SCHEMA | TABLE | VIEW} ident [, ...]] FROM name [, ...]
//
// ok is false when toks are not one of these statements; a statement that starts like one but
// breaks the grammar is a parse error, as in CrateDB.
func preparePrivilegeStatement(toks []token) (*plan, bool, error) {
	st, ok, err := parsePrivilegeStatement(toks)
	if !ok || err != nil {
		return nil, ok, err
	}
	run := func(x *execCtx) (*result, error) {
		return x.changePrivileges(st.verb, st.all, st.types, st.class, st.idents, st.names)
	}
	return &plan{run: run}, true, nil
}

// privStmt is a parsed GRANT, DENY or REVOKE.
type privStmt struct {
	verb          string
	all           bool
	types         []string
	class         string
	idents, names []string
}

func parsePrivilegeStatement(toks []token) (*privStmt, bool, error) {
	if len(toks) == 0 || toks[0].kind != tkWord {
		return nil, false, nil
	}
	verb := strings.ToUpper(toks[0].text)
	if verb != "GRANT" && verb != "DENY" && verb != "REVOKE" {
		return nil, false, nil
	}
	rest := toks[1:]
	word := func(w string) bool {
		if len(rest) > 0 && rest[0].kind == tkWord && rest[0].text == w {
			rest = rest[1:]
			return true
		}
		return false
	}
	syntax := func(want string) error {
		got := "<EOF>"
		if len(rest) > 0 {
			got = rest[0].text
		}
		return errParse("line 1:1: mismatched input '%s' expecting %s", got, want)
	}
	var types, names []string
	all := false
	if word("all") {
		all = true
		word("privileges")
		types = privilegeTypes()
	} else {
		for {
			if len(rest) == 0 || rest[0].kind != tkWord {
				return nil, true, syntax("a privilege type")
			}
			types = append(types, strings.ToUpper(rest[0].text))
			rest = rest[1:]
			if len(rest) == 0 || rest[0].kind != tkPunct || rest[0].text != "," {
				break
			}
			rest = rest[1:]
		}
	}
	class := classCluster
	var idents []string
	if word("on") {
		switch {
		case word("schema"):
			class = classSchema
		case word("table"):
			class = classTable
		case word("view"):
			class = classView
		default:
			return nil, true, syntax("{'SCHEMA', 'TABLE', 'VIEW'}")
		}
		for {
			n := identLen(rest)
			if n == 0 {
				return nil, true, syntax("an identifier")
			}
			if class == classSchema {
				idents = append(idents, identName(rest[:n]))
			} else {
				idents = append(idents, tableName(rest[:n]))
			}
			rest = rest[n:]
			if len(rest) == 0 || rest[0].kind != tkPunct || rest[0].text != "," {
				break
			}
			rest = rest[1:]
		}
	} else {
		idents = []string{""}
	}
	target := "to"
	if verb == "REVOKE" {
		target = "from"
	}
	if !word(target) {
		return nil, true, syntax("'" + strings.ToUpper(target) + "'")
	}
	for {
		n := identLen(rest)
		if n == 0 || n > 1 {
			return nil, true, syntax("a user name")
		}
		names = append(names, identName(rest[:1]))
		rest = rest[1:]
		if len(rest) == 0 || rest[0].kind != tkPunct || rest[0].text != "," {
			break
		}
		rest = rest[1:]
	}
	if len(rest) != 0 {
		return nil, true, syntax("<EOF>")
	}
	return &privStmt{verb: verb, all: all, types: types, class: class, idents: idents, names: names}, true, nil
}

func (x *execCtx) changePrivileges(verb string, all bool, types []string, class string, idents, names []string) (*result, error) {
	if !all {
		for _, t := range types {
			if !slices.Contains(privilegeTypes(), t) {
				if x.version.AtLeast(5, 6) {
					// From 5.6 on a name that is no privilege type is a role to grant.
					return nil, errRoleUnknown(strings.ToLower(t), x.version)
				}
				return nil, errIllegal("Unknown privilege type '%s'", t)
			}
		}
	}
	if err := x.requirePrivilege(); err != nil {
		return nil, err
	}
	if class == classTable || class == classView {
		for _, id := range idents {
			if x.m.tables[id] == nil {
				return nil, errRelationUnknown(id)
			}
		}
	}
	var users []*user
	for _, name := range names {
		u := x.m.users[name]
		if u == nil {
			return nil, errRoleUnknown(name, x.version)
		}
		if u.superuser {
			return nil, &SQLError{SQLState: "0A000", HTTPStatus: 400, Code: 4004,
				Message: "UnsupportedFeatureException[Cannot alter privileges for superuser '" + name + "']"}
		}
		users = append(users, u)
	}
	var changed int64
	for _, u := range users {
		if u.privs == nil {
			u.privs = map[privKey]privEntry{}
		}
		for _, id := range idents {
			for _, t := range types {
				k := privKey{class: class, ident: id, typ: t}
				old, had := u.privs[k]
				switch verb {
				case "REVOKE":
					if had {
						delete(u.privs, k)
						changed++
					}
				default:
					state := stateGrant
					if verb == "DENY" {
						state = stateDeny
					}
					if !had || old.state != state {
						u.privs[k] = privEntry{state: state, grantor: x.user}
						changed++
					}
				}
			}
		}
	}
	if changed > 0 {
		x.mutated = true
	}
	return done(verb, changed), nil
}
