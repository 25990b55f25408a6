//go:build e2e

package e2e

// Harness for the CLI end-to-end tests: builds the real kubectl-dbops binary once, runs it
// against the shared testbed with an isolated environment, streams its NDJSON output, records
// watches on pods and leases, and snapshots a namespace to prove that nothing was written.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubectl-dbops/kubectl-dbops/internal/racebuild"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// cliTimeout bounds every run of the binary.
const cliTimeout = 3 * time.Minute

var (
	dbopsBuildOnce sync.Once
	dbopsBinPath   string
	dbopsBuildErr  error
)

// dbopsBinary builds cmd/kubectl-dbops once per test process into the testbed folder (removed
// when the testbed stops) and returns its path.
func dbopsBinary(t *testing.T) string {
	t.Helper()
	dbopsBuildOnce.Do(func() {
		dir := filepath.Join(bed.Dir, "dbops-bin")
		if dbopsBuildErr = os.MkdirAll(dir, 0o755); dbopsBuildErr != nil {
			return
		}
		dbopsBinPath = filepath.Join(dir, "kubectl-dbops")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, racebuild.BuildFlags(racebuild.CLI)...), "-o", dbopsBinPath, "github.com/kubectl-dbops/kubectl-dbops/cmd/kubectl-dbops")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			dbopsBuildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if dbopsBuildErr != nil {
		t.Fatalf("build kubectl-dbops: %v", dbopsBuildErr)
	}
	return dbopsBinPath
}

// cliEnv is the child's environment: the parent's minus anything that could leak user
// configuration (kubeconfig, DBOPS_*, XDG dirs), with KUBECONFIG on the testbed and a fresh
// HOME per test.
func cliEnv(t *testing.T) []string {
	t.Helper()
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "KUBECONFIG" || k == "HOME" || k == "NO_COLOR" || strings.HasPrefix(k, "DBOPS_") || strings.HasPrefix(k, "XDG_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"KUBECONFIG="+bed.KubeconfigPath,
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"),
	)
}

// defaultLockID is the lock ID the tool derives from the testbed kubeconfig: <user>@<host:port>.
func defaultLockID(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(bed.APIServerURL)
	if err != nil {
		t.Fatalf("parse API server URL %q: %v", bed.APIServerURL, err)
	}
	return "admin@" + u.Host
}

// cliResult is a finished run of the binary.
type cliResult struct {
	Args    []string
	Code    int
	Stdout  string
	Stderr  string
	Elapsed time.Duration
	// CPU is the process's user + system time (kubectl execs a plugin in its own process,
	// so for `kubectl dbops` this is kubectl's start and the plugin's run together).
	CPU time.Duration
}

func (r cliResult) String() string {
	return fmt.Sprintf("kubectl-dbops %s: exit %d after %s\n--- stdout:\n%s--- stderr:\n%s",
		strings.Join(r.Args, " "), r.Code, r.Elapsed.Round(time.Millisecond), r.Stdout, r.Stderr)
}

// cliExitCode returns the process exit code, or -1 when it did not exit normally.
func cliExitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		t.Fatalf("run kubectl-dbops: %v", err)
		return -1
	}
}

// failOnRace fails the test when a CLI built with -race (racebuild) reported a data race: a
// race report alone does not always change the exit code a test expects (a killed run, a
// refusal's exit 2 printed before the report).
func failOnRace(t *testing.T, res cliResult) {
	t.Helper()
	if strings.Contains(res.Stderr, "WARNING: DATA RACE") {
		t.Errorf("the race detector reported a data race in the CLI: %s", res)
	}
}

// runCLI runs the binary to completion with the test's environment.
func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, dbopsBinary(t), args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := cliResult{Args: args, Code: cliExitCode(t, err), Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("kubectl-dbops did not finish within %s: %s", cliTimeout, res)
	}
	failOnRace(t, res)
	t.Logf("kubectl-dbops %s: exit %d in %s", strings.Join(args, " "), res.Code, res.Elapsed.Round(time.Millisecond))
	return res
}

// kubectlEnv is cliEnv with a PATH holding only this build as the kubectl-dbops plugin and
// the test bed's kubectl, so `kubectl dbops` finds ours and no other kubectl-dbops shadows it.
func kubectlEnv(t *testing.T) []string {
	t.Helper()
	return pluginPath(t, cliEnv(t))
}

