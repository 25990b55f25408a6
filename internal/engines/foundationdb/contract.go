package foundationdb

import "github.com/kubectl-dbops/kubectl-dbops/internal/ops"

// The capabilities of internal/ops/engine.go this engine has, and the hooks of the shared
// rolling restart it plugs in, checked at compile time.
var (
	_ ops.Engine          = (*Engine)(nil)
	_ ops.PodReplacer     = (*Engine)(nil)
	_ ops.Scaler          = (*Engine)(nil)
	_ ops.MemberChecker   = (*Engine)(nil)
	_ ops.OperatorControl = (*Engine)(nil)
	_ ops.ClassPodChooser = (*Engine)(nil)
	_ ops.Explainer       = (*Engine)(nil)
	_ ops.Diagnoser       = (*Engine)(nil)

	_ ops.RestartGate        = (*gate)(nil)
	_ ops.RestartOrderer     = (*gate)(nil)
	_ ops.RestartStepper     = (*gate)(nil)
	_ ops.RestartPreflighter = (*gate)(nil)
	_ ops.RestartGrouper     = (*gate)(nil)

	// Its two recognizers (recognize.go), which the registry hands to discovery, and what the
	// StatefulSet layout attaches to a cluster (Cluster.Recognized), finished again by
	// discovery.Refresh.
	_ ops.ResourceRecognizer    = operatorRecognizer{}
	_ ops.StatefulSetRecognizer = statefulSetRecognizer{}
	_ ops.ClusterFinisher       = statefulSetRecognizer{}
	_ ops.ClusterFinisher       = layoutStatefulSet
)
