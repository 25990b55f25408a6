package foundationdb

import "github.com/kubectl-dbops/kubectl-dbops/internal/ops"

// The capabilities of internal/ops/engine.go this engine has, checked at compile time.
var (
	_ ops.Engine = (*Engine)(nil)
)
