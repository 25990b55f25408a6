package commands

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestDocumentOutput: the document commands print through cli-runtime's
// PrintFlags: json, yaml, name, jsonpath and go-template, and the tables
// leave out their headers with --no-headers.
func TestDocumentOutput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// want: exact stdout; or check, for structured output.
		want  string
		check func(t *testing.T, out string)
		// writes: the command changes the Lease.
		writes bool
	}{
		{name: "status name", args: []string{"status", "db", "-o", "name"}, want: "clusterstatus.dbops.io/db\n"},
		{name: "status jsonpath", args: []string{"status", "db", "-o", "jsonpath={.lock.holder} {.cluster.groups[*].name}"}, want: "bob@test master hot cold"},
		{name: "status go-template", args: []string{"status", "db", "-o", "go-template={{.lock.reason}}/{{len .cluster.groups}}"}, want: "INC-9/3"},
		{name: "status yaml", args: []string{"status", "db", "-o", "yaml"}, check: func(t *testing.T, out string) {
			var doc map[string]any
			if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatal(err)
			}
			if doc["kind"] != "ClusterStatus" || doc["apiVersion"] != StatusAPIVersion {
				t.Errorf("kind/apiVersion: %v %v", doc["kind"], doc["apiVersion"])
			}
		}},
		{name: "status no headers", args: []string{"status", "db", "--no-headers"}, check: func(t *testing.T, out string) {
			for _, h := range []string{"POD\t", "  POD ", "GROUP  ", "STATEFULSET"} {
				if strings.Contains(out, h) {
					t.Errorf("header %q printed:\n%s", h, out)
				}
			}
			if !strings.Contains(out, "db-master-0") {
				t.Errorf("rows missing:\n%s", out)
			}
		}},
		{name: "lock status name", args: []string{"lock", "status", "db", "-o", "name"}, want: "lockstatus.dbops.io/db\n"},
		{name: "lock status jsonpath", args: []string{"lock", "status", "db", "-o", "jsonpath={.holder}"}, want: "bob@test"},
		{name: "deny list name", args: []string{"deny", "list", "db", "-o", "name"}, want: "deniedid.dbops.io/ci@test\n"},
		{name: "deny list jsonpath", args: []string{"deny", "list", "db", "-o", "jsonpath={.items[0].reason}"}, want: "runaway pipeline"},
		{name: "deny list no headers", args: []string{"deny", "list", "db", "--no-headers"}, check: func(t *testing.T, out string) {
			if strings.Contains(out, "DENIED BY") || !strings.HasPrefix(out, "ci@test ") {
				t.Errorf("got:\n%s", out)
			}
		}},
		{name: "deny list json", args: []string{"deny", "list", "db", "-o", "json"}, check: func(t *testing.T, out string) {
			var doc struct {
				Kind  string `json:"kind"`
				Items []struct {
					ID string `json:"id"`
					By string `json:"by"`
				} `json:"items"`
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Kind != "DenyList" || len(doc.Items) != 1 || doc.Items[0].ID != "ci@test" || doc.Items[0].By == "" {
				t.Errorf("got %+v", doc)
			}
		}},
		{name: "lock release json", args: []string{"lock", "release", "db", "--id", "bob@test", "-o", "json"}, writes: true,
			check: wantJSON(map[string]any{"kind": "LockAction", "action": "released", "holder": "bob@test"})},
		{name: "lock release dry-run json", args: []string{"lock", "release", "db", "--id", "bob@test", "-o", "json", "--dry-run=client"},
			check: wantJSON(map[string]any{"kind": "LockAction", "action": "release", "holder": "bob@test", "dryRun": true})},
		{name: "lock acquire json", args: []string{"lock", "acquire", "db", "--id", "bob@test", "-o", "json"}, writes: true,
			check: wantJSON(map[string]any{"kind": "LockAction", "action": "extended", "holder": "bob@test"})},
		{name: "deny add json", args: []string{"deny", "add", "db", "eve@test", "--reason", "why", "-o", "json"}, writes: true,
			check: wantJSON(map[string]any{"kind": "DenyAction", "action": "denied", "id": "eve@test", "reason": "why", "by": "alice@api.prod.example:6443"})},
		{name: "deny allow json", args: []string{"deny", "allow", "db", "ci@test", "-o", "json"}, writes: true,
			check: wantJSON(map[string]any{"kind": "DenyAction", "action": "allowed", "id": "ci@test"})},
		{name: "deny allow dry-run yaml", args: []string{"deny", "allow", "db", "ci@test", "-o", "yaml", "--dry-run"},
			check: func(t *testing.T, out string) {
				if !strings.Contains(out, "action: allow\n") || !strings.Contains(out, "dryRun: true\n") {
					t.Errorf("got:\n%s", out)
				}
			}},
		{name: "deny add name", args: []string{"deny", "add", "db", "eve@test", "-o", "name"}, writes: true, want: "denyaction.dbops.io/db\n"},
		{name: "dry-run none releases", args: []string{"lock", "release", "db", "--id", "bob@test", "--dry-run=none"}, writes: true,
			want: "lock on prod/db released by bob@test\n"},
		{name: "version json", args: []string{"version", "-o", "jsonpath={.kind}"}, want: "Version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
			h.run("lock", "acquire", "db", "--id", "bob@test", "--reason", "INC-9")
			h.run("deny", "add", "db", "ci@test", "--reason", "runaway pipeline")
			h.client.ClearActions()
			r := h.run(tt.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			if tt.check != nil {
				tt.check(t, r.out)
			} else if r.out != tt.want {
				t.Errorf("stdout %q, want %q", r.out, tt.want)
			}
			if w := fakecluster.Writes(h.client); (len(w) > 0) != tt.writes {
				t.Errorf("writes: %v (want some: %v)", w, tt.writes)
			}
		})
	}
}

