package commands_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/hack/gendocs/gen"
	"github.com/kubectl-dbops/kubectl-dbops/internal/commands"
)

// TestDocsUpToDate regenerates completions, man pages and the Markdown
// reference and compares them with the checked-in copies, so a change to
// commands or flags cannot land without its documentation.
func TestDocsUpToDate(t *testing.T) {
	var buf bytes.Buffer
	streams := genericiooptions.IOStreams{In: &buf, Out: &buf, ErrOut: &buf}
	tmp := t.TempDir()
	if err := gen.Generate(commands.NewRootCmd(streams), tmp); err != nil {
		t.Fatalf("generate docs: %v", err)
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := gen.Diff(tmp, repo)
	if err != nil {
		t.Fatalf("compare generated docs: %v", err)
	}
	if len(diffs) > 0 {
		t.Fatalf("generated documentation is out of date (%d files); run make completions man\n  %s",
			len(diffs), strings.Join(diffs, "\n  "))
	}
}

// TestDocsDeterministic generates twice and expects identical output: no
// dates, no machine-specific paths.
func TestDocsDeterministic(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	for _, d := range dirs {
		var buf bytes.Buffer
		streams := genericiooptions.IOStreams{In: &buf, Out: &buf, ErrOut: &buf}
		if err := gen.Generate(commands.NewRootCmd(streams), d); err != nil {
			t.Fatalf("generate docs: %v", err)
		}
	}
	diffs, err := gen.Diff(dirs[0], dirs[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Fatalf("two generations differ:\n  %s", strings.Join(diffs, "\n  "))
	}
}
