package commands

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// A fleet mutation whose two contexts reach one Kubernetes cluster would act on the same
// database cluster twice: refused (exit 2) naming both contexts and how they were found the
// same, with no write anywhere. Found by the API server URL (a second context name for one
// server), or by the kube-system namespace's UID read from each (two URLs for one cluster);
// contexts of distinct clusters, or distinct namespaces, run.
func TestFleetRefusesOneClusterTwice(t *testing.T) {
	kubeSystem := func(uid string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: types.UID(uid)}}
	}
	t.Run("one server under two context names", func(t *testing.T) {
		fh := newFleetHarness(t)
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		// ctx-a2 is a second name for server a.
		cfg := strings.Replace(fleetKubeconfig, "contexts:\n", "contexts:\n- name: ctx-a2\n  context: {cluster: a, user: u, namespace: db}\n", 1)
		if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		fh.env["KUBECONFIG"] = kc
		fh.clients["ctx-a2"] = fh.clients["ctx-a"]
		for _, args := range [][]string{
			{"restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-a2", "--yes"},
			{"restart", "orders", "--rolling", "--contexts", "ctx-a*", "--dry-run"},
			{"resume", "orders", "--contexts", "ctx-a,ctx-a2", "--yes"},
			{"lock", "acquire", "orders", "--contexts", "ctx-a,ctx-a2", "--yes"},
		} {
			r := fh.run(args...)
			if r.code != ops.ExitUsage || !strings.Contains(r.err, "contexts ctx-a and ctx-a2 reach the same Kubernetes cluster (API server https://a.invalid:6443): the fleet would act on db/orders twice") {
				t.Errorf("%v: exit %d: %s", args, r.code, r.err)
			}
		}
		fh.noWrites(t)
	})
	t.Run("one cluster under two servers", func(t *testing.T) {
		fh := newFleetHarness(t)
		for _, c := range []string{"ctx-a", "ctx-b"} {
			if _, err := fh.clients[c].CoreV1().Namespaces().Create(t.Context(), kubeSystem("3f1c-one-cluster"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			fh.clients[c].ClearActions()
		}
		r := fh.run("restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b", "--yes")
		if r.code != ops.ExitUsage || !strings.Contains(r.err, "contexts ctx-a and ctx-b reach the same Kubernetes cluster (kube-system namespace UID 3f1c-one-cluster)") {
			t.Errorf("exit %d: %s", r.code, r.err)
		}
		fh.noWrites(t)
	})
	t.Run("distinct clusters run", func(t *testing.T) {
		fh := newFleetHarness(t)
		for c, uid := range map[string]string{"ctx-a": "uid-a", "ctx-b": "uid-b"} {
			if _, err := fh.clients[c].CoreV1().Namespaces().Create(t.Context(), kubeSystem(uid), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		fakecluster.Start(t, fh.clients["ctx-a"], "db")
		fakecluster.Start(t, fh.clients["ctx-b"], "db")
		if r := fh.run("restart", "orders", "--rolling", "--contexts", "ctx-a,ctx-b", "--yes"); r.code != 0 {
			t.Errorf("exit %d: %s", r.code, r.err)
		}
	})
}
