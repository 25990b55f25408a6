package commands

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// engineFlagValues are a valid value of each engine flag, the flags it needs beside it, and
// the flag the refusal names when a needed one sorts first.
var engineFlagValues = map[string]struct {
	value string
	extra []string
	names string
	// alone: the verb's own selection arguments (--replicas, a pod) are left out, as the
	// flag is one of the verb's ways to select.
	alone bool
}{
	"pg-host":                      {value: "h"},
	"pg-port":                      {value: "5433", extra: []string{"--pg-host", "h"}, names: "pg-host"},
	"pg-sslmode":                   {value: "require"},
	"pg-ca-secret":                 {value: "ca", extra: []string{"--pg-sslmode", "verify-ca"}},
	"system-password-secret":       {value: "sys"},
	"health-checks":                {value: "5"},
	"health-interval":              {value: "5s"},
	"stable-for":                   {value: "5s"},
	"crash-user":                   {value: "crate"},
	"allow-rolling-update":         {value: "true"},
	"license-secret":               {value: "lic"},
	"user":                         {value: "app=app-pw"},
	"etcd-container":               {value: "etcd"},
	"etcd-endpoint":                {value: "https://127.0.0.1:2379"},
	"etcd-cacert":                  {value: "/c/ca.crt"},
	"etcd-cert":                    {value: "/c/c.crt", extra: []string{"--etcd-key", "/c/c.key"}},
	"etcd-key":                     {value: "/c/c.key", extra: []string{"--etcd-cert", "/c/c.crt"}, names: "etcd-cert"},
	"etcd-auth-secret":             {value: "root-pw"},
	"etcd-user":                    {value: "admin"},
	"etcd-peer-url-template":       {value: "https://{{.Pod}}.{{.Service}}:2380"},
	"etcd-cluster-state-configmap": {value: "state"},
	"etcd-poll-interval":           {value: "2s"},
	"etcd-max-lag":                 {value: "50"},
	"fdb-timeout":                  {value: "5s"},
	"processes":                    {value: "storage=4", alone: true},
	"remove":                       {value: "storage-1", extra: []string{"--processes", "storage=2"}, names: "processes", alone: true},
	"process-class":                {value: "storage", alone: true},
	"no-exclusion":                 {value: "true", extra: []string{"--force"}, names: "force"},
	"force":                        {value: "true", extra: []string{"--no-exclusion"}},
	"primaries":                    {value: "2"},
}

// engineVerbArgs are the arguments of each verb that operates a cluster, before any engine flag.
var engineVerbArgs = map[string][]string{
	"bootstrap": {"bootstrap", "db", "--yes"},
	"restart":   {"restart", "db", "--rolling", "--yes"},
	"replace":   {"replace", "db", "db-hot-0", "--yes"},
	"scale":     {"scale", "db", "--replicas", "3", "--yes"},
	"status":    {"status", "db"},
	"wait":      {"wait", "db", "--for=ready"},
}

