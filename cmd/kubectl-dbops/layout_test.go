package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestProductImportsNoTestInfrastructure: the product (cmd/ and internal/, test files aside)
// imports nothing under test/ (simulators, fakes, the test bed, shims): what ships cannot
// depend on what only tests need (docs/architecture.md).
func TestProductImportsNoTestInfrastructure(t *testing.T) {
	const module = "github.com/kubectl-dbops/kubectl-dbops/"
	fset := token.NewFileSet()
	checked := 0
	for _, dir := range []string{"../../cmd", "../../internal"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			checked++
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if strings.HasPrefix(p, module+"test/") {
					t.Errorf("%s imports %s: test infrastructure in the product", path, p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 100 {
		t.Fatalf("checked only %d files: the walk missed the source tree", checked)
	}
}
