package discovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// shape renders groups as "name/role/order/sts" in procedure order.
func shape(c *ops.Cluster) string {
	parts := make([]string, 0, len(c.Groups))
	for _, g := range c.Groups {
		parts = append(parts, fmt.Sprintf("%s/%s/%d/%s", g.Name, g.Role, g.Order, ops.StatefulSetName(g)))
	}
	return strings.Join(parts, " ")
}

func podNames(g *ops.NodeGroup) []string {
	out := make([]string, 0, len(g.Pods))
	for _, p := range g.Pods {
		out = append(out, p.Name)
	}
	return out
}

func forbidden(resource string) k8stesting.ReactionFunc {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("RBAC: access denied"))
	}
}

// crate builds the CrateDB operator's StatefulSets for cluster "foo".
func crateMaster(mods ...stsMod) *appsv1.StatefulSet {
	return mkSTS("crate-master-foo", 3, append([]stsMod{withLabels(
		labelAppName, "foo", labelAppComponent, "cratedb", labelCrateNode, "master")}, mods...)...)
}

func crateData(group string, mods ...stsMod) *appsv1.StatefulSet {
	return mkSTS("crate-data-"+group+"-foo", 2, append([]stsMod{withLabels(
		labelAppName, "foo", labelAppComponent, "cratedb", labelCrateNode, group)}, mods...)...)
}

