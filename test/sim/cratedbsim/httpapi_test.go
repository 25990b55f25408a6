package cratedbsim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func postSQL(t *testing.T, addr, user, password string, req SQLRequest) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(req)
	r, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/_sql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		r.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if resp.StatusCode == http.StatusUnauthorized {
		// CrateDB answers authentication failures in plain text.
		return resp.StatusCode, map[string]any{"text": string(data)}
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return resp.StatusCode, out
}

func TestHTTPSQL(t *testing.T) {
	sim := startStatic(t)
	addr := nodeInfo(t, sim, "data-hot-0").HTTPAddr
	if _, err := sim.Exec("test", "crate", "CREATE TABLE t (a INT) CLUSTERED INTO 3 SHARDS WITH (number_of_replicas = 0)"); err != nil {
		t.Fatal(err)
	}
	code, out := postSQL(t, addr, "", "", SQLRequest{
		Stmt: "SELECT node['name'], count(*) FROM sys.shards WHERE node['name'] = ANY(?) GROUP BY 1",
	})
	// CrateDB's HTTP endpoint uses ? or $n placeholders; the simulator knows $n only.
	if code != http.StatusBadRequest || !strings.HasPrefix(out["error"].(map[string]any)["message"].(string), "SQLParseException[") {
		t.Fatalf("? placeholder: %d %v", code, out)
	}
	code, out = postSQL(t, addr, "", "", SQLRequest{
		Stmt: "SELECT node['name'], count(*) FROM sys.shards WHERE node['name'] = ANY($1) GROUP BY 1",
		Args: []any{[]any{"data-hot-0", "data-hot-1", "data-hot-2"}},
	})
	if code != http.StatusOK || out["rowcount"].(float64) != 3 || len(out["cols"].([]any)) != 2 {
		t.Fatalf("shards: %d %v", code, out)
	}
	code, out = postSQL(t, addr, "", "", SQLRequest{Stmt: `CREATE USER u WITH (password = $1)`, Args: []any{"pw"}})
	if code != http.StatusOK || out["rowcount"].(float64) != 1 {
		t.Fatalf("create user: %d %v", code, out)
	}
	code, out = postSQL(t, addr, "u", "bad", SQLRequest{Stmt: "SELECT 1"})
	if code != http.StatusUnauthorized || out["text"] != "password authentication failed for user \"u\"\n" {
		t.Fatalf("bad password: %d %v", code, out)
	}
	code, _ = postSQL(t, addr, "u", "pw", SQLRequest{Stmt: "SELECT 1"})
	if code != http.StatusOK {
		t.Fatalf("good password: %d", code)
	}

	resp, err := http.Get("http://" + addr + "/_sim/statements")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var log []Statement
	if err := json.NewDecoder(resp.Body).Decode(&log); err != nil {
		t.Fatal(err)
	}
	last := log[len(log)-1]
	if last.User != "u" || last.Node != "data-hot-0" || last.Protocol != "http" || last.Statement != "SELECT 1" {
		t.Fatalf("last logged statement = %+v", last)
	}
}
