package commands

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
)

// bigClusterObjects is a labelled cluster of 5,000 pods in 50 node groups of 100.
func bigClusterObjects() []runtime.Object {
	var groups []fakecluster.Group
	for g := range 50 {
		role := "data"
		if g == 0 {
			role = "master"
		}
		groups = append(groups, fakecluster.Group{Name: fmt.Sprintf("g%02d", g), Role: role, Order: g, Replicas: 100})
	}
	return fakecluster.Objects("prod", "big", "", groups...)
}

// BenchmarkStatus5000 measures `status` of a 5,000-pod cluster read from a fake clientset:
// discovery (StatefulSets, pods, nodes), the lock and the rendered table.
func BenchmarkStatus5000(b *testing.B) {
	objs := bigClusterObjects()
	client := fake.NewClientset(objs...)
	dir := b.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(testKubeconfig), 0o600); err != nil {
		b.Fatal(err)
	}
	env := map[string]string{"KUBECONFIG": kc, "HOME": dir, "XDG_CONFIG_HOME": filepath.Join(dir, "config")}
	run := func() string {
		var out, errb bytes.Buffer
		root := NewRootCmd(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errb}, func(g *GlobalOptions) {
			g.NewClients = func() (*Clients, error) { return &Clients{Kube: client, Clock: fixedClock{testNow}}, nil }
			g.IsTerminal = func() bool { return false }
			g.Getenv = func(k string) string { return env[k] }
			g.ConfigFlags.KubeConfig = &kc
		})
		root.SetArgs([]string{"status", "big", "-n", "prod"})
		if err := root.ExecuteContext(context.Background()); err != nil {
			b.Fatalf("status: %v\n%s", err, errb.String())
		}
		return out.String()
	}
	if out := run(); strings.Count(out, "big-g") < 5000 {
		b.Fatalf("status lists %d pods, want 5000:\n%.2000s", strings.Count(out, "big-g"), out)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
}
