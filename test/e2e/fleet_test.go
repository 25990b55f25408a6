//go:build e2e

package e2e

import (
	"context"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
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
	x.ns = x.namespace()
	for _, kv := range cliEnv(t) {
		if strings.HasPrefix(kv, "KUBECONFIG=") {
			kv = "KUBECONFIG=" + kc
		}
		x.env = append(x.env, kv)
	}
	return x
}

// namespace creates a namespace of a new name in both beds (deleted after the test).
func (x *fleetEnv) namespace() string {
	x.t.Helper()
	ns := fmt.Sprintf("fleet-%d", time.Now().UnixNano()%1_000_000_000)
	for _, tb := range []*testbed.Testbed{bed, bedB.tb} {
		if _, err := tb.Client.CoreV1().Namespaces().Create(x.t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			x.t.Fatalf("create namespace: %v", err)
		}
		x.t.Cleanup(func() { _ = tb.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	}
	return ns
}

// context adds (or changes) context name of the kubeconfig: the cluster and user of context
// from (bed-a or bed-b), with namespace ns.
func (x *fleetEnv) context(name, from, ns string) { x.contextAs(name, from, ns, "") }

// contextAs is context whose user (unless as is "") is from's impersonating user as (the
// kubeconfig's `as`): the CLI acts as that user there, while x.client(name) stays from's
// admin, to set up and inspect the bed.
func (x *fleetEnv) contextAs(name, from, ns, as string) {
	x.t.Helper()
	cfg, err := clientcmd.LoadFromFile(x.kc)
	if err != nil {
		x.t.Fatal(err)
	}
	src := cfg.Contexts[from]
	authInfo := src.AuthInfo
	if as != "" {
		ai := cfg.AuthInfos[src.AuthInfo].DeepCopy()
		ai.Impersonate = as
		authInfo = name
		cfg.AuthInfos[authInfo] = ai
	}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: src.Cluster, AuthInfo: authInfo, Namespace: ns}
	if err := clientcmd.WriteToFile(*cfg, x.kc); err != nil {
		x.t.Fatal(err)
	}
	x.beds[name] = x.beds[from]
}

// generic creates a 'generic' cluster (the dbops.io labels, as createDBCluster) in the bed and
// namespace of context (x.ns when "") and waits for its pods to be Ready.
func (x *fleetEnv) generic(context, ns, name string, replicas int32, mutate ...func(*appsv1.StatefulSet)) []*corev1.Pod {
	x.t.Helper()
	sts := statefulSet(name, replicas)
	sts.Labels = maps.Clone(sts.Labels)
	maps.Copy(sts.Labels, map[string]string{"dbops.io/cluster": name, "dbops.io/node-group": name, "dbops.io/role": "data", "dbops.io/engine": "generic"})
	for _, m := range mutate {
		m(sts)
	}
	return x.createIn(context, ns, sts)
}

// replicated creates a cluster of the replicated engine (as newReplApp, with its script as the
// application) in the bed of context, with exec mappings for one pod more (a scale up).
func (x *fleetEnv) replicated(context, name string, replicas int32) *replApp {
	x.t.Helper()
	return x.replicatedIn(context, x.ns, name, replicas, false)
}

// replicatedIn creates a replicated cluster in namespace ns of context's bed; with bootstrap,
// its pods get sequence numbers and `bootstrap` gives them their roles (one primary), so that
// it can be restarted.
func (x *fleetEnv) replicatedIn(context, ns, name string, replicas int32, bootstrap bool, mutate ...func(*appsv1.StatefulSet)) *replApp {
	x.t.Helper()
	dir := x.t.TempDir()
	a := &replApp{t: x.t, ns: ns, name: name, state: filepath.Join(dir, "state"), bin: filepath.Join(dir, "app.sh")}
	if err := os.MkdirAll(a.state, 0o755); err != nil {
		x.t.Fatal(err)
	}
	writeFile(x.t, a.bin, replScript)
	for o := range replicas + 1 {
		pod := fmt.Sprintf("%s-%d", name, o)
		if err := x.beds[context].SetExec(x.t.Context(), ns, pod, testbed.ExecTarget{Env: map[string]string{"REPL_POD": pod, "REPL_STATE": a.state}}); err != nil {
			x.t.Fatalf("exec mapping for %s: %v", pod, err)
		}
	}
	sts := statefulSet(name, replicas)
	sts.Labels = maps.Clone(sts.Labels)
	maps.Copy(sts.Labels, map[string]string{"dbops.io/cluster": name, "dbops.io/engine": "replicated"})
	sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	sts.Spec.Template.Spec.TopologySpreadConstraints = nil
	sts.Annotations = map[string]string{"dbops.io/replicated-config": a.config(1)}
	for _, m := range mutate {
		m(sts)
	}
	x.createIn(context, ns, sts)
	if !bootstrap {
		return a
	}
	for o := range int(replicas) {
		a.setSeq(o, fmt.Sprint(o+1))
	}
	if res := x.run("bootstrap", name, "--context", context, "-n", ns, "--yes", "--no-tui"); res.Code != 0 {
		x.t.Fatalf("%s: bootstrap %s: %s", context, name, res)
	}
	return a
}

// fleetFile writes a fleet file and returns its path.
func (x *fleetEnv) fleetFile(content string) string {
	x.t.Helper()
	p := filepath.Join(x.t.TempDir(), "fleet.yaml")
	writeFile(x.t, p, content)
	return p
}

func (x *fleetEnv) create(context string, sts *appsv1.StatefulSet) { x.createIn(context, "", sts) }

func (x *fleetEnv) createIn(context, ns string, sts *appsv1.StatefulSet) []*corev1.Pod {
	x.t.Helper()
	if ns == "" {
		ns = x.ns
	}
	c := x.client(context)
	if _, err := c.AppsV1().StatefulSets(ns).Create(x.t.Context(), sts, metav1.CreateOptions{}); err != nil {
		x.t.Fatalf("%s: create statefulset: %v", context, err)
	}
	return waitPodsIn(x.t, c, ns, labels.SelectorFromSet(labels.Set{"app": sts.Name}), int(*sts.Spec.Replicas), func(p *corev1.Pod) bool {
		return testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
}

// uids are the UIDs of the pods of StatefulSet name in ns of context's bed, by pod name.
func (x *fleetEnv) uids(context, ns, name string) map[string]string {
	x.t.Helper()
	pods, err := x.client(context).CoreV1().Pods(ns).List(x.t.Context(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		x.t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = string(p.UID)
	}
	return out
}

func (x *fleetEnv) client(context string) kubernetes.Interface { return x.beds[context].Client }

func (x *fleetEnv) run(args ...string) cliResult {
	x.t.Helper()
	return runCLI(x.t, x.env, args...)
}

// TestFleetList: `list --contexts 'bed-*'` over two control planes, each with a generic and a
// replicated cluster, and a third context whose API server does not answer: every cluster of
// the two beds is listed under its context, the dead context is named on one line of stderr,
// and the exit code is non-zero; -o json items carry their context. `status CLUSTER` over the
// same fleet: one status per live context, the dead one in errors and on stderr.
func TestFleetList(t *testing.T) {
	bedB.get(t)
	x := newFleetEnv(t, true)
	for _, c := range []string{"bed-a", "bed-b"} {
		x.generic(c, "", "web", 2)
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

	// status of one cluster over the fleet: one ClusterStatus per live context, bed-gone in
	// errors and on stderr.
	res = x.run("status", "repl", "--contexts", "bed-*", "-n", x.ns, "-o", "json")
	if res.Code != 1 {
		t.Fatalf("status --contexts bed-*: want exit 1: %s", res)
	}
	var st struct {
		Kind  string `json:"kind"`
		Items []struct {
			Context string `json:"context"`
			Cluster struct{ Name, Engine string }
		} `json:"items"`
		Errors []struct{ Context string } `json:"errors"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		t.Fatalf("%v: %s", err, res)
	}
	got = got[:0]
	for _, it := range st.Items {
		got = append(got, it.Context+"/"+it.Cluster.Name+"/"+it.Cluster.Engine)
	}
	if st.Kind != "ClusterStatusList" || strings.Join(got, ",") != "bed-a/repl/replicated,bed-b/repl/replicated" ||
		len(st.Errors) != 1 || st.Errors[0].Context != "bed-gone" || !strings.Contains(res.Stderr, "ERROR: context bed-gone: ") {
		t.Errorf("status: kind %s items %v errors %v: %s", st.Kind, got, st.Errors, res)
	}

	fleetSelect(t, x)
}

// fleetSelect (on TestFleetList's clusters): the web StatefulSets labelled tier=db in both
// beds; `list -l tier=db` lists the web clusters only; `history` and `wait` without CLUSTER
// answer for web in each context (items carrying their context, lines prefixed by the
// target); `wait repl` over bed-* names the dead context on one line.
func fleetSelect(t *testing.T, x *fleetEnv) {
	t.Helper()
	for _, c := range []string{"bed-a", "bed-b"} {
		if _, err := x.client(c).AppsV1().StatefulSets(x.ns).Patch(t.Context(), "web", types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"tier":"db"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("%s: label web: %v", c, err)
		}
	}
	res := x.run("list", "--contexts", "bed-a,bed-b", "-n", x.ns, "-l", "tier=db", "-o", "json")
	var doc struct {
		Items []struct{ Context, Name string } `json:"items"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &doc); res.Code != 0 || err != nil {
		t.Fatalf("list -l tier=db: %v: %s", err, res)
	}
	var got []string
	for _, it := range doc.Items {
		got = append(got, it.Context+"/"+it.Name)
	}
	if strings.Join(got, ",") != "bed-a/web,bed-b/web" {
		t.Errorf("list -l tier=db: items %v: %s", got, res)
	}

	res = x.run("history", "--contexts", "bed-a,bed-b", "-n", x.ns, "-l", "tier=db", "-o", "json")
	var h struct {
		Kind  string                              `json:"kind"`
		Items []struct{ Context, Cluster string } `json:"items"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &h); res.Code != 0 || err != nil {
		t.Fatalf("history -l tier=db: %v: %s", err, res)
	}
	got = got[:0]
	for _, it := range h.Items {
		got = append(got, it.Context+"/"+it.Cluster)
	}
	if h.Kind != "HistoryList" || strings.Join(got, ",") != "bed-a/web,bed-b/web" {
		t.Errorf("history: kind %s items %v: %s", h.Kind, got, res)
	}

	res = x.run("wait", "--for=ready", "--context", "bed-a,bed-b", "-n", x.ns, "-l", "tier=db", "--max-parallel", "2", "--timeout", "2m")
	for _, c := range []string{"bed-a", "bed-b"} {
		if want := fmt.Sprintf("[%s/%s/web] %s/web is ready", c, x.ns, x.ns); res.Code != 0 || !strings.Contains(res.Stdout, want) {
			t.Errorf("wait -l: want %q: %s", want, res)
		}
	}
	res = x.run("wait", "repl", "--for=ready", "--contexts", "bed-*", "-n", x.ns, "--timeout", "2m")
	if res.Code == 0 || strings.Count(res.Stdout, "/repl is ready") != 2 || strings.Count(res.Stderr, "ERROR: context ") != 1 ||
		!strings.Contains(res.Stderr, "ERROR: context bed-gone: ") {
		t.Errorf("wait repl over bed-*: %s", res)
	}
}

// fleetSummaryRows are the fields of each row of the summary table that ends a fleet run's
// plain output (CONTEXT NAMESPACE CLUSTER OUTCOME DURATION REASON).
func fleetSummaryRows(t *testing.T, res cliResult) [][]string {
	t.Helper()
	i := strings.Index(res.Stdout, "\nCONTEXT ")
	if i < 0 {
		t.Fatalf("no summary table: %s", res)
	}
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(res.Stdout[i+1:]), "\n")[1:] {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// fleetEvents are the NDJSON lines of a fleet run, each with its context ("" for the final
// fleet-summary).
type fleetEvent struct {
	Context string `json:"context"`
	Cluster string `json:"cluster"`
	Type    string `json:"type"`
	Outcome string `json:"outcome"`
	Plan    *struct {
		Engine string `json:"engine"`
	} `json:"plan"`
	Targets []struct {
		Context, Namespace, Cluster, Outcome, ReasonCode string
	} `json:"targets"`
}

func fleetEvents(t *testing.T, res cliResult) []fleetEvent {
	t.Helper()
	var evs []fleetEvent
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		var ev fleetEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not NDJSON: %q: %v\n%s", line, err, res)
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestFleetRestart: a rolling restart over the two control planes, each with clusters of two
// engines (a generic and a replicated one), named per context by a fleet file without a
// CLUSTER argument, --canary 1 --max-parallel 2: the canary target (bed-a's replicated
// cluster) runs alone and ends before any other target writes a line; then at most two
// targets run at once; every pod of every cluster comes back with a new UID; every NDJSON
// event names its context and cluster and each target's plan is its own cluster's engine; the
// stream ends with a fleet-summary of four successes.
func TestFleetRestart(t *testing.T) {
	bedB.get(t)
	x := newFleetEnv(t, false)
	engines := map[string]string{"web": "generic", "repl": "replicated"}
	before := map[string]map[string]string{}
	for _, c := range []string{"bed-a", "bed-b"} {
		x.generic(c, x.ns, "web", 2)
		x.replicatedIn(c, x.ns, "repl", 2, true)
		for cl := range engines {
			before[c+"/"+cl] = x.uids(c, x.ns, cl)
		}
	}
	file := x.fleetFile(fmt.Sprintf("namespaces: [%s]\ntargets:\n- context: bed-a\n  clusters: [repl, web]\n- context: bed-b\n  clusters: [web, repl]\n", x.ns))
	res := x.run("restart", "--rolling", "--fleet", file, "--canary", "1", "--max-parallel", "2", "--yes", "-o", "json")
	if res.Code != 0 {
		t.Fatalf("fleet restart: want exit 0: %s", res)
	}
	evs := fleetEvents(t, res)
	first, last, planned := map[string]int{}, map[string]int{}, map[string]string{}
	for i, ev := range evs[:len(evs)-1] {
		tg := ev.Context + "/" + ev.Cluster
		if _, ok := before[tg]; !ok {
			t.Fatalf("event %d without a target of the fleet (context %q, cluster %q): %+v", i, ev.Context, ev.Cluster, ev)
		}
		if ev.Plan != nil {
			planned[tg] = ev.Plan.Engine
		}
		if _, seen := first[tg]; !seen {
			first[tg] = i
		}
		last[tg] = i
	}
	if len(first) != len(before) {
		t.Fatalf("events of %d targets, want %d", len(first), len(before))
	}
	for tg := range before {
		_, cl, _ := strings.Cut(tg, "/")
		if planned[tg] != engines[cl] {
			t.Errorf("%s planned by engine %q, want %s", tg, planned[tg], engines[cl])
		}
	}
	const canary = "bed-a/repl"
	for tg := range before {
		if tg != canary && first[tg] < last[canary] {
			t.Errorf("%s wrote its first event (line %d) before the canary %s ended (line %d)", tg, first[tg], canary, last[canary])
		}
	}
	// A target runs from its first line to its last (done): never more than two at once.
	for i := range evs {
		running := 0
		for tg := range before {
			if first[tg] <= i && i <= last[tg] {
				running++
			}
		}
		if running > 2 {
			t.Fatalf("line %d: %d targets running at once with --max-parallel 2", i, running)
		}
	}
	sum := evs[len(evs)-1]
	var got []string
	for _, tg := range sum.Targets {
		got = append(got, tg.Context+"/"+tg.Cluster+" "+tg.Outcome)
	}
	if want := "bed-a/repl succeeded,bed-a/web succeeded,bed-b/web succeeded,bed-b/repl succeeded"; sum.Type != "fleet-summary" || strings.Join(got, ",") != want {
		t.Errorf("summary %s %v, want %s", sum.Type, got, want)
	}
	for tg, uids := range before {
		c, cl, _ := strings.Cut(tg, "/")
		after := x.uids(c, x.ns, cl)
		for pod, uid := range uids {
			if after[pod] == "" || after[pod] == uid {
				t.Errorf("%s: pod %s/%s not restarted (uid %s -> %q)", c, x.ns, pod, uid, after[pod])
			}
		}
	}
}

// TestFleetRestartFailFast (issue #39's Done when): a fleet file names a generic and a
// replicated cluster on each control plane, restarted with --canary 1 --max-parallel 2. The
// canary (bed-b's generic cluster) succeeds; then bed-b's replicated cluster (its restarted
// pods take 20s to get Ready) and bed-a's generic cluster run at once. bed-a's generic cluster
// has a pod that never gets Ready (the template starts it in an hour): its restart is refused
// (exit 5, PodNotReady). With --fail-fast (the default) no new target starts (bed-a's
// replicated cluster: pods and lock untouched) and the running one finishes its pod in flight
// and stops at the boundary (outcome stopped, its journal unfinished). The summary says which,
// stderr names the failed context, the exit code is the worst (5). Then the pod is made able
// to start and `resume --fleet FILE --start-not-started` finishes the rest: bed-b's replicated
// cluster from its journal, and the two targets the run never started (bed-a's) with the run's
// command; every pod of every cluster is restarted, exit 0.
func TestFleetRestartFailFast(t *testing.T) {
	bedB.get(t)
	x := newFleetEnv(t, false)
	onDelete := func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType }
	x.generic("bed-b", x.ns, "web", 2)
	x.replicatedIn("bed-b", x.ns, "repl", 2, true, onDelete)
	x.generic("bed-a", x.ns, "web", 2, onDelete)
	x.replicatedIn("bed-a", x.ns, "repl", 2, true)
	for _, c := range []string{"bed-a", "bed-b"} {
		// As a cluster set up by other means than dbops: no lock, no journal.
		if err := x.client(c).CoordinationV1().Leases(x.ns).Delete(t.Context(), lock.LeaseName("repl"), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// bed-b's replicated pods made from now on take 20s to get Ready: its first restarted pod is
	// still in flight when bed-a's generic cluster is refused.
	setDelay := func(c, name, delay string) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := x.client(c).AppsV1().StatefulSets(x.ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Template.Annotations = nil
			if delay != "" {
				s.Spec.Template.Annotations = map[string]string{testbed.PodStartDelayAnnotation: delay}
			}
			_, err = x.client(c).AppsV1().StatefulSets(x.ns).Update(t.Context(), s, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setDelay("bed-b", "repl", "20s")
	// bed-a's web-1 is made again with an hour's start delay: never Ready during the test.
	setDelay("bed-a", "web", "1h")
	old := x.uids("bed-a", x.ns, "web")["web-1"]
	if err := x.client("bed-a").CoreV1().Pods(x.ns).Delete(t.Context(), "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodsIn(t, x.client("bed-a"), x.ns, labels.Everything(), 1, func(p *corev1.Pod) bool {
		return p.Name == "web-1" && string(p.UID) != old && p.DeletionTimestamp == nil
	})
	before := map[string]map[string]string{}
	for _, tg := range []string{"bed-b/web", "bed-b/repl", "bed-a/web", "bed-a/repl"} {
		c, cl, _ := strings.Cut(tg, "/")
		before[tg] = x.uids(c, x.ns, cl)
	}
	rowsOf := func(res cliResult) string {
		t.Helper()
		i := strings.Index(res.Stdout, "CONTEXT ")
		if i < 0 {
			t.Fatalf("no summary table: %s", res)
		}
		var rows []string
		for _, l := range strings.Split(strings.TrimSpace(res.Stdout[i:]), "\n")[1:] {
			f := strings.Fields(l)
			rows = append(rows, f[0]+"/"+f[2]+" "+f[3])
		}
		return strings.Join(rows, ",")
	}
	file := x.fleetFile(fmt.Sprintf("namespaces: [%s]\ntargets:\n- context: bed-b\n  clusters: [web, repl]\n- context: bed-a\n  clusters: [web, repl]\n", x.ns))
	// --pause-between-clusters gives bed-b's replicated cluster a head start: its first pod is
	// normally in flight when bed-a's generic cluster is refused.
	res := x.run("restart", "--rolling", "--fleet", file, "--canary", "1", "--max-parallel", "2", "--pause-between-clusters", "5s", "--timeout", "3m", "--yes")
	if res.Code != 5 {
		t.Fatalf("want exit 5 (bed-a's web refused: a pod not Ready): %s", res)
	}
	if got := rowsOf(res); got != "bed-b/web succeeded,bed-b/repl stopped,bed-a/web failed,bed-a/repl not-started" {
		t.Errorf("summary rows %s: %s", got, res)
	}
	if !strings.Contains(res.Stderr, "ERROR: context bed-a, cluster "+x.ns+"/web: failed: ") || !strings.Contains(res.Stderr, "is not Ready") {
		t.Errorf("stderr does not name bed-a and its pod: %s", res)
	}
	// The running target stopped at a boundary: its pod in flight was restarted, the other not.
	changed := 0
	after := x.uids("bed-b", x.ns, "repl")
	for pod, uid := range before["bed-b/repl"] {
		if after[pod] != uid {
			changed++
		}
	}
	// Its second pod is not touched: the stop comes at the boundary after the pod in flight
	// (20s to get Ready), or before the first if the refusal came first.
	if changed > 1 {
		t.Errorf("bed-b/repl: %d pods restarted, want at most the one in flight: %v -> %v", changed, before["bed-b/repl"], after)
	}
	t.Logf("bed-b/repl: %d pod(s) restarted before the stop", changed)
	l, err := x.client("bed-b").CoordinationV1().Leases(x.ns).Get(t.Context(), lock.LeaseName("repl"), metav1.GetOptions{})
	if err != nil || !strings.Contains(l.Annotations["dbops.io/journal"], `"state":"paused"`) {
		t.Errorf("bed-b/repl journal after the stop: %v, %v", l, err)
	}
	// Nothing new started: bed-a's replicated cluster untouched, no lock written; bed-a's web
	// refused before any change.
	if got := x.uids("bed-a", x.ns, "repl"); fmt.Sprint(got) != fmt.Sprint(before["bed-a/repl"]) {
		t.Errorf("bed-a/repl: pods changed %v -> %v", before["bed-a/repl"], got)
	}
	if _, err := x.client("bed-a").CoordinationV1().Leases(x.ns).Get(t.Context(), lock.LeaseName("repl"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("bed-a/repl: lease read %v: a target that never started wrote its lock", err)
	}
	if got := x.uids("bed-a", x.ns, "web"); fmt.Sprint(got) != fmt.Sprint(before["bed-a/web"]) {
		t.Errorf("bed-a/web: pods changed by a refused restart %v -> %v", before["bed-a/web"], got)
	}

	// The pod can start again: the template loses its delay and the stuck pod is deleted (its
	// StatefulSet makes it again, Ready at once).
	setDelay("bed-a", "web", "")
	if err := x.client("bed-a").CoreV1().Pods(x.ns).Delete(t.Context(), "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodsIn(t, x.client("bed-a"), x.ns, labels.Everything(), 2, func(p *corev1.Pod) bool {
		return strings.HasPrefix(p.Name, "web-") && testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
	for pod, uid := range x.uids("bed-a", x.ns, "web") {
		before["bed-a/web"][pod] = uid
	}
	res = x.run("resume", "--fleet", file, "--timeout", "3m", "--yes", "--start-not-started")
	if res.Code != 0 {
		t.Fatalf("resume: want exit 0 (the rest finished): %s", res)
	}
	if got := rowsOf(res); got != "bed-b/web nothing-to-resume,bed-b/repl succeeded,bed-a/web succeeded,bed-a/repl succeeded" {
		t.Errorf("resume summary rows %s: %s", got, res)
	}
	if !strings.Contains(res.Stderr, "[bed-a/"+x.ns+"/repl] starting the fleet run ") {
		t.Errorf("resume stderr does not say it starts the run's command on bed-a's replicated cluster: %s", res)
	}
	for tg, uids := range before {
		c, cl, _ := strings.Cut(tg, "/")
		after := x.uids(c, x.ns, cl)
		for pod, uid := range uids {
			if after[pod] == "" || after[pod] == uid {
				t.Errorf("%s: pod %s not restarted (uid %s -> %q)", tg, pod, uid, after[pod])
			}
		}
		l, err := x.client(c).CoordinationV1().Leases(x.ns).Get(t.Context(), lock.LeaseName(cl), metav1.GetOptions{})
		if err != nil || !strings.Contains(l.Annotations["dbops.io/journal"], `"state":"succeeded"`) || !strings.Contains(l.Annotations["dbops.io/journal"], `"fleet":{"id":"`) {
			t.Errorf("%s: journal %v, %v", tg, l, err)
		}
	}
}

// TestFleetRestartLockedAndStopped: --max-parallel 2 over three targets. bed-b's lock (of a
// generic cluster) is held by someone else: it is reported as skipped at once (never waited
// on) and stops nothing; bed-b-3 names a namespace without the cluster and fails; with
// --fail-fast (the default) bed-a-2 (a replicated cluster), running (its restarted pods take
// 15s to get Ready), stops before its next pod:
// outcome stopped, its journal unfinished, and `resume` on its context finishes it.
func TestFleetRestartLockedAndStopped(t *testing.T) {
	bedB.get(t)
	x := newFleetEnv(t, false)
	ns2, ns3 := x.namespace(), x.namespace()
	x.context("bed-a-2", "bed-a", ns2)
	x.context("bed-b", "bed-b", x.ns)
	x.context("bed-b-3", "bed-b", ns3)
	// bed-a-2's cluster is of the replicated engine, bed-b's generic.
	x.replicatedIn("bed-a-2", ns2, "web", 3, true, func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType })
	updateStatefulSet(t.Context(), t, ns2, "web", func(s *appsv1.StatefulSet) {
		s.Spec.Template.Annotations = map[string]string{testbed.PodStartDelayAnnotation: "15s"}
	})
	x.generic("bed-b", x.ns, "web", 2)
	if res := x.run("lock", "acquire", "web", "--context", "bed-b", "--id", "bob@elsewhere", "--reason", "INC-7"); res.Code != 0 {
		t.Fatalf("lock acquire: %s", res)
	}
	beforeA2, beforeB := x.uids("bed-a-2", ns2, "web"), x.uids("bed-b", x.ns, "web")
	res := x.run("restart", "web", "--rolling", "--contexts", "bed-a-2,bed-b,bed-b-3", "--max-parallel", "2", "--timeout", "5m", "--yes")
	if res.Code == 0 {
		t.Fatalf("want a failure (bed-b-3 has no cluster web): %s", res)
	}
	var rows []string
	for _, f := range fleetSummaryRows(t, res) {
		rows = append(rows, f[0]+" "+f[3])
	}
	if strings.Join(rows, ",") != "bed-a-2 stopped,bed-b skipped,bed-b-3 failed" {
		t.Errorf("summary rows %v: %s", rows, res)
	}
	if !strings.Contains(res.Stderr, "ERROR: context bed-b, cluster "+x.ns+"/web: skipped: ") || !strings.Contains(res.Stderr, "bob@elsewhere") {
		t.Errorf("stderr does not report bed-b's lock: %s", res)
	}
	if got := x.uids("bed-b", x.ns, "web"); fmt.Sprint(got) != fmt.Sprint(beforeB) {
		t.Errorf("bed-b: pods changed under someone else's lock %v -> %v", beforeB, got)
	}
	kept := 0
	for pod, uid := range x.uids("bed-a-2", ns2, "web") {
		if beforeA2[pod] == uid {
			kept++
		}
	}
	if kept == 0 {
		t.Errorf("bed-a-2: every pod restarted: it did not stop")
	}
	l, err := x.client("bed-a-2").CoordinationV1().Leases(ns2).Get(t.Context(), lock.LeaseName("web"), metav1.GetOptions{})
	if err != nil || strings.Contains(l.Annotations["dbops.io/journal"], `"state":"succeeded"`) || !strings.Contains(l.Annotations["dbops.io/journal"], `"request"`) {
		t.Fatalf("bed-a-2: journal not resumable %v, %v", l, err)
	}
	res = x.run("resume", "web", "--context", "bed-a-2", "--timeout", "3m", "--yes")
	if res.Code != 0 {
		t.Fatalf("resume bed-a-2: %s", res)
	}
	after := x.uids("bed-a-2", ns2, "web")
	for pod, uid := range beforeA2 {
		if after[pod] == "" || after[pod] == uid {
			t.Errorf("bed-a-2: pod %s not restarted after resume (uid %s -> %q)", pod, uid, after[pod])
		}
	}
}

// TestFleetLockAndScale: the writing commands over two control planes. `lock acquire` over
// bed-a and bed-b takes each cluster's Lease in its own API server and `lock release` gives both
// up; then `scale --replicas 3` of a replicated cluster (two pods in each bed) runs the
// single-cluster scale in each context: both StatefulSets have three Ready pods, the new pod
// got its role, and the summary says two successes.
func TestFleetLockAndScale(t *testing.T) {
	bedB.get(t)
	x := newFleetEnv(t, false)
	apps := map[string]*replApp{}
	for _, c := range []string{"bed-a", "bed-b"} {
		apps[c] = x.replicated(c, "repl", 2)
		for o, v := range []string{"5", "3", "1"} {
			apps[c].setSeq(o, v)
		}
	}
	rows := func(res cliResult) string {
		t.Helper()
		i := strings.Index(res.Stdout, "CONTEXT ")
		if i < 0 {
			t.Fatalf("no summary table: %s", res)
		}
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(res.Stdout[i:]), "\n")[1:] {
			f := strings.Fields(l)
			out = append(out, f[0]+" "+f[3])
		}
		return strings.Join(out, ",")
	}
	holder := func(c string) string {
		t.Helper()
		l, err := x.client(c).CoordinationV1().Leases(x.ns).Get(t.Context(), lock.LeaseName("repl"), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: lease: %v", c, err)
		}
		if l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	res := x.run("lock", "acquire", "repl", "--contexts", "bed-a,bed-b", "-n", x.ns, "--lock-id", "ci@fleet", "--reason", "e2e", "--yes")
	if res.Code != 0 || rows(res) != "bed-a succeeded,bed-b succeeded" {
		t.Fatalf("lock acquire: %s", res)
	}
	if holder("bed-a") != "ci@fleet" || holder("bed-b") != "ci@fleet" {
		t.Fatalf("holders after acquire: bed-a %q, bed-b %q", holder("bed-a"), holder("bed-b"))
	}
	res = x.run("lock", "release", "repl", "--contexts", "bed-a,bed-b", "-n", x.ns, "--lock-id", "ci@fleet", "--yes")
	if res.Code != 0 || rows(res) != "bed-a succeeded,bed-b succeeded" {
		t.Fatalf("lock release: %s", res)
	}
	if holder("bed-a") != "" || holder("bed-b") != "" {
		t.Fatalf("holders after release: bed-a %q, bed-b %q", holder("bed-a"), holder("bed-b"))
	}

	res = x.run("scale", "repl", "--replicas", "3", "--contexts", "bed-a,bed-b", "-n", x.ns, "--max-parallel", "2", "--timeout", "3m", "--yes")
	if res.Code != 0 || rows(res) != "bed-a succeeded,bed-b succeeded" {
		t.Fatalf("fleet scale: %s", res)
	}
	for _, c := range []string{"bed-a", "bed-b"} {
		sts, err := x.client(c).AppsV1().StatefulSets(x.ns).Get(t.Context(), "repl", metav1.GetOptions{})
		if err != nil || *sts.Spec.Replicas != 3 {
			t.Errorf("%s: statefulset %v, %v", c, sts, err)
		}
		pods := waitPodsIn(t, x.client(c), x.ns, labels.SelectorFromSet(labels.Set{"app": "repl"}), 3, func(p *corev1.Pod) bool {
			return testbed.PodReady(p) && p.DeletionTimestamp == nil
		})
		for _, p := range pods {
			if p.Name == "repl-2" && p.Labels["dbops.io/role"] == "" {
				t.Errorf("%s: the new pod has no role: %v", c, p.Labels)
			}
		}
	}
}
