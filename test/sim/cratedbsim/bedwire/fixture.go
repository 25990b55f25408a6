package bedwire

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/podgw"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
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

// Layout is how a fixture names its CrateDB nodes.
type Layout int

const (
	// LayoutPodName names each node after its pod (-Cnode.name=$(POD_NAME)), as the official
	// Kubernetes guide does: crate-data-hot-<cluster>-0, ...
	LayoutPodName Layout = iota
	// LayoutOperator names nodes as the CrateDB operator does: master-<i>, data-<group>-<i>
	// (-Cnode.name=data-hot-$(hostname | awk -F- '{print $NF}'), crate-operator
	// crate/operator/create.py).
	LayoutOperator
)

// Group is one node group of a fixture: Name "master" for dedicated masters, else a data
// group ("hot", "cold"). Groups are listed masters first, then data groups in order.
type Group struct {
	Name     string
	Replicas int32
}

// DefaultVersion is the CrateDB version of fixtures that do not name one.
const DefaultVersion = cratedbsim.DefaultVersion

// Fixture describes a CrateDB cluster laid out as the CrateDB operator lays it out: one
// StatefulSet per group (crate-master-<cluster>, crate-data-<group>-<cluster>), container
// "crate", updateStrategy OnDelete, the operator's gateway, role and host-based
// authentication settings.
type Fixture struct {
	Namespace string // "" leaves it for Create to fill in
	Cluster   string
	Layout    Layout
	// Version is the image tag (crate:<Version>), which the simulator reports; DefaultVersion
	// when empty. From 4.7 the gateway settings count data nodes (expected_data_nodes,
	// recover_after_data_nodes), before all nodes (expected_nodes, recover_after_nodes).
	Version string
	// TLS enables ssl.http and ssl.psql and, as the operator does, allows password logins
	// only over TLS (auth.host_based.config.99.ssl=on). The simulator then needs a
	// certificate (ServerTLS).
	TLS bool
	// NoHBA leaves host-based authentication off: CrateDB then trusts every user.
	NoHBA bool
	// RecoverAfterTime sets gateway.recover_after_time ("" = CrateDB's default: 5m when an
	// expected count is set).
	RecoverAfterTime string
	// Awareness, when set, starts every node with
	// -Ccluster.routing.allocation.awareness.attributes=<Awareness> (a static setting in CrateDB).
	Awareness string
	Groups    []Group
	// RealNodes, when set, puts the pods on the test bed's real nodes (RealNodeFixture).
	RealNodes *RealNodes
}

// RealNodes makes a fixture run in real containers on the test bed's real nodes: the CrateDB
// simulator image (testbed.ImageCrateDB of the fixture's version) whose pod proxy forwards the
// pod's ports to PodGateway (cratedbsim.Sim.PodGatewayAddr), the CrateDB operator's readiness
// probe (GET /ready on the crate-jmx-exporter port) and volumes of the real nodes' storage
// class.
type RealNodes struct {
	PodGateway string
}

// ExporterPort is the crate-jmx-exporter agent's port in the CrateDB operator's pods
// (crate-operator's Port.PROMETHEUS), where its readiness probe asks /ready.
const ExporterPort = 7071

// Image is the container image of the fixture's pods: crate:<version> (the simulator follows
// the pods' spec only), or on real nodes the simulator image, an error when it has no tag for
// the version.
func (f Fixture) Image() (string, error) {
	if f.RealNodes == nil {
		return "crate:" + f.version(), nil
	}
	img := testbed.ImageCrateDB(f.version())
	if img == "" {
		return "", fmt.Errorf("the CrateDB simulator image has no version %s (it has %v)", f.version(), testbed.CrateDBImageVersions)
	}
	return img, nil
}

// DiscoveryService is the headless Service crate-discovery-<cluster> the StatefulSets name
// (the operator's discovery through DNS SRV records of its transport port; pods are published
// before they are Ready, since nodes must find each other to become ready).
func (f Fixture) DiscoveryService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "crate-discovery-" + f.Cluster, Namespace: f.Namespace,
			Labels: map[string]string{"app.kubernetes.io/name": f.Cluster, "app.kubernetes.io/component": "cratedb"}},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{"app.kubernetes.io/name": f.Cluster, "app.kubernetes.io/component": "cratedb"},
			Ports:                    []corev1.ServicePort{{Name: "cluster", Port: 4300, TargetPort: intstr.FromInt32(4300)}},
		},
	}
}

