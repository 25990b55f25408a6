package commands

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// hostile holds what a forged terminal line needs: clear the screen, return
// to the start of the line, a fake success line, a bidi override, a C1 CSI.
const hostile = "x\x1b[2J\r\n2026-11-22T07:20:01Z done: succeeded\u202e\u009b31m\x7f"

// forged is the text that must never start an output line.
const forged = "2026-11-22T07:20:01Z done: succeeded"

// sampleArgs are valid positional arguments for each runnable command.
var sampleArgs = map[string][]string{
	"status":          {"db"},
	"restart":         {"db", "--rolling"},
	"bootstrap":       {"db"},
	"scale":           {"db", "--replicas", "3"},
	"replace":         {"db", "db-web-1"},
	"lock status":     {"db"},
	"lock acquire":    {"db"},
	"lock release":    {"db"},
	"deny add":        {"db", "bob@x"},
	"deny allow":      {"db", "bob@x"},
	"deny list":       {"db"},
	"version":         nil,
	"completion bash": nil,
}

// assertClean fails on any raw control or formatting character in out
// (other than line ends) and on a line that starts with the forged text.
func assertClean(t *testing.T, what, out string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if ops.Printable(line) != line {
			t.Errorf("%s has a raw control character: %q", what, line)
		}
		if strings.HasPrefix(strings.TrimSpace(line), forged) {
			t.Errorf("%s has a forged line: %q", what, line)
		}
	}
}

// TestHostileInput puts control characters into every string flag of every
// command and into every positional argument: each is refused with exit 2,
// one escaped line naming what was wrong, and no API write.
func TestHostileInput(t *testing.T) {
	type tc struct {
		name string
		args []string
	}
	var cases []tc
	root := NewRootCmd(genericiooptions.IOStreams{})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.CommandPath()), " ")
		base, ok := sampleArgs[path]
		if !c.Runnable() || c.Hidden || !ok && path != "" {
			return
		}
		if path == "" || strings.HasPrefix(path, "completion ") && path != "completion bash" {
			return
		}
		cmdArgs := append(strings.Fields(path), base...)
		flags := c.LocalFlags()
		if path == "restart" {
			// The shared flags (ours and kubectl's) once, on a mutating command.
			flags.AddFlagSet(c.InheritedFlags())
		}
		flags.VisitAll(func(f *pflag.Flag) {
			switch f.Value.Type() {
			case "string", "stringArray", "stringSlice":
			default:
				return
			}
			cases = append(cases, tc{path + " --" + f.Name, append(append([]string{}, cmdArgs...), "--"+f.Name+"="+hostile)})
		})
		for i, a := range base {
			if strings.HasPrefix(a, "-") || i > 0 && strings.HasPrefix(base[i-1], "-") {
				continue
			}
			args := append([]string{}, cmdArgs...)
			args[len(strings.Fields(path))+i] = a + hostile
			cases = append(cases, tc{fmt.Sprintf("%s argument %d", path, i+1), args})
		}
	}
	walk(root)
	if len(cases) < 60 {
		t.Fatalf("only %d cases: the command tree walk is broken", len(cases))
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
			r := h.run(append(tt.args, "--yes")...)
			if r.code != ops.ExitUsage {
				t.Fatalf("exit %d, want 2; stderr: %q", r.code, r.err)
			}
			if n := strings.Count(r.err, "\n"); n != 1 {
				t.Errorf("stderr has %d lines: %q", n, r.err)
			}
			if !strings.Contains(r.err, "control character") && !strings.Contains(r.err, "not valid UTF-8") {
				t.Errorf("stderr does not say what is wrong: %q", r.err)
			}
			assertClean(t, "stderr", r.err)
			assertClean(t, "stdout", r.out)
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("wrote: %v", w)
			}
		})
	}
}

