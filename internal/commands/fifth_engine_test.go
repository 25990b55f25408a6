package commands

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// toyEngine is a fifth engine added by nothing but this test, following the
// checklist of docs/architecture.md: an ops.Engine whose restart is the
// shared rolling restart with its own gate, its capabilities asserted at
// compile time, built from EngineDeps and registered as an EngineKind.
type toyEngine struct {
	client kubernetes.Interface
	gate   *toyGate
}

var _ ops.Engine = (*toyEngine)(nil)

func (e *toyEngine) Name() string { return "toy" }

func (e *toyEngine) Health(context.Context, *ops.Cluster) (*ops.Health, error) {
	return &ops.Health{Status: "toy-healthy"}, nil
}

func (e *toyEngine) PlanRestart(_ context.Context, c *ops.Cluster, opts ops.RestartOptions) (*ops.Plan, error) {
	return (&ops.RollingRestart{Client: e.client, Gate: e.gate}).Plan(c, "toy", opts)
}

// toyGate records the gate calls around each pod.
type toyGate struct {
	mu    sync.Mutex
	calls []string
}

var _ ops.RestartGate = (*toyGate)(nil)

func (g *toyGate) Describe(p ops.Pod) ([]string, []string) {
	return []string{"the toy database lets " + p.Name + " go"}, nil
}

func (g *toyGate) Before(_ context.Context, _ *ops.StepContext, p ops.Pod) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, "before "+p.Name)
	return nil
}

func (g *toyGate) After(_ context.Context, _ *ops.StepContext, p ops.Pod) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, "after "+p.Name)
	return nil
}

// withToy registers the toy engine, as a fifth EngineKind beside the built-in ones.
func withToy(gate *toyGate) func(*GlobalOptions) {
	return func(g *GlobalOptions) {
		g.Engines = append(g.Engines, EngineKind{Name: "toy", Build: func(_ context.Context, d EngineDeps) (ops.Engine, error) {
			return &toyEngine{client: d.Clients.Kube, gate: gate}, nil
		}})
	}
}

func TestFifthEngine(t *testing.T) {
	t.Run("restart through the shared pipeline with the engine's gate", func(t *testing.T) {
		h := newHarness(t, fakecluster.Objects("prod", "db", "toy", webObjects()...)...)
		ctrl := fakecluster.Start(t, h.client, "prod")
		gate := &toyGate{}
		r := h.runWith(withToy(gate), "restart", "db", "--rolling", "--yes", "--lock-id", "alice@test")
		if r.code != 0 {
			t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
		}
		pods := []string{"db-web-0", "db-web-1", "db-web-2"}
		if got := ctrl.Deleted(); !slices.Equal(got, pods) {
			t.Errorf("deleted %v, want %v", got, pods)
		}
		var want []string
		for _, p := range pods {
			want = append(want, "before "+p, "after "+p)
		}
		if !slices.Equal(gate.calls, want) {
			t.Errorf("gate calls %v, want %v", gate.calls, want)
		}
	})
	t.Run("dry-run shows the engine's plan", func(t *testing.T) {
		h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
		r := h.runWith(withToy(&toyGate{}), "restart", "db", "--rolling", "--engine", "toy", "--dry-run")
		if r.code != 0 || !strings.Contains(r.out, "(engine toy)") || !strings.Contains(r.out, "requires: the toy database lets db-web-0 go") {
			t.Errorf("exit %d, stdout:\n%s\nstderr: %s", r.code, r.out, r.err)
		}
	})
	t.Run("status shows its health", func(t *testing.T) {
		h := newHarness(t, fakecluster.Objects("prod", "db", "toy", webObjects()...)...)
		r := h.runWith(withToy(&toyGate{}), "status", "db")
		if r.code != 0 || !strings.Contains(r.out, "toy-healthy") {
			t.Errorf("exit %d, stdout:\n%s\nstderr: %s", r.code, r.out, r.err)
		}
	})
	t.Run("a capability it lacks is refused", func(t *testing.T) {
		h := newHarness(t, fakecluster.Objects("prod", "db", "toy", webObjects()...)...)
		r := h.runWith(withToy(&toyGate{}), "scale", "db", "--replicas", "4", "--yes")
		if r.code != ops.ExitUsage || !strings.Contains(r.err, "engine toy (cluster db) cannot scale") {
			t.Errorf("exit %d, stderr %q", r.code, r.err)
		}
		if w := fakecluster.Writes(h.client); len(w) > 0 {
			t.Errorf("refusal wrote: %v", w)
		}
	})
	t.Run("unregistered, it is an unknown engine", func(t *testing.T) {
		h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
		r := h.run("restart", "db", "--rolling", "--engine", "toy", "--yes")
		if r.code != ops.ExitUsage || !strings.Contains(r.err, `unknown engine "toy"; allowed: cratedb, etcd, replicated, generic`) {
			t.Errorf("exit %d, stderr %q", r.code, r.err)
		}
	})
}
