package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// toyEngine is a fifth engine added by nothing but this test, following the
// checklist of docs/architecture.md: an ops.Engine with a constructor of the
// shape every engine has (newToy, from ops.EngineDeps and its own options),
// whose restart is the shared rolling restart with its own gate (checks
// around each pod through the exec seam, a preflight refusing an unhealthy
// database before the lock), its capabilities and hooks asserted at compile
// time, built by an EngineKind from d.deps() and registered beside the
// built-in ones.
type toyEngine struct {
	client kubernetes.Interface
	gate   *toyGate
}

// toyOptions are the toy engine's own settings.
type toyOptions struct {
	// Calls records the gate's calls (the test reads it).
	Calls *toyCalls
	// Unhealthy makes the database refuse a restart.
	Unhealthy bool
}

// newToy is the toy engine's New: clients and the exec seam from deps.
func newToy(deps ops.EngineDeps, opts toyOptions) (*toyEngine, error) {
	if opts.Calls == nil {
		return nil, errors.New("toy: no call record")
	}
	return &toyEngine{client: deps.Client, gate: &toyGate{exec: deps.Executor(), calls: opts.Calls, unhealthy: opts.Unhealthy}}, nil
}

// The toy's contract (an engine package's contract.go).
var (
	_ ops.Engine             = (*toyEngine)(nil)
	_ ops.RestartGate        = (*toyGate)(nil)
	_ ops.RestartPreflighter = (*toyGate)(nil)
)

func (e *toyEngine) Name() string { return "toy" }

func (e *toyEngine) Health(context.Context, *ops.Cluster) (*ops.Health, error) {
	if e.gate.unhealthy {
		return &ops.Health{Status: "toy-sick"}, nil
	}
	return &ops.Health{Status: "toy-healthy"}, nil
}

func (e *toyEngine) PlanRestart(_ context.Context, c *ops.Cluster, opts ops.RestartOptions) (*ops.Plan, error) {
	return (&ops.RollingRestart{Client: e.client, Gate: e.gate}).Plan(c, "toy", opts)
}

// toyCalls records what the gate did, in order (a channel: the gate runs in the executor's
// goroutines, the test reads after the run).
type toyCalls struct{ ch chan string }

func newToyCalls() *toyCalls { return &toyCalls{ch: make(chan string, 64)} }

func (c *toyCalls) add(s string) { c.ch <- s }

func (c *toyCalls) get() []string {
	var out []string
	for {
		select {
		case s := <-c.ch:
			out = append(out, s)
		default:
			return out
		}
	}
}

// toyGate checks the database around each pod: before, a note; after, the
// toy's check command in the new pod, through the engine's executor.
type toyGate struct {
	exec      kube.Executor
	calls     *toyCalls
	unhealthy bool
}

func (g *toyGate) Describe(p ops.Pod) ([]string, []string) {
	return []string{"the toy database lets " + p.Name + " go"}, nil
}

func (g *toyGate) Preflight(_ context.Context, c *ops.Cluster, _ ops.PreflightState) error {
	if g.unhealthy {
		return ops.Preconditionf("toy database %s/%s is unhealthy; refusing to start a rolling restart", c.Namespace, c.Name)
	}
	return nil
}

func (g *toyGate) Before(_ context.Context, _ *ops.StepContext, p ops.Pod) error {
	g.calls.add("before " + p.Name)
	return nil
}

func (g *toyGate) After(ctx context.Context, _ *ops.StepContext, p ops.Pod) error {
	out, _, err := g.exec.Exec(ctx, "prod", p.Name, "", []string{"toy-check"}, nil)
	if err != nil {
		return fmt.Errorf("toy check in %s: %w", p.Name, err)
	}
	g.calls.add("after " + p.Name + ": " + string(out))
	return nil
}

// toyExec is the exec fake the test injects where every engine's exec seam is
// (Factory.Exec): it answers the toy's check command.
type toyExec struct{}

