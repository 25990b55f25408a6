package etcd

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// LayoutStatefulSet: one StatefulSet running etcd, named <name> or <name>-etcd (the Bitnami
// chart's default) or labelled as the Bitnami release; named in Cluster.Layout.
const LayoutStatefulSet = "etcd"

// Bitnami chart labels.
const (
	labelAppName     = "app.kubernetes.io/name"
	labelAppInstance = "app.kubernetes.io/instance"
)

// Recognizers are etcd's layouts: one StatefulSet running etcd.
func Recognizers() []ops.Recognizer { return []ops.Recognizer{recognizer{}} }

type recognizer struct{}

func (recognizer) Engine() string { return ops.EngineEtcd }
func (recognizer) Layout() string { return LayoutStatefulSet }

// Members: the etcd StatefulSet of cluster name; several are ambiguous.
func (recognizer) Members(namespace, name string, all []appsv1.StatefulSet) ([]appsv1.StatefulSet, error) {
	var out []appsv1.StatefulSet
	for i := range all {
		if etcdMember(&all[i], name) {
			out = append(out, all[i])
		}
	}
	if len(out) > 1 {
		names := make([]string, len(out))
		for i := range out {
			names[i] = fmt.Sprintf("%q", out[i].Name)
		}
		return nil, ops.Usagef("database cluster %q in namespace %q is ambiguous: StatefulSets %s all run etcd (use --selector to pick StatefulSets explicitly)",
			name, namespace, strings.Join(names, ", "))
	}
	return out, nil
}

func (recognizer) Names(cluster string) []string { return []string{cluster + "-etcd"} }

func (recognizer) Runs(s *appsv1.StatefulSet, _ string) bool { return runsEtcd(s) }

// etcdMember matches an etcd StatefulSet of cluster name: named <name> or
// <name>-etcd (Bitnami chart default), or labelled as the Bitnami release.
func etcdMember(s *appsv1.StatefulSet, name string) bool {
	named := s.Name == name || s.Name == name+"-etcd" ||
		(s.Labels[labelAppName] == "etcd" && s.Labels[labelAppInstance] == name)
	return named && runsEtcd(s)
}

// runsEtcd reports whether the pod template runs etcd, by container name or
// image repository (bitnami/etcd, registry.k8s.io/etcd, quay.io/coreos/etcd).
func runsEtcd(s *appsv1.StatefulSet) bool {
	for _, c := range s.Spec.Template.Spec.Containers {
		if c.Name == "etcd" || strings.Contains(imageRepo(c.Image), "etcd") {
			return true
		}
	}
	return false
}

// imageRepo returns the last path element of an image reference without
// tag or digest.
func imageRepo(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, "/"); i >= 0 {
		image = image[i+1:]
	}
	image, _, _ = strings.Cut(image, ":")
	return image
}