func TestDiscover(t *testing.T) {
	master, hot, cold := crateMaster(), crateData("hot", createdAt(1)), crateData("cold", createdAt(2))

	// Label-less CrateDB StatefulSets, recognised by name only.
	bareHot := mkSTS("crate-data-hot-foo", 1)
	bareCold := mkSTS("crate-data-cold-foo", 1, createdAt(5))

	dbops := func(name string, mods ...stsMod) *appsv1.StatefulSet {
		return mkSTS(name, 1, append([]stsMod{withLabels(LabelCluster, "foo")}, mods...)...)
	}

	etcdSts := mkSTS("foo-etcd", 3,
		withLabels(labelAppName, "etcd", labelAppInstance, "foo", labelManagedBy, "Helm"),
		withImage("etcd", "docker.io/bitnami/etcd:3.5.17-debian-12-r0"))

	plain := mkSTS("foo", 2)
	foreignOwner := mkSTS("other", 1)

	tests := []struct {
		name      string
		objs      []runtime.Object
		dyn       []runtime.Object // CrateDB resources; the dynamic client is set when useDyn
		useDyn    bool
		opts      Options
		react     func(*fake.Clientset, *dynamicfake.FakeDynamicClient)
		wantErr   string // substring
		wantUsage bool
		check     func(*testing.T, *ops.Cluster)
	}{
		{
			name:   "cratedb operator: CR order puts cold before hot",
			objs:   []runtime.Object{master, hot, cold, mkPod(master, 0), mkPod(hot, 0), mkPod(cold, 1), mkPod(cold, 0)},
			dyn:    []runtime.Object{crateCR("foo", "cold", "hot")},
			useDyn: true,
			opts:   Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if c.Layout != LayoutCrateDBOperator || c.Engine != ops.EngineCrateDB {
					t.Errorf("layout/engine = %s/%s", c.Layout, c.Engine)
				}
				if got, want := shape(c), "master/master/0/crate-master-foo cold/data/0/crate-data-cold-foo hot/data/1/crate-data-hot-foo"; got != want {
					t.Errorf("groups:\n got %s\nwant %s", got, want)
				}
				if got := podNames(c.Group("cold")); !slices.Equal(got, []string{"crate-data-cold-foo-0", "crate-data-cold-foo-1"}) {
					t.Errorf("cold pods = %v", got)
				}
				if g := MasterEligible(c); g == nil || g.Name != "master" {
					t.Errorf("MasterEligible = %v, want master", g)
				}
				if c.Operator != "" {
					t.Errorf("Operator = %q, want none", c.Operator)
				}
			},
		},
		{
			name: "foundationdb sample StatefulSet: by image, instance ID = pod name",
			objs: func() []runtime.Object {
				s := mkSTS("foo", 2, withImage("foundationdb", "foundationdb/foundationdb-kubernetes:6.3.15"))
				return []runtime.Object{s, mkPod(s, 0), mkPod(s, 1)}
			}(),
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if c.Layout != LayoutFoundationDBStatefulSet || c.Engine != ops.EngineFoundationDB {
					t.Errorf("layout/engine = %s/%s", c.Layout, c.Engine)
				}
				if ps := c.AllPods(); len(ps) != 2 || ps[0].Member != "foo-0" || ps[1].Member != "foo-1" {
					t.Errorf("members = %+v", ps)
				}
			},
		},
		{
			name: "foundationdb by label, --engine foundationdb without a FoundationDBCluster",
			objs: func() []runtime.Object {
				s := mkSTS("foo", 1, withLabels(LabelEngine, ops.EngineFoundationDB))
				return []runtime.Object{s, mkPod(s, 0)}
			}(),
			useDyn: true,
			opts:   Options{Name: "foo", Engine: ops.EngineFoundationDB},
			check: func(t *testing.T, c *ops.Cluster) {
				if c.Layout != LayoutFoundationDBStatefulSet || c.Engine != ops.EngineFoundationDB || c.AllPods()[0].Member != "foo-0" {
					t.Errorf("layout/engine/member = %s/%s/%+v", c.Layout, c.Engine, c.AllPods())
				}
			},
		},
		{
			name:   "cratedb operator: without CR, creation order",
			objs:   []runtime.Object{master, cold, hot},
			useDyn: true,
			opts:   Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if got, want := shape(c), "master/master/0/crate-master-foo hot/data/0/crate-data-hot-foo cold/data/1/crate-data-cold-foo"; got != want {
					t.Errorf("groups:\n got %s\nwant %s", got, want)
				}
			},
		},
		{
			name: "cratedb operator: no dynamic client, same-time groups by name",
			objs: []runtime.Object{crateData("b"), crateData("a"), master},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if got, want := shape(c), "master/master/0/crate-master-foo a/data/0/crate-data-a-foo b/data/1/crate-data-b-foo"; got != want {
					t.Errorf("groups:\n got %s\nwant %s", got, want)
				}
			},
		},
		{
			name:   "cratedb operator: CR unreadable (Forbidden) falls back to creation order",
			objs:   []runtime.Object{hot, cold},
			dyn:    []runtime.Object{crateCR("foo", "cold", "hot")},
			useDyn: true,
			opts:   Options{Name: "foo"},
			react: func(_ *fake.Clientset, d *dynamicfake.FakeDynamicClient) {
				d.PrependReactor("get", "cratedbs", forbidden("cratedbs"))
			},
			check: func(t *testing.T, c *ops.Cluster) {
				if got, want := shape(c), "hot/data/0/crate-data-hot-foo cold/data/1/crate-data-cold-foo"; got != want {
					t.Errorf("groups:\n got %s\nwant %s", got, want)
				}
			},
		},
		{
			name: "cratedb operator: no master StatefulSet makes the first data group master-eligible",
			objs: []runtime.Object{bareCold, bareHot},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if got, want := shape(c), "hot/data/0/crate-data-hot-foo cold/data/1/crate-data-cold-foo"; got != want {
					t.Errorf("groups:\n got %s\nwant %s", got, want)
				}
				if g := MasterEligible(c); g == nil || g.Name != "hot" {
					t.Errorf("MasterEligible = %v, want hot", g)
				}
			},
		},
		{
			name:   "cratedb operator: order annotation beats the CR",
			objs:   []runtime.Object{master, crateData("hot", withAnnotation(AnnotationOrder, "-1")), cold},
			dyn:    []runtime.Object{crateCR("foo", "cold", "hot")},
			useDyn: true,
			opts:   Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if got, want := shape(c), "master/master/0/crate-master-foo hot/data/-1/crate-data-hot-foo cold/data/0/crate-data-cold-foo"; got != want {
					t.Errorf("groups:\n got %s\nwant %s", got, want)
				}
			},
		},
		{
			name: "cratedb operator: matched by labels when names differ",
			objs: []runtime.Object{
				mkSTS("db-masters", 3, withLabels(labelAppName, "foo", labelAppComponent, "cratedb", labelCrateNode, "master")),
				mkSTS("db-hot", 3, withLabels(labelAppName, "foo", labelAppComponent, "cratedb", labelCrateNode, "hot")),
				mkSTS("crate-data-hot-bar", 3, withLabels(labelAppName, "bar", labelAppComponent, "cratedb", labelCrateNode, "hot")),
			},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if got, want := shape(c), "master/master/0/db-masters hot/data/0/db-hot"; got != want {
					t.Errorf("groups:\n got %s\nwant %s", got, want)
				}
			},
		},
		{
			name: "cratedb operator: owned by the CrateDB resource",
			objs: []runtime.Object{crateMaster(ownedBy("cloud.crate.io/v1", "CrateDB", "foo")), crateData("hot", ownedBy("cloud.crate.io/v1", "CrateDB", "foo"))},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if want := "CrateDB/foo (cloud.crate.io/v1)"; c.Operator != want {
					t.Errorf("Operator = %q, want %q", c.Operator, want)
				}
			},
		},
		{
			name: "dbops labels: roles, order annotation, engine",
			objs: []runtime.Object{
				dbops("foo-b", withLabels(LabelNodeGroup, "second", LabelEngine, "replicated"), withAnnotation(AnnotationOrder, "2")),
				dbops("foo-a", withLabels(LabelNodeGroup, "first", LabelEngine, "replicated"), withAnnotation(AnnotationOrder, " 1 ")),
				dbops("foo-m", withLabels(LabelRole, "master")),
				mkSTS("crate-master-foo", 3), // a lower-priority layout is not mixed in
			},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if c.Layout != LayoutLabels || c.Engine != ops.EngineReplicated {
					t.Errorf("layout/engine = %s/%s", c.Layout, c.Engine)
				}
				if got, want := shape(c), "foo-m/master/0/foo-m first/data/1/foo-a second/data/2/foo-b"; got != want {
					t.Errorf("groups:\n got %s\nwant %s", got, want)
				}
				if g := MasterEligible(c); g == nil || g.Name != "foo-m" {
					t.Errorf("MasterEligible = %v, want foo-m", g)
				}
			},
		},
		{
			name: "dbops labels: no engine label, generic",
			objs: []runtime.Object{dbops("foo-a")},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if c.Engine != ops.EngineGeneric || MasterEligible(c) != nil {
					t.Errorf("engine = %s, MasterEligible = %v", c.Engine, MasterEligible(c))
				}
			},
		},
		{
			name:      "dbops labels: bad order value",
			objs:      []runtime.Object{dbops("foo-a", withAnnotation(AnnotationOrder, "first"))},
			opts:      Options{Name: "foo"},
			wantUsage: true,
			wantErr:   `StatefulSet "foo-a": annotation dbops.io/order="first" is not an integer (allowed: any integer`,
		},
		{
			name:      "dbops labels: bad role value",
			objs:      []runtime.Object{dbops("foo-a", withLabels(LabelRole, "leader"))},
			opts:      Options{Name: "foo"},
			wantUsage: true,
			wantErr:   `StatefulSet "foo-a": label dbops.io/role="leader" is not valid (allowed: master, data)`,
		},
		{
			name:      "dbops labels: unknown engine label",
			objs:      []runtime.Object{dbops("foo-a", withLabels(LabelEngine, "mysql"))},
			opts:      Options{Name: "foo"},
			wantUsage: true,
			wantErr:   `label dbops.io/engine="mysql" is not a known engine (allowed: cratedb, etcd, foundationdb, replicated, generic)`,
		},
		{
			name: "dbops labels: engines disagree",
			objs: []runtime.Object{
				dbops("foo-a", withLabels(LabelEngine, "cratedb")),
				dbops("foo-b", withLabels(LabelEngine, "etcd")),
			},
			opts:      Options{Name: "foo"},
			wantUsage: true,
			wantErr:   `StatefulSets of cluster "foo" disagree on dbops.io/engine: "foo-a" says cratedb, "foo-b" says etcd`,
		},
		{
			name: "dbops labels: --engine overrides disagreeing labels",
			objs: []runtime.Object{
				dbops("foo-a", withLabels(LabelEngine, "cratedb")),
				dbops("foo-b", withLabels(LabelEngine, "etcd")),
			},
			opts: Options{Name: "foo", Engine: ops.EngineGeneric},
			check: func(t *testing.T, c *ops.Cluster) {
				if c.Engine != ops.EngineGeneric {
					t.Errorf("engine = %s", c.Engine)
				}
			},
		},
		{
			name: "dbops labels: duplicate node group",
			objs: []runtime.Object{
				dbops("foo-a", withLabels(LabelNodeGroup, "g")),
				dbops("foo-b", withLabels(LabelNodeGroup, "g")),
			},
			opts:      Options{Name: "foo"},
			wantUsage: true,
			wantErr:   `both form node group "g"`,
		},
		{
			name:      "unknown --engine",
			objs:      []runtime.Object{plain},
			opts:      Options{Name: "foo", Engine: "postgres"},
			wantUsage: true,
			wantErr:   `unknown engine "postgres" (allowed: cratedb, etcd, foundationdb, replicated, generic)`,
		},
		{
			name: "selector: picks StatefulSets, labels refine roles",
			objs: []runtime.Object{
				mkSTS("db-1", 1, withLabels("team", "x", LabelRole, "master")),
				mkSTS("db-2", 1, withLabels("team", "x")),
				mkSTS("db-3", 1, withLabels("team", "y")),
			},
			opts: Options{Name: "mydb", Selector: "team=x"},
			check: func(t *testing.T, c *ops.Cluster) {
				if c.Layout != LayoutSelector || c.Name != "mydb" || c.Engine != ops.EngineGeneric {
					t.Errorf("layout/name/engine = %s/%s/%s", c.Layout, c.Name, c.Engine)
				}
				if got, want := shape(c), "db-1/master/0/db-1 db-2/data/0/db-2"; got != want {
					t.Errorf("groups:\n got %s\nwant %s", got, want)
				}
			},
		},
		{
			name: "selector: CrateDB StatefulSets detected as cratedb, name from dbops.io/cluster",
			objs: []runtime.Object{
				crateMaster(withLabels(LabelCluster, "foo")),
				crateData("hot", withLabels(LabelCluster, "foo")),
			},
			opts: Options{Selector: "app.kubernetes.io/name=foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if c.Name != "foo" || c.Engine != ops.EngineCrateDB {
					t.Errorf("name/engine = %s/%s", c.Name, c.Engine)
				}
				if got, want := shape(c), "master/master/0/crate-master-foo hot/data/0/crate-data-hot-foo"; got != want {
					t.Errorf("groups:\n got %s\nwant %s", got, want)
				}
			},
		},
		{
			name:      "selector: nothing matches",
			objs:      []runtime.Object{plain},
			opts:      Options{Name: "foo", Selector: "team=z"},
			wantUsage: true,
			wantErr:   `no database cluster in namespace "prod": no StatefulSet matches selector "team=z"`,
		},
		{
			name:      "selector: invalid",
			opts:      Options{Name: "foo", Selector: "team in (x"},
			wantUsage: true,
			wantErr:   `invalid selector "team in (x"`,
		},
		{
			name:      "selector: no name and no common cluster label",
			objs:      []runtime.Object{mkSTS("db-1", 1, withLabels("team", "x"))},
			opts:      Options{Selector: "team=x"},
			wantUsage: true,
			wantErr:   "give the cluster a name",
		},
		{
			name: "operator: managed-by label",
			objs: []runtime.Object{mkSTS("foo", 3, withLabels(labelManagedBy, "etcd-operator"), withImage("etcd", "quay.io/coreos/etcd:v3.5.9"))},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if want := "managed-by=etcd-operator"; c.Operator != want {
					t.Errorf("Operator = %q, want %q", c.Operator, want)
				}
			},
		},
		{
			name: "operator: ownerReference to a custom kind",
			objs: []runtime.Object{mkSTS("foo", 3, ownedBy("etcd.database.coreos.com/v1beta2", "EtcdCluster", "foo"))},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if want := "EtcdCluster/foo (etcd.database.coreos.com/v1beta2)"; c.Operator != want {
					t.Errorf("Operator = %q, want %q", c.Operator, want)
				}
			},
		},
		{
			name: "operator: Helm, kubectl-dbops and built-in owners are not operators",
			objs: []runtime.Object{
				dbops("foo-a", withLabels(labelManagedBy, "Helm")),
				dbops("foo-b", withLabels(labelManagedBy, "kubectl-dbops")),
				dbops("foo-c", ownedBy("apps/v1", "Deployment", "x")),
				dbops("foo-d", ownedBy("apiextensions.k8s.io/v1", "Thing", "x")),
			},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if c.Operator != "" {
					t.Errorf("Operator = %q, want none", c.Operator)
				}
			},
		},
		{
			name: "etcd: Bitnami chart",
			objs: []runtime.Object{etcdSts, mkPod(etcdSts, 0), mkPod(etcdSts, 1), mkPod(etcdSts, 2)},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if c.Layout != LayoutEtcd || c.Engine != ops.EngineEtcd || c.Operator != "" {
					t.Errorf("layout/engine/operator = %s/%s/%q", c.Layout, c.Engine, c.Operator)
				}
				if got, want := shape(c), "foo-etcd/data/0/foo-etcd"; got != want {
					t.Errorf("groups:\n got %s\nwant %s", got, want)
				}
				if n := len(c.Groups[0].Pods); n != 3 {
					t.Errorf("%d pods, want 3", n)
				}
			},
		},
		{
			name: "etcd: Bitnami release with fullnameOverride, found by labels",
			objs: []runtime.Object{mkSTS("kv-store", 3,
				withLabels(labelAppName, "etcd", labelAppInstance, "foo"),
				withImage("main", "registry.k8s.io/etcd:3.5.21-0"))},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if c.Layout != LayoutEtcd || shape(c) != "kv-store/data/0/kv-store" {
					t.Errorf("layout %s, groups %s", c.Layout, shape(c))
				}
			},
		},
		{
			name: "etcd: two candidates are ambiguous",
			objs: []runtime.Object{
				mkSTS("foo", 3, withImage("etcd", "bitnami/etcd:3.5")),
				mkSTS("foo-etcd", 3, withImage("etcd", "bitnami/etcd:3.5")),
			},
			opts:      Options{Name: "foo"},
			wantUsage: true,
			wantErr:   `database cluster "foo" in namespace "prod" is ambiguous: StatefulSets "foo", "foo-etcd" all run etcd`,
		},
		{
			name: "plain StatefulSet",
			objs: []runtime.Object{plain, mkSTS("foo-etcd", 1), mkPod(plain, 1), mkPod(plain, 0)},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if c.Layout != LayoutStatefulSet || c.Engine != ops.EngineGeneric {
					t.Errorf("layout/engine = %s/%s", c.Layout, c.Engine)
				}
				if got, want := shape(c), "foo/data/0/foo"; got != want {
					t.Errorf("groups:\n got %s\nwant %s", got, want)
				}
				if got := podNames(c.Groups[0]); !slices.Equal(got, []string{"foo-0", "foo-1"}) {
					t.Errorf("pods = %v", got)
				}
			},
		},
		{
			name:      "not found",
			objs:      []runtime.Object{mkSTS("bar", 1), mkSTS("crate-data-hot-bar", 1)},
			opts:      Options{Name: "foo"},
			wantUsage: true,
			wantErr:   `no database cluster "foo" in namespace "prod": no StatefulSet labelled dbops.io/cluster=foo, named crate-*-foo, foo-etcd or foo (use --selector to pick StatefulSets explicitly)`,
		},
		{
			name:      "no name",
			opts:      Options{},
			wantUsage: true,
			wantErr:   "no database cluster name given",
		},
		{
			name: "pods not controlled by the StatefulSet are ignored",
			objs: []runtime.Object{
				plain, foreignOwner,
				mkPod(plain, 0),
				// Same labels, but controlled by another StatefulSet.
				mkPod(plain, 1, func(p *corev1.Pod) { p.OwnerReferences[0].UID = foreignOwner.UID }),
				// Same labels, no owner at all.
				mkPod(plain, 2, func(p *corev1.Pod) { p.OwnerReferences = nil }),
				// Owned, but not as controller.
				mkPod(plain, 3, func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }),
			},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				if got := podNames(c.Groups[0]); !slices.Equal(got, []string{"foo-0"}) {
					t.Errorf("pods = %v, want [foo-0]", got)
				}
			},
		},
		{
			name: "pod details and zones from nodes",
			objs: []runtime.Object{
				plain, mkNode("n1", "eu-1a"), mkNode("n2", "eu-1b"), mkNode("n3", ""),
				mkPod(plain, 0, onNode("n1"), func(p *corev1.Pod) {
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: 2}, {RestartCount: 3}}
				}),
				mkPod(plain, 1, onNode("n2"), notReady, func(p *corev1.Pod) {
					now := metav1.NewTime(t0)
					p.DeletionTimestamp = &now
					p.Finalizers = []string{"x"} // the fake tracker needs one to keep a terminating pod
					p.Status.Phase = corev1.PodPending
				}),
				mkPod(plain, 2, onNode("n3")),
				mkPod(plain, 3, onNode("gone")),
			},
			opts: Options{Name: "foo"},
			check: func(t *testing.T, c *ops.Cluster) {
				g := c.Groups[0]
				if g.Desired != 2 || g.Current != 2 || g.Ready != 2 || ops.StatefulSetOf(g) == nil {
					t.Errorf("counts = %d/%d/%d object %v", g.Desired, g.Current, g.Ready, ops.StatefulSetOf(g) != nil)
				}
				p0, p1 := g.Pods[0], g.Pods[1]
				if p0.Zone != "eu-1a" || p1.Zone != "eu-1b" || g.Pods[2].Zone != "" || g.Pods[3].Zone != "" {
					t.Errorf("zones = %q %q %q %q", p0.Zone, p1.Zone, g.Pods[2].Zone, g.Pods[3].Zone)
				}
				if p0.Ordinal != 0 || p1.Ordinal != 1 || p0.Group != "foo" || p0.UID != "uid-foo-0" {
					t.Errorf("pod0 %+v", p0)
				}
				if p0.Restarts != 5 || !p0.Ready || p0.Deleting || p0.Phase != "Running" || p0.Node != "n1" {
					t.Errorf("pod0 %+v", p0)
				}
				if p1.Ready || !p1.Deleting || p1.Phase != "Pending" {
					t.Errorf("pod1 %+v", p1)
				}
				if !slices.Equal(p0.PVCs, []string{"data-foo-0"}) || !p0.Created.Equal(t0.Add(time.Hour)) {
					t.Errorf("pod0 pvcs %v created %v", p0.PVCs, p0.Created)
				}
			},
		},
		{
			name: "Forbidden on nodes leaves zones empty",
			objs: []runtime.Object{plain, mkNode("n1", "eu-1a"), mkPod(plain, 0, onNode("n1"))},
			opts: Options{Name: "foo"},
			react: func(c *fake.Clientset, _ *dynamicfake.FakeDynamicClient) {
				c.PrependReactor("get", "nodes", forbidden("nodes"))
				c.PrependReactor("list", "nodes", forbidden("nodes"))
			},
			check: func(t *testing.T, c *ops.Cluster) {
				if p := c.Groups[0].Pods[0]; p.Zone != "" || p.Node != "n1" {
					t.Errorf("pod = %+v, want node n1 and no zone", p)
				}
			},
		},
		{
			name: "API error on StatefulSets is wrapped",
			opts: Options{Name: "foo"},
			react: func(c *fake.Clientset, _ *dynamicfake.FakeDynamicClient) {
				c.PrependReactor("list", "statefulsets", forbidden("statefulsets"))
			},
			wantErr: `listing StatefulSets in namespace "prod": `,
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objs...)
			var dyn *dynamicfake.FakeDynamicClient
			opts := tt.opts
			opts.Namespace = ns
			if tt.useDyn || tt.dyn != nil {
				dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
					map[schema.GroupVersionResource]string{crateDBResource: "CrateDBList"}, tt.dyn...)
				opts.Dynamic = dyn
			}
			if tt.react != nil {
				tt.react(client, dyn)
			}

			c, err := discover(context.Background(), client, opts)

			assertReadOnly(t, client.Actions())
			if dyn != nil {
				assertReadOnly(t, dyn.Actions())
			}
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("want error containing %q, got cluster %s", tt.wantErr, shape(c))
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error:\n got %v\nwant %s", err, tt.wantErr)
				}
				if got := errors.Is(err, ops.ErrUsage); got != tt.wantUsage {
					t.Errorf("errors.Is(err, ErrUsage) = %v, want %v", got, tt.wantUsage)
				}
				return
			}
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			if c.Name != opts.Name && opts.Name != "" || c.Namespace != ns {
				t.Errorf("cluster %s/%s", c.Namespace, c.Name)
			}
			tt.check(t, c)
		})
	}
}

