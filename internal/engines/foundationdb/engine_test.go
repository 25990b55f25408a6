package foundationdb

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// simExec is a kube.Executor that runs fdbcli in the FoundationDB simulator (test/sim/fdbsim)
// as the pod named, and records every call.
type simExec struct {
	host *fdbsim.Host
	mu   sync.Mutex
	argv [][]string
}

func (s *simExec) Exec(ctx context.Context, namespace, pod, container string, argv []string, _ io.Reader) ([]byte, []byte, error) {
	s.mu.Lock()
	s.argv = append(s.argv, append([]string{namespace + "/" + pod, container}, argv...))
	s.mu.Unlock()
	// The container's environment as the operator's pods set it (its trace directory among it);
	// env(1) in argv changes it as the real one does.
	cmd, env, err := fdbsim.EnvCommand(argv, fdbsim.OperatorMainContainerEnv("myfdb"))
	if err != nil {
		return nil, []byte(err.Error()), &kube.ExitError{Code: 125}
	}
	if container != Container || len(cmd) == 0 || cmd[0] != "fdbcli" {
		return nil, []byte("executable not found"), &kube.ExitError{Code: 127}
	}
	var out, errb bytes.Buffer
	code := s.host.ExecEnv(ctx, namespace+"/"+pod, cmd[1:], env, &out, &errb)
	if code != 0 {
		return out.Bytes(), errb.Bytes(), &kube.ExitError{Code: code}
	}
	return out.Bytes(), errb.Bytes(), nil
}

// execArg is the --exec argument of an fdbcli argv (after any env(1) prefix), or "".
func execArg(argv []string) string {
	if i := slices.Index(argv, "--exec"); i >= 0 && i+1 < len(argv) {
		return argv[i+1]
	}
	return ""
}

// simCluster is the sandbox layout in the simulator and as discovery would see it.
func simCluster(t *testing.T) (*ops.Cluster, *fdbsim.Cluster, *fdbsim.ManualClock, *simExec) {
	t.Helper()
	clock := fdbsim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	host := fdbsim.NewHost(clock)
	c := &ops.Cluster{Name: "myfdb", Namespace: "demo", Engine: ops.EngineFoundationDB}
	var specs []fdbsim.ProcessSpec
	for _, class := range []string{"storage", "log", "stateless"} {
		g := &ops.NodeGroup{Name: class, Owner: NewOwner(&ops.ControllerRef{Kind: "FoundationDBCluster", Name: "myfdb", Object: map[string]any{
			"metadata": map[string]any{"generation": int64(3)},
			"status":   map[string]any{"generations": map[string]any{"reconciled": int64(3)}, "health": map[string]any{"available": true}},
		}}, class)}
		for i, z := range []string{"zone-a", "zone-b", "zone-c"} {
			id := fmt.Sprintf("%s-%d", class, 10+i)
			pod := "myfdb-" + id
			g.Pods = append(g.Pods, ops.Pod{Name: pod, Member: id, Group: class, Ready: true, Zone: z})
			specs = append(specs, fdbsim.ProcessSpec{ID: id, Address: fmt.Sprintf("10.0.%d.%d:4501", len(c.Groups), i+1), Class: class, Zone: z})
			host.BindPod("demo/"+pod, "demo/myfdb")
		}
		c.Groups = append(c.Groups, g)
	}
	model, err := fdbsim.New(clock, fdbsim.Config{RedundancyMode: "triple"}, specs,
		[]string{"10.0.0.1:4501", "10.0.0.2:4501", "10.0.0.3:4501", "10.0.1.1:4501", "10.0.1.2:4501"})
	if err != nil {
		t.Fatal(err)
	}
	host.SetCluster("demo/myfdb", model)
	clock.Advance(time.Minute)
	return c, model, clock, &simExec{host: host}
}

