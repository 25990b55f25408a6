package cratedbsim

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// docSettingTypes reads testdata/upstream/sys-cluster-settings-columns.txt, the doctest in
// crate/crate docs/admin/system-information.rst listing information_schema.columns of
// sys.cluster's settings (testdata/upstream/README.md): column name -> CrateDB data type.
func docSettingTypes(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("testdata/upstream/sys-cluster-settings-columns.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) != 4 {
			continue
		}
		name, typ := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])
		if strings.HasPrefix(name, "settings") {
			out[name] = typ
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 50 {
		t.Fatalf("read only %d settings columns", len(out))
	}
	return out
}

// TestSysClusterSettingsTypedAsCrateDBDocumentsThem: every settings column the model's
// sys.cluster exposes is one CrateDB lists, with the type CrateDB gives it (a client decodes
// an integer setting as an integer, not as text).
func TestSysClusterSettingsTypedAsCrateDBDocumentsThem(t *testing.T) {
	doc := docSettingTypes(t)
	pgType := map[uint32]string{oidVarchar: "text", oidText: "text", oidInt4: "integer", oidInt8: "bigint",
		oidInt2: "smallint", oidBool: "boolean", oidFloat4: "real", oidFloat8: "double precision"}
	m := &model{}
	vt := clusterVirtualTable()
	row := vt.rows(m)[0]
	for i, c := range vt.cols {
		if !strings.HasPrefix(c.name, "settings") {
			continue
		}
		want, ok := doc[c.name]
		if !ok {
			t.Errorf("sys.cluster column %s: CrateDB has no such settings column", c.name)
			continue
		}
		if got := pgType[c.oid]; got != want {
			t.Errorf("sys.cluster column %s: type %s (oid %d), CrateDB: %s", c.name, got, c.oid, want)
			continue
		}
		v := row[i]
		var okv bool
		switch want {
		case "text":
			_, okv = v.(string)
		case "integer":
			_, okv = v.(int32)
		case "boolean":
			_, okv = v.(bool)
		case "real":
			_, okv = v.(float32)
		case "double precision":
			_, okv = v.(float64)
		case "bigint":
			_, okv = v.(int64)
		}
		if !okv && v != nil {
			t.Errorf("sys.cluster column %s: value %#v is not a %s", c.name, v, want)
		}
	}
}

// TestSysHealthAndNodeChecksTypedAsCrateDBDocumentsThem: the columns of sys.node_checks and
// sys.health the model has carry the Return Type CrateDB documents
// (testdata/upstream/sys-node-checks-and-health-columns.txt).
func TestSysHealthAndNodeChecksTypedAsCrateDBDocumentsThem(t *testing.T) {
	b, err := os.ReadFile("testdata/upstream/sys-node-checks-and-health-columns.txt")
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]map[string]string{}
	var table string
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "# sys.health"):
			table = "sys.health"
		case strings.HasPrefix(line, "# crate/crate"):
			table = "sys.node_checks"
		case strings.HasPrefix(line, "| ``"):
			cells := strings.Split(line, "|")
			name := strings.Trim(strings.TrimSpace(cells[1]), "`")
			typ := strings.ToLower(strings.Trim(strings.TrimSpace(cells[3]), "`"))
			if doc[table] == nil {
				doc[table] = map[string]string{}
			}
			doc[table][name] = typ
		}
	}
	pgType := map[uint32]string{oidVarchar: "text", oidText: "text", oidInt4: "integer", oidInt8: "bigint",
		oidInt2: "smallint", oidBool: "boolean", oidFloat4: "real", oidFloat8: "double precision"}
	for _, table := range []string{"sys.node_checks", "sys.health"} {
		if len(doc[table]) < 6 {
			t.Fatalf("%s: read %v from the documentation", table, doc[table])
		}
		for _, c := range virtualTables()[table].cols {
			want, ok := doc[table][c.name]
			if !ok {
				t.Errorf("%s.%s: CrateDB documents no such column", table, c.name)
				continue
			}
			if got := pgType[c.oid]; got != want {
				t.Errorf("%s.%s: type %s, CrateDB: %s", table, c.name, got, want)
			}
		}
	}
}
