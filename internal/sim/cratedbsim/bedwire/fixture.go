package bedwire

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/cratedbsim"
	"github.com/kubectl-dbops/kubectl-dbops/internal/testbed"
)

// Labels are the CrateDB operator's labels for one node group (nodeName is
// "master" or the data group's name).
func Labels(cluster, nodeName string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      cluster,
		"app.kubernetes.io/component": "cratedb",
		"cloud.crate.io/node-name":    nodeName,
	}
}

// StatefulSet returns one node group of a CrateDB cluster laid out as the
// operator does (container "crate", expected data nodes in its args,
// updateStrategy OnDelete), for the sandbox and the end-to-end tests.
// order sets the dbops.io/order annotation ("" = none); an empty namespace
// is left for Create to fill in.
func StatefulSet(namespace, cluster, name, nodeName, order string, replicas, dataNodes int32) *appsv1.StatefulSet {
	lbls := Labels(cluster, nodeName)
	ann := map[string]string{}
	if order != "" {
		ann["dbops.io/order"] = order
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: lbls, Annotations: ann},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: "crate-discovery-" + cluster,
			Selector:    &metav1.LabelSelector{MatchLabels: lbls},
			// The operator's choice: a template change (expected nodes)
			// restarts nothing by itself.
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "crate",
						Image: "crate:5.10",
						Args: []string{
							"-Cnode.name=$(POD_NAME)",
							"-Cgateway.expected_data_nodes=" + strconv.Itoa(int(dataNodes)),
						},
						Ports: []corev1.ContainerPort{
							{Name: "http", ContainerPort: cratedbsim.PodHTTPPort},
							{Name: "postgres", ContainerPort: cratedbsim.PodPGPort},
							{Name: "transport", ContainerPort: 4300},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					}},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew:           1,
						TopologyKey:       testbed.ZoneLabel,
						WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector:     &metav1.LabelSelector{MatchLabels: lbls},
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: lbls},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					},
				},
			}},
		},
	}
}
