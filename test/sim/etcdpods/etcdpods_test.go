package etcdpods

import (
	"bytes"
	"fmt"
	"maps"
	"strings"
	"testing"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// The fixture's StatefulSet and ConfigMap: the peer URL template annotation names each
// ordinal's peer URL (evaluated here with text/template, as a Go template; that the engine
// reads it the same way is what the etcd e2e tests exercise), and the ConfigMap holds etcd's
// own environment names.
func TestObjects(t *testing.T) {
	r := &Runner{opts: Options{Namespace: "ns", StatefulSet: "etcd", AddrPrefix: "127.0.42", MaxMembers: 7}}
	sts, cm := r.Objects(3)
	tmpl, err := template.New("peer").Funcs(template.FuncMap{"add": func(a, b int) int { return a + b }}).
		Parse(sts.Annotations["dbops.io/etcd-peer-url-template"])
	if err != nil {
		t.Fatal(err)
	}
	for o := range 7 {
		var b bytes.Buffer
		if err := tmpl.Execute(&b, struct {
			Pod     string
			Ordinal int
		}{fmt.Sprintf("etcd-%d", o), o}); err != nil {
			t.Fatal(err)
		}
		if got, want := b.String(), r.PeerURL(o); got != want {
			t.Errorf("ordinal %d: annotation gives %s, runner URL %s", o, got, want)
		}
	}
	if got, want := cm.Data["ETCD_INITIAL_CLUSTER"], "etcd-0=http://127.0.42.1:2380,etcd-1=http://127.0.42.2:2380,etcd-2=http://127.0.42.3:2380"; got != want {
		t.Errorf("initial cluster = %s, want %s", got, want)
	}
	if ef := sts.Spec.Template.Spec.Containers[0].EnvFrom; len(ef) != 1 || ef[0].ConfigMapRef == nil || ef[0].ConfigMapRef.Name != cm.Name || cm.Data["ETCD_INITIAL_CLUSTER_STATE"] != "new" {
		t.Errorf("the pods do not read ConfigMap %s %v", cm.Name, cm.Data)
	}
}

// containerEnv resolves a pod's environment as a kubelet does: envFrom ConfigMaps (with
// prefix; a missing one fails unless optional), then env, which wins.
func TestContainerEnv(t *testing.T) {
	cms := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := cms.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "state", Namespace: "ns"},
		Data: map[string]string{"ETCD_INITIAL_CLUSTER_STATE": "existing", "A": "from-cm"}}); err != nil {
		t.Fatal(err)
	}
	r := &Runner{cms: cms}
	pod := func(envFrom ...corev1.EnvFromSource) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-1", Namespace: "ns"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", EnvFrom: envFrom, Env: []corev1.EnvVar{
				{Name: "A", Value: "from-env"},
				{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			}}}}}
	}
	ref := func(name, prefix string, optional bool) corev1.EnvFromSource {
		return corev1.EnvFromSource{Prefix: prefix, ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Optional: &optional}}
	}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		want    map[string]string
		wantErr bool
	}{
		{"envFrom then env", pod(ref("state", "", false)), map[string]string{"ETCD_INITIAL_CLUSTER_STATE": "existing", "A": "from-env", "POD": "etcd-1"}, false},
		{"prefix", pod(ref("state", "X_", false)), map[string]string{"X_ETCD_INITIAL_CLUSTER_STATE": "existing", "X_A": "from-cm", "A": "from-env", "POD": "etcd-1"}, false},
		{"optional missing", pod(ref("gone", "", true)), map[string]string{"A": "from-env", "POD": "etcd-1"}, false},
		{"missing", pod(ref("gone", "", false)), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := r.containerEnv(tt.pod)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			got := map[string]string{}
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				got[k] = v
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("env = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOrdinal(t *testing.T) {
	r := &Runner{opts: Options{StatefulSet: "etcd", MaxMembers: 7}}
	for pod, want := range map[string]int{"etcd-0": 0, "etcd-6": 6, "etcd-7": -1, "etcd-01": -1, "etcdx-1": -1, "etcd-": -1} {
		if got := r.ordinal(pod); got != want {
			t.Errorf("ordinal(%s) = %d, want %d", pod, got, want)
		}
	}
}

func TestFreePrefix(t *testing.T) {
	p, err := freePrefix(3)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p, "127.0.") || !addrsFree(p, 3) {
		t.Errorf("prefix %s not free", p)
	}
}
