// Package fdbsts runs the FoundationDB simulator behind StatefulSets laid out as FoundationDB's
// own Kubernetes sample (apple/foundationdb packaging/docker/kubernetes/statefulset.yaml): one
// fdbserver per pod of a StatefulSet whose `foundationdb` container runs a foundationdb image,
// with its locality from the pod's environment:
//   - FDB_INSTANCE_ID and FDB_MACHINE_ID from metadata.name: locality_instance_id is the pod name;
//   - FDB_ZONE_ID from metadata.name in the sample (each pod its own zone), or spec.nodeName, or
//     a literal value;
//   - the process class from the `--class` argument (the sample's config.json passes
//     `--class storage` to every process), read here from the container's args or from
//     FDB_PROCESS_CLASS; storage when neither names one, as in the sample;
//   - the public address $FDB_PUBLIC_IP:4501 (ProcessNumber 1, offset 4499, multiplier 2).
//
// The sample's cluster file names the first three pods' IPs (its step 3: `limit(3;…)`), and the
// database is configured once every pod runs (step 7, `configure new double ssd`); the runner
// creates the model then, with those coordinators. Afterwards it does what Kubernetes and
// fdbmonitor do to the processes: a pod that goes away stops its process, a pod that comes back
// starts it at its new address, a new pod (a higher ordinal) joins a new process. It never
// changes the database itself: exclusions, coordinators and includes are the tool's work, and
// arrive through fdbcli in the pods.
package fdbsts

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// MainContainer is the sample's container that runs fdbserver and fdbcli.
const MainContainer = "foundationdb"

// engineLabel marks a StatefulSet as FoundationDB whatever its image.
const engineLabel = "dbops.io/engine"

// Options configure the runner.
type Options struct {
	// Namespace to watch.
	Namespace string
	// Model is the configuration of each cluster model (redundancy mode, delays).
	Model fdbsim.Config
	// Resync is how often everything is looked at again without an event; default 500 ms.
	Resync time.Duration
}

// Runner keeps the models of the FDB StatefulSets of a namespace in step with their pods.
type Runner struct {
	kube kubernetes.Interface
	host *fdbsim.Host
	opts Options

	mu    sync.Mutex
	bound map[string]map[string]types.UID // cluster key -> process ID -> pod incarnation
}

// New makes the runner; Run starts it.
func New(kube kubernetes.Interface, host *fdbsim.Host, opts Options) *Runner {
	if opts.Resync == 0 {
		opts.Resync = 500 * time.Millisecond
	}
	return &Runner{kube: kube, host: host, opts: opts, bound: map[string]map[string]types.UID{}}
}

// Key is the host key of a StatefulSet's cluster.
func Key(namespace, sts string) string { return namespace + "/" + sts }

// RunsFDB reports whether a StatefulSet is one the runner models: labelled as FoundationDB, or
// with a foundationdb image in its `foundationdb` container.
func RunsFDB(s *appsv1.StatefulSet) bool {
	if s.Labels[engineLabel] == "foundationdb" {
		return true
	}
	for _, c := range s.Spec.Template.Spec.Containers {
		if c.Name == MainContainer && strings.Contains(c.Image, "foundationdb") {
			return true
		}
	}
	return false
}

// Run reconciles on every pod event of the namespace and every Resync, until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	kick := make(chan struct{}, 1)
	go func() {
		for ctx.Err() == nil {
			w, err := r.kube.CoreV1().Pods(r.opts.Namespace).Watch(ctx, metav1.ListOptions{})
			if err != nil {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
					continue
				}
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					break
				}
				select {
				case kick <- struct{}{}:
				default:
				}
			}
			w.Stop()
		}
	}()
	tick := time.NewTicker(r.opts.Resync)
	defer tick.Stop()
	for {
		_ = r.Reconcile(ctx) // errors are retried on the next event or resync
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-tick.C:
		}
	}
}

