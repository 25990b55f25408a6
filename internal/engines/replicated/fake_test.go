package replicated

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/golden"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func assertGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Assert(t, name, got)
}

const testNS = "prod"

// testConfig configures every command as /bin/<name>.
const testConfig = `
primaries: 1
commands:
  sequence: {argv: [/bin/sequence], timeout: 5s}
  seed: {argv: [/bin/seed]}
  primary: {argv: [/bin/primary], timeout: 30}
  secondary: {argv: [/bin/secondary]}
  stop: {argv: [/bin/stop]}
  status: {argv: [/bin/status]}
`

// fakeApp plays the application in every pod: the command is the base name
// of argv[0]; sequence prints seq[pod]; fail[cmd][pod] makes it exit 1.
type fakeApp struct {
	mu    sync.Mutex
	seq   map[string]string
	fail  map[string]map[string]bool
	calls []string
	// hook, when set, runs after a call is recorded; an error it returns
	// is the command's result.
	hook func(pod, cmd string) error
}

func newFakeApp() *fakeApp {
	return &fakeApp{seq: map[string]string{}, fail: map[string]map[string]bool{}}
}

func (f *fakeApp) failOn(cmd string, pods ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail[cmd] == nil {
		f.fail[cmd] = map[string]bool{}
	}
	for _, p := range pods {
		f.fail[cmd][p] = true
	}
}

// Exec implements kube.Executor.
func (f *fakeApp) Exec(_ context.Context, _, pod, _ string, argv []string, _ io.Reader) ([]byte, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	argv, _, _ = inPodTimeout(argv)
	cmd := path.Base(argv[0])
	f.calls = append(f.calls, strings.TrimSpace(pod+": "+cmd+" "+strings.Join(argv[1:], " ")))
	if f.hook != nil {
		if err := f.hook(pod, cmd); err != nil {
			return nil, nil, err
		}
	}
	if f.fail[cmd][pod] {
		return nil, []byte(cmd + " failed on purpose\n"), &kube.ExitError{Namespace: testNS, Pod: pod, Code: 1}
	}
	switch cmd {
	case "sequence":
		v, ok := f.seq[pod]
		if !ok {
			return nil, []byte("no data\n"), &kube.ExitError{Namespace: testNS, Pod: pod, Code: 2}
		}
		return []byte(v + "\n"), nil, nil
	case "status":
		return []byte("ok\n"), nil, nil
	}
	return nil, nil, nil
}

// mutations are the calls other than sequence and status.
func (f *fakeApp) mutations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if !strings.Contains(c, ": sequence") && !strings.Contains(c, ": status") {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeApp) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// fixture is a fake API with StatefulSet "db" and a controller that
// recreates deleted pods (template labels only, new UID) and follows
// spec.replicas.
type fixture struct {
	t      *testing.T
	client *fake.Clientset
	app    *fakeApp
	eng    *Engine

	mu      sync.Mutex
	gen     int
	pending []*corev1.Pod
	deleted []string
	watched bool // a pod watch is open: the run's informer sees creations at once
}

func newFixture(t *testing.T, replicas int, roles map[string]string, annotation string) *fixture {
	t.Helper()
	sts := fakecluster.StatefulSet(testNS, "db", int32(replicas))
	sts.Spec.ServiceName = "db-hl"
	sts.Labels["dbops.io/engine"] = "replicated"
	if annotation != "" {
		sts.Annotations[AnnotationConfig] = annotation
	}
	objs := []runtime.Object{sts}
	for o := range replicas {
		p := fakecluster.Pod(sts, o, types.UID(fmt.Sprintf("db-%d-uid0", o)))
		if r := roles[p.Name]; r != "" {
			p.Labels[LabelRole] = r
		}
		objs = append(objs, p)
	}
	f := &fixture{t: t, client: fake.NewClientset(objs...), app: newFakeApp()}
	f.eng = &Engine{Client: f.client, Exec: f.app}
	f.install()
	f.client.ClearActions()
	return f
}

func (f *fixture) newPod(sts *appsv1.StatefulSet, o int) *corev1.Pod {
	f.gen++
	p := fakecluster.Pod(sts, o, types.UID(fmt.Sprintf("db-%d-gen%d", o, f.gen)))
	return p
}

