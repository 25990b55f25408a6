//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-dbops/kubectl-dbops/internal/testbed"
)

// realEtcd is an etcd StatefulSet on the real nodes (testbed.RealEtcdObjects: /readyz
// readiness probes, DNS peer URLs), reached from the test through etcdctl on the pod IPs.
type realEtcd struct {
	t       *testing.T
	ns      string
	name    string
	etcdctl string
	// scheme of the client URLs and extra etcdctl flags (TLS files, credentials).
	scheme string
	flags  []string
}

func newRealEtcd(t *testing.T, replicas int32) *realEtcd {
	t.Helper()
	x := newRealEtcdIn(t, newNamespace(t))
	x.deploy(testbed.RealEtcdObjects(x.ns, x.name, replicas), replicas)
	return x
}

// newRealEtcdIn is the handle of an etcd named "etcd" in ns, not yet deployed.
func newRealEtcdIn(t *testing.T, ns string) *realEtcd {
	t.Helper()
	bin, err := testbed.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	return &realEtcd{t: t, ns: ns, name: "etcd", etcdctl: filepath.Join(bin, "etcdctl"), scheme: "http"}
}

// deploy creates objs and waits for replicas Ready pods.
func (x *realEtcd) deploy(objs testbed.RealEtcd, replicas int32) {
	t, ns := x.t, x.ns
	t.Helper()
	ctx := t.Context()
	if _, err := bed.Client.CoreV1().Services(ns).Create(ctx, objs.Service, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bed.Client.CoreV1().ConfigMaps(ns).Create(ctx, objs.ConfigMap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(ctx, objs.StatefulSet, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	x.waitReady(int(replicas))
}

func (x *realEtcd) selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{"app.kubernetes.io/instance": x.name})
}

// waitReady waits until n pods pass their /readyz probe (Ready only as voters).
func (x *realEtcd) waitReady(n int) []*corev1.Pod {
	x.t.Helper()
	return waitPods(x.t, x.ns, x.selector(), n, func(p *corev1.Pod) bool {
		return testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
}

// endpoints are the client URLs of the running pods, by pod IP: the host reaches the pod
// network through the real nodes' bridge.
func (x *realEtcd) endpoints(ctx context.Context) string {
	pods, err := bed.Client.CoreV1().Pods(x.ns).List(ctx, metav1.ListOptions{LabelSelector: x.selector().String()})
	if err != nil {
		return ""
	}
	var eps []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			eps = append(eps, x.scheme+"://"+p.Status.PodIP+":2379")
		}
	}
	return strings.Join(eps, ",")
}

func (x *realEtcd) ctl(ctx context.Context, args ...string) ([]byte, error) {
	eps := x.endpoints(ctx)
	if eps == "" {
		return nil, fmt.Errorf("no etcd pod has an IP")
	}
	flags := append([]string{"--endpoints=" + eps, "--dial-timeout=2s", "--command-timeout=4s"}, x.flags...)
	cmd := exec.CommandContext(ctx, x.etcdctl, append(flags, args...)...)
	return cmd.CombinedOutput()
}

// writer puts keys one after the other until stopped and remembers those etcd acknowledged.
type writer struct {
	stopCh chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	acked  map[string]string
	failed int
}

func (x *realEtcd) startWriter() *writer {
	w := &writer{stopCh: make(chan struct{}), done: make(chan struct{}), acked: map[string]string{}}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stopCh:
				return
			default:
			}
			k, v := fmt.Sprintf("/e2e/k%06d", i), fmt.Sprintf("v%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			_, err := x.ctl(ctx, "put", k, v)
			cancel()
			w.mu.Lock()
			if err == nil {
				w.acked[k] = v
			} else {
				w.failed++
			}
			w.mu.Unlock()
			time.Sleep(100 * time.Millisecond) // pacing of a background load, not a wait for state
		}
	}()
	return w
}

func (w *writer) stop() (map[string]string, int) {
	close(w.stopCh)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.failed
}