func TestDiscoverNotFoundIsOneUsageLine(t *testing.T) {
	_, err := discover(context.Background(), fake.NewClientset(), Options{Namespace: "prod", Name: "foo"})
	want := `no database cluster "foo" in namespace "prod": no StatefulSet labelled dbops.io/cluster=foo, named crate-*-foo, foo-etcd or foo (use --selector to pick StatefulSets explicitly)`
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n got %v\nwant %s", err, want)
	}
	if ops.ExitCode(err) != ops.ExitUsage {
		t.Errorf("exit code %d, want %d", ops.ExitCode(err), ops.ExitUsage)
	}
}

func TestDiscoverAPIErrorKeepsCause(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd leader changed")
	})
	if err := client.Tracker().Add(mkSTS("foo", 1)); err != nil {
		t.Fatal(err)
	}
	_, err := discover(context.Background(), client, Options{Namespace: ns, Name: "foo"})
	if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), `listing pods of StatefulSet prod/foo`) {
		t.Fatalf("error = %v, want wrapped ServiceUnavailable with context", err)
	}
	if errors.Is(err, ops.ErrUsage) {
		t.Error("API error must not be a usage error")
	}
}

// Nodes are read once per run, with one list, and only when a pod is placed: the pods view
// reuses what it read (Cluster.NodeZones) for pods that move to another node.
func TestDiscoverReadsNodesOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pods      int
		placed    bool
		wantReads string
	}{
		{name: "three pods on three nodes", pods: 3, placed: true, wantReads: "list 1, get 0"},
		{name: "forty pods on forty nodes", pods: 40, placed: true, wantReads: "list 1, get 0"},
		{name: "no pod placed yet", pods: 3, placed: false, wantReads: "list 0, get 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mkSTS("foo", int32(tc.pods))
			// A spare node, one without a zone: listed too, for pods moving there.
			objs := []runtime.Object{s, mkNode("spare", "zspare"), mkNode("bare", "")}
			for i := range tc.pods {
				n := fmt.Sprintf("n%d", i)
				var mods []podMod
				if tc.placed {
					mods = append(mods, onNode(n))
				}
				objs = append(objs, mkNode(n, "z"+n), mkPod(s, i, mods...))
			}
			client := fake.NewClientset(objs...)
			c, err := discover(context.Background(), client, Options{Namespace: ns, Name: "foo"})
			if err != nil {
				t.Fatal(err)
			}
			reads := map[string]int{}
			for _, a := range client.Actions() {
				if a.GetResource().Resource == "nodes" {
					reads[a.GetVerb()]++
				}
			}
			if got := fmt.Sprintf("list %d, get %d", reads["list"], reads["get"]); got != tc.wantReads {
				t.Errorf("node reads: %s, want %s", got, tc.wantReads)
			}
			for _, p := range c.Groups[0].Pods {
				if tc.placed && p.Zone != "z"+p.Node {
					t.Errorf("%s on %s: zone %q", p.Name, p.Node, p.Zone)
				}
			}
			if z, ok := c.NodeZones["spare"]; tc.placed && (!ok || z != "zspare") {
				t.Errorf("NodeZones[spare] = %q, %v; want the listed node's zone", z, ok)
			}
			if z, ok := c.NodeZones["bare"]; tc.placed && (!ok || z != "") {
				t.Errorf("NodeZones[bare] = %q, %v; want listed, with no zone", z, ok)
			}
			if !tc.placed && len(c.NodeZones) != 0 {
				t.Errorf("NodeZones = %v without a node read", c.NodeZones)
			}
			assertReadOnly(t, client.Actions())
		})
	}
}

