package ops

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Recognizer recognises the clusters of one layout of one engine in live API state. Each engine
// package provides its own (its Recognizers), the registry (internal/commands/engines.go) hands
// them to discovery (internal/ops/discovery), and discovery tries them in registry order: it
// keeps only the generic paths (the dbops.io/cluster label, a StatefulSet named as the cluster,
// --selector) and the assembly of groups, and knows no engine by name.
//
// A recognizer is a ResourceRecognizer or a StatefulSetRecognizer.
type Recognizer interface {
	// Engine is the engine (EngineKind name) whose clusters it recognises.
	Engine() string
	// Layout names the layout in Cluster.Layout, which status prints.
	Layout() string
}

// ResourceRecognizer recognises a cluster that an operator's custom resource is (the
// FoundationDB operator's FoundationDBCluster): the resource named as the cluster, whose pods
// the operator creates with no StatefulSet. It builds the cluster's groups itself.
type ResourceRecognizer interface {
	Recognizer
	// Resource is the custom resource; Kind its kind ("FoundationDBCluster"), for messages
	// and for the resources that list and status --watch read.
	Resource() schema.GroupVersionResource
	Kind() string
	// RecognizeResource reads the resource namespace/name and its pods. found is false when
	// there is no such resource, or no such resource type in the API.
	RecognizeResource(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, namespace, name string) (c *Cluster, found bool, err error)
}

// StatefulSetRecognizer recognises clusters made of StatefulSets that run the engine.
type StatefulSetRecognizer interface {
	Recognizer
	// Members are the StatefulSets among all that the layout's own naming makes cluster name
	// (the CrateDB operator's crate-data-<group>-<name>); nil when none match, or the layout
	// has no naming of its own. Several where the layout allows one is a usage error.
	// Discovery asks after the dbops.io/cluster label and before a StatefulSet named name; a
	// cluster found this way has this engine and Layout.
	Members(namespace, name string, all []appsv1.StatefulSet) ([]appsv1.StatefulSet, error)
	// Runs reports whether s runs the engine (its image, container or the operator's
	// labels): when neither --engine nor the dbops.io/engine label names the engine, the
	// cluster gets the first engine whose recognizer runs all its StatefulSets.
	Runs(s *appsv1.StatefulSet, cluster string) bool
}

// ClusterFinisher is implemented by StatefulSet recognizers that attach what their engine
// needs to every cluster of it found by StatefulSets, however it was found (by label, name,
// selector or --engine): the FoundationDB StatefulSet layout names its layout and reads each
// pod's process identity from its name. Discovery calls it after assembling the groups.
type ClusterFinisher interface {
	Finish(c *Cluster)
}

// ResourceRecognizers are the ResourceRecognizers among rs, in order.
func ResourceRecognizers(rs []Recognizer) []ResourceRecognizer {
	var out []ResourceRecognizer
	for _, r := range rs {
		if rr, ok := r.(ResourceRecognizer); ok {
			out = append(out, rr)
		}
	}
	return out
}

// NameDescriber is implemented by StatefulSet recognizers with a naming of their own: the
// names they look for, for the message when no cluster is found ("crate-*-<name>").
type NameDescriber interface {
	Names(cluster string) []string
}

// GroupNamer is implemented by StatefulSet recognizers whose layout names node groups itself
// (the CrateDB operator: its master and data groups, from StatefulSet names and labels).
// Discovery asks it for each StatefulSet of a cluster of its engine or layout; the dbops.io
// labels win over it. ok is false for a StatefulSet it does not name (a data group named after
// its StatefulSet).
type GroupNamer interface {
	GroupOf(s *appsv1.StatefulSet, cluster string) (group string, master, ok bool)
}

// GroupOrderer is implemented by StatefulSet recognizers whose engine orders data groups
// without an order annotation (CrateDB: by the cluster's resource, else creation time) and,
// without a master group, makes the first data group master-eligible.
type GroupOrderer interface {
	// DataGroupOrder reads the data groups' names in the order the cluster's resource
	// defines them; nil when it cannot be read (the order is then creation time, then name).
	DataGroupOrder(ctx context.Context, dyn dynamic.Interface, namespace, name string) ([]string, error)
}