func wantJSON(want map[string]any) func(t *testing.T, out string) {
	return func(t *testing.T, out string) {
		t.Helper()
		var doc map[string]any
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for k, v := range want {
			if doc[k] != v {
				t.Errorf("%s = %v, want %v\n%s", k, doc[k], v, out)
			}
		}
		if doc["apiVersion"] != StatusAPIVersion {
			t.Errorf("apiVersion %v", doc["apiVersion"])
		}
	}
}

// TestOutputRefusals: -o and --dry-run values that do not apply are refused
// with exit 2, one line, and no write.
func TestOutputRefusals(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown format status", []string{"status", "db", "-o", "xml"}, `unknown output format "xml"; allowed: text, json, yaml, kyaml, name, go-template`},
		{"unknown format restart", []string{"restart", "db", "--rolling", "-o", "xml"}, `unknown output format "xml"; allowed: text, json, yaml`},
		{"name for an operation", []string{"restart", "db", "--rolling", "-o", "name"}, "-o name is for commands that print a document"},
		{"template for an operation", []string{"scale", "db", "--replicas", "3", "-o", "jsonpath={.x}"}, "is for commands that print a document"},
		{"bad template", []string{"status", "db", "-o", "go-template={{.x"}, "-o go-template={{.x: error parsing template"},
		{"bad jsonpath", []string{"status", "db", "-o", "jsonpath={.x"}, "-o jsonpath={.x:"},
		{"dry-run server", []string{"restart", "db", "--rolling", "--dry-run=server"}, "server is not supported"},
		{"dry-run other", []string{"lock", "release", "db", "--dry-run=yes"}, `must be "none" or "client"`},
		{"dry-run status", []string{"status", "db", "--dry-run"}, "--dry-run does not apply to status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
			r := h.run(append(tt.args, "--yes")...)
			if r.code != ops.ExitUsage {
				t.Fatalf("exit %d, want 2: %s", r.code, r.err)
			}
			if !strings.Contains(r.err, tt.want) || strings.Count(r.err, "\n") != 1 {
				t.Errorf("stderr %q, want one line with %q", r.err, tt.want)
			}
			if len(h.client.Actions()) > 0 {
				t.Errorf("API calls: %v", h.client.Actions())
			}
		})
	}
}

// TestDryRunClient: --dry-run=client is the bare --dry-run.
func TestDryRunClient(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
	bare := h.run("restart", "db", "--rolling", "--dry-run")
	client := h.run("restart", "db", "--rolling", "--dry-run=client")
	if bare.code != 0 || client.code != 0 || bare.out != client.out || !strings.HasPrefix(client.out, "Plan: restart prod/db") {
		t.Fatalf("bare: %d %q\nclient: %d %q %s", bare.code, bare.out, client.code, client.out, client.err)
	}
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("wrote: %v", w)
	}
}

// TestVersionBuildInfo: without linker flags, version comes from the Go
// build information.
func TestVersionBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/kubectl-dbops/kubectl-dbops", Version: "v0.4.1"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-11-20T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	got := versionInfo(func() (*debug.BuildInfo, bool) { return bi, true })
	if got.Version != "v0.4.1" || got.Commit != "0123abcd" || got.Date != "2026-11-20T10:00:00Z" || !got.Dirty || got.GoVersion != "go1.26.0" {
		t.Errorf("got %+v", got)
	}
	devel := *bi
	devel.Main.Version = "(devel)"
	if got := versionInfo(func() (*debug.BuildInfo, bool) { return &devel, true }); got.Version != "dev" || got.Commit != "0123abcd" {
		t.Errorf("(devel): got %+v", got)
	}
	if got := versionInfo(func() (*debug.BuildInfo, bool) { return nil, false }); got.Version != Version || got.Commit != Commit {
		t.Errorf("no build info: got %+v", got)
	}
}

// TestConfigUnknownKey: a config file key that is no flag of any command is
// a warning naming the key and the file; keys of other commands' flags are
// not.
func TestConfigUnknownKey(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", dbGroups()...)...)
	cfg := filepath.Join(h.env["XDG_CONFIG_HOME"], "kubectl-dbops", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("lock-id: from-config\nlockid: typo\ngroup: [hot]\nno-headers: true\ntimeuot: 5m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := h.run("lock", "status", "db", "-o", "jsonpath={.self}")
	if r.code != 0 || r.out != "from-config" {
		t.Fatalf("exit %d: %q %s", r.code, r.out, r.err)
	}
	want := "WARNING: config file " + cfg + ": unknown key \"lockid\" (not a kubectl-dbops flag); ignored\n" +
		"WARNING: config file " + cfg + ": unknown key \"timeuot\" (not a kubectl-dbops flag); ignored\n"
	if r.err != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", r.err, want)
	}
}
