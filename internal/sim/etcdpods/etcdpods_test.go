package etcdpods

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/etcd"
)

// The engine must compute the same peer URL the runner makes each pod
// advertise, from the annotation the runner puts on the StatefulSet.
func TestPeerURLTemplateMatchesEngine(t *testing.T) {
	r := &Runner{opts: Options{Namespace: "ns", StatefulSet: "etcd", AddrPrefix: "127.0.42", MaxMembers: 7}}
	sts, cm := r.Objects(3)
	tmpl, err := etcd.ParsePeerURLTemplate(sts.Annotations[etcd.AnnotationPeerURLTemplate])
	if err != nil {
		t.Fatal(err)
	}
	for o := range 7 {
		var b bytes.Buffer
		if err := tmpl.Execute(&b, etcd.PeerURLData{Pod: fmt.Sprintf("etcd-%d", o), Ordinal: o}); err != nil {
			t.Fatal(err)
		}
		if got, want := b.String(), r.PeerURL(o); got != want {
			t.Errorf("ordinal %d: engine URL %s, runner URL %s", o, got, want)
		}
	}
	if got, want := cm.Data[etcd.KeyInitialCluster], "etcd-0=http://127.0.42.1:2380,etcd-1=http://127.0.42.2:2380,etcd-2=http://127.0.42.3:2380"; got != want {
		t.Errorf("initial cluster = %s, want %s", got, want)
	}
	if cm.Name != sts.Name+etcd.ConfigMapSuffix || cm.Data[etcd.KeyInitialClusterState] != "new" {
		t.Errorf("ConfigMap %s %v does not follow the engine's convention", cm.Name, cm.Data)
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
