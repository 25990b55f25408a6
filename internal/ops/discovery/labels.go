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
	labelAppName      = "app.kubernetes.io/name"
	labelAppInstance  = "app.kubernetes.io/instance"
	labelAppComponent = "app.kubernetes.io/component"
	labelManagedBy    = "app.kubernetes.io/managed-by"
	labelCrateNode    = "cloud.crate.io/node-name"
	labelPodIndex     = "apps.kubernetes.io/pod-index"
	labelZone         = "topology.kubernetes.io/zone"
	// Still set by some older clouds and kubelets.
	labelZoneBeta = "failure-domain.beta.kubernetes.io/zone"
)

// Layouts recorded in ops.Cluster.Layout.
const (
	LayoutLabels          = "labels"
	LayoutCrateDBOperator = "cratedb-operator"
	LayoutEtcd            = "etcd"
	LayoutStatefulSet     = "statefulset"
	LayoutSelector        = "selector"
	// LayoutFoundationDBStatefulSet: fdbserver run by a StatefulSet, as FoundationDB's own
	// Kubernetes sample does (apple/foundationdb packaging/docker/kubernetes/statefulset.yaml),
	// with no operator; each pod's locality_instance_id is its name.
	LayoutFoundationDBStatefulSet = "foundationdb-statefulset"
)

const (
	crateMasterPrefix = "crate-master-"
	crateDataPrefix   = "crate-data-"
	crateComponent    = "cratedb"
	crateMasterNode   = "master"
)
