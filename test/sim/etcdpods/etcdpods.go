// Package etcdpods runs real etcd processes for the pods of an etcd
// StatefulSet on the testbed (kwok pods run nothing by themselves). It is
// not a simulator: each pod that exists and is scheduled gets one etcd
// process, started the way the pod's container would start it, and
// `etcdctl` exec'd "in the pod" talks to that pod's member.
//
// Conventions:
//   - pod ordinal N listens on <AddrPrefix>.<N+1> (a free 127.0.X picked
//     at start unless given), client port 2379, peer port 2380; exec into
//     the pod gets ETCDCTL_ENDPOINTS=http://<AddrPrefix>.<N+1>:2379 and
//     finds etcdctl through a shim on kwok's PATH; the peer URL a pod advertises is
//     PeerURLTemplate(), which the StatefulSet (Objects, the fixture) carries in
//     the annotation dbops.io/etcd-peer-url-template, as a user's manifest would;
//   - the data folder is keyed by the UID of the pod's PVC: recreating the
//     pod keeps the data, deleting the PVC gives a new empty folder;
//   - the process gets the environment a kubelet gives the pod's container
//     (its env and the ConfigMaps of its envFrom, read when the process starts),
//     and etcd reads its ETCD_* variables from it, as the real etcd does
//     (etcd's flags have ETCD_<FLAG> environment equivalents). Objects' fixture
//     puts ETCD_INITIAL_CLUSTER and ETCD_INITIAL_CLUSTER_STATE in the ConfigMap
//     <sts>-cluster-state; the runner takes the layout from the pod, not from
//     the engine;
//   - a crashed process is restarted with a backoff while its pod exists
//     (like a kubelet's restart policy).
package etcdpods

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// Ports every member uses on its own loopback address.
const (
	ClientPort = 2379
	PeerPort   = 2380
)

// Bed is the part of the testbed the runner needs: *testbed.Testbed, or
// a stand-in for a testbed run by another process (the sandbox).
type Bed interface {
	// SetExec maps exec into a pod to local processes with extra env.
	SetExec(ctx context.Context, namespace, pod string, targets ...testbed.ExecTarget) error
	// WriteShim puts a program on kwok's PATH.
	WriteShim(name string, content []byte) (string, error)
}

// Options configure a Runner.
type Options struct {
	Bed         Bed
	Client      kubernetes.Interface
	Namespace   string
	StatefulSet string
	// AddrPrefix is the first three octets of the members' loopback
	// addresses, e.g. "127.0.3". Empty picks a free one in 127.0.20-250,
	// so runners of concurrent test processes do not collide.
	AddrPrefix string
	// MaxMembers bounds the ordinals given exec mappings (default 7).
	MaxMembers int
	// BinDir holds etcd and etcdctl (default: the testbed's binaries).
	BinDir string
	// Dir holds data and logs (default: a temp dir removed by Stop).
	Dir string
	// ElectionTimeout in milliseconds (default 2000: the test machine is
	// slow and shared, spurious elections would make tests flaky).
	ElectionTimeout int
	Logf            func(format string, args ...any)
}

// Runner keeps one etcd process per pod.
type Runner struct {
	opts   Options
	client kubernetes.Interface
	dir    string
	ownDir bool
	etcd   string

	mu        sync.Mutex
	starts    int              // numbers log files
	procs     map[string]*proc // by pod name
	suspended map[string]bool
	stopped   bool
	// transitions records every start and exit of a member process, in order.
	transitions []Transition

	trigger chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	pods    cache.Indexer
	pvcs    cache.Indexer
	cms     cache.Indexer
}

// Transition is one member process starting (Up) or having exited (not Up).
type Transition struct {
	Pod string
	Up  bool
}

// Transitions returns every start and exit of a member process so far, in the order they
// happened: a test reads from it how many members were down at once, which etcd itself does
// not show when the outage is shorter than an election timeout.
func (r *Runner) Transitions() []Transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.transitions)
}

// proc is one etcd process standing in for one pod incarnation.
type proc struct {
	podUID string
	cmd    *exec.Cmd
	exited chan struct{}
	// restarts counts crashes of this pod incarnation, for backoff.
	restarts int
	nextTry  time.Time
	logPath  string
}