// Reconcile looks at every FDB StatefulSet of the namespace once.
func (r *Runner) Reconcile(ctx context.Context) error {
	ns := r.opts.Namespace
	stss, err := r.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list StatefulSets: %w", err)
	}
	pods, err := r.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	for i := range stss.Items {
		s := &stss.Items[i]
		if !RunsFDB(s) {
			continue
		}
		var own []*corev1.Pod
		for j := range pods.Items {
			if metav1.IsControlledBy(&pods.Items[j], s) {
				own = append(own, &pods.Items[j])
			}
		}
		if err := r.reconcileSet(s, own); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runner) reconcileSet(s *appsv1.StatefulSet, pods []*corev1.Pod) error {
	key := Key(s.Namespace, s.Name)
	r.mu.Lock()
	defer r.mu.Unlock()
	bound := r.bound[key]
	if bound == nil {
		bound = map[string]types.UID{}
		r.bound[key] = bound
	}
	ready := map[string]*corev1.Pod{}
	for _, p := range pods {
		r.host.BindPod(p.Namespace+"/"+p.Name, key)
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && podReady(p) {
			ready[p.Name] = p
		}
	}
	model := r.host.Cluster(key)
	if model == nil {
		want := int32(1)
		if s.Spec.Replicas != nil {
			want = *s.Spec.Replicas
		}
		if int32(len(ready)) < want || want == 0 {
			return nil // the sample configures the database once every pod runs
		}
		var specs []fdbsim.ProcessSpec
		for _, p := range sortedByOrdinal(ready, s.Name) {
			specs = append(specs, specOf(p))
		}
		cfg := r.opts.Model
		if cfg.RedundancyMode == "" {
			cfg.RedundancyMode = "double" // the sample's `configure new double ssd`
		}
		var coords []string
		for _, sp := range specs[:min(3, len(specs))] {
			coords = append(coords, sp.Address)
		}
		m, err := fdbsim.New(r.host.Clock(), cfg, specs, coords)
		if err != nil {
			return fmt.Errorf("StatefulSet %s: %w", key, err)
		}
		for _, p := range ready {
			bound[p.Name] = p.UID
		}
		r.host.SetCluster(key, m)
		return nil
	}
	// A process whose pod is gone or not ready stops (fdbserver dies with its pod).
	for id, uid := range bound {
		p := ready[id]
		if uid != "" && (p == nil || p.UID != uid) {
			_ = model.Stop(id)
			bound[id] = ""
		}
	}
	for name, p := range ready {
		if bound[name] == p.UID {
			continue
		}
		sp := specOf(p)
		var err error
		if model.Has(name) {
			err = model.Start(name, sp.Address)
		} else {
			// A new ordinal: a new worker registers with the cluster controller.
			err = model.AddProcess(sp)
		}
		if err == nil {
			bound[name] = p.UID
		}
	}
	return nil
}

// specOf is the process a pod runs, as the sample's environment and arguments make it.
func specOf(p *corev1.Pod) fdbsim.ProcessSpec {
	sp := fdbsim.ProcessSpec{ID: p.Name, Address: p.Status.PodIP + ":4501", Class: fdbsim.ClassStorage, Zone: p.Name}
	for _, c := range p.Spec.Containers {
		if c.Name != MainContainer {
			continue
		}
		if i := slices.Index(c.Args, "--class"); i >= 0 && i+1 < len(c.Args) {
			sp.Class = c.Args[i+1]
		}
		for _, e := range c.Env {
			switch e.Name {
			case "FDB_PROCESS_CLASS":
				if e.Value != "" {
					sp.Class = e.Value
				}
			case "FDB_ZONE_ID":
				sp.Zone = fieldValue(p, e)
			}
		}
	}
	return sp
}

// fieldValue resolves an env var the way the kubelet does for the fields the sample uses.
func fieldValue(p *corev1.Pod, e corev1.EnvVar) string {
	if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
		return e.Value
	}
	switch e.ValueFrom.FieldRef.FieldPath {
	case "spec.nodeName":
		return p.Spec.NodeName
	case "status.podIP":
		return p.Status.PodIP
	}
	return p.Name
}

func sortedByOrdinal(pods map[string]*corev1.Pod, sts string) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p)
	}
	ord := func(p *corev1.Pod) int {
		var n int
		_, _ = fmt.Sscanf(strings.TrimPrefix(p.Name, sts+"-"), "%d", &n)
		return n
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return ord(a) - ord(b) })
	return out
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