// pluginPath returns env with its PATH replaced as kubectlEnv describes.
func pluginPath(t *testing.T, env []string) []string {
	t.Helper()
	pluginDir, kubectlDir := t.TempDir(), t.TempDir()
	if err := os.Symlink(dbopsBinary(t), filepath.Join(pluginDir, "kubectl-dbops")); err != nil {
		t.Fatalf("symlink plugin: %v", err)
	}
	if err := os.Symlink(bed.Kubectl(), filepath.Join(kubectlDir, "kubectl")); err != nil {
		t.Fatalf("symlink kubectl: %v", err)
	}
	env = slices.Clone(env)
	for i, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			env[i] = "PATH=" + pluginDir + string(os.PathListSeparator) + kubectlDir
		}
	}
	return env
}

// runKubectl runs kubectl (the path given) with args and env, as runCLI runs the plugin.
func runKubectl(t *testing.T, kubectl string, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := cliResult{Args: append([]string{"(kubectl)"}, args...), Code: cliExitCode(t, err), Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("kubectl did not finish within %s: %s", cliTimeout, res)
	}
	failOnRace(t, res)
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
	}
	t.Logf("kubectl %s: exit %d in %s, %s CPU", strings.Join(args, " "), res.Code, res.Elapsed.Round(time.Millisecond), res.CPU.Round(time.Millisecond))
	return res
}

// ndEvent is the part of an NDJSON event the tests look at.
type ndEvent struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	Step *struct {
		Index  int    `json:"index"`
		Total  int    `json:"total"`
		ID     string `json:"id"`
		Target string `json:"target"`
	} `json:"step"`
	Reason  string        `json:"reason"`
	Message string        `json:"message"`
	Error   string        `json:"error"`
	Outcome string        `json:"outcome"`
	Elapsed time.Duration `json:"elapsedNs"`
	ETA     *ndETA        `json:"eta"`
	// APIRequests is the done event's request count by "verb resource", plus "total".
	APIRequests map[string]int `json:"apiRequests"`
	Lock        *struct {
		Action string `json:"action"`
		Holder string `json:"holder"`
	} `json:"lock"`
	Plan *struct {
		Steps []struct {
			ID   string `json:"id"`
			Done bool   `json:"done"`
		} `json:"steps"`
	} `json:"plan"`
}

func (e ndEvent) stepID() string {
	if e.Step == nil {
		return ""
	}
	return e.Step.ID
}

// runningCLI is a started `-o json` run whose NDJSON stdout is decoded as it streams.
type runningCLI struct {
	t       *testing.T
	args    []string
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	start   time.Time
	events  chan ndEvent // closed at the end of stdout
	readErr chan error
	stdout  bytes.Buffer // raw lines, written by the reader goroutine only
	stderr  bytes.Buffer
	all     []ndEvent
	done    bool
}

// startCLI starts the binary; args must include -o json for events to stream.
func startCLI(t *testing.T, env []string, args ...string) *runningCLI {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	r := &runningCLI{t: t, args: args, cancel: cancel, events: make(chan ndEvent, 1024), readErr: make(chan error, 1)}
	r.cmd = exec.CommandContext(ctx, dbopsBinary(t), args...)
	r.cmd.Env = env
	r.cmd.Stderr = &r.stderr
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatalf("stdout pipe: %v", err)
	}
	r.start = time.Now()
	if err := r.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start kubectl-dbops: %v", err)
	}
	t.Cleanup(func() {
		if !r.done { // a failed test left it running: make sure it does not outlive the test
			_ = r.cmd.Process.Signal(syscall.SIGCONT)
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
		}
		cancel()
	})
	go func() {
		defer close(r.events)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			r.stdout.Write(line)
			r.stdout.WriteByte('\n')
			var ev ndEvent
			if err := json.Unmarshal(line, &ev); err != nil {
				r.readErr <- fmt.Errorf("stdout line is not JSON: %q: %v", line, err)
				return
			}
			r.events <- ev
		}
		r.readErr <- sc.Err()
	}()
	return r
}

// next returns the next event, or false at the end of the output.
func (r *runningCLI) next() (ndEvent, bool) {
	ev, ok := <-r.events
	if ok {
		r.all = append(r.all, ev)
	}
	return ev, ok
}

// waitEvent reads events until one satisfies match; it fails the test at the end of the output.
func (r *runningCLI) waitEvent(what string, match func(ndEvent) bool) ndEvent {
	r.t.Helper()
	for {
		ev, ok := r.next()
		if !ok {
			res := r.wait()
			r.t.Fatalf("output ended before %s: %s", what, res)
		}
		if match(ev) {
			return ev
		}
	}
}

