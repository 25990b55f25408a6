//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// fleetEnv is a fleet over the two control planes: one kubeconfig (bed-a, bed-b and, with
// gone, a context bed-gone whose API server does not answer), one namespace of the same name
// in both beds.
type fleetEnv struct {
	t   *testing.T
	kc  string
	ns  string
	env []string
	// beds by context name.
	beds map[string]*testbed.Testbed
}

func newFleetEnv(t *testing.T, gone bool) *fleetEnv {
	t.Helper()
	kc := fleetKubeconfig(t)
	if gone {
		cfg, err := clientcmd.LoadFromFile(kc)
		if err != nil {
			t.Fatal(err)
		}
		// Port 1 on loopback: nothing listens there, the connection is refused.
		cfg.Clusters["bed-gone"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
		cfg.AuthInfos["bed-gone"] = &clientcmdapi.AuthInfo{Token: "not-a-real-token"}
		cfg.Contexts["bed-gone"] = &clientcmdapi.Context{Cluster: "bed-gone", AuthInfo: "bed-gone", Namespace: "default"}
		if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
			t.Fatal(err)
		}
	}
	x := &fleetEnv{t: t, kc: kc, beds: map[string]*testbed.Testbed{"bed-a": bed, "bed-b": bedB.tb}}
	x.ns = fmt.Sprintf("fleet-%d", time.Now().UnixNano()%1_000_000_000)
	for _, tb := range x.beds {
		if _, err := tb.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: x.ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace: %v", err)
		}
		t.Cleanup(func() { _ = tb.Client.CoreV1().Namespaces().Delete(t.Context(), x.ns, metav1.DeleteOptions{}) })
	}
	for _, kv := range cliEnv(t) {
		if strings.HasPrefix(kv, "KUBECONFIG=") {
			kv = "KUBECONFIG=" + kc
		}
		x.env = append(x.env, kv)
	}
	return x
}

// generic creates a 'generic' cluster (the dbops.io labels, as createDBCluster) in the bed of
// context and waits for its pods to be Ready.
func (x *fleetEnv) generic(context, name string, replicas int32) {
	x.t.Helper()
	sts := statefulSet(name, replicas)
	sts.Labels = maps.Clone(sts.Labels)
	maps.Copy(sts.Labels, map[string]string{"dbops.io/cluster": name, "dbops.io/node-group": name, "dbops.io/role": "data", "dbops.io/engine": "generic"})
	x.create(context, sts)
}

// replicated creates a cluster of the replicated engine (as newReplApp, with its script as the
// application) in the bed of context.
func (x *fleetEnv) replicated(context, name string, replicas int32) {
	x.t.Helper()
	dir := x.t.TempDir()
	a := &replApp{t: x.t, ns: x.ns, name: name, state: filepath.Join(dir, "state"), bin: filepath.Join(dir, "app.sh")}
	if err := os.MkdirAll(a.state, 0o755); err != nil {
		x.t.Fatal(err)
	}
	writeFile(x.t, a.bin, replScript)
	for o := range replicas {
		pod := fmt.Sprintf("%s-%d", name, o)
		if err := x.beds[context].SetExec(x.t.Context(), x.ns, pod, testbed.ExecTarget{Env: map[string]string{"REPL_POD": pod, "REPL_STATE": a.state}}); err != nil {
			x.t.Fatalf("exec mapping for %s: %v", pod, err)
		}
	}
	sts := statefulSet(name, replicas)
	sts.Labels = maps.Clone(sts.Labels)
	maps.Copy(sts.Labels, map[string]string{"dbops.io/cluster": name, "dbops.io/engine": "replicated"})
	sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	sts.Spec.Template.Spec.TopologySpreadConstraints = nil
	sts.Annotations = map[string]string{"dbops.io/replicated-config": a.config(1)}
	x.create(context, sts)
}

func (x *fleetEnv) create(context string, sts *appsv1.StatefulSet) {
	x.t.Helper()
	c := x.client(context)
	if _, err := c.AppsV1().StatefulSets(x.ns).Create(x.t.Context(), sts, metav1.CreateOptions{}); err != nil {
		x.t.Fatalf("%s: create statefulset: %v", context, err)
	}
	waitPodsIn(x.t, c, x.ns, labels.SelectorFromSet(labels.Set{"app": sts.Name}), int(*sts.Spec.Replicas), func(p *corev1.Pod) bool {
		return testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
}

func (x *fleetEnv) client(context string) kubernetes.Interface { return x.beds[context].Client }

func (x *fleetEnv) run(args ...string) cliResult {
	x.t.Helper()
	return runCLI(x.t, x.env, args...)
}

// TestFleetList: `list --contexts 'bed-*'` over two control planes, each with a generic and a
// replicated cluster, and a third context whose API server does not answer: every cluster of
// the two beds is listed under its context, the dead context is named on one line of stderr,
// and the exit code is non-zero; -o json items carry their context.
func TestFleetList(t *testing.T) {
	bedB.get(t)
	x := newFleetEnv(t, true)
	for _, c := range []string{"bed-a", "bed-b"} {
		x.generic(c, "web", 2)
		x.replicated(c, "repl", 2)
	}
	res := x.run("list", "--contexts", "bed-*", "-n", x.ns, "--max-parallel", "3")
	if res.Code != 1 {
		t.Fatalf("list --contexts bed-*: want exit 1 (bed-gone fails): %s", res)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	var got []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		got = append(got, strings.Join(f[:3], " ")+" "+f[4])
	}
	want := "bed-a repl replicated 2/2,bed-a web generic 2/2,bed-b repl replicated 2/2,bed-b web generic 2/2"
	if !strings.HasPrefix(lines[0], "CONTEXT") || strings.Join(got, ",") != want {
		t.Errorf("rows %q, want %q:\n%s", strings.Join(got, ","), want, res)
	}
	var errLines []string
	for _, l := range strings.Split(res.Stderr, "\n") {
		if strings.HasPrefix(l, "ERROR: context ") {
			errLines = append(errLines, l)
		}
	}
	if len(errLines) != 1 || !strings.HasPrefix(errLines[0], "ERROR: context bed-gone: ") {
		t.Errorf("stderr should name bed-gone on one line: %s", res)
	}

	res = x.run("list", "--context", "bed-b,bed-a", "-n", x.ns, "-o", "json")
	if res.Code != 0 {
		t.Fatalf("list --context bed-b,bed-a -o json: %s", res)
	}
	var doc struct {
		Items []struct{ Context, Namespace, Name, Engine string } `json:"items"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &doc); err != nil {
		t.Fatalf("%v: %s", err, res)
	}
	got = got[:0]
	for _, it := range doc.Items {
		got = append(got, it.Context+"/"+it.Name+"/"+it.Engine)
	}
	if want := "bed-b/repl/replicated,bed-b/web/generic,bed-a/repl/replicated,bed-a/web/generic"; strings.Join(got, ",") != want {
		t.Errorf("JSON items %q, want %q", strings.Join(got, ","), want)
	}
}
