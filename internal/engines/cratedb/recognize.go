package cratedb

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// LayoutOperator: the CrateDB operator's StatefulSets (crate-master-<name>,
// crate-data-<group>-<name>), named in Cluster.Layout.
const LayoutOperator = "cratedb-operator"

// Labels the CrateDB operator sets on its StatefulSets.
const (
	labelAppName      = "app.kubernetes.io/name"
	labelAppComponent = "app.kubernetes.io/component"
	labelCrateNode    = "cloud.crate.io/node-name"
	crateMasterPrefix = "crate-master-"
	crateDataPrefix   = "crate-data-"
	crateComponent    = "cratedb"
	crateMasterNode   = "master"
)

// Recognizers are CrateDB's layouts: the CrateDB operator's StatefulSets, which also names the
// groups of any cluster of CrateDB-shaped StatefulSets.
func Recognizers() []ops.Recognizer { return []ops.Recognizer{recognizer{}} }

type recognizer struct{}

func (recognizer) Engine() string { return ops.EngineCrateDB }
func (recognizer) Layout() string { return LayoutOperator }

// Members are the operator's StatefulSets of cluster name, by naming pattern or by its labels.
func (recognizer) Members(_, name string, all []appsv1.StatefulSet) ([]appsv1.StatefulSet, error) {
	var out []appsv1.StatefulSet
	for i := range all {
		if crateMember(&all[i], name) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

func (recognizer) Names(cluster string) []string { return []string{"crate-*-" + cluster} }

// Runs: CrateDB-shaped (crateShape).
func (recognizer) Runs(s *appsv1.StatefulSet, cluster string) bool {
	_, _, ok := crateShape(s, cluster)
	return ok
}

func (recognizer) GroupOf(s *appsv1.StatefulSet, cluster string) (string, bool, bool) {
	return crateShape(s, cluster)
}

func (recognizer) DataGroupOrder(ctx context.Context, dyn dynamic.Interface, namespace, name string) ([]string, error) {
	return crateDataGroups(ctx, dyn, namespace, name)
}

// crateMember matches the CrateDB operator's StatefulSets of cluster name,
// by naming pattern or by its labels.
func crateMember(s *appsv1.StatefulSet, name string) bool {
	if s.Labels[labelAppName] == name && s.Labels[labelAppComponent] == crateComponent {
		return true
	}
	if app, set := s.Labels[labelAppName]; set && app != name {
		return false
	}
	if s.Name == crateMasterPrefix+name {
		return true
	}
	rest, ok := strings.CutPrefix(s.Name, crateDataPrefix)
	if !ok {
		return false
	}
	g, ok := strings.CutSuffix(rest, "-"+name)
	return ok && g != ""
}

// crateShape reports whether a StatefulSet looks like the CrateDB
// operator's, and its node group. The component and node-name labels are
// specific enough on their own; the name pattern is only trusted when the
// app name label does not point at another cluster.
func crateShape(s *appsv1.StatefulSet, cluster string) (group string, master, ok bool) {
	if s.Labels[labelAppComponent] == crateComponent {
		if node := s.Labels[labelCrateNode]; node != "" {
			return node, node == crateMasterNode, true
		}
	}
	if cluster == "" {
		return "", false, false
	}
	if app, set := s.Labels[labelAppName]; set && app != cluster {
		return "", false, false
	}
	if s.Name == crateMasterPrefix+cluster {
		return crateMasterNode, true, true
	}
	if rest, ok := strings.CutPrefix(s.Name, crateDataPrefix); ok {
		if g, ok := strings.CutSuffix(rest, "-"+cluster); ok && g != "" {
			return g, false, true
		}
	}
	if s.Labels[labelAppName] == cluster && s.Labels[labelAppComponent] == crateComponent {
		return s.Name, false, true
	}
	return "", false, false
}

// crateDBResource is the CrateDB operator's custom resource.
func crateDBResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "cloud.crate.io", Version: "v1", Resource: "cratedbs"}
}

// crateDataGroups reads spec.nodes.data[].name from the CrateDB resource
// named name, in definition order. The resource is optional: when it does
// not exist, its CRD is not installed, or RBAC forbids reading it, the
// result is nil and discovery falls back to creation order.
func crateDataGroups(ctx context.Context, dyn dynamic.Interface, ns, name string) ([]string, error) {
	obj, err := dyn.Resource(crateDBResource()).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err), meta.IsNoMatchError(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading CrateDB resource %s/%s: %w", ns, name, err)
	}
	data, found, err := unstructured.NestedSlice(obj.Object, "spec", "nodes", "data")
	if err != nil || !found {
		// An unexpected shape only loses the ordering hint.
		return nil, nil
	}
	var names []string
	for _, item := range data {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if n, ok := m["name"].(string); ok && n != "" {
			names = append(names, n)
		}
	}
	return names, nil
}