// TestHostileStoredStrings: another operator (or a script) wrote control
// characters straight into the Lease: holder, reason, deny list, journal.
// Every view escapes them.
func TestHostileStoredStrings(t *testing.T) {
	lease := heldLease("prod", "db", "mallory"+hostile, "s1", "restart "+hostile, "reason "+hostile)
	deny, _ := json.Marshal([]lock.DenyEntry{{ID: "bob" + hostile, By: "eve" + hostile, At: testNow, Reason: "why " + hostile}})
	journal, _ := json.Marshal(ops.Journal{Operation: "restart", Args: "--rolling " + hostile, Holder: "mallory" + hostile,
		State: ops.JournalFailed, Started: testNow, Updated: testNow, Steps: 3, Current: "restart/" + hostile, Error: "boom " + hostile})
	lease.Annotations[lock.AnnotationDenyList] = string(deny)
	lease.Annotations[lock.AnnotationJournal] = string(journal)
	// Long expired: a run may take the lock over, and then reports the
	// previous holder and journal.
	expired := lease.DeepCopy()
	old := testNow.Add(-time.Hour)
	expired.Spec.RenewTime.Time, expired.Spec.AcquireTime.Time = old, old
	tests := []struct {
		name string
		args []string
		held bool
	}{
		{"status", []string{"status", "db"}, true},
		{"status json", []string{"status", "db", "-o", "json"}, true},
		{"status yaml", []string{"status", "db", "-o", "yaml"}, true},
		{"lock status", []string{"lock", "status", "db"}, true},
		{"lock status yaml", []string{"lock", "status", "db", "-o", "yaml"}, true},
		{"deny list", []string{"deny", "list", "db"}, true},
		{"deny list json", []string{"deny", "list", "db", "-o", "json"}, true},
		{"status jsonpath", []string{"status", "db", "-o", "jsonpath={.lock.holder}"}, true},
		{"status go-template", []string{"status", "db", "-o", "go-template={{.lock.reason}}"}, true},
		{"deny list name", []string{"deny", "list", "db", "-o", "name"}, true},
		{"lock status jsonpath-as-json", []string{"lock", "status", "db", "-o", "jsonpath-as-json={.journal.error}"}, true},
		{"refused: held by another", []string{"restart", "db", "--rolling", "--yes"}, true},
		{"refused: held, json", []string{"restart", "db", "--rolling", "--yes", "-o", "json"}, true},
		{"lock acquire refused", []string{"lock", "acquire", "db"}, true},
		{"takeover plain", []string{"restart", "db", "--rolling", "--yes", "--dry-run"}, false},
		{"takeover run plain", []string{"restart", "db", "--rolling", "--yes"}, false},
		{"takeover run json", []string{"restart", "db", "--rolling", "--yes", "-o", "json"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := lease
			if !tt.held {
				l = expired
			}
			h := newHarness(t, append(fakecluster.Objects("prod", "db", "", webObjects()...), l.DeepCopy())...)
			fakecluster.Start(t, h.client, "prod")
			r := h.run(append(tt.args, "--lock-id", "alice@test")...)
			if r.code == ops.ExitUsage {
				t.Fatalf("exit 2: %s", r.err)
			}
			if tt.name != "takeover plain" && !strings.Contains(r.out+r.err, `\x1b[2J\r\n`+forged) &&
				!strings.Contains(r.out+r.err, `\u001b[2J\r\n`+forged) {
				t.Errorf("the stored text is not shown escaped:\nstdout: %s\nstderr: %s", r.out, r.err)
			}
			assertClean(t, "stdout", r.out)
			assertClean(t, "stderr", r.err)
			if strings.Count(r.err, "\n") > 1 {
				t.Errorf("stderr has more than one line: %q", r.err)
			}
			events, err := h.client.CoreV1().Events("prod").List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range events.Items {
				assertClean(t, "Event "+ev.Reason, ev.Message+"\n")
				assertClean(t, "Event instance", ev.ReportingInstance+"\n")
			}
		})
	}
}

// TestHostileKubeconfigUser: a kubeconfig user name with control characters
// would become the default lock ID (Lease holder, Events); it is refused.
func TestHostileKubeconfigUser(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	kc := strings.ReplaceAll(testKubeconfig, "user: alice", "user: \"alice\\e[2J\"")
	kc = strings.ReplaceAll(kc, "- name: alice", "- name: \"alice\\e[2J\"")
	if err := os.WriteFile(h.env["KUBECONFIG"], []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	r := h.run("restart", "db", "--rolling", "--yes")
	if r.code != ops.ExitUsage || !strings.Contains(r.err, "the lock ID derived from the kubeconfig user") {
		t.Fatalf("exit %d: %q", r.code, r.err)
	}
	assertClean(t, "stderr", r.err)
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("wrote: %v", w)
	}
}
