package cratedb

import "github.com/kubectl-dbops/kubectl-dbops/internal/ops"

// The capabilities of internal/ops/engine.go this engine has, and the hooks of the shared
// procedures it plugs in (ops finds the optional ones by type assertion), checked at compile
// time: the one place per engine.
var (
	_ ops.Engine        = (*Engine)(nil)
	_ ops.Scaler        = (*Engine)(nil)
	_ ops.Bootstrapper  = (*Engine)(nil)
	_ ops.PodReplacer   = (*Engine)(nil)
	_ ops.MemberChecker = (*Engine)(nil)
	_ ops.Closer        = (*Engine)(nil)
	_ ops.Explainer     = (*Engine)(nil)
	_ ops.Diagnoser     = (*Engine)(nil)

	_ ops.RestartGate        = (*restartGate)(nil)
	_ ops.BatchChecker       = (*restartGate)(nil)
	_ ops.RestartStepper     = (*restartGate)(nil)
	_ ops.RestartPreflighter = (*restartGate)(nil)
	_ ops.ReplaceHooks       = (*replaceHooks)(nil)

	// Its recognizer (recognize.go), which the registry hands to discovery.
	_ ops.StatefulSetRecognizer = recognizer{}
	_ ops.NameDescriber         = recognizer{}
	_ ops.GroupNamer            = recognizer{}
	_ ops.GroupOrderer          = recognizer{}
)