// install adds the StatefulSet controller stand-in. Creations are held
// until the next pod watch opens (the fake drops events between an
// informer's list and watch).
func (f *fixture) install() {
	podsGVR := corev1.SchemeGroupVersion.WithResource("pods")
	fakecluster.PatchReplicasAsUpdate(f.client)
	f.client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		da := a.(k8stesting.DeleteActionImpl)
		obj, err := f.client.Tracker().Get(podsGVR, testNS, da.Name)
		if err != nil {
			return true, nil, err
		}
		old := obj.(*corev1.Pod)
		if err := f.client.Tracker().Delete(podsGVR, testNS, da.Name); err != nil {
			return true, nil, err
		}
		so, err := f.client.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("statefulsets"), testNS, "db")
		if err != nil {
			return true, nil, err
		}
		sts := so.(*appsv1.StatefulSet)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.deleted = append(f.deleted, old.Name)
		var o int
		fmt.Sscanf(strings.TrimPrefix(old.Name, "db-"), "%d", &o)
		f.pending = append(f.pending, f.newPod(sts, o))
		if f.watched {
			go f.flush()
		}
		return true, nil, nil
	})
	f.client.PrependReactor("update", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sts := a.(k8stesting.UpdateActionImpl).GetObject().(*appsv1.StatefulSet)
		n := int(*sts.Spec.Replicas)
		if err := f.client.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("statefulsets"), sts, testNS); err != nil {
			return true, nil, err
		}
		list, _ := f.client.Tracker().List(podsGVR, corev1.SchemeGroupVersion.WithKind("Pod"), testNS)
		have := map[string]bool{}
		for _, p := range list.(*corev1.PodList).Items {
			have[p.Name] = true
			var o int
			fmt.Sscanf(strings.TrimPrefix(p.Name, "db-"), "%d", &o)
			if o >= n {
				_ = f.client.Tracker().Delete(podsGVR, testNS, p.Name)
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for o := range n {
			if !have[fmt.Sprintf("db-%d", o)] {
				f.pending = append(f.pending, f.newPod(sts, o))
			}
		}
		if f.watched {
			go f.flush()
		}
		return true, sts, nil
	})
	f.client.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		wa := a.(k8stesting.WatchActionImpl)
		w, err := f.client.Tracker().Watch(a.GetResource(), wa.GetNamespace(), wa.ListOptions)
		if err != nil {
			return true, nil, err
		}
		f.mu.Lock()
		f.watched = true
		f.mu.Unlock()
		go f.flush()
		return true, w, nil
	})
}

func (f *fixture) flush() {
	f.mu.Lock()
	pending := f.pending
	f.pending = nil
	f.mu.Unlock()
	for _, p := range pending {
		_, _ = f.client.CoreV1().Pods(testNS).Create(context.Background(), p, metav1.CreateOptions{})
	}
}

func (f *fixture) sts() *appsv1.StatefulSet {
	s, err := f.client.AppsV1().StatefulSets(testNS).Get(context.Background(), "db", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// cluster is what discovery would find now.
func (f *fixture) cluster() *ops.Cluster {
	f.t.Helper()
	sts := f.sts()
	g := &ops.NodeGroup{Name: "db", Owner: ops.NewStatefulSetOwner(sts), Role: ops.RoleData, Desired: *sts.Spec.Replicas}
	list, err := f.client.CoreV1().Pods(testNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, p := range list.Items {
		var o int
		fmt.Sscanf(strings.TrimPrefix(p.Name, "db-"), "%d", &o)
		g.Pods = append(g.Pods, ops.Pod{Name: p.Name, Group: "db", Ordinal: o, UID: p.UID, Phase: string(p.Status.Phase), Ready: ops.PodReady(&p)})
	}
	c := &ops.Cluster{Name: "db", Namespace: testNS, Engine: ops.EngineReplicated, Layout: "labels", Groups: []*ops.NodeGroup{g}}
	c.SortGroups()
	return c
}

// roles maps pod → role label now.
func (f *fixture) roles() map[string]string {
	list, err := f.client.CoreV1().Pods(testNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		out[p.Name] = p.Labels[LabelRole]
	}
	return out
}

func (f *fixture) uid(pod string) types.UID {
	p, err := f.client.CoreV1().Pods(testNS).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return p.UID
}

func (f *fixture) run(p *ops.Plan) error {
	return (&ops.Executor{LockID: "test"}).Run(context.Background(), p)
}

func planText(t *testing.T, p *ops.Plan) []byte {
	t.Helper()
	var b strings.Builder
	if err := ops.WritePlanText(&b, p.View()); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// memLocker keeps the journal across executor runs, like the Lease does
// across processes.
type memLocker struct {
	mu      sync.Mutex
	journal *ops.Journal
}

func (m *memLocker) Acquire(_ context.Context, op string) (ops.HeldLock, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var j *ops.Journal
	if m.journal != nil {
		c := *m.journal
		c.Data = maps.Clone(m.journal.Data)
		j = &c
	}
	return &memHeld{m: m, j: j}, nil
}

type memHeld struct {
	m *memLocker
	j *ops.Journal
}

func (h *memHeld) ID() string { return "test" }
func (h *memHeld) Info() ops.LockInfo {
	return ops.LockInfo{Action: ops.LockAcquired, Holder: "test", Expires: time.Now().Add(time.Hour)}
}
func (h *memHeld) Renew(context.Context) (ops.LockInfo, error) { return h.Info(), nil }
func (h *memHeld) Release(context.Context) error               { return nil }
func (h *memHeld) Journal() *ops.Journal                       { return h.j }
func (h *memHeld) Detach(context.Context) error                { return nil }
func (h *memHeld) SaveJournal(_ context.Context, j *ops.Journal) error {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	c := *j
	c.Data = maps.Clone(j.Data)
	c.Done = slices.Clone(j.Done)
	h.m.journal = &c
	return nil
}

// inPodTimeout reads a "timeout -s SIG SECS PROG ARGS" prefix as timeout(1) in the container
// would: the command it runs, and after how long it kills it.
func inPodTimeout(argv []string) (cmd []string, limit time.Duration, wrapped bool) {
	if len(argv) < 5 || argv[0] != "timeout" || argv[1] != "-s" {
		return argv, 0, false
	}
	secs, err := strconv.Atoi(argv[3])
	if err != nil {
		return argv, 0, false
	}
	return argv[4:], time.Duration(secs) * time.Second, true
}