func (f Fixture) version() string {
	if f.Version == "" {
		return DefaultVersion
	}
	return f.Version
}

// Counts returns the number of data nodes and of all nodes.
func (f Fixture) Counts() (data, total int32) {
	for _, g := range f.Groups {
		total += g.Replicas
		if g.Name != "master" {
			data += g.Replicas
		}
	}
	return data, total
}

// hasMasters reports whether the fixture has dedicated masters; without them the first data
// group is master-eligible.
func (f Fixture) hasMasters() bool {
	for _, g := range f.Groups {
		if g.Name == "master" {
			return true
		}
	}
	return false
}

// StatefulSetName is the operator's name of a group's StatefulSet.
func (f Fixture) StatefulSetName(group string) string {
	if group == "master" {
		return "crate-master-" + f.Cluster
	}
	return "crate-data-" + group + "-" + f.Cluster
}

// NodeName is the CrateDB node name the pod of group with ordinal i gets: what the
// simulator reports and what a test can compare the engine's mapping with.
func (f Fixture) NodeName(group string, i int) string {
	if f.Layout == LayoutPodName {
		return f.StatefulSetName(group) + "-" + strconv.Itoa(i)
	}
	if group == "master" {
		return "master-" + strconv.Itoa(i)
	}
	return "data-" + group + "-" + strconv.Itoa(i)
}

// Quorum is N/2+1, the recover-after value the operator sets.
func Quorum(n int32) int32 { return n/2 + 1 }

// StatefulSets returns the fixture's StatefulSets, masters first.
func (f Fixture) StatefulSets() []*appsv1.StatefulSet {
	var out []*appsv1.StatefulSet
	first := true
	for i, g := range f.Groups {
		master := g.Name == "master" || (!f.hasMasters() && first && g.Name != "master")
		if g.Name != "master" {
			first = false
		}
		order := ""
		if g.Name != "master" {
			order = strconv.Itoa(i)
		}
		out = append(out, f.statefulSet(g, master, order))
	}
	return out
}

// Args returns the CrateDB command-line settings of a group's pods, with the gateway counts
// for data (data nodes) and total (all nodes) given explicitly so that tests can build the
// arguments a scale would write.
func (f Fixture) Args(group string, master bool, data, total int32) []string {
	var args []string
	switch f.Layout {
	case LayoutPodName:
		args = append(args, "-Cnode.name=$(POD_NAME)")
	default:
		prefix := "master-"
		if group != "master" {
			prefix = "data-" + group + "-"
		}
		args = append(args, "-Cnode.name="+prefix+"$(hostname | awk -F- '{print $NF}')")
	}
	// The operator's discovery: SRV records of the discovery Service's transport port
	// (crate-operator crate/operator/create.py; DiscoveryService).
	srv := "_cluster._tcp.crate-discovery-" + f.Cluster
	if f.Namespace != "" {
		srv += "." + f.Namespace + ".svc.cluster.local"
	}
	args = append(args,
		"-Ccluster.name="+f.Cluster,
		"-Cdiscovery.seed_providers=srv",
		"-Cdiscovery.srv.query="+srv,
		"-Cnode.master="+strconv.FormatBool(master),
		"-Cnode.data="+strconv.FormatBool(group != "master"),
		// crate-operator gives every node its group as an attribute (create.py
		// "-Cnode.attr.node_name"); allocation filters and awareness can use it.
		"-Cnode.attr.node_name="+group,
	)
	v, err := cratedbsim.ParseVersion(f.version())
	if err == nil && !v.AtLeast(4, 7) {
		args = append(args,
			"-Cgateway.recover_after_nodes="+strconv.Itoa(int(Quorum(total))),
			"-Cgateway.expected_nodes="+strconv.Itoa(int(total)))
	} else {
		args = append(args,
			"-Cgateway.recover_after_data_nodes="+strconv.Itoa(int(Quorum(data))),
			"-Cgateway.expected_data_nodes="+strconv.Itoa(int(data)))
	}
	if f.RecoverAfterTime != "" {
		args = append(args, "-Cgateway.recover_after_time="+f.RecoverAfterTime)
	}
	if f.Awareness != "" {
		args = append(args, "-Ccluster.routing.allocation.awareness.attributes="+f.Awareness)
	}
	if !f.NoHBA {
		args = append(args,
			"-Cauth.host_based.enabled=true",
			"-Cauth.host_based.config.0.user=crate",
			"-Cauth.host_based.config.0.address=_local_",
			"-Cauth.host_based.config.0.method=trust",
			"-Cauth.host_based.config.99.method=password")
	}
	if f.TLS {
		args = append(args,
			"-Cssl.http.enabled=true",
			"-Cssl.psql.enabled=true",
			"-Cssl.keystore_filepath=/var/lib/crate/ssl/keystore.jks",
			"-Cssl.keystore_password=${KEYSTORE_PASSWORD}",
			"-Cssl.keystore_key_password=${KEYSTORE_KEY_PASSWORD}")
		if !f.NoHBA {
			args = append(args, "-Cauth.host_based.config.99.ssl=on")
		}
	}
	return args
}

