package ops

import (
	"context"
)

// Engine adapts one kind of database. The plan/executor, lock and discovery
// are shared; an engine contributes health and the engine-specific parts of
// procedures. Optional abilities (scale, bootstrap, replace) are separate
// interfaces an engine may also implement.
type Engine interface {
	Name() string
	// Health reports database-level health for status and health gates;
	// (nil, nil) when the engine has no notion of it.
	Health(ctx context.Context, c *Cluster) (*Health, error)
	// PlanRestart computes a rolling restart plan.
	PlanRestart(ctx context.Context, c *Cluster, opts RestartOptions) (*Plan, error)
}

// Health is an engine's view of the database.
type Health struct {
	// Status is engine-specific but short: green|yellow|red for CrateDB,
	// healthy|degraded|no-quorum for etcd.
	Status  string            `json:"status"`
	Message string            `json:"message,omitempty"`
	Details map[string]string `json:"details,omitempty"`
}

// RestartOptions is what the user asked of a rolling restart.
type RestartOptions struct {
	// Groups limits the restart to these node groups (empty = all).
	Groups []string
	// Command re-runs the request (resume hint).
	Command string
}
