package commands_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/hack/gendocs/gen"
	"github.com/kubectl-dbops/kubectl-dbops/internal/commands"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
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

// TestManSections: every man page has EXIT STATUS, ENVIRONMENT and FILES,
// and the exit codes are those of the README's table.
func TestManSections(t *testing.T) {
	var buf bytes.Buffer
	streams := genericiooptions.IOStreams{In: &buf, Out: &buf, ErrOut: &buf}
	tmp := t.TempDir()
	if err := gen.Generate(commands.NewRootCmd(streams), tmp); err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(tmp, gen.ManDir, "*.1"))
	if err != nil || len(pages) < 10 {
		t.Fatalf("%d pages: %v", len(pages), err)
	}
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		page := string(data)
		last := -1
		for _, sec := range []string{".SH EXIT STATUS", ".SH ENVIRONMENT", ".SH FILES", ".SH SEE ALSO"} {
			i := strings.Index(page, sec)
			if i <= last {
				t.Errorf("%s: %s missing or out of order", filepath.Base(p), sec)
			}
			last = i
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)[strings.Index(string(readme), "## Exit codes"):]
	section = section[:strings.Index(section, "\n## ")]
	var readmeCodes, manCodes []string
	for _, line := range strings.Split(section, "\n") {
		if f := strings.Split(line, "|"); len(f) > 2 && strings.TrimSpace(f[1]) != "Code" && !strings.HasPrefix(strings.TrimSpace(f[1]), "---") {
			readmeCodes = append(readmeCodes, strings.TrimSpace(f[1]))
		}
	}
	for _, e := range commands.ExitStatuses() {
		manCodes = append(manCodes, e.Term)
	}
	if strings.Join(readmeCodes, ",") != strings.Join(manCodes, ",") {
		t.Errorf("README exit codes %v, man pages %v", readmeCodes, manCodes)
	}
}

// The README's reason codes are exactly the ones the code emits (ops.ReasonCodes).
func TestReadmeReasonCodes(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)[strings.Index(string(readme), "## Reason codes"):]
	section = section[:strings.Index(section, "\n## ")]
	var codes []string
	for _, line := range strings.Split(section, "\n") {
		if f := strings.Split(line, "|"); len(f) > 2 && strings.HasPrefix(strings.TrimSpace(f[1]), "`") && !strings.Contains(f[1], "reasonCode") {
			codes = append(codes, strings.Trim(strings.TrimSpace(f[1]), "`"))
		}
	}
	if strings.Join(codes, ",") != strings.Join(ops.ReasonCodes, ",") {
		t.Errorf("README reason codes %v, the code's %v", codes, ops.ReasonCodes)
	}
}
