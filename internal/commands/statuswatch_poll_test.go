package commands

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// polledEngine's health lives only in its database (as FoundationDB's does): nothing in
// Kubernetes changes with it. Each read reports a growing uptime.
type polledEngine struct {
	state *atomic.Value // string
	reads chan struct{}
	n     atomic.Int64
}

func (e *polledEngine) Name() string { return "polled" }

func (e *polledEngine) Health(context.Context, *ops.Cluster) (*ops.Health, error) {
	n := e.n.Add(1)
	select {
	case e.reads <- struct{}{}:
	default:
	}
	return &ops.Health{Status: "ok", Details: map[string]string{"state": e.state.Load().(string), "remaining": fmt.Sprintf("%d s", 1000-n)},
		Values:   map[string]any{"state": e.state.Load().(string), "remaining": map[string]any{"seconds": 1000 - n}},
		Volatile: []string{"remaining"},
		Table:    &ops.Table{Title: "Processes", Columns: []string{"NAME", "UPTIME"}, Rows: [][]string{{"p1", fmt.Sprintf("%ds", n)}}, VolatileColumns: []int{1}}}, nil
}

func (e *polledEngine) PlanRestart(context.Context, *ops.Cluster, ops.RestartOptions) (*ops.Plan, error) {
	return nil, fmt.Errorf("not supported")
}

func (e *polledEngine) HealthPollInterval() time.Duration { return 5 * time.Millisecond }

// TestStatusWatchPollsDatabaseHealth: for an engine whose health has no Kubernetes trace,
// --watch reads it again every interval and prints a document when it changed — and not for
// what changes with time alone (Volatile details and columns).
func TestStatusWatchPollsDatabaseHealth(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "polled", webObjects()...)...)
	state := &atomic.Value{}
	state.Store("steady")
	eng := &polledEngine{state: state, reads: make(chan struct{}, 1)}
	out, errb, done, cancel := startStatusWatch(t, h, "json", func(g *GlobalOptions) {
		g.Engines = append(g.Engines, EngineKind{Name: "polled", Build: func(context.Context, EngineDeps) (ops.Engine, error) { return eng, nil }})
	})
	defer cancel()
	docs := jsonDocs(t, waitWatchOutput(t, out, errb, done, "the first status", func(s string) bool { return len(jsonDocs(t, s)) >= 1 }))
	if docs[0].Health == nil || docs[0].Health.Details["state"] != "steady" {
		t.Fatalf("first document health %+v", docs[0].Health)
	}
	// Several more reads, each with a new uptime and seconds remaining: no new document.
	start := eng.n.Load()
	for eng.n.Load() < start+5 {
		select {
		case <-eng.reads:
		case err := <-done:
			t.Fatalf("watch ended: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("the watch does not read the health again (no poll)")
		}
	}
	if n := len(jsonDocs(t, out.String())); n != 1 {
		t.Fatalf("%d documents for uptimes alone:\n%s", n, out.String())
	}
	state.Store("changed")
	docs = jsonDocs(t, waitWatchOutput(t, out, errb, done, "the changed health", func(s string) bool { return len(jsonDocs(t, s)) >= 2 }))
	if docs[1].Health.Details["state"] != "changed" {
		t.Fatalf("second document health %+v", docs[1].Health)
	}
}
