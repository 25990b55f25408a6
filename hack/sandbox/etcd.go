package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/etcdpods"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// Demo etcd cluster: real etcd processes, one per pod, kept by the
// foreground command `sandbox etcd` (the sandbox's components run detached,
// but etcd members need a process that watches their pods).
const (
	etcdDemoNamespace = "demo-etcd"
	etcdDemoName      = "etcd"
	etcdDemoAddrs     = "127.0.3"
)

// sandboxBed gives the etcd runner exec mappings and shims on a sandbox
// started by another process: it writes the same objects and files the
// testbed package does.
type sandboxBed struct {
	dyn     dynamic.Interface
	shimDir string
}

var gvrKwokExec = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "execs"}

// SetExec applies a per-pod kwok Exec object.
func (b sandboxBed) SetExec(ctx context.Context, namespace, pod string, targets ...testbed.ExecTarget) error {
	execs := make([]any, 0, len(targets))
	for _, t := range targets {
		keys := make([]string, 0, len(t.Env))
		for k := range t.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		envs := make([]any, 0, len(keys))
		for _, k := range keys {
			envs = append(envs, map[string]any{"name": k, "value": t.Env[k]})
		}
		local := map[string]any{"envs": envs}
		if t.WorkDir != "" {
			local["workDir"] = t.WorkDir
		}
		execs = append(execs, map[string]any{"local": local})
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Exec",
		"metadata": map[string]any{"name": pod, "namespace": namespace},
		"spec":     map[string]any{"execs": execs},
	}}
	_, err := b.dyn.Resource(gvrKwokExec).Namespace(namespace).Apply(ctx, pod, obj,
		metav1.ApplyOptions{FieldManager: "dbops-sandbox", Force: true})
	if err != nil {
		return fmt.Errorf("apply exec mapping for %s/%s: %w", namespace, pod, err)
	}
	return nil
}

// WriteShim writes an executable into the sandbox's shim folder, which is
// at the front of kwok's PATH.
func (b sandboxBed) WriteShim(name string, content []byte) (string, error) {
	p := filepath.Join(b.shimDir, name)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, content, 0o755); err != nil {
		return "", fmt.Errorf("write shim %s: %w", name, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("write shim %s: %w", name, err)
	}
	return p, nil
}

// demoClients checks that the sandbox runs and returns its state folder and clients, with
// namespace ns created for a demo cluster.
func demoClients(ctx context.Context, ns string) (string, kubernetes.Interface, dynamic.Interface, error) {
	dir, err := stateDir()
	if err != nil {
		return "", nil, nil, err
	}
	alive, err := testbed.PidfileAlive(pidfile(dir))
	if err != nil {
		return "", nil, nil, err
	}
	if !alive {
		return "", nil, nil, fmt.Errorf("the sandbox does not run; start it with: go run ./hack/sandbox up")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig(dir))
	if err != nil {
		return "", nil, nil, fmt.Errorf("load sandbox kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return "", nil, nil, err
	}
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, nil, fmt.Errorf("create namespace: %w", err)
	}
	return dir, client, dyn, nil
}

// runEtcd creates the demo etcd cluster if needed and keeps its members
// running until interrupted. Member data stays in the sandbox folder, so
// running it again resumes the same cluster.
func runEtcd(ctx context.Context) error {
	dir, client, dyn, err := demoClients(ctx, etcdDemoNamespace)
	if err != nil {
		return err
	}
	r, err := etcdpods.Start(ctx, etcdpods.Options{
		Bed: sandboxBed{dyn: dyn, shimDir: filepath.Join(dir, "shims")}, Client: client,
		Namespace: etcdDemoNamespace, StatefulSet: etcdDemoName, AddrPrefix: etcdDemoAddrs,
		Dir:  filepath.Join(dir, "etcd-members"),
		Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
	})
	if err != nil {
		return err
	}
	defer r.Stop() //nolint:errcheck // best effort on the way out
	sts, cm := r.Objects(3)
	if _, err := client.CoreV1().ConfigMaps(etcdDemoNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create configmap: %w", err)
	}
	if _, err := client.AppsV1().StatefulSets(etcdDemoNamespace).Create(ctx, sts, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create statefulset: %w", err)
	}
	fmt.Printf("# etcd members of %s/%s run while this command runs (Ctrl-C stops them; data is kept in %s)\n",
		etcdDemoNamespace, etcdDemoName, filepath.Join(dir, "etcd-members"))
	fmt.Println("# in another shell:")
	for _, h := range []string{
		"export KUBECONFIG=" + kubeconfig(dir),
		"kubectl dbops status etcd -n " + etcdDemoNamespace,
		"kubectl dbops restart etcd -n " + etcdDemoNamespace + " --rolling",
		"kubectl exec -n " + etcdDemoNamespace + " etcd-0 -- etcdctl member list -w table",
	} {
		fmt.Printf("#   %s\n", h)
	}
	<-ctx.Done()
	return nil
}
