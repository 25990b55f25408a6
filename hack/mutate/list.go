package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Mutant is one safety check disabled: Find, in File, becomes Replace; the tests Run (a
// go test -run pattern) of package Pkg must then fail.
type Mutant struct {
	ID      string
	File    string // relative to the repository root
	Find    string // exact text, found exactly once in File
	Replace string
	Pkg     string // ./internal/...
	Run     string
	Line    int // of the entry in the list
}

// Load reads a list: blocks of "key: value" lines separated by blank lines, # comments.
// Keys: id, file, find, replace, pkg, run. A value is the rest of the line after ": "; a
// value in double quotes is a Go string literal (for code of several lines: "a\n\tb").
func Load(path string) ([]Mutant, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, string(b))
}

// Parse parses a list's text (Load).
func Parse(name, text string) ([]Mutant, error) {
	var out []Mutant
	var cur *Mutant
	ids := map[string]int{}
	finish := func() error {
		if cur == nil {
			return nil
		}
		m := *cur
		cur = nil
		switch {
		case m.ID == "" || m.File == "" || m.Find == "" || m.Pkg == "" || m.Run == "":
			return fmt.Errorf("%s:%d: a mutant needs id, file, find, replace, pkg and run", name, m.Line)
		case m.Find == m.Replace:
			return fmt.Errorf("%s:%d: mutant %s: replace equals find", name, m.Line, m.ID)
		}
		if l, dup := ids[m.ID]; dup {
			return fmt.Errorf("%s:%d: mutant id %s already used on line %d", name, m.Line, m.ID, l)
		}
		ids[m.ID] = m.Line
		out = append(out, m)
		return nil
	}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.TrimSpace(line) == "" {
			if err := finish(); err != nil {
				return nil, err
			}
			continue
		}
		key, val, ok := strings.Cut(line, ": ")
		if !ok {
			key, val, ok = strings.TrimSuffix(line, ":"), "", strings.HasSuffix(line, ":")
		}
		if !ok {
			return nil, fmt.Errorf("%s:%d: want \"key: value\", got %q", name, n, line)
		}
		if cur == nil {
			cur = &Mutant{Line: n}
		}
		if strings.HasPrefix(val, `"`) {
			uq, err := strconv.Unquote(val)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %s: %w", name, n, key, err)
			}
			val = uq
		}
		switch key {
		case "id":
			cur.ID = val
		case "file":
			cur.File = val
		case "find":
			cur.Find = val
		case "replace":
			cur.Replace = val
		case "pkg":
			cur.Pkg = val
		case "run":
			cur.Run = val
		default:
			return nil, fmt.Errorf("%s:%d: unknown key %q (want id, file, find, replace, pkg, run)", name, n, key)
		}
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return out, nil
}

// Apply returns src with the mutant applied; Find must occur exactly once.
func (m Mutant) Apply(src string) (string, error) {
	switch n := strings.Count(src, m.Find); n {
	case 1:
		return strings.Replace(src, m.Find, m.Replace, 1), nil
	case 0:
		return "", fmt.Errorf("mutant %s: %q is not in %s (the code changed: update the entry)", m.ID, m.Find, m.File)
	default:
		return "", fmt.Errorf("mutant %s: %q occurs %d times in %s (make find unique)", m.ID, m.Find, n, m.File)
	}
}