// Start sets up exec mappings and the etcdctl shim, then starts watching
// the StatefulSet's pods. Stop ends every process it started.
func Start(ctx context.Context, opts Options) (*Runner, error) {
	if opts.Bed == nil || opts.Client == nil || opts.Namespace == "" || opts.StatefulSet == "" {
		return nil, errors.New("etcdpods: Bed, Client, Namespace and StatefulSet are required")
	}
	if opts.MaxMembers <= 0 {
		opts.MaxMembers = 7
	}
	if opts.AddrPrefix == "" {
		p, err := freePrefix(opts.MaxMembers)
		if err != nil {
			return nil, err
		}
		opts.AddrPrefix = p
	}
	if opts.ElectionTimeout <= 0 {
		opts.ElectionTimeout = 2000
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.BinDir == "" {
		d, err := testbed.DefaultBinDir()
		if err != nil {
			return nil, fmt.Errorf("etcdpods: locating etcd binaries: %w", err)
		}
		opts.BinDir = d
	}
	r := &Runner{opts: opts, client: opts.Client, etcd: filepath.Join(opts.BinDir, "etcd"),
		procs: map[string]*proc{}, suspended: map[string]bool{}, trigger: make(chan struct{}, 1), done: make(chan struct{})}
	for _, b := range []string{r.etcd, filepath.Join(opts.BinDir, "etcdctl")} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("etcdpods: %w", err)
		}
	}
	r.dir, r.ownDir = opts.Dir, opts.Dir == ""
	if r.ownDir {
		d, err := os.MkdirTemp("", "dbops-etcdpods-*")
		if err != nil {
			return nil, fmt.Errorf("etcdpods: %w", err)
		}
		r.dir = d
	}
	for _, d := range []string{r.DataDir(), r.LogDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("etcdpods: %w", err)
		}
	}
	// etcdctl in a pod is the real binary; the pod's endpoint comes from
	// the per-pod exec mapping's environment.
	shim := fmt.Sprintf("#!/bin/sh\nexec %q \"$@\"\n", filepath.Join(opts.BinDir, "etcdctl"))
	if _, err := opts.Bed.WriteShim("etcdctl", []byte(shim)); err != nil {
		return nil, err
	}
	for o := range opts.MaxMembers {
		pod := fmt.Sprintf("%s-%d", opts.StatefulSet, o)
		if err := opts.Bed.SetExec(ctx, opts.Namespace, pod, testbed.ExecTarget{Env: map[string]string{
			"ETCDCTL_ENDPOINTS": r.ClientURL(o),
			"ETCDCTL_API":       "3",
		}}); err != nil {
			return nil, err
		}
	}

	runCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	f := informers.NewSharedInformerFactoryWithOptions(r.client, 0, informers.WithNamespace(opts.Namespace))
	podInf := f.Core().V1().Pods().Informer()
	pvcInf := f.Core().V1().PersistentVolumeClaims().Informer()
	cmInf := f.Core().V1().ConfigMaps().Informer()
	for _, inf := range []cache.SharedIndexInformer{podInf, pvcInf, cmInf} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { r.kick() },
			UpdateFunc: func(any, any) { r.kick() },
			DeleteFunc: func(any) { r.kick() },
		}); err != nil {
			cancel()
			return nil, fmt.Errorf("etcdpods: %w", err)
		}
	}
	r.pods, r.pvcs, r.cms = podInf.GetIndexer(), pvcInf.GetIndexer(), cmInf.GetIndexer()
	f.Start(runCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, pvcInf.HasSynced, cmInf.HasSynced) {
		cancel()
		f.Shutdown()
		return nil, errors.New("etcdpods: informers did not sync")
	}
	go func() {
		defer close(r.done)
		defer f.Shutdown()
		r.loop(runCtx)
	}()
	return r, nil
}

// DataDir holds one folder per PVC UID.
func (r *Runner) DataDir() string { return filepath.Join(r.dir, "data") }

// LogDir holds one log per process start.
func (r *Runner) LogDir() string { return filepath.Join(r.dir, "logs") }

// Addr is the loopback address of ordinal.
func (r *Runner) Addr(ordinal int) string {
	return fmt.Sprintf("%s.%d", r.opts.AddrPrefix, ordinal+1)
}

