package discovery

// Labels and annotations discovery reads. They are the tool's public
// contract with cluster owners (see the README table), so they are exported
// for commands and docs to reference instead of repeating the strings.
const (
	// LabelCluster groups StatefulSets into one database cluster.
	LabelCluster = "dbops.io/cluster"
	// LabelNodeGroup names the node group (default: the StatefulSet name).
	LabelNodeGroup = "dbops.io/node-group"
	// LabelRole is "master" or "data" (default "data").
	LabelRole = "dbops.io/role"
	// LabelEngine is one of ops.KnownEngines.
	LabelEngine = "dbops.io/engine"
	// AnnotationOrder is an integer; lower node groups go first in procedures.
	AnnotationOrder = "dbops.io/order"
)

// Well-known labels set by operators and charts.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelPodIndex  = "apps.kubernetes.io/pod-index"
	labelZone      = "topology.kubernetes.io/zone"
	// Still set by some older clouds and kubelets.
	labelZoneBeta = "failure-domain.beta.kubernetes.io/zone"
)

// Layouts of discovery's generic paths, recorded in ops.Cluster.Layout; the engines'
// recognizers name theirs (ops.Recognizer).
const (
	LayoutLabels      = "labels"
	LayoutStatefulSet = "statefulset"
	LayoutSelector    = "selector"
)