// wait drains the output and waits for the process to exit.
func (r *runningCLI) wait() cliResult {
	r.t.Helper()
	for {
		if _, ok := r.next(); !ok {
			break
		}
	}
	readErr := <-r.readErr
	err := r.cmd.Wait()
	r.done = true
	r.cancel()
	res := cliResult{Args: r.args, Code: cliExitCode(r.t, err), Stdout: r.stdout.String(), Stderr: r.stderr.String(), Elapsed: time.Since(r.start)}
	if readErr != nil {
		r.t.Errorf("reading NDJSON output: %v\n%s", readErr, res)
	}
	failOnRace(r.t, res)
	r.t.Logf("kubectl-dbops %s: exit %d in %s", strings.Join(r.args, " "), res.Code, res.Elapsed.Round(time.Millisecond))
	return res
}

// parseNDJSON decodes a finished run's stdout.
func parseNDJSON(t *testing.T, res cliResult) []ndEvent {
	t.Helper()
	var evs []ndEvent
	for line := range strings.Lines(res.Stdout) {
		var ev ndEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("stdout line is not JSON: %q: %v\n%s", line, err, res)
		}
		evs = append(evs, ev)
	}
	return evs
}

// lastOutcome returns the outcome of the final "done" event.
func lastOutcome(evs []ndEvent) string {
	if len(evs) == 0 || evs[len(evs)-1].Type != "done" {
		return "<no done event last>"
	}
	return evs[len(evs)-1].Outcome
}

// stepsOf returns the step IDs of events of type typ, in order.
func stepsOf(evs []ndEvent, typ string) []string {
	var ids []string
	for _, e := range evs {
		if e.Type == typ {
			ids = append(ids, e.stepID())
		}
	}
	return ids
}

// ---- database cluster fixture ----

// createDBCluster creates a 'generic' database cluster: a StatefulSet carrying the dbops.io
// labels, and waits until its pods are Ready, its claims Bound and its status settled, so that
// later snapshots of the namespace are not disturbed by controllers catching up.
func createDBCluster(t *testing.T, ns, name string, replicas int32, mutate ...func(*appsv1.StatefulSet)) []*corev1.Pod {
	t.Helper()
	sts := statefulSet(name, replicas)
	for _, m := range mutate {
		m(sts)
	}
	// statefulSet shares one map between labels and selector: copy before adding.
	sts.Labels = maps.Clone(sts.Labels)
	maps.Copy(sts.Labels, map[string]string{
		"dbops.io/cluster":    name,
		"dbops.io/node-group": name,
		"dbops.io/role":       "data",
		"dbops.io/engine":     "generic",
	})
	if _, err := bed.Client.AppsV1().StatefulSets(ns).Create(t.Context(), sts, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create statefulset: %v", err)
	}
	pods := waitPods(t, ns, labels.SelectorFromSet(labels.Set{"app": name}), int(replicas), func(p *corev1.Pod) bool {
		return testbed.PodReady(p) && p.DeletionTimestamp == nil
	})
	waitPVCsBound(t, ns, int(replicas))
	waitStatefulSetSettled(t, ns, name, replicas)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods
}

// waitStatefulSetSettled watches the StatefulSet until its status reports every replica ready,
// available and on the current revision.
func waitStatefulSetSettled(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	c := bed.Client.AppsV1().StatefulSets(ns)
	sel := "metadata.name=" + name
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return c.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return c.Watch(ctx, o)
		},
	}
	var last string
	settled := func(s cache.Store) bool {
		for _, o := range s.List() {
			obj, ok := o.(*appsv1.StatefulSet)
			if !ok {
				continue
			}
			st := obj.Status
			last = fmt.Sprintf("%+v", st)
			return st.ObservedGeneration == obj.Generation && st.ReadyReplicas == replicas && st.AvailableReplicas == replicas &&
				st.CurrentReplicas == replicas && st.UpdatedReplicas == replicas && st.CurrentRevision == st.UpdateRevision
		}
		return false
	}
	var store cache.Store
	if _, err := watchtools.UntilWithSync(ctx, lw, &appsv1.StatefulSet{},
		func(s cache.Store) (bool, error) { store = s; return settled(s), nil },
		func(watch.Event) (bool, error) { return settled(store), nil }); err != nil {
		t.Fatalf("wait for statefulset %s/%s to settle: %v (last status %s)", ns, name, err, last)
	}
}

// ---- watch recorder ----

// recordedEvent is one watch event as received, in the API server's order for the resource.
type recordedEvent struct {
	At   time.Time
	Type watch.EventType
	Obj  runtime.Object
}

// watchRecorder records every event of a watch started at a list's resourceVersion. Events of one
// resource in one namespace arrive in resourceVersion order, so their order is the order in
// which the API server applied the changes.
type watchRecorder struct {
	mu      sync.Mutex
	initial []runtime.Object
	events  []recordedEvent
	notify  chan struct{} // closed and replaced on every event
	err     error
}

