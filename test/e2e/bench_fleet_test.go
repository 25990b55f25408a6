//go:build e2e

package e2e

// Benchmarks of issue 39 item 5 ("Scale and speed"), measured on the test bed (real
// kube-apiserver, kwok nodes) with the real CLI process. Speed targets live here, not in
// timed tests; make test does not run them (make bench-fleet does):
//
//	go test -tags e2e -run '^$' -bench 'BenchmarkFleetList|BenchmarkStatus1000|BenchmarkRestartRequests1000' -benchtime=1x ./test/e2e
//
// The CLI is built without -race here (racebuild would slow it and inflate its memory).

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

var benchBin struct {
	once sync.Once
	path string
	err  error
}

// benchBinary builds cmd/kubectl-dbops once, without the race detector, into the bed's folder.
func benchBinary(tb testing.TB) string {
	tb.Helper()
	benchBin.once.Do(func() {
		dir := filepath.Join(bed.Dir, "bench-bin")
		if benchBin.err = os.MkdirAll(dir, 0o755); benchBin.err != nil {
			return
		}
		benchBin.path = filepath.Join(dir, "kubectl-dbops")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", benchBin.path, "github.com/kubectl-dbops/kubectl-dbops/cmd/kubectl-dbops").CombinedOutput()
		if err != nil {
			benchBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if benchBin.err != nil {
		tb.Fatalf("build kubectl-dbops: %v", benchBin.err)
	}
	return benchBin.path
}

// benchEnv is cliEnv for a benchmark: the parent's environment without user configuration,
// KUBECONFIG=kubeconfig and a fresh HOME.
func benchEnv(tb testing.TB, kubeconfig string) []string {
	home := tb.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "KUBECONFIG" || k == "HOME" || k == "NO_COLOR" || k == "GORACE" || strings.HasPrefix(k, "DBOPS_") || strings.HasPrefix(k, "XDG_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "KUBECONFIG="+kubeconfig, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "XDG_STATE_HOME="+filepath.Join(home, ".local", "state"))
}

// benchRun is one finished CLI process.
type benchRun struct {
	Args           []string
	Code           int
	Stdout, Stderr string
	Elapsed        time.Duration
	// MaxRSS is the process's peak resident set (getrusage ru_maxrss, KiB on Linux), in bytes.
	MaxRSS int64
}

func (r benchRun) String() string {
	return fmt.Sprintf("kubectl-dbops %s: exit %d after %s\n--- stdout:\n%.3000s--- stderr:\n%.3000s",
		strings.Join(r.Args, " "), r.Code, r.Elapsed.Round(time.Millisecond), r.Stdout, r.Stderr)
}

// runBenchCLI runs the benchmark binary to completion and fails tb unless it exits 0.
func runBenchCLI(tb testing.TB, env []string, timeout time.Duration, args ...string) benchRun {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, benchBinary(tb), args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := benchRun{Args: args, Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	if cmd.ProcessState != nil {
		r.Code = cmd.ProcessState.ExitCode()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.MaxRSS = int64(ru.Maxrss) * 1024
		}
	}
	if err != nil || r.Code != 0 {
		tb.Fatalf("%v: %s", err, r)
	}
	return r
}

// createBenchCluster creates a generic cluster of groups StatefulSets of perGroup pods each
// (no volume claims, pods started in parallel: the fixture is about pod counts), and waits
// until all its pods are Ready.
func createBenchCluster(tb testing.TB, c kubernetes.Interface, ns, name string, groups, perGroup int32) {
	tb.Helper()
	ctx := context.Background()
	for g := range groups {
		stsName, group := name, name
		if groups > 1 {
			group = fmt.Sprintf("g%02d", g)
			stsName = name + "-" + group
		}
		sts := statefulSet(stsName, perGroup)
		sts.Spec.VolumeClaimTemplates = nil
		sts.Spec.Template.Spec.Containers[0].VolumeMounts = nil
		sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
		sts.Spec.Template.Labels = maps.Clone(sts.Spec.Template.Labels)
		sts.Spec.Template.Labels["bench-cluster"] = name
		sts.Labels = maps.Clone(sts.Labels)
		maps.Copy(sts.Labels, map[string]string{"dbops.io/cluster": name, "dbops.io/node-group": group,
			"dbops.io/role": "data", "dbops.io/engine": "generic"})
		sts.Annotations = map[string]string{"dbops.io/order": fmt.Sprint(g)}
		if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			tb.Fatalf("create statefulset %s/%s: %v", ns, stsName, err)
		}
	}
}

// waitBenchPodsReady watches the pods of ns labelled bench-cluster (any cluster) until want
// of them are Ready and not terminating.
func waitBenchPodsReady(tb testing.TB, c kubernetes.Interface, ns string, want int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	pods := c.CoreV1().Pods(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = "bench-cluster"
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = "bench-cluster"
			return pods.Watch(ctx, o)
		},
	}
	ready := func(s cache.Store) bool {
		n := 0
		for _, o := range s.List() {
			if p, ok := o.(*corev1.Pod); ok && testbed.PodReady(p) && p.DeletionTimestamp == nil {
				n++
			}
		}
		return n >= want
	}
	var store cache.Store
	if _, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{},
		func(s cache.Store) (bool, error) { store = s; return ready(s), nil },
		func(watch.Event) (bool, error) { return ready(store), nil }); err != nil {
		tb.Fatalf("wait for %d Ready pods in %s: %v", want, ns, err)
	}
}

// benchNamespace creates namespace name in c (deleted when the benchmark ends).
func benchNamespace(tb testing.TB, c kubernetes.Interface, name string) {
	tb.Helper()
	if _, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("create namespace %s: %v", name, err)
	}
	tb.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func benchName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000)
}

// Cluster size of the 1,000-pod benchmarks: 10 node groups of 100 pods.
const (
	bigGroups   = 10
	bigPerGroup = 100
	bigPods     = bigGroups * bigPerGroup
)

// bigBenchCluster creates the 1,000-pod generic cluster "big" in a new namespace of the shared
// bed and returns the namespace.
func bigBenchCluster(tb testing.TB) string {
	tb.Helper()
	ns := benchName("bench-big")
	benchNamespace(tb, bed.Client, ns)
	start := time.Now()
	createBenchCluster(tb, bed.Client, ns, "big", bigGroups, bigPerGroup)
	waitBenchPodsReady(tb, bed.Client, ns, bigPods)
	tb.Logf("created %d Ready pods in %s", bigPods, time.Since(start).Round(time.Second))
	return ns
}

// BenchmarkStatus1000 measures `status` of a 1,000-pod cluster on the test bed, the real CLI
// process from start to exit: ns/op is its wall time, MiB-maxRSS the largest peak resident
// set of any run (issue 39 item 5: at most 1 s and 150 MiB).
func BenchmarkStatus1000(b *testing.B) {
	ns := bigBenchCluster(b)
	env := benchEnv(b, bed.KubeconfigPath)
	var maxRSS int64
	var total time.Duration
	n := 0
	for b.Loop() {
		r := runBenchCLI(b, env, 2*time.Minute, "status", "big", "-n", ns)
		if got := strings.Count(r.Stdout, "big-g"); got < bigPods {
			b.Fatalf("status lists %d pods, want %d: %s", got, bigPods, r)
		}
		maxRSS = max(maxRSS, r.MaxRSS)
		total += r.Elapsed
		n++
	}
	b.ReportMetric(float64(maxRSS)/(1<<20), "MiB-maxRSS")
	b.ReportMetric(float64(total.Nanoseconds())/float64(n), "ns/op")
}
