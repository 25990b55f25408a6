//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// secondBed is a second, independent control plane for fleet tests (issue 39), started on
// first use only, so that the other tests don't pay for it; TestMain stops it by PID like bed.
type secondBed struct {
	once sync.Once
	tb   *testbed.Testbed
	err  error
}

// bedB is set once, by the first fleet test that needs it.
var bedB secondBed

func (s *secondBed) get(t testing.TB) *testbed.Testbed {
	t.Helper()
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		s.tb, s.err = testbed.Start(ctx, testbed.Options{
			Logf:        func(format string, args ...any) { fmt.Fprintf(os.Stderr, "bed-b: "+format+"\n", args...) },
			BuildOutput: os.Stderr,
		})
	})
	if s.err != nil {
		t.Fatalf("start second testbed: %v", s.err)
	}
	return s.tb
}

func (s *secondBed) stop() error {
	if s.tb == nil {
		return nil
	}
	return s.tb.Stop()
}

// fleetKubeconfig writes one kubeconfig with contexts bed-a (the shared bed) and bed-b (the
// second control plane) and returns its path.
func fleetKubeconfig(t *testing.T) string {
	t.Helper()
	b := bedB.get(t)
	p := filepath.Join(t.TempDir(), "fleet-kubeconfig")
	if err := testbed.WriteFleetKubeconfig(p, testbed.Context{Name: "bed-a", Bed: bed}, testbed.Context{Name: "bed-b", Bed: b}); err != nil {
		t.Fatal(err)
	}
	return p
}

func clientFor(t *testing.T, kubeconfig, context string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFleetBedsAreSeparate: the two contexts of the fleet kubeconfig reach two different API
// servers with their own storage: a namespace created through bed-a does not exist in bed-b.
func TestFleetBedsAreSeparate(t *testing.T) {
	kc := fleetKubeconfig(t)
	if bed.APIServerURL == bedB.tb.APIServerURL {
		t.Fatalf("both contexts point at %s", bed.APIServerURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := clientFor(t, kc, "bed-a"), clientFor(t, kc, "bed-b")
	name := "fleet-sep-" + fmt.Sprint(time.Now().UnixNano()%1_000_000)
	if _, err := a.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if _, err := a.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatalf("bed-a: %v", err)
	}
	if _, err := b.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("bed-b sees bed-a's namespace %s (err %v): the control planes are not separate", name, err)
	}
	nodes, err := b.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("bed-b nodes: %d, %v", len(nodes.Items), err)
	}
}