func (toyExec) Exec(_ context.Context, _, pod, _ string, argv []string, _ io.Reader) ([]byte, []byte, error) {
	if !slices.Equal(argv, []string{"toy-check"}) {
		return nil, nil, fmt.Errorf("unexpected command %v", argv)
	}
	return []byte(pod + " ok"), nil, nil
}

// withToy registers the toy engine, as a fifth EngineKind beside the built-in ones, built
// from d.deps() as they are, with the exec fake in the one exec seam.
func withToy(opts toyOptions) func(*GlobalOptions) {
	return func(g *GlobalOptions) {
		g.Exec = toyExec{}
		g.Engines = append(g.Engines, EngineKind{Name: "toy", Build: func(_ context.Context, d EngineDeps) (ops.Engine, error) {
			return built(newToy(d.deps(), opts))
		}})
	}
}

func TestFifthEngine(t *testing.T) {
	t.Run("restart through the shared pipeline with the engine's gate", func(t *testing.T) {
		h := newHarness(t, fakecluster.Objects("prod", "db", "toy", webObjects()...)...)
		ctrl := fakecluster.Start(t, h.client, "prod")
		calls := newToyCalls()
		r := h.runWith(withToy(toyOptions{Calls: calls}), "restart", "db", "--rolling", "--yes", "--lock-id", "alice@test")
		if r.code != 0 {
			t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
		}
		pods := []string{"db-web-0", "db-web-1", "db-web-2"}
		if got := ctrl.Deleted(); !slices.Equal(got, pods) {
			t.Errorf("deleted %v, want %v", got, pods)
		}
		var want []string
		for _, p := range pods {
			want = append(want, "before "+p, "after "+p+": "+p+" ok")
		}
		if got := calls.get(); !slices.Equal(got, want) {
			t.Errorf("gate calls %v, want %v", got, want)
		}
	})
	t.Run("an unhealthy database is refused before the lock", func(t *testing.T) {
		h := newHarness(t, fakecluster.Objects("prod", "db", "toy", webObjects()...)...)
		calls := newToyCalls()
		r := h.runWith(withToy(toyOptions{Calls: calls, Unhealthy: true}), "restart", "db", "--rolling", "--yes")
		if r.code != ops.ExitPrecondition || !strings.Contains(r.err, "toy database prod/db is unhealthy") {
			t.Errorf("exit %d, stderr %q", r.code, r.err)
		}
		if w := fakecluster.Writes(h.client); len(w) > 0 {
			t.Errorf("refusal wrote: %v", w)
		}
		if got := calls.get(); len(got) > 0 {
			t.Errorf("gate ran: %v", got)
		}
	})
	t.Run("dry-run shows the engine's plan", func(t *testing.T) {
		h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
		r := h.runWith(withToy(toyOptions{Calls: newToyCalls()}), "restart", "db", "--rolling", "--engine", "toy", "--dry-run")
		if r.code != 0 || !strings.Contains(r.out, "(engine toy)") || !strings.Contains(r.out, "requires: the toy database lets db-web-0 go") {
			t.Errorf("exit %d, stdout:\n%s\nstderr: %s", r.code, r.out, r.err)
		}
	})
	t.Run("status shows its health", func(t *testing.T) {
		h := newHarness(t, fakecluster.Objects("prod", "db", "toy", webObjects()...)...)
		r := h.runWith(withToy(toyOptions{Calls: newToyCalls()}), "status", "db")
		if r.code != 0 || !strings.Contains(r.out, "toy-healthy") {
			t.Errorf("exit %d, stdout:\n%s\nstderr: %s", r.code, r.out, r.err)
		}
	})
	t.Run("a capability it lacks is refused", func(t *testing.T) {
		h := newHarness(t, fakecluster.Objects("prod", "db", "toy", webObjects()...)...)
		r := h.runWith(withToy(toyOptions{Calls: newToyCalls()}), "scale", "db", "--replicas", "4", "--yes")
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
		if r.code != ops.ExitUsage || !strings.Contains(r.err, `unknown engine "toy"; allowed: cratedb, etcd, foundationdb, replicated, generic`) {
			t.Errorf("exit %d, stderr %q", r.code, r.err)
		}
	})
}
