package fdbsim

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbschema"
)

// statusSchema is FoundationDB 7.3.63's status schema (fdbschema/testdata/README.md) with one
// widening: its processes' class_type "$enum" lists only some process classes, while a real
// server reports its ProcessClass name there (fdbrpc/include/fdbrpc/Locality.h
// ProcessClass::toString; the operator's captured 7.1 status in
// internal/engines/foundationdb/testdata/upstream shows "log" and "cluster_controller").
func statusSchema(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("fdbschema/testdata/status_schema_7.3.63.json")
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	ct := path(s, "cluster", "processes", "$map", "class_type").(map[string]any)
	ct["$enum"] = []any{"unset", "storage", "transaction", "resolution", "commit_proxy", "grv_proxy", "master",
		"test", "stateless", "log", "router", "cluster_controller", "fast_restore", "data_distributor",
		"coordinator", "ratekeeper", "consistency_scan", "blob_manager", "blob_worker", "storage_cache",
		"backup", "encrypt_key_proxy"}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStatusJSONMatchesFDBSchema: every status document the model writes, healthy or not,
// passes FoundationDB's own schemaMatch against its status schema, as FoundationDB requires of
// its own status in simulation (fdbcli/Util.cpp).
func TestStatusJSONMatchesFDBSchema(t *testing.T) {
	schema := statusSchema(t)
	tests := []struct {
		name  string
		setup func(t *testing.T, c *Cluster, clock *ManualClock)
	}{
		{"healthy", func(*testing.T, *Cluster, *ManualClock) {}},
		{"maintenance on", func(t *testing.T, c *Cluster, _ *ManualClock) {
			mustRun(t, c, "maintenance on z1 600")
		}},
		{"storage process down", func(t *testing.T, c *Cluster, _ *ManualClock) {
			if err := c.Stop("storage-1"); err != nil {
				t.Fatal(err)
			}
		}},
		{"log down, recovering", func(t *testing.T, c *Cluster, clock *ManualClock) {
			if err := c.Stop("log-1"); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Second)
		}},
		{"exclusion in progress", func(t *testing.T, c *Cluster, _ *ManualClock) {
			mustRun(t, c, "exclude no_wait locality_instance_id:storage-2")
		}},
		{"coordinator quorum lost", func(t *testing.T, c *Cluster, _ *ManualClock) {
			for _, id := range []string{"storage-1", "storage-2", "storage-3"} {
				if err := c.Stop(id); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, clock := fixture(t)
			tt.setup(t, c, clock)
			errs, err := fdbschema.Match(schema, c.StatusJSON())
			if err != nil {
				t.Fatal(err)
			}
			if len(errs) > 0 {
				t.Fatalf("status json does not match FoundationDB's status schema:\n%s", strings.Join(errs, "\n"))
			}
		})
	}
}

func mustRun(t *testing.T, c *Cluster, cmds string) {
	t.Helper()
	if r := run(c, "--exec", cmds, "--timeout", "10"); r.code != 0 {
		t.Fatalf("fdbcli --exec %q: %+v", cmds, r)
	}
}
