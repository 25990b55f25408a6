package commands

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"

	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
)

// BenchmarkFleetMemory measures what a fleet `list` and `status` keep per target (issue 39
// item 5: fleet memory grows linearly with targets, not pods × targets). N = 16 targets, one
// kubeconfig context each with its own fake clientset (Factory.ContextClients), each with a
// cluster of P = 10 or 200 pods, read one after the other (--max-parallel 1). When a target
// lists its pods, every earlier target is done: the live heap there (after a full collection)
// is the fixtures, what the earlier targets kept, and the start of this one's reads. Its
// growth from the first target to the last, per target, is what each finished target keeps
// until the output is printed:
//
//   - retained-B/target: that growth per target;
//   - retained-B/target/pod: the same per pod of a target;
//   - fixture-B/pod: for scale, what one pod (with its share of the StatefulSet) takes in the
//     fake clientsets, about what a target's read of its pods holds while it runs.
//
// A target that kept its pod objects (or its clients' caches) would keep several KiB per pod;
// list keeps one row per cluster (flat in P), status the lines it prints per pod. (Checked
// 2026-11-29: list made to keep each cluster's discovery result reports 56 KB per target at
// 200 pods instead of 2.4 KB.)
func BenchmarkFleetMemory(b *testing.B) {
	for _, command := range []string{"list", "status"} {
		for _, pods := range []int{10, 200} {
			b.Run(fmt.Sprintf("%s/pods=%d", command, pods), func(b *testing.B) {
				const targets = 16
				var retained float64
				n := 0
				for b.Loop() {
					retained += fleetRetainedPerTarget(b, command, targets, pods)
					n++
				}
				retained /= float64(n)
				b.ReportMetric(retained, "retained-B/target")
				b.ReportMetric(retained/float64(pods), "retained-B/target/pod")
			})
		}
	}
}

// fleetRetainedPerTarget runs command over a fleet of targets contexts whose cluster "orders"
// has pods pods, and returns the live heap's growth per target between the first target's
// pod list and the last one's (see BenchmarkFleetMemory).
func fleetRetainedPerTarget(b *testing.B, command string, targets, pods int) float64 {
	b.Helper()
	dir := b.TempDir()
	var kc strings.Builder
	kc.WriteString("apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: not-a-real-token}\nclusters:\n")
	for i := range targets {
		fmt.Fprintf(&kc, "- name: c%02d\n  cluster: {server: \"https://c%02d.invalid:6443\"}\n", i, i)
	}
	kc.WriteString("contexts:\n")
	for i := range targets {
		fmt.Fprintf(&kc, "- name: ctx-%02d\n  context: {cluster: c%02d, user: u, namespace: db}\n", i, i)
	}
	kc.WriteString("current-context: ctx-00\n")
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, []byte(kc.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var live []uint64
	runtime.GC()
	before := liveHeapBytes()
	clients := map[string]*fake.Clientset{}
	for i := range targets {
		c := fake.NewClientset(fakecluster.Objects("db", "orders", "", fakecluster.Group{Name: "data", Role: "data", Replicas: pods})...)
		var once sync.Once
		c.PrependReactor("list", "pods", func(k8stesting.Action) (bool, kruntime.Object, error) {
			once.Do(func() {
				runtime.GC()
				mu.Lock()
				live = append(live, liveHeapBytes())
				mu.Unlock()
			})
			return false, nil, nil
		})
		clients[fmt.Sprintf("ctx-%02d", i)] = c
	}
	runtime.GC()
	b.ReportMetric(float64(liveHeapBytes()-before)/float64(targets*pods), "fixture-B/pod")
	env := map[string]string{"KUBECONFIG": kcPath, "HOME": dir, "XDG_CONFIG_HOME": filepath.Join(dir, "config")}
	var errb bytes.Buffer
	out := &countingWriter{}
	root := NewRootCmd(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: &errb}, func(g *GlobalOptions) {
		g.ContextClients = func(c string) (*Clients, error) { return &Clients{Kube: clients[c], Clock: fixedClock{testNow}}, nil }
		g.IsTerminal = func() bool { return false }
		g.Getenv = func(k string) string { return env[k] }
		g.ConfigFlags.KubeConfig = &kcPath
	})
	args := []string{command}
	if command == "status" {
		args = append(args, "orders")
	}
	args = append(args, "--contexts", "ctx-*", "-n", "db", "--max-parallel", "1")
	root.SetArgs(args)
	if err := root.ExecuteContext(context.Background()); err != nil {
		b.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	if command == "list" && out.lines < targets || command == "status" && out.lines < targets*pods {
		b.Fatalf("%s printed %d lines for %d targets of %d pods", strings.Join(args, " "), out.lines, targets, pods)
	}
	if len(live) != targets {
		b.Fatalf("%d pod lists seen, want one per target (%d)", len(live), targets)
	}
	return (float64(live[targets-1]) - float64(live[0])) / float64(targets-1)
}

// liveHeapBytes is the live heap as the last collection marked it (runtime/metrics).
func liveHeapBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// countingWriter counts the lines written to it and keeps nothing.
type countingWriter struct {
	mu    sync.Mutex
	lines int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}
