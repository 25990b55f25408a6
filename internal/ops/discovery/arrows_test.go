package discovery

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// sources parses the non-test Go files under dir.
func sources(t *testing.T, dir string) map[string]*ast.File {
	t.Helper()
	out := map[string]*ast.File{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out[path] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRecognitionArrows: engines recognise their layouts and hand discovery their recognizers
// through the registry, so no engine imports discovery, and discovery names no engine (other
// than generic, the engine of what no recognizer claims) by constant or by string.
func TestRecognitionArrows(t *testing.T) {
	for path, f := range sources(t, "../../engines") {
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasSuffix(p, "/internal/ops/discovery") {
				t.Errorf("%s imports %s: engines hand discovery recognizers (ops.Recognizer) instead", path, p)
			}
		}
	}
	names := slices.DeleteFunc(slices.Clone(ops.KnownEngines), func(e string) bool { return e == ops.EngineGeneric })
	for path, f := range sources(t, ".") {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "ops" && strings.HasPrefix(n.Sel.Name, "Engine") && n.Sel.Name != "EngineGeneric" &&
					n.Sel.Name != "EngineDeps" {
					t.Errorf("%s names ops.%s: recognition belongs to the engine", path, n.Sel.Name)
				}
			case *ast.BasicLit:
				if v, err := strconv.Unquote(n.Value); err == nil && slices.Contains(names, v) {
					t.Errorf("%s names engine %q: recognition belongs to the engine", path, v)
				}
			}
			return true
		})
	}
}
