package commands_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/commands"
)

// flagLine is a flag line of a README usage block: "  -x, --name type   usage".
var flagLine = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z][a-z0-9-]*)(?: [a-zA-Z0-9]+)?\s{2,}(\S.*)$`)

// collapse folds runs of white space.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// The README's usage blocks say what the CLI says: every flag line under a
// "kubectl dbops COMMAND ..." line names a flag of that command, with the usage and the
// default its --help prints; and the global flags table's --timeout defaults are the
// commands' own.
func TestReadmeFlagsAgreeWithCLI(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	root := commands.NewRootCmd(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	var cmd *cobra.Command
	checked := 0
	inBlock := false
	lines := strings.Split(string(readme), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "```") {
			inBlock, cmd = !inBlock, nil
			continue
		}
		if !inBlock {
			continue
		}
		if strings.HasPrefix(line, "kubectl dbops ") {
			var path []string
			for _, w := range strings.Fields(line)[2:] {
				if w == strings.ToLower(w) && !strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "[") {
					path = append(path, w)
					continue
				}
				break
			}
			c, _, err := root.Find(path)
			if err != nil || c == root {
				cmd = nil
				continue
			}
			cmd = c
			continue
		}
		m := flagLine.FindStringSubmatch(line)
		if cmd == nil || m == nil {
			continue
		}
		name, usage := m[1], m[2]
		// A usage wrapped onto the next lines (indented further).
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], strings.Repeat(" ", 20)) &&
			flagLine.FindStringSubmatch(lines[i+1]) == nil {
			i++
			usage += " " + strings.TrimSpace(lines[i])
		}
		f := cmd.Flags().Lookup(name)
		if f == nil {
			f = cmd.InheritedFlags().Lookup(name)
		}
		if f == nil {
			t.Errorf("README: %q shows flag --%s, which it does not have", cmd.CommandPath(), name)
			continue
		}
		want := usageOf(f)
		if collapse(usage) != collapse(want) {
			t.Errorf("README: %s --%s says %q, --help says %q", cmd.CommandPath(), name, collapse(usage), collapse(want))
		}
		checked++
	}
	if checked < 20 {
		t.Errorf("checked %d README flag lines; the parser missed the usage blocks", checked)
	}

	// The --timeout row of the global flags table.
	timeout := root.PersistentFlags().Lookup("timeout")
	row := ""
	for _, l := range lines {
		if strings.HasPrefix(l, "| `--timeout` |") {
			row = l
		}
	}
	if want := timeout.Usage; !strings.Contains(row, want) {
		t.Errorf("README global flags: the --timeout row %q does not carry the flag's defaults %q", row, timeout.Usage)
	}
}

// usageOf is a flag's usage as --help prints it, with the default.
func usageOf(f *pflag.Flag) string {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.AddFlag(f)
	line := strings.TrimSpace(fs.FlagUsages())
	m := flagLine.FindStringSubmatch("  " + line)
	if m == nil {
		return line
	}
	return m[2]
}

// Every flag a plan header prints (the golden plans of every engine) is a flag of the command
// that runs that plan: a header can be read, and typed, as a command line.
func TestPlanHeaderFlagsParse(t *testing.T) {
	root := commands.NewRootCmd(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	header := regexp.MustCompile(`Plan: ([a-z-]+) \S+ \(engine [a-z]+\)(.*)$`)
	commandOf := map[string]string{"restart": "restart", "rolling-restart": "restart", "scale": "scale", "bootstrap": "bootstrap",
		"replace": "replace", "repair": "replace"}
	files, err := filepath.Glob(filepath.Join("..", "*", "*", "testdata", "*"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join("..", "*", "testdata", "*"))
	checked := 0
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			m := header.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			name, ok := commandOf[m[1]]
			if !ok {
				t.Errorf("%s: plan header of an unknown operation %q", f, m[1])
				continue
			}
			cmd, _, err := root.Find([]string{name})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range strings.Fields(m[2]) {
				if !strings.HasPrefix(w, "--") {
					continue
				}
				flag, _, _ := strings.Cut(strings.TrimPrefix(w, "--"), "=")
				if cmd.Flags().Lookup(flag) == nil && cmd.InheritedFlags().Lookup(flag) == nil {
					t.Errorf("%s: plan header %q prints --%s, which %s does not have", f, line, flag, cmd.CommandPath())
				}
				checked++
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked %d flags of plan headers; the golden plans were not found", checked)
	}
}

// Every command's help shows examples (cobra prints Example under "Examples:").
func TestEveryCommandHasExamples(t *testing.T) {
	root := commands.NewRootCmd(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		// cobra's own completion commands have their own long help with usage per shell.
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c.Example == "" {
			t.Errorf("%s has no examples", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
