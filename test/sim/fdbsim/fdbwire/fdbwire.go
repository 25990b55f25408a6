// Package fdbwire connects the FoundationDB simulator (test/sim/fdbsim and its stand-in
// operator fdbop) to the pods of a local test bed (test/testbed): it installs the
// FoundationDBCluster CRD, serves the simulator host on loopback, runs the stand-in operator,
// installs the fdbcli shim (test/cmd/fdbcli-shim) on kwok's PATH as `fdbcli` and maps `exec` into the
// `foundationdb` container of every pod the operator created to it. It is test support, kept
// apart so that fdbsim does not depend on the test bed.
package fdbwire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/racebuild"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbop"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbsts"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// ShimPackage is the fdbcli shim, installed on kwok's PATH as `fdbcli`.
const ShimPackage = "github.com/kubectl-dbops/kubectl-dbops/test/cmd/fdbcli-shim"

// pollInterval is how often new pods are looked for to wire.
const pollInterval = 250 * time.Millisecond

// TestBed is what the wiring needs of a test bed: kwok exec mappings and its shim folder
// (*testbed.Testbed, or the sandbox's view of a test bed another process runs).
type TestBed interface {
	SetExec(ctx context.Context, namespace, pod string, targets ...testbed.ExecTarget) error
	WriteShim(name string, content []byte) (string, error)
}

// Bed is a running simulator host and stand-in operator for one namespace.
type Bed struct {
	Host     *fdbsim.Host
	Operator *fdbop.Operator
	// StatefulSets runs the models of FDB StatefulSets (StartStatefulSets; nil otherwise).
	StatefulSets *fdbsts.Runner
	// URL is the host's address, as the shim reaches it.
	URL string

	client kubernetes.Interface
	dyn    dynamic.Interface
	srv    *http.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	wired   map[string]bool // pod names whose exec reaches the shim
	changed chan struct{}   // closed (and replaced) when wired grows
}

// InstallShim builds the fdbcli shim (with the go tool, from the current module) into the
// test bed's shim folder, unless it is already there.
func InstallShim(ctx context.Context, tb TestBed) error {
	if d, ok := tb.(interface{ ShimDir() string }); ok {
		if _, err := os.Stat(filepath.Join(d.ShimDir(), "fdbcli")); err == nil {
			return nil
		}
	}
	tmp, err := os.MkdirTemp("", "fdbcli-shim-")
	if err != nil {
		return fmt.Errorf("build fdbcli shim: %w", err)
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "fdbcli")
	if out, err := exec.CommandContext(ctx, "go", append(append([]string{"build"}, racebuild.BuildFlags(racebuild.FDBShim)...), "-o", bin, ShimPackage)...).CombinedOutput(); err != nil {
		return fmt.Errorf("build fdbcli shim: %w\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("read fdbcli shim: %w", err)
	}
	_, err = tb.WriteShim("fdbcli", data)
	return err
}

// Option configures the stand-in operator Start runs.
type Option func(*fdbop.Options)

// WithPacing runs the stand-in with these waits after a recovery instead of the operator's
// defaults (fdbop.DefaultPacing: 600 s before an inclusion, 120 s before an exclusion, 2 and 5
// minutes before a coordinator change), as the operator's flags set them.
func WithPacing(p fdbop.Pacing) Option {
	return func(o *fdbop.Options) { o.Pacing = &p }
}

// Start installs the CRD and the shim, serves a host with the real clock and runs the stand-in
// operator for namespace until Close.
func Start(ctx context.Context, tb TestBed, client kubernetes.Interface, dyn dynamic.Interface, namespace string, model fdbsim.Config, opts ...Option) (*Bed, error) {
	if err := fdbop.InstallCRD(ctx, dyn); err != nil {
		return nil, err
	}
	o := fdbop.Options{Namespace: namespace, Model: model}
	for _, f := range opts {
		f(&o)
	}
	return start(ctx, tb, client, dyn, namespace, ownedByCluster, func(b *Bed) func(context.Context) error {
		b.Operator = fdbop.New(client, dyn, b.Host, o)
		return b.Operator.Run
	})
}

// StartStatefulSets installs the shim, serves a host with the real clock and runs the
// StatefulSet runner (fdbsts) for namespace until Close: the layout of FoundationDB's own
// Kubernetes sample, with no operator.
func StartStatefulSets(ctx context.Context, tb TestBed, client kubernetes.Interface, namespace string, model fdbsim.Config) (*Bed, error) {
	return start(ctx, tb, client, nil, namespace, ownedByStatefulSet, func(b *Bed) func(context.Context) error {
		b.StatefulSets = fdbsts.New(client, b.Host, fdbsts.Options{Namespace: namespace, Model: model})
		return b.StatefulSets.Run
	})
}

// start installs the shim, serves a host with the real clock, and runs until Close the
// controller that controller makes for the bed (the stand-in operator or the StatefulSet
// runner) and the exec wiring of the pods owned tells apart.
func start(ctx context.Context, tb TestBed, client kubernetes.Interface, dyn dynamic.Interface, namespace string,
	owned func(*corev1.Pod) bool, controller func(*Bed) func(context.Context) error) (*Bed, error) {
	if err := InstallShim(ctx, tb); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the fdbcli shim: %w", err)
	}
	host := fdbsim.NewHost(fdbsim.RealClock{})
	runCtx, cancel := context.WithCancel(context.Background())
	b := &Bed{Host: host, URL: "http://" + ln.Addr().String(), cancel: cancel, wired: map[string]bool{}, changed: make(chan struct{}),
		client: client, dyn: dyn,
		srv: &http.Server{Handler: host.Handler(), ReadHeaderTimeout: 10 * time.Second}}
	run := controller(b)
	b.wg.Add(3)
	go func() {
		defer b.wg.Done()
		_ = b.srv.Serve(ln)
	}()
	go func() {
		defer b.wg.Done()
		_ = run(runCtx)
	}()
	go func() {
		defer b.wg.Done()
		b.wireLoop(runCtx, tb, namespace, owned)
	}()
	return b, nil
}

