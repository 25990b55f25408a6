package testbed

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// RealEtcd is an etcd cluster for the real nodes in the layout of
// /work/shared/docs/realnode.md §7: a headless Service <name>-headless that publishes
// not-ready addresses (members must resolve each other before they are Ready), a ConfigMap
// the members read the initial cluster and its state from (RealEtcdStateLayout), and a
// StatefulSet of ImageEtcd with a /readyz readiness probe, a hostPath volume and one pod per
// zone at most apart from the others (a hard zone spread, so --mode zone restarts one member
// at a time).
type RealEtcd struct {
	Service     *corev1.Service
	ConfigMap   *corev1.ConfigMap
	StatefulSet *appsv1.StatefulSet
}

// RealEtcdStateLayout says where the members read ETCD_INITIAL_CLUSTER and
// ETCD_INITIAL_CLUSTER_STATE from. The zero value is the default layout: envFrom of the
// ConfigMap <name>-cluster-state with the variables' names as keys.
type RealEtcdStateLayout struct {
	// ConfigMap names the ConfigMap (default <name>-cluster-state).
	ConfigMap string
	// Prefix is the envFrom prefix: the keys are the variables' names without it.
	Prefix string
	// ClusterKey and StateKey, when set, are read through configMapKeyRef into the variables
	// INITIAL_PEERS and INITIAL_STATE, passed as --initial-cluster=$(INITIAL_PEERS)
	// --initial-cluster-state=$(INITIAL_STATE) (no envFrom).
	ClusterKey, StateKey string
}

// Keys returns the ConfigMap's name and the keys of the initial cluster and its state.
func (l RealEtcdStateLayout) Keys(name string) (configMap, clusterKey, stateKey string) {
	configMap = l.ConfigMap
	if configMap == "" {
		configMap = name + "-cluster-state"
	}
	if l.ClusterKey != "" {
		return configMap, l.ClusterKey, l.StateKey
	}
	return configMap, strings.TrimPrefix("ETCD_INITIAL_CLUSTER", l.Prefix), strings.TrimPrefix("ETCD_INITIAL_CLUSTER_STATE", l.Prefix)
}

// RealEtcdPeerURL is the peer URL of pod in RealEtcdObjects' layout.
func RealEtcdPeerURL(namespace, name, pod string) string {
	return fmt.Sprintf("http://%s.%s-headless.%s.svc.cluster.local:2380", pod, name, namespace)
}

// RealEtcdInitialCluster is the initial-cluster string of pods <name>-0..n-1.
func RealEtcdInitialCluster(namespace, name string, n int) string {
	var initial []string
	for o := range n {
		pod := fmt.Sprintf("%s-%d", name, o)
		initial = append(initial, pod+"="+RealEtcdPeerURL(namespace, name, pod))
	}
	return strings.Join(initial, ",")
}

// RealEtcdObjects returns the objects of a new etcd cluster of replicas members in the
// default layout.
func RealEtcdObjects(namespace, name string, replicas int32) RealEtcd {
	return RealEtcdObjectsLayout(namespace, name, replicas, RealEtcdStateLayout{})
}