func TestRefresh(t *testing.T) {
	master, hot := crateMaster(), crateData("hot")
	client := fake.NewClientset(master, hot, mkNode("n1", "eu-1a"),
		mkPod(master, 0, onNode("n1")), mkPod(hot, 0, onNode("n1")), mkPod(hot, 1, onNode("n1")))
	c, err := discover(context.Background(), client, Options{Namespace: ns, Name: "foo"})
	if err != nil {
		t.Fatal(err)
	}
	before := shape(c)

	// Live changes: one pod is being replaced, the group was scaled.
	ctx := context.Background()
	if err := client.CoreV1().Pods(ns).Delete(ctx, "crate-data-hot-foo-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p := mkPod(hot, 1, onNode("n1"), notReady, func(p *corev1.Pod) { p.UID = "new-uid" })
	if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	live := hot.DeepCopy()
	live.Spec.Replicas = ptr(int32(3))
	live.Status.ReadyReplicas = 1
	if _, err := client.AppsV1().StatefulSets(ns).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()

	r, err := Refresh(ctx, client, c)
	if err != nil {
		t.Fatal(err)
	}
	assertReadOnly(t, client.Actions())
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "nodes" {
			t.Errorf("zones are known, yet nodes were read: %v", a)
		}
	}
	if got := shape(r); got != before {
		t.Errorf("identity changed:\n got %s\nwant %s", got, before)
	}
	if r.Layout != c.Layout || r.Engine != c.Engine || r == c {
		t.Errorf("refresh lost cluster identity or returned the input")
	}
	g := r.Group("hot")
	if g.Desired != 3 || g.Ready != 1 {
		t.Errorf("hot desired/ready = %d/%d, want 3/1", g.Desired, g.Ready)
	}
	if _, pod := r.Pod("crate-data-hot-foo-1"); pod == nil || pod.UID != "new-uid" || pod.Ready || pod.Zone != "eu-1a" {
		t.Errorf("refreshed pod = %+v", pod)
	}
	if _, pod := c.Pod("crate-data-hot-foo-1"); pod.UID != "uid-crate-data-hot-foo-1" {
		t.Errorf("Refresh modified its input")
	}

	// A StatefulSet that vanished is an error, not a smaller cluster.
	if err := client.AppsV1().StatefulSets(ns).Delete(ctx, hot.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Refresh(ctx, client, c); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `node group "hot"`) {
		t.Errorf("Refresh after delete: %v", err)
	}
}

