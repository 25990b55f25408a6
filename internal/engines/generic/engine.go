// Package generic is the engine for any StatefulSet-based cluster without database-specific
// gates: the shared rolling restart (internal/ops/restart.go) and replacement
// (internal/ops/replace.go) procedures with no hooks.
package generic

import (
	"context"

	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Engine handles any StatefulSet-based cluster.
type Engine struct {
	Client kubernetes.Interface
}

// Options are the generic engine's settings: none.
type Options struct{}

// New returns the generic engine.
func New(deps ops.EngineDeps, _ Options) (*Engine, error) { return &Engine{Client: deps.Client}, nil }

// Name returns "generic".
func (*Engine) Name() string { return ops.EngineGeneric }

// Health has nothing database-specific to say.
func (*Engine) Health(context.Context, *ops.Cluster) (*ops.Health, error) { return nil, nil }

// PlanRestart builds the plain rolling restart.
func (e *Engine) PlanRestart(_ context.Context, c *ops.Cluster, opts ops.RestartOptions) (*ops.Plan, error) {
	return (&ops.RollingRestart{Client: e.Client}).Plan(c, ops.EngineGeneric, opts)
}

// PlanReplacement implements ops.PodReplacer: pods and PVCs recreated, with no database
// steps.
func (e *Engine) PlanReplacement(_ context.Context, c *ops.Cluster, req ops.ReplaceRequest) (*ops.Plan, error) {
	return (&ops.Replacement{Client: e.Client}).Plan(c, ops.EngineGeneric, req)
}
