package fdbschema

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestMatchRules: the rules of FoundationDB's schemaMatch, one case each.
func TestMatchRules(t *testing.T) {
	schema := `{"a":{"n":1.5,"s":"x","b":true,"e":{"$enum":["x","y"]},"m":{"$map":{"k":1}},"any":{"$map":"v"},
		"one":[{"k":1}],"none":[]}}`
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"permitted, integers are reals, missing keys fine", `{"a":{"n":3,"s":"y","e":"y","m":{"p":{"k":2}},"any":{"q":{"z":1}},"one":[{"k":1},{}],"none":[]}}`, nil},
		{"unknown key", `{"a":{"zz":1}}`, []string{"Unknown key `.a.zz'"}},
		{"wrong type", `{"a":{"n":"3"}}`, []string{"Incorrect value type for key `.a.n' (schema number, value string)"}},
		{"null is its own type", `{"a":{"s":null}}`, []string{"Incorrect value type for key `.a.s' (schema string, value null)"}},
		{"enum", `{"a":{"e":"z"}}`, []string{"Unknown value `\"z\"' for key `.a.e'"}},
		{"map of non-object", `{"a":{"m":[]}}`, []string{"Expected an object as the value for key `.a.m'"}},
		{"map entry not an object", `{"a":{"m":{"p":1}}}`, []string{"Expected an object for `.a.m[p]'"}},
		{"map entry mismatch", `{"a":{"m":{"p":{"k":"x"}}}}`, []string{"Incorrect value type for key `.a.m[p].k' (schema number, value string)"}},
		{"array item", `{"a":{"one":[{"k":1},{"j":1}]}}`, []string{"Unknown key `.a.one[1].j'"}},
		{"empty schema array", `{"a":{"none":[1]}}`, []string{"Expected an empty array for key `.a.none'"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Match([]byte(schema), []byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRealStatusDocuments: the status documents the operator's repository captured from real
// clusters match the schema except where FoundationDB's schema itself is narrower than its
// server: process classes missing from class_type's "$enum" (a real server reports its
// ProcessClass name) and the backup layer's keys. Proves Match accepts what real FDB writes.
func TestRealStatusDocuments(t *testing.T) {
	schema, err := os.ReadFile("testdata/status_schema_7.3.63.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"operator_fdb_status_7_1_rc1.json", "operator_unreachable_test_processes.json"} {
		t.Run(f, func(t *testing.T) {
			doc, err := os.ReadFile("../../../../internal/engines/foundationdb/testdata/upstream/" + f)
			if err != nil {
				t.Fatal(err)
			}
			errs, err := Match(schema, doc)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range errs {
				known := strings.HasPrefix(e, "Unknown value `\"log\"' for key `.cluster.processes[") ||
					strings.HasPrefix(e, "Unknown value `\"cluster_controller\"' for key `.cluster.processes[") ||
					e == "Unknown key `.cluster.layers.backup'"
				if !known {
					t.Errorf("real document fails the schema: %s", e)
				}
			}
		})
	}
}