// WaitStatefulSet waits until the model of StatefulSet name exists, every Ready pod of it is
// wired for exec, and want processes of the model are up.
func (b *Bed) WaitStatefulSet(ctx context.Context, namespace, name string, want int) error {
	for {
		b.mu.Lock()
		ch := b.changed
		b.mu.Unlock()
		ok := false
		if m := b.Host.Cluster(fdbsts.Key(namespace, name)); m != nil {
			up := 0
			for _, p := range m.Processes() {
				if p.Up {
					up++
				}
			}
			ok = up == want
		}
		if ok {
			pods, err := b.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("list pods of %s: %w", name, err)
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if ownedByStatefulSet(p) && p.Status.Phase == corev1.PodRunning && !b.isWired(p.Name) {
					ok = false
				}
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("FDB StatefulSet %s not up with %d processes: %w", name, want, ctx.Err())
		case <-ch:
		case <-time.After(pollInterval):
		}
	}
}

// Close stops the operator, the wiring and the host.
func (b *Bed) Close() {
	b.cancel()
	_ = b.srv.Close()
	b.wg.Wait()
}

// wireLoop maps exec of each running pod that owned accepts to the shim, once per pod name: a
// recreated pod keeps its name and its mapping.
func (b *Bed) wireLoop(ctx context.Context, tb TestBed, namespace string, owned func(*corev1.Pod) bool) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		pods, err := b.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if b.isWired(p.Name) || p.Status.Phase != corev1.PodRunning || !owned(p) {
					continue
				}
				env := map[string]string{"FDBSIM_ADDR": b.URL, "FDBSIM_POD": namespace + "/" + p.Name}
				// The container's FDB client environment, as exec inherits it in a real pod (the
				// operator's sets the client trace directory).
				for _, c := range p.Spec.Containers {
					if c.Name != fdbop.MainContainer {
						continue
					}
					for _, e := range c.Env {
						if strings.HasPrefix(e.Name, "FDB_NETWORK_OPTION_") && e.ValueFrom == nil {
							env[e.Name] = e.Value
						}
					}
				}
				err := tb.SetExec(ctx, namespace, p.Name, testbed.ExecTarget{
					Containers: []string{fdbop.MainContainer},
					Env:        env,
				})
				if err == nil {
					b.mu.Lock()
					b.wired[p.Name] = true
					close(b.changed)
					b.changed = make(chan struct{})
					b.mu.Unlock()
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (b *Bed) isWired(pod string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.wired[pod]
}

// waitWired waits until every pod owned by the cluster is wired.
func (b *Bed) waitWired(ctx context.Context, namespace, name string) error {
	for {
		b.mu.Lock()
		ch := b.changed
		b.mu.Unlock()
		pods, err := b.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-cluster-name=" + name})
		if err != nil {
			return fmt.Errorf("list pods of %s: %w", name, err)
		}
		all := len(pods.Items) > 0
		for _, p := range pods.Items {
			all = all && b.isWired(p.Name)
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pods of %s not wired for exec: %w", name, ctx.Err())
		case <-ch:
		}
	}
}

func ownedByCluster(p *corev1.Pod) bool {
	for _, r := range p.OwnerReferences {
		if r.Kind == "FoundationDBCluster" {
			return true
		}
	}
	return false
}

// ownedByStatefulSet: a pod of a StatefulSet with the sample's `foundationdb` container.
func ownedByStatefulSet(p *corev1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind != "StatefulSet" {
		return false
	}
	for _, c := range p.Spec.Containers {
		if c.Name == fdbsts.MainContainer {
			return true
		}
	}
	return false
}

// ClusterSpec describes a FoundationDBCluster for tests and the sandbox.
type ClusterSpec struct {
	Namespace, Name         string
	Storage, Log, Stateless int
	RedundancyMode          string // default double
	ZoneFromNodeLabel       bool   // zoneid from topology.kubernetes.io/zone (else the node name)
	// OperatorSample is the FoundationDB operator's own config/samples/cluster.yaml: no
	// redundancy mode, processCounts {cluster_controller: 1, stateless: -1} with storage and log
	// left to the operator's defaults, faultDomain foundationdb.org/none, explicit labels.
	// Storage, Log, Stateless, RedundancyMode and ZoneFromNodeLabel are then ignored.
	OperatorSample bool
	// DNS names the coordinators by the pods' DNS names in the cluster file
	// (spec.routing.useDNSInClusterFile).
	DNS bool
	// WaitBetweenRemovalsSeconds sets spec.automationOptions.waitBetweenRemovalsSeconds (nil:
	// unset, the operator's 60 s).
	WaitBetweenRemovalsSeconds *int
	// TLS sets spec.mainContainer.enableTls (api/v1beta2 foundationdbcluster_types.go): the
	// processes listen on ip:4500:tls (foundationdb_process_address.go GetProcessPort).
	TLS bool
}

// Object is the FoundationDBCluster resource of s.
func (s ClusterSpec) Object() *unstructured.Unstructured {
	spec := map[string]any{
		"version": fdbsim.Version,
		"processCounts": map[string]any{
			"storage": int64(s.Storage), "log": int64(s.Log), "stateless": int64(s.Stateless),
		},
	}
	if s.OperatorSample {
		spec = map[string]any{
			"version":                       fdbsim.Version,
			"automationOptions":             map[string]any{"replacements": map[string]any{"enabled": true}},
			"faultDomain":                   map[string]any{"key": "foundationdb.org/none"},
			"minimumUptimeSecondsForBounce": int64(60),
			"processCounts":                 map[string]any{"cluster_controller": int64(1), "stateless": int64(-1)},
			"labels": map[string]any{
				"filterOnOwnerReference": false,
				"matchLabels":            map[string]any{"foundationdb.org/fdb-cluster-name": s.Name},
				"processClassLabels":     []any{"foundationdb.org/fdb-process-class"},
				"processGroupIDLabels":   []any{"foundationdb.org/fdb-process-group-id"},
			},
			"routing": map[string]any{"defineDNSLocalityFields": true},
		}
		s.RedundancyMode, s.ZoneFromNodeLabel = "", false
	}
	if s.DNS {
		routing, _ := spec["routing"].(map[string]any)
		if routing == nil {
			routing = map[string]any{}
			spec["routing"] = routing
		}
		routing["useDNSInClusterFile"] = true
	}
	if s.RedundancyMode != "" {
		spec["databaseConfiguration"] = map[string]any{"redundancy_mode": s.RedundancyMode}
	}
	if s.TLS {
		spec["mainContainer"] = map[string]any{"enableTls": true}
	}
	if s.WaitBetweenRemovalsSeconds != nil {
		ao, _ := spec["automationOptions"].(map[string]any)
		if ao == nil {
			ao = map[string]any{}
			spec["automationOptions"] = ao
		}
		ao["waitBetweenRemovalsSeconds"] = int64(*s.WaitBetweenRemovalsSeconds)
	}
	if s.ZoneFromNodeLabel {
		spec["faultDomain"] = map[string]any{"key": testbed.ZoneLabel, "valueFrom": "$NODE_LABEL_TOPOLOGY_KUBERNETES_IO_ZONE"}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fdbop.GVR.GroupVersion().String(),
		"kind":       "FoundationDBCluster",
		"metadata":   map[string]any{"name": s.Name, "namespace": s.Namespace},
		"spec":       spec,
	}}
}

// Create creates the cluster resource and waits until the stand-in reports it reconciled.
func (b *Bed) Create(ctx context.Context, s ClusterSpec) error {
	if _, err := b.dyn.Resource(fdbop.GVR).Namespace(s.Namespace).Create(ctx, s.Object(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create FoundationDBCluster %s: %w", s.Name, err)
	}
	return b.WaitReconciled(ctx, s.Namespace, s.Name)
}

// WaitReconciled waits until status.generations.reconciled equals metadata.generation, the
// database is available, and every pod of the cluster is wired for exec.
func (b *Bed) WaitReconciled(ctx context.Context, namespace, name string) error {
	w, err := b.dyn.Resource(fdbop.GVR).Namespace(namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return fmt.Errorf("watch FoundationDBCluster %s: %w", name, err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		rec, _, _ := unstructured.NestedInt64(u.Object, "status", "generations", "reconciled")
		avail, _, _ := unstructured.NestedBool(u.Object, "status", "health", "available")
		if rec == u.GetGeneration() && avail {
			return b.waitWired(ctx, namespace, name)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("FoundationDBCluster %s not reconciled: %w", name, err)
	}
	return errors.New("watch of FoundationDBCluster " + name + " ended")
}