// startRecorder lists with lw, then watches from the list's resourceVersion until the test ends.
func startRecorder(t *testing.T, lw *cache.ListWatch) *watchRecorder {
	t.Helper()
	list, err := lw.ListWithContext(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		t.Fatalf("list accessor: %v", err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatalf("extract list: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := watchtools.NewRetryWatcherWithContext(ctx, lm.GetResourceVersion(), lw)
	if err != nil {
		cancel()
		t.Fatalf("start watch: %v", err)
	}
	r := &watchRecorder{initial: items, notify: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			r.mu.Lock()
			if ev.Type == watch.Error {
				r.err = fmt.Errorf("watch error: %v", ev.Object)
			} else {
				r.events = append(r.events, recordedEvent{At: time.Now(), Type: ev.Type, Obj: ev.Object})
			}
			close(r.notify)
			r.notify = make(chan struct{})
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		w.Stop()
		cancel()
		<-done
	})
	return r
}

// snapshot returns the events so far.
func (r *watchRecorder) snapshot() []recordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// waitUntil waits until cond holds on the events so far (checked on every new event).
func (r *watchRecorder) waitUntil(ctx context.Context, cond func([]recordedEvent) bool) error {
	for {
		r.mu.Lock()
		ok, ch, werr := cond(r.events), r.notify, r.err
		r.mu.Unlock()
		if ok {
			return nil
		}
		if werr != nil {
			return werr
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func recordPodWatch(t *testing.T, ns string) *watchRecorder {
	c := bed.Client.CoreV1().Pods(ns)
	return startRecorder(t, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, o)
		},
	})
}

func recordLeaseWatch(t *testing.T, ns string) *watchRecorder {
	c := bed.Client.CoordinationV1().Leases(ns)
	return startRecorder(t, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, o)
		},
	})
}

// podTransition is a pod watch event reduced to what the ordering checks need.
type podTransition struct {
	Seq         int
	At          time.Time
	Type        watch.EventType
	Namespace   string
	Name        string
	UID         types.UID
	Ready       bool
	Terminating bool
	Phase       corev1.PodPhase
	Node        string
}

func (c podTransition) String() string {
	return fmt.Sprintf("#%d %s %-8s %s uid=%.8s ready=%v terminating=%v phase=%s node=%s", c.Seq, c.At.Format("15:04:05.000"), c.Type, c.Name, c.UID, c.Ready, c.Terminating, c.Phase, c.Node)
}

func podTransitions(evs []recordedEvent) []podTransition {
	var out []podTransition
	for i, e := range evs {
		p, ok := e.Obj.(*corev1.Pod)
		if !ok {
			continue
		}
		out = append(out, podTransition{Seq: i, At: e.At, Type: e.Type, Namespace: p.Namespace, Name: p.Name, UID: p.UID,
			Ready: testbed.PodReady(p) && e.Type != watch.Deleted, Terminating: p.DeletionTimestamp != nil || e.Type == watch.Deleted,
			Phase: p.Status.Phase, Node: p.Spec.NodeName})
	}
	return out
}

// leaseHolderSeen is a waitUntil condition: the lease name was held by holder (any holder when
// empty).
func leaseHolderSeen(name, holder string) func([]recordedEvent) bool {
	return func(evs []recordedEvent) bool {
		for _, e := range evs {
			if l, ok := e.Obj.(*coordinationv1.Lease); ok && l.Name == name && e.Type != watch.Deleted {
				if h := holderString(l.Spec.HolderIdentity); h != "" && (holder == "" || h == holder) {
					return true
				}
			}
		}
		return false
	}
}

func holderString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ---- lease and journal ----

// leaseJournal is the part of the dbops.io/journal annotation the tests check.
type leaseJournal struct {
	Operation string            `json:"operation"`
	Args      string            `json:"args"`
	Holder    string            `json:"holder"`
	State     string            `json:"state"`
	Steps     int               `json:"steps"`
	Done      []string          `json:"done"`
	Current   string            `json:"current"`
	Data      map[string]string `json:"data"`
	Error     string            `json:"error"`
}

// getLockLease returns the cluster's lock Lease and its decoded journal.
func getLockLease(t *testing.T, ns, cluster string) (*coordinationv1.Lease, *leaseJournal) {
	t.Helper()
	l, err := bed.Client.CoordinationV1().Leases(ns).Get(t.Context(), "dbops-"+cluster, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lock lease dbops-%s: %v", cluster, err)
	}
	raw, ok := l.Annotations["dbops.io/journal"]
	if !ok {
		t.Fatalf("lease %s has no dbops.io/journal annotation; annotations: %v", l.Name, l.Annotations)
	}
	var j leaseJournal
	if err := json.Unmarshal([]byte(raw), &j); err != nil {
		t.Fatalf("decode journal %q: %v", raw, err)
	}
	return l, &j
}

