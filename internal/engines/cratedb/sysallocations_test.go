package cratedb

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestSysAllocationsColumnsAreDocumented: every query of sys.allocations this engine prints
// or runs (the drain's "to unblock" hint, report's diagnostics) names only the columns
// CrateDB documents for that table (CrateDB's reference, "System information" >
// sys.allocations). The CrateDB simulator does not serve sys.allocations, so nothing else
// would catch a misspelt column before a user pastes the hint during an incident.
func TestSysAllocationsColumnsAreDocumented(t *testing.T) {
	documented := map[string]bool{"table_schema": true, "table_name": true, "partition_ident": true, "shard_id": true,
		"node_id": true, "primary": true, "current_state": true, "explanation": true, "decisions": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	query := regexp.MustCompile(`(?i)SELECT\s+(.+?)\s+FROM\s+sys\.allocations`)
	found := 0
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, m := range query.FindAllStringSubmatch(s, -1) {
				found++
				for _, col := range strings.Split(m[1], ",") {
					col = strings.Trim(strings.TrimSpace(col), `"`)
					if base, _, ok := strings.Cut(col, "["); ok {
						col = base
					}
					if !documented[col] {
						t.Errorf("%s: sys.allocations has no column %q (query %q)", fset.Position(lit.Pos()), col, m[0])
					}
				}
			}
			return true
		})
	}
	if found < 2 {
		t.Fatalf("found %d sys.allocations queries, want the drain hint and the diagnostics", found)
	}
}
