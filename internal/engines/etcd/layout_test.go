package etcd

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func cmRef(name string) *corev1.ConfigMapEnvSource {
	return &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}
}

func cmKey(name, key string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}
}

// TestEtcdLayoutDetection reads where new members learn the initial cluster from pod
// templates shaped like the real layouts, and drives or refuses each before any write.
func TestEtcdLayoutDetection(t *testing.T) {
	podName := corev1.EnvVar{Name: "MY_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}
	for _, tc := range []struct {
		name       string
		container  corev1.Container
		annotation string
		layout     string
		cm, key    string
		stateKey   string
		refuse     string // substring of the refusal; "" = drivable
	}{
		{name: "envFrom ConfigMap (test bed, realnode recipe)",
			container: corev1.Container{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: cmRef("etcd-cluster-state")}}},
			layout:    LayoutConfigMap, cm: "etcd-cluster-state", key: "ETCD_INITIAL_CLUSTER", stateKey: "ETCD_INITIAL_CLUSTER_STATE"},
		{name: "envFrom with prefix, operator-named ConfigMap",
			container: corev1.Container{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: cmRef("other")}, {Prefix: "ETCD_", ConfigMapRef: cmRef("members")}}},
			layout:    LayoutConfigMap, cm: "members", key: "INITIAL_CLUSTER", stateKey: "INITIAL_CLUSTER_STATE"},
		{name: "configMapKeyRef through --initial-cluster=$(VAR)",
			container: corev1.Container{Command: []string{"etcd"},
				Args: []string{"--name=$(MY_POD_NAME)", "--initial-cluster=$(INITIAL)", "--initial-cluster-state=existing"},
				Env:  []corev1.EnvVar{podName, {Name: "INITIAL", ValueFrom: cmKey("etcd-peers", "peers")}}},
			layout: LayoutConfigMap, cm: "etcd-peers", key: "peers", stateKey: ""},
		{name: "configMapKeyRef for both through --initial-cluster=$(VAR) and --initial-cluster-state=$(VAR)",
			container: corev1.Container{Command: []string{"etcd"},
				Args: []string{"--name=$(MY_POD_NAME)", "--initial-cluster=$(INITIAL_PEERS)", "--initial-cluster-state=$(INITIAL_STATE)"},
				Env: []corev1.EnvVar{podName, {Name: "INITIAL_PEERS", ValueFrom: cmKey("etcd-peers", "peers")},
					{Name: "INITIAL_STATE", ValueFrom: cmKey("etcd-peers", "state")}}},
			layout: LayoutConfigMap, cm: "etcd-peers", key: "peers", stateKey: "state"},
		{name: "envFrom with prefix, state through --initial-cluster-state=$(VAR)",
			container: corev1.Container{Command: []string{"etcd", "--initial-cluster-state=$(ETCD_INITIAL_CLUSTER_STATE)"},
				EnvFrom: []corev1.EnvFromSource{{Prefix: "ETCD_", ConfigMapRef: cmRef("members")}}},
			layout: LayoutConfigMap, cm: "members", key: "INITIAL_CLUSTER", stateKey: "INITIAL_CLUSTER_STATE"},
		{name: "state through $(VAR) from another ConfigMap",
			container: corev1.Container{Command: []string{"etcd"},
				Args: []string{"--initial-cluster=$(INITIAL_PEERS)", "--initial-cluster-state=$(INITIAL_STATE)"},
				Env: []corev1.EnvVar{{Name: "INITIAL_PEERS", ValueFrom: cmKey("etcd-peers", "peers")},
					{Name: "INITIAL_STATE", ValueFrom: cmKey("etcd-settings", "state")}}},
			layout: LayoutConfigMap, cm: "etcd-peers", key: "peers", refuse: "keep both in one ConfigMap"},
		{name: "state through $(VAR) the template does not define",
			container: corev1.Container{Command: []string{"etcd"},
				Args: []string{"--initial-cluster=$(INITIAL_PEERS)", "--initial-cluster-state=$(INITIAL_STATE)"},
				Env:  []corev1.EnvVar{{Name: "INITIAL_PEERS", ValueFrom: cmKey("etcd-peers", "peers")}}},
			layout: LayoutConfigMap, cm: "etcd-peers", key: "peers", refuse: "does not come from ConfigMap etcd-peers"},
		{name: "state flag fixed to new shadows the ConfigMap's variable",
			container: corev1.Container{Command: []string{"etcd", "--initial-cluster-state=new"},
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: cmRef("etcd-cluster-state")}}},
			layout: LayoutConfigMap, cm: "etcd-cluster-state", key: "ETCD_INITIAL_CLUSTER", refuse: "--initial-cluster-state=new is fixed"},
		{name: "Bitnami chart env",
			container: corev1.Container{Env: []corev1.EnvVar{podName,
				{Name: "ETCD_INITIAL_CLUSTER_STATE", Value: "new"},
				{Name: "ETCD_INITIAL_CLUSTER_TOKEN", Value: "etcd-cluster-k8s"},
				{Name: "ETCD_INITIAL_CLUSTER", Value: "foo-etcd-0=http://foo-etcd-0.foo-etcd-headless.db.svc.cluster.local:2380,foo-etcd-1=http://foo-etcd-1.foo-etcd-headless.db.svc.cluster.local:2380"}}},
			layout: LayoutEnv, refuse: "Bitnami chart's layout"},
		{name: "static --initial-cluster (kubeadm-style args)",
			container: corev1.Container{Command: []string{"etcd", "--name=$(POD_NAME)",
				"--initial-cluster=etcd-0=https://etcd-0.etcd:2380,etcd-1=https://etcd-1.etcd:2380,etcd-2=https://etcd-2.etcd:2380",
				"--initial-cluster-state=new"}},
			layout: LayoutArgs, refuse: "set --initial-cluster=$(ETCD_INITIAL_CLUSTER)"},
		{name: "state fixed to new",
			container: corev1.Container{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: cmRef("etcd-cluster-state")}},
				Env: []corev1.EnvVar{{Name: "ETCD_INITIAL_CLUSTER_STATE", Value: "new"}}},
			layout: LayoutConfigMap, cm: "etcd-cluster-state", key: "ETCD_INITIAL_CLUSTER", refuse: "would start a new cluster"},
		{name: "nothing in the template",
			container: corev1.Container{Command: []string{"etcd"}},
			layout:    LayoutUnknown, refuse: "does not say where a new member learns the initial cluster"},
		{name: "annotation names the ConfigMap",
			container: corev1.Container{Command: []string{"etcd"}}, annotation: "my-state",
			layout: LayoutConfigMap, cm: "my-state", key: "ETCD_INITIAL_CLUSTER", stateKey: "ETCD_INITIAL_CLUSTER_STATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEtcd(3, 0)
			fx := newFixture(t, 3, f, func(c *corev1.Container, ann map[string]string) {
				name, image := c.Name, c.Image
				*c = tc.container
				c.Name, c.Image = name, image
				if tc.annotation != "" {
					ann[AnnotationConfigMap] = tc.annotation
				}
			})
			s, err := fx.eng.newSite(fx.c)
			if err != nil {
				t.Fatal(err)
			}
			st := s.state
			if st.Layout != tc.layout || st.ConfigMap != tc.cm || (tc.key != "" && st.ClusterKey != tc.key) || (tc.refuse == "" && st.StateKey != tc.stateKey) {
				t.Fatalf("detected %+v, want layout %s ConfigMap %q key %q state key %q", st, tc.layout, tc.cm, tc.key, tc.stateKey)
			}
			five := int32(5)
			_, err = fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &five})
			_, rerr := fx.eng.PlanRepair(context.Background(), fx.c, "etcd-1")
			if tc.refuse == "" {
				if err != nil {
					t.Fatalf("scale refused: %v", err)
				}
			} else {
				for what, e := range map[string]error{"scale": err, "repair": rerr} {
					if ops.ExitCode(e) != ops.ExitPrecondition || !strings.Contains(e.Error(), tc.refuse) || strings.Contains(e.Error(), "\n") {
						t.Errorf("%s: got %v (exit %d), want a one-line refusal with %q", what, e, ops.ExitCode(e), tc.refuse)
					}
				}
			}
			if w := fakecluster.Writes(fx.client); len(w) != 0 {
				t.Errorf("planning wrote %v", w)
			}
			if m := f.mutations(); len(m) != 0 {
				t.Errorf("planning changed membership: %v", m)
			}
		})
	}
}

// The ConfigMap write follows the detected keys (prefix stripped) and leaves other keys.
func TestClusterStateWrittenWithDetectedKeys(t *testing.T) {
	f := newFakeEtcd(3, 0)
	fx := newFixture(t, 3, f, func(c *corev1.Container, _ map[string]string) {
		c.EnvFrom = []corev1.EnvFromSource{{Prefix: "ETCD_", ConfigMapRef: cmRef("members")}}
	})
	s, err := fx.eng.newSite(fx.c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fx.eng.writeClusterState(context.Background(), s, "a=http://a:2380"); err != nil {
		t.Fatal(err)
	}
	cm, err := fx.client.CoreV1().ConfigMaps(testNS).Get(context.Background(), "members", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["INITIAL_CLUSTER"] != "a=http://a:2380" || cm.Data["INITIAL_CLUSTER_STATE"] != "existing" || len(cm.Data) != 2 {
		t.Errorf("ConfigMap data = %v", cm.Data)
	}
	if ok, _ := fx.eng.clusterStateIs(context.Background(), s, "a=http://a:2380"); !ok {
		t.Error("clusterStateIs does not see what was written")
	}
}