func newEngine(t *testing.T, ex kube.Executor) *Engine {
	t.Helper()
	e, err := New(ops.EngineDeps{Client: fake.NewClientset(), Exec: ex}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestParseStatus(t *testing.T) {
	doc := `{"client":{"database_status":{"available":true}},"cluster":{"recovery_state":{"name":"fully_recovered","active_generations":1}}}`
	tests := []struct {
		name, out string
		ok        bool
	}{
		{"plain", doc + "\n", true},
		{"after the long-delay status", "\nThe database is available.\n\n" + doc + "\n", true},
		{"after warning lines", "WARNING: something\nmore\n  " + doc, true},
		{"no document", "ERROR: nothing\n", false},
		{"truncated", `{"client":{`, false},
	}
	for _, tt := range tests {
		st, err := ParseStatus([]byte(tt.out))
		if (err == nil) != tt.ok {
			t.Fatalf("%s: err %v", tt.name, err)
		}
		if tt.ok && (!st.Available() || st.RecoveryName() != "fully_recovered" || st.ActiveGenerations() != 1) {
			t.Fatalf("%s: %+v", tt.name, st)
		}
	}
}

func TestHealthFromStatusJSON(t *testing.T) {
	c, model, _, ex := simCluster(t)
	e := newEngine(t, ex)
	h, err := e.Health(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "healthy" || h.Details["data"] != "healthy" || h.Details["minReplicasRemaining"] != "3" ||
		h.Details["maintenance"] != "none" || h.Details["coordinators"] != "5/5 reachable" ||
		!strings.HasPrefix(h.Details["recovery"], "fully_recovered") || h.Details["operatorReconciled"] != "yes" {
		t.Fatalf("health %+v", h)
	}
	if got := ex.argv[0]; !slices.Equal(got, []string{"demo/myfdb-storage-10", "foundationdb", "env", "-u", "FDB_NETWORK_OPTION_TRACE_ENABLE", "fdbcli", "--exec", "status json", "--timeout", "40"}) {
		t.Fatalf("exec %q", got)
	}
	if h.Table == nil || len(h.Table.Rows) != 9 {
		t.Fatalf("table %+v", h.Table)
	}
	// status -o json: typed values, and the processes as objects by column name.
	raw, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Values struct {
			Available            bool `json:"available"`
			MinReplicasRemaining int  `json:"minReplicasRemaining"`
			Coordinators         struct {
				Reachable, Total int
			} `json:"coordinators"`
			FaultTolerance struct{ Data, Availability int } `json:"faultTolerance"`
			Recovery       struct {
				State             string `json:"state"`
				ActiveGenerations int    `json:"activeGenerations"`
			} `json:"recovery"`
			Maintenance *struct{ Zone string } `json:"maintenance"`
		} `json:"values"`
		Table struct {
			Items []map[string]string `json:"items"`
		} `json:"table"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	v := doc.Values
	if !v.Available || v.MinReplicasRemaining != 3 || v.Coordinators.Reachable != 5 || v.Coordinators.Total != 5 ||
		v.Recovery.State != "fully_recovered" || v.Recovery.ActiveGenerations != 1 || v.Maintenance != nil {
		t.Fatalf("values %+v from %s", v, raw)
	}
	if len(doc.Table.Items) != 9 || !slices.ContainsFunc(doc.Table.Items, func(i map[string]string) bool {
		return i["pod"] == "myfdb-storage-10" && i["processGroup"] == "storage-10" && i["zoneid"] == "zone-a"
	}) {
		t.Fatalf("table items %v", doc.Table.Items)
	}
	var roles []string
	for _, r := range h.Table.Rows {
		if r[0] == "myfdb-storage-10" && (r[1] != "storage-10" || r[3] != "zone-a" || r[5] != "yes" || !strings.Contains(r[7], "storage")) {
			t.Fatalf("row %q", r)
		}
		roles = append(roles, r[7])
	}
	if !slices.ContainsFunc(roles, func(r string) bool { return strings.Contains(r, "master") }) ||
		!slices.ContainsFunc(roles, func(r string) bool { return strings.Contains(r, "cluster_controller") }) {
		t.Fatalf("roles %v", roles)
	}

	// Maintenance shows with its zone and remaining time, and on the zone's processes.
	var out, errb bytes.Buffer
	if code := model.Run(context.Background(), []string{"--exec", "maintenance on zone-b 120"}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	h, _ = e.Health(context.Background(), c)
	if m, _ := h.Values["maintenance"].(map[string]any); m["zone"] != "zone-b" || m["secondsRemaining"] != 120 {
		t.Fatalf("maintenance values %v", h.Values["maintenance"])
	}
	if h.Status != "maintenance" || h.Details["maintenance"] != "zone zone-b, 120 seconds remaining" || !strings.Contains(h.Message, "maintenance zone-b") ||
		!strings.Contains(h.Message, "end it with fdbcli --exec 'maintenance off'") {
		t.Fatalf("maintenance: %+v", h)
	}
	under := 0
	for _, r := range h.Table.Rows {
		if strings.Contains(r[9], "UnderMaintenance") {
			under++
			if r[3] != "zone-b" {
				t.Fatalf("row %q", r)
			}
		}
	}
	if under != 3 {
		t.Fatalf("%d processes under maintenance", under)
	}
}

func TestHealthUnavailableAndUnreachable(t *testing.T) {
	c, model, _, ex := simCluster(t)
	for _, id := range []string{"storage-10", "storage-11", "storage-12"} {
		if err := model.Stop(id); err != nil {
			t.Fatal(err)
		}
	}
	e := newEngine(t, ex)
	h, err := e.Health(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "unavailable" || h.Details["available"] != "false" || !strings.Contains(h.Message, "quorum") {
		t.Fatalf("health %+v", h)
	}
	// No Ready pod: nothing to run fdbcli in.
	for _, g := range c.Groups {
		for i := range g.Pods {
			g.Pods[i].Ready = false
		}
	}
	h, err = e.Health(context.Background(), c)
	if err != nil || h.Status != "unreachable" || !strings.Contains(h.Message, "no Ready pod") {
		t.Fatalf("health %+v %v", h, err)
	}
}

func TestCLIReportsFdbcliFailures(t *testing.T) {
	c, _, _, ex := simCluster(t)
	cli := &CLI{Exec: ex, Timeout: 5}
	_, err := cli.Run(context.Background(), c.Namespace, "myfdb-log-10", "kill 10.0.0.1:4501")
	if err == nil || !strings.Contains(err.Error(), "process `10.0.0.1:4501' not recognized") || cli.Calls != 1 {
		t.Fatalf("err %v calls %d", err, cli.Calls)
	}
}

// Options.Timeout (--fdb-timeout) is the --timeout of every fdbcli call.
func TestFdbcliTimeoutFromOptions(t *testing.T) {
	c, _, _, ex := simCluster(t)
	e, err := New(ops.EngineDeps{Client: fake.NewClientset(), Exec: ex}, Options{Timeout: 7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Health(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if got := ex.argv[0]; !slices.Equal(got[len(got)-2:], []string{"--timeout", "7"}) {
		t.Fatalf("exec %q", got)
	}
}