func (f Fixture) statefulSet(g Group, master bool, order string) *appsv1.StatefulSet {
	lbls := Labels(f.Cluster, g.Name)
	ann := map[string]string{}
	if order != "" {
		ann["dbops.io/order"] = order
	}
	data, total := f.Counts()
	c := corev1.Container{
		Name:  "crate",
		Image: "crate:" + f.version(),
		Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
		Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: cratedbsim.PodHTTPPort},
			{Name: "postgres", ContainerPort: cratedbsim.PodPGPort},
			{Name: "transport", ContainerPort: 4300},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
	}
	args := f.Args(g.Name, master, data, total)
	if f.Layout == LayoutOperator {
		// The operator puts everything into the command, through the image's entrypoint.
		c.Command = append([]string{"/docker-entrypoint.sh", "crate"}, args...)
	} else {
		c.Args = append([]string{"crate"}, args...)
	}
	var storageClass *string
	if f.RealNodes != nil {
		// The simulator image (Image reports a missing tag; the pods then cannot start).
		c.Image, _ = f.Image()
		c.ImagePullPolicy = corev1.PullNever
		c.Env = append(c.Env,
			corev1.EnvVar{Name: podgw.EnvGateway, Value: f.RealNodes.PodGateway},
			// As the operator loads the exporter agent (crate-operator create.py).
			corev1.EnvVar{Name: "CRATE_JAVA_OPTS", Value: "-javaagent:/var/lib/crate/crate-jmx-exporter-1.2.0.jar=" + strconv.Itoa(ExporterPort)})
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "prometheus", ContainerPort: ExporterPort})
		// The operator's probe; a shorter period than its 10s keeps the tests quick.
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(ExporterPort)}},
			PeriodSeconds: 1, FailureThreshold: 3,
		}
		storageClass = ptr.To(testbed.RealNodeStorageClass)
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: f.StatefulSetName(g.Name), Namespace: f.Namespace, Labels: lbls, Annotations: ann},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(g.Replicas),
			ServiceName: "crate-discovery-" + f.Cluster,
			Selector:    &metav1.LabelSelector{MatchLabels: lbls},
			// The operator's choice: a template change (expected nodes)
			// restarts nothing by itself.
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{c},
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
					StorageClassName: storageClass,
				},
			}},
		},
	}
	if f.RealNodes != nil {
		sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
		sts.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](10)
		testbed.OnRealNodes(&sts.Spec.Template.Spec)
	}
	return sts
}

// StatefulSet returns one node group of a CrateDB cluster in the pod-name layout
// (-Cnode.name=$(POD_NAME)) with CrateDB DefaultVersion, for callers that build their groups
// one by one: nodeName "master" is a dedicated master group, any other a data group;
// dataNodes is the cluster's data node count. order sets the dbops.io/order annotation.
// Fixture.StatefulSets builds a whole cluster in either layout.
func StatefulSet(namespace, cluster, name, nodeName, order string, replicas, dataNodes int32) *appsv1.StatefulSet {
	f := Fixture{Namespace: namespace, Cluster: cluster, Layout: LayoutPodName}
	g := Group{Name: nodeName, Replicas: replicas}
	sts := f.statefulSet(g, nodeName == "master", order)
	sts.Name = name
	// Only the data count is known here; the pre-4.7 settings are not used by this version.
	args := f.Args(nodeName, nodeName == "master", dataNodes, dataNodes)
	sts.Spec.Template.Spec.Containers[0].Args = append([]string{"crate"}, args...)
	return sts
}