// ClientURL is the client URL of ordinal.
func (r *Runner) ClientURL(ordinal int) string {
	return fmt.Sprintf("http://%s:%d", r.Addr(ordinal), ClientPort)
}

// PeerURL is the peer URL of ordinal.
func (r *Runner) PeerURL(ordinal int) string {
	return fmt.Sprintf("http://%s:%d", r.Addr(ordinal), PeerPort)
}

// PeerURLTemplate renders like PeerURL for the engine's template.
func (r *Runner) PeerURLTemplate() string {
	return fmt.Sprintf("http://%s.{{add .Ordinal 1}}:%d", r.opts.AddrPrefix, PeerPort)
}

// InitialCluster is ETCD_INITIAL_CLUSTER for ordinals 0..n-1.
func (r *Runner) InitialCluster(n int) string {
	parts := make([]string, n)
	for i := range n {
		parts[i] = fmt.Sprintf("%s-%d=%s", r.opts.StatefulSet, i, r.PeerURL(i))
	}
	return strings.Join(parts, ",")
}

// Endpoints are the client URLs of ordinals 0..n-1, comma separated.
func (r *Runner) Endpoints(n int) string {
	parts := make([]string, n)
	for i := range n {
		parts[i] = r.ClientURL(i)
	}
	return strings.Join(parts, ",")
}

// ConfigMapName is the cluster-state ConfigMap of the fixture (Objects).
func (r *Runner) ConfigMapName() string { return r.opts.StatefulSet + "-cluster-state" }

// peerURLTemplateAnnotation is where the fixture tells kubectl-dbops how a member's peer
// URL is made (README, etcd layouts), as a user's StatefulSet would.
const peerURLTemplateAnnotation = "dbops.io/etcd-peer-url-template"

// Objects returns a StatefulSet (with headless service name, PVC template
// and the peer URL annotation) and its cluster-state ConfigMap for a new
// cluster of n members. Create the ConfigMap first.
func (r *Runner) Objects(n int32) (*appsv1.StatefulSet, *corev1.ConfigMap) {
	name := r.opts.StatefulSet
	lbls := map[string]string{"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.opts.Namespace, Labels: lbls,
			Annotations: map[string]string{peerURLTemplateAnnotation: r.PeerURLTemplate()}},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(n),
			ServiceName:         name + "-headless",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "etcd",
					Image: "registry.k8s.io/etcd:3.6.8-0",
					Env: []corev1.EnvVar{{Name: "MY_POD_NAME", ValueFrom: &corev1.EnvVarSource{
						FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: r.ConfigMapName()}}}},
					Ports:        []corev1.ContainerPort{{Name: "client", ContainerPort: ClientPort}, {Name: "peer", ContainerPort: PeerPort}},
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: r.ConfigMapName(), Namespace: r.opts.Namespace},
		// etcd's own environment names of --initial-cluster and --initial-cluster-state.
		Data: map[string]string{"ETCD_INITIAL_CLUSTER": r.InitialCluster(int(n)), "ETCD_INITIAL_CLUSTER_STATE": "new"},
	}
	return sts, cm
}

// Suspend stops the member of pod and keeps it stopped (a member that is
// down while its pod stays), until Resume.
func (r *Runner) Suspend(pod string) {
	r.mu.Lock()
	r.suspended[pod] = true
	p := r.procs[pod]
	delete(r.procs, pod)
	r.mu.Unlock()
	if p != nil {
		r.stopProc(pod, p)
	}
}

// Resume lets a suspended member start again.
func (r *Runner) Resume(pod string) {
	r.mu.Lock()
	delete(r.suspended, pod)
	r.mu.Unlock()
	r.kick()
}

// Running lists the pods whose etcd process runs now.
func (r *Runner) Running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for pod, p := range r.procs {
		select {
		case <-p.exited:
		default:
			out = append(out, pod)
		}
	}
	return out
}

