package cratedbsim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// tokKind classifies the tokens of the SQL lexer, whose output the parsers of expr.go,
// query.go, ddl.go, tables.go and privileges.go read by CrateDB's grammar.
type tokKind int

const (
	tkWord   tokKind = iota // keyword or bare identifier, lowercased
	tkQuoted                // "quoted identifier", unescaped, case kept
	tkString                // 'string literal', unescaped
	tkNumber
	tkParam // $n, text holds n
	tkPunct
)

type token struct {
	kind tokKind
	text string
}

func (t token) String() string {
	switch t.kind {
	case tkQuoted:
		return `"` + strings.ReplaceAll(t.text, `"`, `""`) + `"`
	case tkString:
		return "'" + strings.ReplaceAll(t.text, "'", "''") + "'"
	case tkParam:
		return "$" + t.text
	default:
		return t.text
	}
}

// lex splits one SQL statement into tokens.
func lex(sql string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(sql) {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '\'' || c == '"':
			s, n, err := readQuoted(sql[i:], c)
			if err != nil {
				return nil, err
			}
			kind := tkString
			if c == '"' {
				kind = tkQuoted
			}
			toks = append(toks, token{kind: kind, text: s})
			i += n
		case c == '$' && i+1 < len(sql) && isDigit(sql[i+1]):
			j := i + 1
			for j < len(sql) && isDigit(sql[j]) {
				j++
			}
			toks = append(toks, token{kind: tkParam, text: sql[i+1 : j]})
			i = j
		case isDigit(c):
			j := i
			for j < len(sql) && (isDigit(sql[j]) || sql[j] == '.') {
				j++
			}
			toks = append(toks, token{kind: tkNumber, text: sql[i:j]})
			i = j
		case isWordStart(c):
			j := i + 1
			for j < len(sql) && isWordPart(sql[j]) {
				j++
			}
			toks = append(toks, token{kind: tkWord, text: strings.ToLower(sql[i:j])})
			i = j
		case c == ':' && i+1 < len(sql) && sql[i+1] == ':':
			toks = append(toks, token{kind: tkPunct, text: "::"})
			i += 2
		case strings.IndexByte("(),.;=*[]<>!+-/", c) >= 0:
			if (c == '<' || c == '>' || c == '!') && i+1 < len(sql) && sql[i+1] == '=' {
				toks = append(toks, token{kind: tkPunct, text: sql[i : i+2]})
				i += 2
				continue
			}
			toks = append(toks, token{kind: tkPunct, text: string(c)})
			i++
		default:
			return nil, fmt.Errorf("unexpected character %q", c)
		}
	}
	return toks, nil
}

func readQuoted(s string, q byte) (string, int, error) {
	var b strings.Builder
	i := 1
	for i < len(s) {
		if s[i] == q {
			if i+1 < len(s) && s[i+1] == q {
				b.WriteByte(q)
				i += 2
				continue
			}
			return b.String(), i + 1, nil
		}
		b.WriteByte(s[i])
		i++
	}
	return "", 0, fmt.Errorf("unterminated quoted text")
}

func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isWordStart(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isWordPart(c byte) bool  { return isWordStart(c) || isDigit(c) }

// splitStatements splits a script on semicolons outside quotes, dropping empty statements.
func splitStatements(sql string) []string {
	var out []string
	start := 0
	var quote byte
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == ';':
			if s := strings.TrimSpace(sql[start:i]); s != "" {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	if s := strings.TrimSpace(sql[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// identLen returns how many tokens an identifier takes at the start of toks: a bare or
// quoted name, possibly schema-qualified (1 or 3), 0 when toks do not start with one.
func identLen(toks []token) int {
	if len(toks) == 0 || (toks[0].kind != tkWord && toks[0].kind != tkQuoted) {
		return 0
	}
	if len(toks) >= 3 && toks[1].kind == tkPunct && toks[1].text == "." && (toks[2].kind == tkWord || toks[2].kind == tkQuoted) {
		return 3
	}
	return 1
}

// identName renders an identifier: bare words lowercased, quoted ones verbatim.
func identName(toks []token) string {
	parts := make([]string, 0, 2)
	for _, t := range toks {
		if t.kind == tkPunct {
			continue
		}
		parts = append(parts, t.text)
	}
	return strings.Join(parts, ".")
}

// paramIndex returns the 0-based parameter index of a $n token.
func paramIndex(t token) (int, bool) {
	if t.kind != tkParam {
		return 0, false
	}
	n, err := strconv.Atoi(t.text)
	if err != nil || n < 1 {
		return 0, false
	}
	return n - 1, true
}

// parseArrayLiteral parses PostgreSQL's text array form {a,"b c",NULL}.
func parseArrayLiteral(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, fmt.Errorf("malformed array literal")
	}
	body := s[1 : len(s)-1]
	var out []string
	if strings.TrimSpace(body) == "" {
		return out, nil
	}
	var cur strings.Builder
	inQuote, quoted := false, false
	flush := func() {
		v := cur.String()
		if !quoted {
			v = strings.TrimSpace(v)
		}
		out = append(out, v)
		cur.Reset()
		quoted = false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '\\' && i+1 < len(body):
			i++
			cur.WriteByte(body[i])
		case c == '"':
			inQuote = !inQuote
			quoted = true
		case !inQuote && c == ',':
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	if inQuote {
		return nil, fmt.Errorf("malformed array literal")
	}
	flush()
	return out, nil
}

// secretLiteral finds string literals that follow PASSWORD or LICENSE.
var secretLiteral = regexp.MustCompile(`(?i)((?:password\s*=\s*|password\s+|license\s+)(?:E)?)'(?:[^']|'')*'`)

// Redact replaces the string literals given after `password` and `LICENSE` by '***', so that
// a statement can be logged.
func Redact(stmt string) string {
	return secretLiteral.ReplaceAllString(stmt, "$1'***'")
}