// ---- namespace snapshot ----

// rvSnapshot maps "kind/name" to resourceVersion for every object a command could write.
type rvSnapshot map[string]string

func snapshotNamespace(t *testing.T, ns string) rvSnapshot {
	t.Helper()
	ctx := t.Context()
	s := rvSnapshot{}
	add := func(kind string, list runtime.Object, err error) {
		if err != nil {
			t.Fatalf("list %s in %s: %v", kind, ns, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatalf("extract %s: %v", kind, err)
		}
		for _, it := range items {
			m, err := meta.Accessor(it)
			if err != nil {
				t.Fatalf("accessor: %v", err)
			}
			key := kind + "/" + m.GetName()
			if ev, ok := it.(*corev1.Event); ok {
				key += " (" + ev.Reason + " from " + eventReporter(ev) + ")"
			}
			s[key] = m.GetResourceVersion()
		}
	}
	lo := metav1.ListOptions{}
	pods, err := bed.Client.CoreV1().Pods(ns).List(ctx, lo)
	add("pod", pods, err)
	sts, err := bed.Client.AppsV1().StatefulSets(ns).List(ctx, lo)
	add("statefulset", sts, err)
	pvcs, err := bed.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, lo)
	add("pvc", pvcs, err)
	leases, err := bed.Client.CoordinationV1().Leases(ns).List(ctx, lo)
	add("lease", leases, err)
	events, err := bed.Client.CoreV1().Events(ns).List(ctx, lo)
	add("event", events, err)
	cms, err := bed.Client.CoreV1().ConfigMaps(ns).List(ctx, lo)
	add("configmap", cms, err)
	return s
}

func eventReporter(ev *corev1.Event) string {
	if ev.ReportingController != "" {
		return ev.ReportingController
	}
	return ev.Source.Component
}

// diffRVSnapshots reports every object created, changed or deleted between before and after.
// Events recorded by Kubernetes' own components (the scheduler or a controller catching up
// with the fixture) are not writes of the tool and are only logged.
func diffRVSnapshots(t *testing.T, before, after rvSnapshot) []string {
	t.Helper()
	var diffs []string
	foreign := func(key string) bool {
		return strings.HasPrefix(key, "event/") && !strings.Contains(key, "from kubectl-dbops)")
	}
	for k, rv := range after {
		old, ok := before[k]
		switch {
		case !ok && foreign(k):
			t.Logf("ignoring a new event from a Kubernetes component: %s", k)
		case !ok:
			diffs = append(diffs, "created "+k)
		case old != rv && foreign(k):
			t.Logf("ignoring an updated event from a Kubernetes component: %s", k)
		case old != rv:
			diffs = append(diffs, fmt.Sprintf("changed %s (resourceVersion %s -> %s)", k, old, rv))
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			diffs = append(diffs, "deleted "+k)
		}
	}
	sort.Strings(diffs)
	return diffs
}

// dbopsWrites lists the writes (create, update, patch, delete) kubectl-dbops made in ns since
// `since`, from the API server's audit log, other than to the resources in allowed (its own
// lock Lease, say). On real kubelet nodes a resourceVersion snapshot cannot show "no write": the
// kubelet updates pod status on its own, so refusals there are checked by who wrote.
func dbopsWrites(t *testing.T, ns string, since time.Time, allowed ...string) []string {
	t.Helper()
	events, err := bed.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range events {
		if !strings.HasPrefix(e.UserAgent, "kubectl-dbops/") || e.ObjectRef == nil || e.ObjectRef.Namespace != ns ||
			e.RequestReceived.Before(since) || slices.Contains(allowed, e.ObjectRef.Resource) {
			continue
		}
		switch e.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
		default:
			continue
		}
		// A pods/exec or portforward is a "create" of a subresource: it reaches the database, not
		// the API objects, and is counted by the database's own checks.
		if e.ObjectRef.Subresource == "exec" || e.ObjectRef.Subresource == "portforward" {
			continue
		}
		w := e.Verb + " " + e.ObjectRef.Resource + "/" + e.ObjectRef.Name
		if e.ObjectRef.Subresource != "" {
			w += "/" + e.ObjectRef.Subresource
		}
		if !seen[w+e.RequestURI] {
			seen[w+e.RequestURI] = true
			out = append(out, w)
		}
	}
	return out
}