// verify reads every key back: none acknowledged may be lost.
func (x *realEtcd) verify(acked map[string]string) {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), 30*time.Second)
	defer cancel()
	out, err := x.ctl(ctx, "get", "--prefix", "/e2e/", "-w", "json")
	if err != nil {
		x.t.Fatalf("read keys: %v: %s", err, out)
	}
	var resp struct {
		Kvs []struct {
			Key   []byte `json:"key"`
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		x.t.Fatalf("decode get: %v", err)
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	lost := 0
	for k, v := range acked {
		if got[k] != v {
			lost++
			if lost < 5 {
				x.t.Errorf("key %s: got %q, want %q (acknowledged, then lost)", k, got[k], v)
			}
		}
	}
	if lost > 0 {
		x.t.Fatalf("%d of %d acknowledged keys lost", lost, len(acked))
	}
}

// members returns voters and learners by name.
func (x *realEtcd) members() (voters, learners []string) {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), 20*time.Second)
	defer cancel()
	out, err := x.ctl(ctx, "member", "list", "-w", "json")
	if err != nil {
		x.t.Fatalf("member list: %v: %s", err, out)
	}
	var ml struct {
		Members []struct {
			Name      string `json:"name"`
			IsLearner bool   `json:"isLearner"`
		} `json:"members"`
	}
	if err := json.Unmarshal(out, &ml); err != nil {
		x.t.Fatalf("decode member list: %v", err)
	}
	for _, m := range ml.Members {
		if m.IsLearner {
			learners = append(learners, m.Name)
		} else {
			voters = append(voters, m.Name)
		}
	}
	return voters, learners
}

func (x *realEtcd) checkConverged(n int) {
	x.t.Helper()
	x.waitReady(n)
	voters, learners := x.members()
	if len(voters) != n || len(learners) != 0 {
		x.t.Fatalf("members: voters %v learners %v, want %d voters and no learner", voters, learners, n)
	}
	pvcs, err := bed.Client.CoreV1().PersistentVolumeClaims(x.ns).List(x.t.Context(), metav1.ListOptions{})
	if err != nil {
		x.t.Fatal(err)
	}
	for _, p := range pvcs.Items {
		var o int
		if _, err := fmt.Sscanf(p.Name, "data-"+x.name+"-%d", &o); err == nil && o >= n {
			x.t.Errorf("PVC %s of a removed member is left", p.Name)
		}
	}
}

// TestRealNodeEtcdScale: on real kubelets with /readyz probes (a learner's pod is never Ready),
// scale 3→5→3, repair a member and restart all members through the CLI, with keys written all
// along and none lost.
func TestRealNodeEtcdScale(t *testing.T) {
	needRealNodes(t)
	x := newRealEtcd(t, 3)
	w := x.startWriter()
	env := cliEnv(t)
	steps := []struct {
		args []string
		want int
	}{
		{[]string{"scale", x.name, "-n", x.ns, "--replicas", "5", "--yes", "--timeout", "170s"}, 5},
		{[]string{"scale", x.name, "-n", x.ns, "--replicas", "3", "--yes", "--timeout", "170s"}, 3},
		{[]string{"replace", x.name, x.name + "-1", "-n", x.ns, "--yes", "--timeout", "170s"}, 3},
		{[]string{"restart", x.name, "-n", x.ns, "--rolling", "--yes", "--timeout", "170s"}, 3},
	}
	for _, s := range steps {
		began := time.Now()
		res := runCLI(t, env, s.args...)
		t.Logf("%s: exit %d in %s", strings.Join(s.args[:1], " "), res.Code, time.Since(began).Round(time.Millisecond))
		if res.Code != 0 {
			w.stop()
			t.Fatalf("%v: %s", s.args, res)
		}
		x.checkConverged(s.want)
	}
	acked, failed := w.stop()
	t.Logf("writes: %d acknowledged, %d failed (leader changes)", len(acked), failed)
	if len(acked) < 20 {
		t.Fatalf("only %d writes acknowledged: the load did not run", len(acked))
	}
	x.verify(acked)
}