// RealEtcdObjectsLayout returns the objects of a new etcd cluster of replicas members that
// read the initial cluster as layout says.
func RealEtcdObjectsLayout(namespace, name string, replicas int32, layout RealEtcdStateLayout) RealEtcd {
	lbls := map[string]string{"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": name}
	svc := name + "-headless"
	cmName, clusterKey, stateKey := layout.Keys(name)
	self := fmt.Sprintf("$(MY_POD_NAME).%s.%s.svc.cluster.local", svc, namespace)
	env := []corev1.EnvVar{{Name: "MY_POD_NAME", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	var envFrom []corev1.EnvFromSource
	var stateArgs []string
	if layout.ClusterKey != "" {
		ref := func(key string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: cmName}, Key: key}}
		}
		env = append(env, corev1.EnvVar{Name: "INITIAL_PEERS", ValueFrom: ref(clusterKey)},
			corev1.EnvVar{Name: "INITIAL_STATE", ValueFrom: ref(stateKey)})
		stateArgs = []string{"--initial-cluster=$(INITIAL_PEERS)", "--initial-cluster-state=$(INITIAL_STATE)"}
	} else {
		envFrom = []corev1.EnvFromSource{{Prefix: layout.Prefix, ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: cmName}}}}
	}
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](10),
		Containers: []corev1.Container{{
			Name:            "etcd",
			Image:           ImageEtcd,
			ImagePullPolicy: corev1.PullNever,
			Command:         []string{"etcd"},
			Args: append([]string{
				"--name=$(MY_POD_NAME)",
				"--data-dir=/var/lib/etcd/data",
				"--listen-client-urls=http://0.0.0.0:2379",
				"--advertise-client-urls=http://" + self + ":2379",
				"--listen-peer-urls=http://0.0.0.0:2380",
				"--initial-advertise-peer-urls=http://" + self + ":2380",
				"--election-timeout=2000",
				"--heartbeat-interval=200",
			}, stateArgs...),
			Env:     env,
			EnvFrom: envFrom,
			Ports:   []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(2379)}},
				PeriodSeconds: 2,
				// kubeadm's etcd manifest gives its /readyz probe 15 s: on a loaded host a
				// member's /readyz can take over the default 1 s while another member catches
				// up, and the pod flapped to not Ready (a CI run's restart then refused).
				TimeoutSeconds: 15,
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
		}},
	}
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: ZoneLabel, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: lbls},
	}}
	OnRealNodes(&spec)
	return RealEtcd{
		Service: &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: svc, Namespace: namespace, Labels: lbls},
			Spec: corev1.ServiceSpec{
				ClusterIP:                corev1.ClusterIPNone,
				PublishNotReadyAddresses: true,
				Selector:                 lbls,
				Ports: []corev1.ServicePort{
					{Name: "client", Port: 2379, TargetPort: intstr.FromInt32(2379)},
					{Name: "peer", Port: 2380, TargetPort: intstr.FromInt32(2380)},
				},
			},
		},
		ConfigMap: &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: cmName, Namespace: namespace},
			Data: map[string]string{
				clusterKey: RealEtcdInitialCluster(namespace, name, int(replicas)),
				stateKey:   "new",
			},
		},
		StatefulSet: &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: lbls},
			Spec:       realNodeStatefulSetSpec(replicas, svc, lbls, spec, "1Gi"),
		},
	}
}

// RealReplicated is a replicated-app example cluster for the real nodes: a headless Service
// and a StatefulSet of ImageReplicated (state in /data on a hostPath volume), labelled for
// the replicated engine, with config as its dbops.io/replicated-config annotation.
type RealReplicated struct {
	Service     *corev1.Service
	StatefulSet *appsv1.StatefulSet
}

// RealReplicatedConfig is the engine configuration for ImageReplicated's commands, with the
// given number of primaries and timeout for the role commands; without secondaries the
// secondary command is left out (pods that are not primaries keep no role).
func RealReplicatedConfig(primaries int, roleTimeout string, secondaries bool) string {
	cmd := func(name, timeout string) string {
		return fmt.Sprintf("  %s: {argv: [/app/bin/%s], timeout: %s}\n", name, name, timeout)
	}
	conf := fmt.Sprintf("primaries: %d\ncommands:\n", primaries) +
		cmd("sequence", "20s") + cmd("status", "20s") + cmd("primary", roleTimeout) + cmd("stop", roleTimeout)
	if secondaries {
		conf += cmd("secondary", roleTimeout)
	}
	return conf
}

// RealReplicatedObjects returns the objects of a replicated-app cluster of replicas pods.
func RealReplicatedObjects(namespace, name string, replicas int32, config string) RealReplicated {
	lbls := map[string]string{"app": name}
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](5),
		Containers: []corev1.Container{{
			Name:            "app",
			Image:           ImageReplicated,
			ImagePullPolicy: corev1.PullNever,
			VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		}},
	}
	OnRealNodes(&spec)
	stsLabels := map[string]string{"app": name, "dbops.io/cluster": name, "dbops.io/engine": "replicated"}
	return RealReplicated{
		Service: &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: lbls},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: lbls,
				Ports: []corev1.ServicePort{{Name: "app", Port: 7000, TargetPort: intstr.FromInt32(7000)}}},
		},
		StatefulSet: &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: stsLabels,
				Annotations: map[string]string{"dbops.io/replicated-config": config}},
			Spec: realNodeStatefulSetSpec(replicas, name, lbls, spec, "100Mi"),
		},
	}
}

// realNodeStatefulSetSpec is the StatefulSet spec of the real-node fixtures: pods started in
// parallel, one data claim of size in the real nodes' storage class.
func realNodeStatefulSetSpec(replicas int32, service string, lbls map[string]string, spec corev1.PodSpec, size string) appsv1.StatefulSetSpec {
	return appsv1.StatefulSetSpec{
		Replicas:            ptr.To(replicas),
		ServiceName:         service,
		PodManagementPolicy: appsv1.ParallelPodManagement,
		Selector:            &metav1.LabelSelector{MatchLabels: lbls},
		Template:            corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls}, Spec: spec},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To(RealNodeStorageClass),
				Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			},
		}},
	}
}