func TestMasterEligibleNonCrate(t *testing.T) {
	c := &ops.Cluster{Engine: ops.EngineEtcd, Groups: []*ops.NodeGroup{{Name: "a", Role: ops.RoleData}}}
	if g := MasterEligible(c); g != nil {
		t.Errorf("MasterEligible = %v, want nil for etcd without masters", g)
	}
}

func ptr[T any](v T) *T { return &v }

// TestPodListsNotOlderThanTheFirst: only the first pod list is a consistent read; the other
// StatefulSets' lists ask for a state not older than it (a second consistent read right after
// the first can wait up to 100 ms at the API server), continued pages carry only their token,
// and the cluster records the newest list's resourceVersion for the run's pod informer. So
// does Refresh.
func TestPodListsNotOlderThanTheFirst(t *testing.T) {
	master, hot, cold := crateMaster(), crateData("hot"), crateData("cold")
	objs := []runtime.Object{master, hot, cold}
	for _, s := range []*appsv1.StatefulSet{master, hot, cold} {
		for i := range int(*s.Spec.Replicas) {
			objs = append(objs, mkPod(s, i))
		}
	}
	client := fake.NewClientset(objs...)
	var got []metav1.ListOptions
	rv := 100
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		o := a.(k8stesting.ListActionImpl).ListOptions
		got = append(got, o)
		// The second StatefulSet's pods come back in two pages.
		l, err := podsMatching(client, o.LabelSelector)
		if err != nil {
			return true, nil, err
		}
		switch {
		case len(got) == 2:
			l.Items, l.Continue = l.Items[:1], "page-2"
		case o.Continue == "page-2":
			l.Items = l.Items[1:]
		}
		if o.Continue == "" {
			rv++
		}
		l.ResourceVersion = strconv.Itoa(rv)
		return true, l, nil
	})
	c, err := discover(context.Background(), client, Options{Namespace: ns, Name: "foo"})
	if err != nil {
		t.Fatal(err)
	}
	check := func(c *ops.Cluster, first int) {
		t.Helper()
		if n := len(c.Groups[0].Pods) + len(c.Groups[1].Pods) + len(c.Groups[2].Pods); n != 7 {
			t.Errorf("discovered %d pods, want 7", n)
		}
		want := []string{
			`rv "" match "" continue ""`,
			fmt.Sprintf(`rv "%d" match "NotOlderThan" continue ""`, first),
			`rv "" match "" continue "page-2"`,
			fmt.Sprintf(`rv "%d" match "NotOlderThan" continue ""`, first+1),
		}
		var lists []string
		for _, o := range got {
			lists = append(lists, fmt.Sprintf("rv %q match %q continue %q", o.ResourceVersion, o.ResourceVersionMatch, o.Continue))
		}
		if !slices.Equal(lists, want) {
			t.Errorf("pod lists:\n got %q\nwant %q", lists, want)
		}
		if want := strconv.Itoa(first + 2); c.PodsResourceVersion != want {
			t.Errorf("PodsResourceVersion %q, want %q (the newest list's)", c.PodsResourceVersion, want)
		}
	}
	check(c, 101)
	got = nil
	r, err := Refresh(context.Background(), client, c)
	if err != nil {
		t.Fatal(err)
	}
	check(r, 104)
}

