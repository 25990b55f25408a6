package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// Labels kubectl-dbops uses to recognise the database clusters it operates.
const (
	labelCluster   = "dbops.io/cluster"
	labelNodeGroup = "dbops.io/node-group"
	labelRole      = "dbops.io/role"
	labelEngine    = "dbops.io/engine"
)

// demoFixture is one demo database cluster of the sandbox. Engines add theirs to
// demoFixtures; each gets a StatefulSet per node group and per-pod exec mappings so that
// `kubectl exec` into a pod runs local programs knowing which pod they stand for.
type demoFixture struct {
	Engine    string
	Namespace string
	Name      string
	// NodeGroups become one StatefulSet each.
	NodeGroups []nodeGroup
	// Hints are example commands printed by `sandbox up`.
	Hints []string
}

type nodeGroup struct {
	Name          string
	Role          string
	Replicas      int32
	Image         string
	ContainerName string
	Port          int32
	Storage       string
}

// demoFixtures lists the demo clusters created by `sandbox up`.
func demoFixtures() []demoFixture {
	return []demoFixture{
		{
			Engine:    "generic",
			Namespace: "demo",
			Name:      "web",
			NodeGroups: []nodeGroup{{
				Name: "web", Role: "data", Replicas: 3,
				Image: "registry.example/generic-db:1", ContainerName: "db", Port: 8080, Storage: "1Gi",
			}},
			Hints: []string{
				"kubectl get statefulsets,pods,pvc -n demo -L " + labelCluster + "," + labelRole,
				"kubectl dbops status web -n demo",
				"kubectl dbops restart web -n demo --rolling",
			},
		},
	}
}

func (f demoFixture) labels(g nodeGroup) map[string]string {
	return map[string]string{
		labelCluster:   f.Name,
		labelNodeGroup: g.Name,
		labelRole:      g.Role,
		labelEngine:    f.Engine,
	}
}

// install creates the fixture's objects, waits until its pods are Ready and maps exec into
// each pod to a working folder under stateDir/pods.
func (f demoFixture) install(ctx context.Context, tb *testbed.Testbed, stateDir string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.Namespace}}
	if _, err := tb.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace: %w", err)
	}
	for _, g := range f.NodeGroups {
		lbls := f.labels(g)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: f.Namespace, Labels: lbls},
			Spec: corev1.ServiceSpec{
				ClusterIP: corev1.ClusterIPNone,
				Selector:  lbls,
				Ports:     []corev1.ServicePort{{Name: "db", Port: g.Port}},
			},
		}
		if _, err := tb.Client.CoreV1().Services(f.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create service %s: %w", g.Name, err)
		}
		if _, err := tb.Client.AppsV1().StatefulSets(f.Namespace).Create(ctx, f.statefulSet(g), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create statefulset %s: %w", g.Name, err)
		}
	}
	for _, g := range f.NodeGroups {
		sel := labels.SelectorFromSet(f.labels(g)).String()
		if err := tb.WaitPodsReady(ctx, f.Namespace, sel, int(g.Replicas)); err != nil {
			return err
		}
		for i := range g.Replicas {
			pod := fmt.Sprintf("%s-%d", g.Name, i)
			work := filepath.Join(stateDir, "pods", f.Namespace, pod)
			if err := os.MkdirAll(work, 0o700); err != nil {
				return fmt.Errorf("create pod work dir: %w", err)
			}
			if err := tb.SetExec(ctx, f.Namespace, pod, testbed.ExecTarget{
				WorkDir: work,
				Env: map[string]string{
					"DBOPS_POD":        pod,
					"DBOPS_NAMESPACE":  f.Namespace,
					"DBOPS_CLUSTER":    f.Name,
					"DBOPS_NODE_GROUP": g.Name,
					"DBOPS_ENGINE":     f.Engine,
				},
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f demoFixture) statefulSet(g nodeGroup) *appsv1.StatefulSet {
	lbls := f.labels(g)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: f.Namespace, Labels: lbls},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(g.Replicas),
			ServiceName: g.Name,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{labelCluster: f.Name, labelNodeGroup: g.Name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:         g.ContainerName,
						Image:        g.Image,
						Ports:        []corev1.ContainerPort{{Name: "db", ContainerPort: g.Port}},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					}},
					// Spread replicas over zones as a production database would.
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
						Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(g.Storage)},
					},
				},
			}},
		},
	}
}
