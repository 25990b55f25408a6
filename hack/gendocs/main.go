// Command gendocs regenerates the checked-in shell completions
// (completions/), man pages (docs/man/) and Markdown command reference
// (docs/reference/) from the command tree. Run it from the repository root:
//
//	go run ./hack/gendocs        # or: make completions man
//
// internal/commands/docs_test.go fails when the checked-in files are stale.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/hack/gendocs/gen"
	"github.com/kubectl-dbops/kubectl-dbops/internal/commands"
)

func main() {
	root := flag.String("root", ".", "repository root to write into")
	flag.Parse()
	if _, err := os.Stat(filepath.Join(*root, "go.mod")); err != nil {
		fmt.Fprintf(os.Stderr, "gendocs: %s is not the repository root (no go.mod); run it from there or pass -root\n", *root)
		os.Exit(2)
	}
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: io.Discard, ErrOut: io.Discard}
	if err := gen.Generate(commands.NewRootCmd(streams), *root); err != nil {
		fmt.Fprintf(os.Stderr, "gendocs: %v\n", err)
		os.Exit(1)
	}
	for _, d := range gen.Dirs {
		fmt.Printf("gendocs: wrote %s/\n", d)
	}
}
