package cratedbsim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// tokKind classifies the tokens of the small SQL lexer. The simulator does not parse SQL; it
// matches token sequences against known statement shapes, which is enough to be
// case-insensitive and whitespace-insensitive like a real parser.
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

// lex splits one SQL statement into tokens. Pattern placeholders (":v") lex as words.
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
		case isWordStart(c) || (c == ':' && i+1 < len(sql) && isWordStart(sql[i+1])):
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

// Placeholders usable in statement patterns.
const (
	phValue  = ":v"      // string literal, number, NULL/TRUE/FALSE or $n (text parameter)
	phBool   = ":b"      // TRUE/FALSE or $n (bool parameter)
	phInt    = ":i"      // number or $n (int8 parameter)
	phArray  = ":arr"    // $n (text[] parameter), '{a,b}' literal, ['a','b'] or ARRAY['a','b']
	phIdent  = ":id"     // bare or quoted identifier, possibly schema-qualified
	phParens = ":parens" // a balanced parenthesised group, ignored
)

// capture is what one placeholder matched.
type capture struct {
	kind string
	toks []token
}

// match matches toks against pattern tokens. It returns the captures in order.
func match(pat, toks []token) ([]capture, bool) {
	var caps []capture
	i := 0
	for _, p := range pat {
		if p.kind == tkWord && strings.HasPrefix(p.text, ":") {
			n := matchPlaceholder(p.text, toks[i:])
			if n == 0 {
				return nil, false
			}
			caps = append(caps, capture{kind: p.text, toks: toks[i : i+n]})
			i += n
			continue
		}
		if i >= len(toks) || toks[i].kind != p.kind || toks[i].text != p.text {
			return nil, false
		}
		i++
	}
	return caps, i == len(toks)
}

// matchPlaceholder returns how many tokens the placeholder consumes at the start of toks, 0
// when it does not match.
func matchPlaceholder(ph string, toks []token) int {
	if len(toks) == 0 {
		return 0
	}
	t := toks[0]
	switch ph {
	case phValue:
		switch t.kind {
		case tkString, tkNumber, tkParam:
			return 1
		case tkWord:
			if t.text == "null" || t.text == "true" || t.text == "false" {
				return 1
			}
		case tkPunct:
			if t.text == "-" && len(toks) > 1 && toks[1].kind == tkNumber {
				return 2
			}
		}
	case phBool:
		if t.kind == tkParam || (t.kind == tkWord && (t.text == "true" || t.text == "false")) {
			return 1
		}
	case phInt:
		if t.kind == tkParam || t.kind == tkNumber {
			return 1
		}
	case phArray:
		switch {
		case t.kind == tkParam || t.kind == tkString:
			n := 1
			// Tolerate a cast such as $1::text[] or '{a}'::text[].
			if len(toks) >= 3 && toks[1].text == "::" && toks[2].kind == tkWord {
				n = 3
				if len(toks) >= 5 && toks[3].text == "[" && toks[4].text == "]" {
					n = 5
				}
			}
			return n
		case t.kind == tkWord && t.text == "array" && len(toks) > 1 && toks[1].text == "[":
			if n := matchBrackets(toks[1:]); n > 0 {
				return n + 1
			}
		case t.kind == tkPunct && t.text == "[":
			return matchBrackets(toks)
		}
	case phIdent:
		if t.kind != tkWord && t.kind != tkQuoted {
			return 0
		}
		if len(toks) >= 3 && toks[1].text == "." && toks[1].kind == tkPunct && (toks[2].kind == tkWord || toks[2].kind == tkQuoted) {
			return 3
		}
		return 1
	case phParens:
		if t.kind != tkPunct || t.text != "(" {
			return 0
		}
		depth := 0
		for i, x := range toks {
			if x.kind != tkPunct {
				continue
			}
			switch x.text {
			case "(":
				depth++
			case ")":
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
	}
	return 0
}

// matchBrackets matches "[ v , v ... ]" of literal values.
func matchBrackets(toks []token) int {
	if len(toks) < 2 || toks[0].text != "[" {
		return 0
	}
	for i := 1; i < len(toks); i++ {
		switch {
		case toks[i].kind == tkPunct && toks[i].text == "]":
			return i + 1
		case toks[i].kind == tkPunct && toks[i].text == ",":
		case toks[i].kind == tkString || toks[i].kind == tkNumber:
		default:
			return 0
		}
	}
	return 0
}

// identName renders a captured identifier: bare words lowercased, quoted ones verbatim.
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