// Stop ends the watch and every process it started (by PID: SIGTERM,
// SIGKILL after a grace period), then removes its own temp dir.
func (r *Runner) Stop() error {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return nil
	}
	r.stopped = true
	r.mu.Unlock()
	r.cancel()
	<-r.done
	r.mu.Lock()
	procs := r.procs
	r.procs = map[string]*proc{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for pod, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); r.stopProc(pod, p) }()
	}
	wg.Wait()
	if r.ownDir {
		if err := os.RemoveAll(r.dir); err != nil {
			return fmt.Errorf("etcdpods: %w", err)
		}
	}
	return nil
}

func (r *Runner) kick() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// loop reconciles on every pod/PVC/ConfigMap change and, at a slow tick,
// to restart crashed processes after their backoff.
func (r *Runner) loop(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		r.reconcile()
		select {
		case <-ctx.Done():
			return
		case <-r.trigger:
		case <-tick.C:
		}
	}
}

// ordinal parses the ordinal of a pod of the StatefulSet, -1 otherwise.
func (r *Runner) ordinal(pod string) int {
	rest, ok := strings.CutPrefix(pod, r.opts.StatefulSet+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil || strconv.Itoa(n) != rest || n >= r.opts.MaxMembers {
		return -1
	}
	return n
}

// wanted returns, per pod name, the pod that should have a process now.
func (r *Runner) wanted() map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for _, o := range r.pods.List() {
		p := o.(*corev1.Pod)
		if r.ordinal(p.Name) < 0 || p.DeletionTimestamp != nil || p.Spec.NodeName == "" ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out[p.Name] = p
	}
	return out
}

func (r *Runner) reconcile() {
	want := r.wanted()
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	var stop []string
	for pod, p := range r.procs {
		if w, ok := want[pod]; !ok || string(w.UID) != p.podUID || r.suspended[pod] {
			stop = append(stop, pod)
		}
	}
	stopping := map[string]*proc{}
	for _, pod := range stop {
		stopping[pod] = r.procs[pod]
		delete(r.procs, pod)
	}
	r.mu.Unlock()
	// A pod deleted and recreated: the old process must be gone (ports
	// free) before the new one starts, as with a real container.
	for pod, p := range stopping {
		r.stopProc(pod, p)
	}

	now := time.Now()
	for pod, p := range want {
		r.mu.Lock()
		cur, running := r.procs[pod]
		suspended := r.suspended[pod]
		r.mu.Unlock()
		if suspended {
			continue
		}
		if running {
			select {
			case <-cur.exited:
				if now.Before(cur.nextTry) {
					continue
				}
			default:
				continue
			}
		}
		restarts := 0
		if running {
			restarts = cur.restarts + 1
		}
		np, err := r.startProc(p, restarts)
		if err != nil {
			// Not startable yet (PVC not bound, ConfigMap missing): the
			// next event or tick tries again.
			continue
		}
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			r.stopProc(pod, np)
			return
		}
		r.procs[pod] = np
		r.mu.Unlock()
	}
}