// podsMatching lists the fake's pods in ns that selector matches, as the API server would.
func podsMatching(client *fake.Clientset, selector string) (*corev1.PodList, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, err
	}
	all, err := client.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), ns)
	if err != nil {
		return nil, err
	}
	l := &corev1.PodList{}
	for _, p := range all.(*corev1.PodList).Items {
		if sel.Matches(labels.Set(p.Labels)) {
			l.Items = append(l.Items, p)
		}
	}
	return l, nil
}

// operatorSelector gives s the CrateDB operator's selector (and pod labels): the cluster's
// name and component, which every node group shares, and the group's node name.
func operatorSelector(s *appsv1.StatefulSet) {
	lbls := map[string]string{labelAppName: "foo", labelAppComponent: "cratedb", labelCrateNode: s.Labels[labelCrateNode]}
	s.Spec.Selector = &metav1.LabelSelector{MatchLabels: lbls}
	s.Spec.Template.Labels = maps.Clone(lbls)
}

// StatefulSets whose selectors share labels (the CrateDB operator's) are read with one pod
// list by those labels, paged, and each pod goes to the StatefulSet that controls and selects
// it: a pod with the shared labels that another StatefulSet controls, or that its controller
// does not select, is left out.
func TestPodListsOneListForSharedLabels(t *testing.T) {
	master, hot, cold := crateMaster(operatorSelector), crateData("hot", operatorSelector), crateData("cold", operatorSelector)
	other := mkSTS("crate-data-hot-bar", 1)
	objs := []runtime.Object{master, hot, cold, other}
	for _, s := range []*appsv1.StatefulSet{master, hot, cold} {
		for i := range int(*s.Spec.Replicas) {
			objs = append(objs, mkPod(s, i, func(p *corev1.Pod) { p.Labels = maps.Clone(s.Spec.Template.Labels) }))
		}
	}
	// Shared labels, but controlled by a StatefulSet of another cluster.
	objs = append(objs, mkPod(other, 0, func(p *corev1.Pod) { p.Labels = maps.Clone(hot.Spec.Template.Labels) }))
	// Controlled by hot, but with cold's labels: hot does not select it.
	objs = append(objs, mkPod(hot, 7, func(p *corev1.Pod) { p.Labels = maps.Clone(cold.Spec.Template.Labels) }))
	client := fake.NewClientset(objs...)
	var got []metav1.ListOptions
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		o := a.(k8stesting.ListActionImpl).ListOptions
		got = append(got, o)
		l, err := podsMatching(client, o.LabelSelector)
		if err != nil {
			return true, nil, err
		}
		l.ResourceVersion = "42"
		slices.SortFunc(l.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		if o.Continue == "" {
			l.Items, l.Continue = l.Items[:4], "page-2"
		} else {
			l.Items = l.Items[4:]
		}
		return true, l, nil
	})
	c, err := discover(context.Background(), client, Options{Namespace: ns, Name: "foo"})
	if err != nil {
		t.Fatal(err)
	}
	check := func(c *ops.Cluster) {
		t.Helper()
		want := []string{
			`selector "app.kubernetes.io/component=cratedb,app.kubernetes.io/name=foo" continue ""`,
			`selector "app.kubernetes.io/component=cratedb,app.kubernetes.io/name=foo" continue "page-2"`,
		}
		var lists []string
		for _, o := range got {
			lists = append(lists, fmt.Sprintf("selector %q continue %q", o.LabelSelector, o.Continue))
			if o.ResourceVersion != "" {
				t.Errorf("list %+v: want a consistent read", o)
			}
		}
		if !slices.Equal(lists, want) {
			t.Errorf("pod lists:\n got %q\nwant %q", lists, want)
		}
		byGroup := map[string][]string{}
		for _, g := range c.Groups {
			for _, p := range g.Pods {
				byGroup[ops.StatefulSetName(g)] = append(byGroup[ops.StatefulSetName(g)], p.Name)
			}
		}
		wantGroups := map[string][]string{
			master.Name: {"crate-master-foo-0", "crate-master-foo-1", "crate-master-foo-2"},
			hot.Name:    {"crate-data-hot-foo-0", "crate-data-hot-foo-1"},
			cold.Name:   {"crate-data-cold-foo-0", "crate-data-cold-foo-1"},
		}
		for sts, want := range wantGroups {
			if !slices.Equal(byGroup[sts], want) {
				t.Errorf("pods of %s: %v, want %v", sts, byGroup[sts], want)
			}
		}
		if c.PodsResourceVersion != "42" {
			t.Errorf("PodsResourceVersion %q, want 42", c.PodsResourceVersion)
		}
	}
	check(c)
	got = nil
	r, err := Refresh(context.Background(), client, c)
	if err != nil {
		t.Fatal(err)
	}
	check(r)
}
