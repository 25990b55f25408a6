package ops

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Engines the tool knows. The engine decides which health gates and
// procedures apply; "generic" is plain StatefulSet handling.
const (
	EngineGeneric    = "generic"
	EngineCrateDB    = "cratedb"
	EngineEtcd       = "etcd"
	EngineReplicated = "replicated"
	// EngineFoundationDB is FoundationDB run by the FoundationDB operator: node groups are
	// process classes whose pods the operator's FoundationDBCluster recreates (no StatefulSet).
	EngineFoundationDB = "foundationdb"
)

// KnownEngines lists the accepted --engine values, in help order.
var KnownEngines = []string{EngineCrateDB, EngineEtcd, EngineFoundationDB, EngineReplicated, EngineGeneric}

// Node group roles.
const (
	RoleMaster = "master"
	RoleData   = "data"
)

// Cluster is a database cluster as discovered from live API state.
type Cluster struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Engine    string `json:"engine"`
	// Layout says how the cluster was recognised: "labels" (dbops.io/*), "statefulset" or
	// "selector" (discovery's generic paths), or the name of the engine's recognizer's layout
	// ("cratedb-operator", "etcd", "foundationdb-operator", ...). Only for people: engines
	// read Recognized.
	Layout string `json:"layout"`
	// Recognized is what the engine's recognizer attached (ops.Recognizer), a value of the
	// engine's own type (FoundationDB: which of its layouts); nil when none attached one.
	Recognized any `json:"-"`
	// Operator is non-empty when an operator owns the StatefulSets
	// (ownerReferences or app.kubernetes.io/managed-by); mutating commands
	// refuse unless overridden.
	Operator string       `json:"operator,omitempty"`
	Groups   []*NodeGroup `json:"groups"`
	// NodeZones are the zones discovery knows, by node name ("" for a node without one):
	// every node's when it read them (one node list, only when a pod is placed), so the pods
	// view places pods that move without reading nodes again. Empty when nodes were not read.
	NodeZones map[string]string `json:"-"`
	// PodsResourceVersion is the resourceVersion of discovery's newest pod list (empty when
	// unknown): the run's pod informer starts from a state not older than it instead of a
	// consistent read of its own (internal/ops/discovery/discovery.go says why).
	PodsResourceVersion string `json:"-"`
}

// NodeGroup is a set of pods of a cluster and the resource that recreates them (Owner).
type NodeGroup struct {
	Name string `json:"name"`
	// Owner creates and recreates the group's pods: a StatefulSet (*StatefulSetOwner) or an
	// operator's resource. MarshalJSON writes it as "statefulSet" and "controller".
	Owner   PodOwner `json:"-"`
	Role    string   `json:"role"`
	Order   int      `json:"order"`
	Desired int32    `json:"desired"`
	Current int32    `json:"current"`
	Ready   int32    `json:"ready"`
	// MasterEligible marks the group whose nodes can be elected master:
	// the master group, or (CrateDB without dedicated masters) the first
	// data group.
	MasterEligible bool  `json:"masterEligible,omitempty"`
	Pods           []Pod `json:"pods"`
}

// OwnerRef names the resource that recreates the group's pods (its StatefulSet, or the
// operator's resource), for the operation's audit events: never a StatefulSet with an empty name
// for a group an operator's resource owns.
func (g *NodeGroup) OwnerRef(namespace string) ObjectRef { return g.Owner.Ref(namespace) }

// OwnerRefs names each resource that recreates the cluster's pods once (an operator's resource
// owns several groups), in group order.
func (c *Cluster) OwnerRefs() []ObjectRef {
	var out []ObjectRef
	for _, g := range c.Groups {
		ref := g.OwnerRef(c.Namespace)
		if !slices.ContainsFunc(out, func(o ObjectRef) bool {
			return o.Kind == ref.Kind && o.APIVersion == ref.APIVersion && o.Name == ref.Name
		}) {
			out = append(out, ref)
		}
	}
	return out
}

// ControllerRef names a resource that creates and recreates pods, and holds it as read.
type ControllerRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	// Object is the resource as discovery read it, for the engine (spec and status).
	Object map[string]any `json:"-"`
}

// Pod is one member of a node group.
type Pod struct {
	Name string `json:"name"`
	// Member is the pod's identity in the database when discovery reads it from the pod (the
	// FoundationDB operator's process group ID label); empty otherwise.
	Member   string    `json:"member,omitempty"`
	Group    string    `json:"group"`
	Ordinal  int       `json:"ordinal"`
	UID      types.UID `json:"uid"`
	Phase    string    `json:"phase"`
	Ready    bool      `json:"ready"`
	Node     string    `json:"node,omitempty"`
	Zone     string    `json:"zone,omitempty"`
	PVCs     []string  `json:"pvcs,omitempty"`
	Restarts int32     `json:"restarts"`
	Created  time.Time `json:"created"`
	Deleting bool      `json:"deleting,omitempty"`
}

// Group returns the named node group, or nil.
func (c *Cluster) Group(name string) *NodeGroup {
	for _, g := range c.Groups {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// GroupNames lists node group names in procedure order.
func (c *Cluster) GroupNames() []string {
	names := make([]string, 0, len(c.Groups))
	for _, g := range c.Groups {
		names = append(names, g.Name)
	}
	return names
}

// Pod finds a pod by name across groups.
func (c *Cluster) Pod(name string) (*NodeGroup, *Pod) {
	for _, g := range c.Groups {
		for i := range g.Pods {
			if g.Pods[i].Name == name {
				return g, &g.Pods[i]
			}
		}
	}
	return nil, nil
}

// AllPods returns every pod in procedure order.
func (c *Cluster) AllPods() []Pod {
	var out []Pod
	for _, g := range c.Groups {
		out = append(out, g.Pods...)
	}
	return out
}

// SortGroups puts groups into procedure order: masters first, then by
// Order, then by name so the result is stable.
func (c *Cluster) SortGroups() {
	slices.SortStableFunc(c.Groups, func(a, b *NodeGroup) int {
		if (a.Role == RoleMaster) != (b.Role == RoleMaster) {
			if a.Role == RoleMaster {
				return -1
			}
			return 1
		}
		if a.Order != b.Order {
			return cmp.Compare(a.Order, b.Order)
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, g := range c.Groups {
		slices.SortStableFunc(g.Pods, func(a, b Pod) int { return cmp.Compare(a.Ordinal, b.Ordinal) })
	}
}