// Every flag of every engine, on every verb that takes it (bound by the engine, by the
// command, or globally), given for a cluster of another engine, is exit 2 with one line
// naming the flag and the engine it is for, and writes nothing. The flags are found from
// the command tree, so an engine flag added later is covered (and needs a value above).
func TestEngineFlagOnAnotherEngineIsUsageError(t *testing.T) {
	root := NewRootCmd(genericiooptions.NewTestIOStreamsDiscard())
	titles := map[string]string{}
	for _, k := range builtinEngines() {
		titles[k.Name] = k.Name
		if k.Title != "" {
			titles[k.Name] = k.Title
		}
	}
	seen := map[string]bool{}
	for _, verb := range slices.Sorted(func(yield func(string) bool) {
		for v := range engineVerbArgs {
			if !yield(v) {
				return
			}
		}
	}) {
		cmd, _, err := root.Find([]string{verb})
		if err != nil {
			t.Fatal(err)
		}
		claims := engineClaims(cmd)
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for n := range claims {
				if !yield(n) {
					return
				}
			}
		}) {
			engines := claims[name]
			seen[strings.Join(engines, ",")+"/"+name] = true
			v, ok := engineFlagValues[name]
			if !ok {
				t.Errorf("%s --%s (engine %v) has no value in engineFlagValues", verb, name, engines)
				continue
			}
			t.Run(verb+" --"+name, func(t *testing.T) {
				other := ops.EngineGeneric
				if slices.Contains(engines, other) {
					t.Fatalf("--%s is generic's", name)
				}
				h := newHarness(t, fakecluster.Objects("prod", "db", other, dbGroups()...)...)
				args := slices.Clone(engineVerbArgs[verb])
				if v.alone {
					args = []string{verb, "db", "--yes"}
				}
				args = append(args, "--"+name+"="+v.value)
				r := h.run(append(args, v.extra...)...)
				named := name
				if v.names != "" {
					named = v.names
				}
				want := "--" + named + " is for " + titles[claims[named][0]]
				if r.code != ops.ExitUsage || strings.Count(r.err, "\n") != 1 || !strings.Contains(r.err, want) ||
					!strings.Contains(r.err, "cluster db is generic") {
					t.Fatalf("%q: exit %d, stderr %q; want exit 2, one line with %q", args, r.code, r.err, want)
				}
				if w := fakecluster.Writes(h.client); len(w) > 0 {
					t.Errorf("wrote to the API: %v", w)
				}
			})
		}
	}
	// Every engine with flags has them checked here.
	for _, k := range builtinEngines() {
		if k.NewFlags == nil && len(k.Flags) == 0 {
			continue
		}
		found := false
		for key := range seen {
			found = found || slices.Contains(strings.Split(strings.Split(key, "/")[0], ","), k.Name)
		}
		if !found {
			t.Errorf("no flag of engine %s was checked", k.Name)
		}
	}
}

// A flag name an engine binds on one verb is not that engine's on another: bootstrap's
// --user is CrateDB's, the kubeconfig's --user is every command's.
func TestEngineFlagClaimIsPerCommand(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", ops.EngineGeneric, dbGroups()...)...)
	r := h.run("restart", "db", "--rolling", "--dry-run", "--user", "nobody")
	if strings.Contains(r.err, "is for CrateDB") {
		t.Fatalf("the kubeconfig's --user was taken for bootstrap's: %s", r.err)
	}
}

// restart --help shows each engine's flags in a section of their own, and no engine flag
// among the command's or the global ones.
func TestHelpGroupsFlagsByEngine(t *testing.T) {
	var out bytes.Buffer
	root := NewRootCmd(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
	root.SetArgs([]string{"restart", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	sections := helpSections(out.String())
	for title, flags := range map[string][]string{
		"CrateDB flags":      {"pg-host", "health-checks", "stable-for"},
		"etcd flags":         {"etcd-auth-secret", "etcd-max-lag"},
		"FoundationDB flags": {"fdb-timeout"},
		"Flags":              {"rolling", "mode"},
		"Global Flags":       {"timeout", "lock-id"},
	} {
		for _, f := range flags {
			if !slices.Contains(sections[title], f) {
				t.Errorf("restart --help: --%s not under %q; sections: %v", f, title, sections)
			}
		}
	}
	for _, title := range []string{"Flags", "Global Flags"} {
		for _, f := range sections[title] {
			if strings.HasPrefix(f, "pg-") || strings.HasPrefix(f, "etcd-") || f == "fdb-timeout" {
				t.Errorf("restart --help: engine flag --%s under %q", f, title)
			}
		}
	}
	// A command without engine flags keeps cobra's layout.
	out.Reset()
	root.SetArgs([]string{"history", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); strings.Contains(s, "FoundationDB flags:") || !strings.Contains(s, "--fdb-timeout") {
		t.Errorf("history --help:\n%s", s)
	}
}

// helpSections are the flag names under each "Title:" heading of a help text.
func helpSections(help string) map[string][]string {
	out := map[string][]string{}
	title := ""
	for _, line := range strings.Split(help, "\n") {
		if strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " ") {
			title = strings.TrimSuffix(line, ":")
			continue
		}
		fields := strings.Fields(line)
		for _, f := range fields {
			if strings.HasPrefix(f, "--") {
				name, _, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
				out[title] = append(out[title], name)
				break
			}
		}
	}
	return out
}