// startProc starts etcd for pod, reading its PVC and the cluster-state
// ConfigMap as the pod's container would.
func (r *Runner) startProc(p *corev1.Pod, restarts int) (*proc, error) {
	o := r.ordinal(p.Name)
	pvcName := "data-" + p.Name
	obj, ok, err := r.pvcs.GetByKey(r.opts.Namespace + "/" + pvcName)
	if err != nil || !ok {
		return nil, fmt.Errorf("PVC %s not found", pvcName)
	}
	pvc := obj.(*corev1.PersistentVolumeClaim)
	if pvc.DeletionTimestamp != nil || pvc.Status.Phase != corev1.ClaimBound {
		return nil, fmt.Errorf("PVC %s not usable", pvcName)
	}
	env, err := r.containerEnv(p)
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(r.DataDir(), string(pvc.UID))
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.starts++
	seq := r.starts
	r.mu.Unlock()
	logPath := filepath.Join(r.LogDir(), fmt.Sprintf("%03d-%s.%s.log", seq, p.Name, shortUID(string(p.UID))))
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := []string{
		"--name=" + p.Name,
		"--data-dir=" + filepath.Join(dataDir, "etcd"),
		"--listen-client-urls=" + r.ClientURL(o),
		"--advertise-client-urls=" + r.ClientURL(o),
		"--listen-peer-urls=" + r.PeerURL(o),
		"--initial-advertise-peer-urls=" + r.PeerURL(o),
		"--initial-cluster-token=" + r.opts.Namespace + "-" + r.opts.StatefulSet,
		"--heartbeat-interval=" + strconv.Itoa(max(100, r.opts.ElectionTimeout/10)),
		"--election-timeout=" + strconv.Itoa(r.opts.ElectionTimeout),
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
	cmd := exec.Command(r.etcd, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = dataDir
	// Own process group so stopping it never signals anyone else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting etcd for %s: %w", p.Name, err)
	}
	np := &proc{podUID: string(p.UID), cmd: cmd, exited: make(chan struct{}), restarts: restarts, logPath: logPath}
	r.mu.Lock()
	r.transitions = append(r.transitions, Transition{Pod: p.Name, Up: true})
	r.mu.Unlock()
	r.opts.Logf("etcdpods: started etcd for %s (pid %d, pvc %s, state %s, log %s)", p.Name, cmd.Process.Pid,
		shortUID(string(pvc.UID)), envValue(env, "ETCD_INITIAL_CLUSTER_STATE"), logPath)
	go func() {
		err := cmd.Wait()
		// Crash-loop backoff like a kubelet's, capped low for tests.
		np.nextTry = time.Now().Add(min(time.Duration(1<<min(restarts, 4))*time.Second, 10*time.Second))
		r.mu.Lock()
		r.transitions = append(r.transitions, Transition{Pod: p.Name, Up: false})
		r.mu.Unlock()
		close(np.exited)
		r.opts.Logf("etcdpods: etcd for %s exited: %v", p.Name, err)
		r.kick()
	}()
	return np, nil
}

// containerEnv is the environment a kubelet gives the pod's first container: for each envFrom
// ConfigMap its keys (with the source's prefix; a missing ConfigMap fails the start unless
// optional), then the env entries (literal values, and fieldRef metadata.name/namespace),
// which win over envFrom (kubelet: makeEnvironmentVariables). Only what the fixtures use.
func (r *Runner) containerEnv(p *corev1.Pod) ([]string, error) {
	if len(p.Spec.Containers) == 0 {
		return nil, fmt.Errorf("pod %s has no container", p.Name)
	}
	c := p.Spec.Containers[0]
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef == nil {
			continue
		}
		obj, ok, err := r.cms.GetByKey(p.Namespace + "/" + ef.ConfigMapRef.Name)
		if err != nil || !ok {
			if ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional {
				continue
			}
			return nil, fmt.Errorf("ConfigMap %s (envFrom of pod %s) not found", ef.ConfigMapRef.Name, p.Name)
		}
		for k, v := range obj.(*corev1.ConfigMap).Data {
			set(ef.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			set(e.Name, e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			set(e.Name, p.Name)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			set(e.Name, p.Namespace)
		}
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vars[k])
	}
	return env, nil
}

// envValue is the value of name in env (KEY=value entries).
func envValue(env []string, name string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// stopProc ends one process: SIGTERM (etcd hands leadership over), then
// SIGKILL after 10 s.
func (r *Runner) stopProc(pod string, p *proc) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		r.opts.Logf("etcdpods: etcd for %s ignored SIGTERM; killing pid %d", pod, p.cmd.Process.Pid)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// freePrefix finds a 127.0.X prefix whose member addresses have both ports
// free. A port taken between this check and etcd's start makes that member
// crash-loop visibly, never share another runner's cluster.
func freePrefix(members int) (string, error) {
	start := rand.IntN(231)
	for i := range 231 {
		prefix := fmt.Sprintf("127.0.%d", 20+(start+i)%231)
		if addrsFree(prefix, members) {
			return prefix, nil
		}
	}
	return "", errors.New("etcdpods: no free loopback prefix in 127.0.20-250")
}

func addrsFree(prefix string, members int) bool {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for o := range members {
		for _, port := range []int{ClientPort, PeerPort} {
			l, err := net.Listen("tcp", fmt.Sprintf("%s.%d:%d", prefix, o+1, port))
			if err != nil {
				return false
			}
			ls = append(ls, l)
		}
	}
	return true
}

func shortUID(u string) string {
	if len(u) > 8 {
		return u[:8]
	}
	return u
}
