package testbed

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

//go:embed assets/stages/*.yaml assets/crds/*.yaml assets/storage-class.yaml
var assets embed.FS

// kwokCRDKinds are the kwok resources served from the API server instead of kwok's config
// file, so that tests can change exec and port-forward mappings while kwok runs.
var kwokCRDKinds = []string{"Exec", "ClusterExec", "PortForward", "ClusterPortForward"}

// ProbePort is a pod port reserved by the testbed: every PortForward/ClusterPortForward it
// writes maps it to a command printing a token, so the testbed can tell when kwok has loaded
// the new mapping.
const ProbePort = 65534

// probeEnv is set in every exec mapping for the same reason as ProbePort.
const probeEnv = "DBOPS_TESTBED_MAPPING"

var (
	gvrExec               = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "execs"}
	gvrClusterExec        = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "clusterexecs"}
	gvrPortForward        = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "portforwards"}
	gvrClusterPortForward = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "clusterportforwards"}
	gvrCRD                = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// kwokConfig returns kwok's --config content: all embedded Stage documents.
func kwokConfig() ([]byte, error) {
	files, err := fs.Glob(assets, "assets/stages/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list kwok stages: %w", err)
	}
	sort.Strings(files)
	var buf bytes.Buffer
	for _, f := range files {
		data, err := assets.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		buf.WriteString("---\n")
		buf.Write(bytes.TrimSpace(data))
		buf.WriteString("\n")
	}
	return buf.Bytes(), nil
}

// installKwokResources creates the kwok CRDs (waiting until they are served, because kwok
// lists them at start-up) and the default kwok-volume StorageClass.
func (tb *Testbed) installKwokResources(ctx context.Context) error {
	files, err := fs.Glob(assets, "assets/crds/*.yaml")
	if err != nil {
		return fmt.Errorf("list kwok CRDs: %w", err)
	}
	var names []string
	for _, f := range files {
		data, err := assets.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			return fmt.Errorf("decode %s: %w", f, err)
		}
		if _, err := tb.Dynamic.Resource(gvrCRD).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := tb.Dynamic.Resource(gvrCRD).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // transient until the CRD is stored
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("wait for CRD %s to be established: %w", name, err)
		}
	}

	data, err := assets.ReadFile("assets/storage-class.yaml")
	if err != nil {
		return fmt.Errorf("read storage class: %w", err)
	}
	sc := &storagev1.StorageClass{}
	if err := yaml.Unmarshal(data, sc); err != nil {
		return fmt.Errorf("decode storage class: %w", err)
	}
	if _, err := tb.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create storage class %s: %w", sc.Name, err)
	}
	return nil
}

// StorageClassName is the default StorageClass whose claims kwok binds immediately.
const StorageClassName = "kwok-volume"

// ExecTarget configures how kwok runs `exec` requests for some containers of a pod.
//
// kwok runs the exec argv itself, as a local process of the kwok controller: argv[0] is looked
// up on kwok's PATH, which starts with Testbed.ShimDir (see Options.ExtraPath). Env and WorkDir
// let one local program tell which pod it stands for.
type ExecTarget struct {
	// Containers this target applies to; empty means every container without its own target.
	Containers []string
	// WorkDir is the working directory of the local process.
	WorkDir string
	// Env is added to kwok's environment for the local process.
	Env map[string]string
}

// PortTarget maps pod ports to a local TCP address.
type PortTarget struct {
	// Ports of the pod; empty means every port without its own target.
	Ports []int32
	// Address is the local IP to connect to; it must be on loopback (127.0.0.0/8).
	Address string
	// Port is the local port to connect to.
	Port int32
}

// Selector selects pods for cluster-wide mappings. Empty fields match everything.
type Selector struct {
	Namespaces []string
	Names      []string
}

func newToken() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func execTargetsObject(targets []ExecTarget, token string) ([]any, error) {
	if len(targets) == 0 {
		return nil, errors.New("at least one exec target is required")
	}
	out := make([]any, 0, len(targets))
	for _, t := range targets {
		envKeys := make([]string, 0, len(t.Env)+1)
		for k := range t.Env {
			if k == probeEnv {
				return nil, fmt.Errorf("env %s is reserved by the testbed", probeEnv)
			}
			envKeys = append(envKeys, k)
		}
		sort.Strings(envKeys)
		envs := []any{map[string]any{"name": probeEnv, "value": token}}
		for _, k := range envKeys {
			envs = append(envs, map[string]any{"name": k, "value": t.Env[k]})
		}
		local := map[string]any{"envs": envs}
		if t.WorkDir != "" {
			local["workDir"] = t.WorkDir
		}
		target := map[string]any{"local": local}
		if len(t.Containers) != 0 {
			target["containers"] = toAnySlice(t.Containers)
		}
		out = append(out, target)
	}
	return out, nil
}

func portTargetsObject(targets []PortTarget, token string) ([]any, error) {
	if len(targets) == 0 {
		return nil, errors.New("at least one port target is required")
	}
	out := make([]any, 0, len(targets)+1)
	for _, t := range targets {
		ip := net.ParseIP(t.Address)
		if ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("port target address %q is not a loopback IP", t.Address)
		}
		if t.Port <= 0 || t.Port > 65535 {
			return nil, fmt.Errorf("port target port %d is invalid", t.Port)
		}
		fw := map[string]any{"target": map[string]any{"address": t.Address, "port": int64(t.Port)}}
		if len(t.Ports) != 0 {
			ports := make([]any, 0, len(t.Ports))
			for _, p := range t.Ports {
				if p == ProbePort {
					return nil, fmt.Errorf("pod port %d is reserved by the testbed", ProbePort)
				}
				ports = append(ports, int64(p))
			}
			fw["ports"] = ports
		}
		out = append(out, fw)
	}
	// Listed first so that a catch-all target (no ports) cannot shadow it.
	probe := map[string]any{"ports": []any{int64(ProbePort)}, "command": []any{"printf", "%s", token}}
	return append([]any{probe}, out...), nil
}

func toAnySlice(in []string) []any {
	out := make([]any, len(in))
	for i, s := range in {
		out[i] = s
	}
	return out
}

func selectorObject(sel Selector) map[string]any {
	m := map[string]any{}
	if len(sel.Namespaces) != 0 {
		m["matchNamespaces"] = toAnySlice(sel.Namespaces)
	}
	if len(sel.Names) != 0 {
		m["matchNames"] = toAnySlice(sel.Names)
	}
	return m
}

func (tb *Testbed) apply(ctx context.Context, gvr schema.GroupVersionResource, kind, namespace, name string, spec map[string]any) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
	var err error
	if namespace != "" {
		obj.SetNamespace(namespace)
		_, err = tb.Dynamic.Resource(gvr).Namespace(namespace).Apply(ctx, name, obj, metav1.ApplyOptions{FieldManager: "dbops-testbed", Force: true})
	} else {
		_, err = tb.Dynamic.Resource(gvr).Apply(ctx, name, obj, metav1.ApplyOptions{FieldManager: "dbops-testbed", Force: true})
	}
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, path.Join(namespace, name), err)
	}
	return nil
}

// SetExec makes kwok handle `exec` into the pod namespace/pod with the given targets,
// replacing any earlier per-pod mapping. A per-pod mapping takes precedence over cluster-wide
// ones. If the pod is already running, SetExec returns only after kwok uses the new mapping.
func (tb *Testbed) SetExec(ctx context.Context, namespace, pod string, targets ...ExecTarget) error {
	token, err := newToken()
	if err != nil {
		return err
	}
	execs, err := execTargetsObject(targets, token)
	if err != nil {
		return fmt.Errorf("exec mapping for pod %s/%s: %w", namespace, pod, err)
	}
	if err := tb.apply(ctx, gvrExec, "Exec", namespace, pod, map[string]any{"execs": execs}); err != nil {
		return err
	}
	container := ""
	if len(targets[0].Containers) != 0 {
		container = targets[0].Containers[0]
	}
	return tb.probeExec(ctx, namespace, pod, container, token)
}

// SetClusterExec creates or replaces a cluster-wide exec mapping for the pods matched by sel.
// When a running matching pod without a per-pod mapping exists, it waits until kwok uses it.
func (tb *Testbed) SetClusterExec(ctx context.Context, name string, sel Selector, targets ...ExecTarget) error {
	token, err := newToken()
	if err != nil {
		return err
	}
	execs, err := execTargetsObject(targets, token)
	if err != nil {
		return fmt.Errorf("cluster exec mapping %s: %w", name, err)
	}
	if err := tb.apply(ctx, gvrClusterExec, "ClusterExec", "", name, map[string]any{"selector": selectorObject(sel), "execs": execs}); err != nil {
		return err
	}
	pod, err := tb.probeCandidate(ctx, sel, gvrExec)
	if err != nil || pod == nil {
		return err
	}
	container := ""
	if len(targets[0].Containers) != 0 {
		container = targets[0].Containers[0]
	}
	return tb.probeExec(ctx, pod.Namespace, pod.Name, container, token)
}

// SetPortForward makes port-forwards to the pod namespace/pod reach the given local targets,
// replacing any earlier per-pod mapping. If the pod is already running, it returns only after
// kwok uses the new mapping.
func (tb *Testbed) SetPortForward(ctx context.Context, namespace, pod string, targets ...PortTarget) error {
	token, err := newToken()
	if err != nil {
		return err
	}
	forwards, err := portTargetsObject(targets, token)
	if err != nil {
		return fmt.Errorf("port-forward mapping for pod %s/%s: %w", namespace, pod, err)
	}
	if err := tb.apply(ctx, gvrPortForward, "PortForward", namespace, pod, map[string]any{"forwards": forwards}); err != nil {
		return err
	}
	return tb.probePortForward(ctx, namespace, pod, token)
}

// SetClusterPortForward creates or replaces a cluster-wide port-forward mapping.
func (tb *Testbed) SetClusterPortForward(ctx context.Context, name string, sel Selector, targets ...PortTarget) error {
	token, err := newToken()
	if err != nil {
		return err
	}
	forwards, err := portTargetsObject(targets, token)
	if err != nil {
		return fmt.Errorf("cluster port-forward mapping %s: %w", name, err)
	}
	if err := tb.apply(ctx, gvrClusterPortForward, "ClusterPortForward", "", name, map[string]any{"selector": selectorObject(sel), "forwards": forwards}); err != nil {
		return err
	}
	pod, err := tb.probeCandidate(ctx, sel, gvrPortForward)
	if err != nil || pod == nil {
		return err
	}
	return tb.probePortForward(ctx, pod.Namespace, pod.Name, token)
}

// DeleteExec removes the per-pod exec mapping of namespace/pod, if any.
func (tb *Testbed) DeleteExec(ctx context.Context, namespace, pod string) error {
	return ignoreNotFound(tb.Dynamic.Resource(gvrExec).Namespace(namespace).Delete(ctx, pod, metav1.DeleteOptions{}))
}

// DeletePortForward removes the per-pod port-forward mapping of namespace/pod, if any.
func (tb *Testbed) DeletePortForward(ctx context.Context, namespace, pod string) error {
	return ignoreNotFound(tb.Dynamic.Resource(gvrPortForward).Namespace(namespace).Delete(ctx, pod, metav1.DeleteOptions{}))
}

// DeleteClusterExec removes a cluster-wide exec mapping, if present.
func (tb *Testbed) DeleteClusterExec(ctx context.Context, name string) error {
	return ignoreNotFound(tb.Dynamic.Resource(gvrClusterExec).Delete(ctx, name, metav1.DeleteOptions{}))
}

// DeleteClusterPortForward removes a cluster-wide port-forward mapping, if present.
func (tb *Testbed) DeleteClusterPortForward(ctx context.Context, name string) error {
	return ignoreNotFound(tb.Dynamic.Resource(gvrClusterPortForward).Delete(ctx, name, metav1.DeleteOptions{}))
}

func ignoreNotFound(err error) error {
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("delete kwok mapping: %w", err)
}

// probeTimeout bounds how long a Set* call waits for kwok to pick up a mapping; kwok watches
// the objects, so this normally takes milliseconds.
const probeTimeout = 30 * time.Second

// probeable reports whether exec/port-forward requests can reach the pod at all. For pods that
// are not running yet there is nothing to probe: kwok sees the mapping long before the
// scheduler and kwok's stages make a new pod Running.
func probeable(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil
}

// probeCandidate finds a running pod matched by sel that has no per-pod mapping of the kind
// gvr, so that a probe through it exercises the cluster-wide mapping. nil if none exists.
func (tb *Testbed) probeCandidate(ctx context.Context, sel Selector, perPod schema.GroupVersionResource) (*corev1.Pod, error) {
	namespaces := sel.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		pods, err := tb.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list pods to probe mapping: %w", err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if !probeable(p) || (len(sel.Names) != 0 && !slices.Contains(sel.Names, p.Name)) {
				continue
			}
			_, err := tb.Dynamic.Resource(perPod).Namespace(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return p, nil
			}
		}
	}
	return nil, nil
}

func (tb *Testbed) probeExec(ctx context.Context, namespace, name, container, token string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, probeTimeout, true, func(ctx context.Context) (bool, error) {
		pod, err := tb.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			last = err
			return false, nil
		}
		if !probeable(pod) {
			return true, nil
		}
		c := container
		if c == "" && len(pod.Spec.Containers) != 0 {
			c = pod.Spec.Containers[0].Name
		}
		out, _, err := kube.Exec(ctx, tb.RESTConfig, tb.Client, namespace, name, c,
			[]string{"sh", "-c", `printf %s "$` + probeEnv + `"`}, nil)
		if err != nil {
			last = err
			return false, nil
		}
		last = fmt.Errorf("exec mapping not loaded yet (got %q)", out)
		return string(out) == token, nil
	})
	if err != nil {
		return fmt.Errorf("wait for kwok to use the exec mapping of pod %s/%s: %w (last: %v)", namespace, name, err, last)
	}
	return nil
}

func (tb *Testbed) probePortForward(ctx context.Context, namespace, name, token string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, probeTimeout, true, func(ctx context.Context) (bool, error) {
		pod, err := tb.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			last = err
			return false, nil
		}
		if !probeable(pod) {
			return true, nil
		}
		got, err := readProbePort(ctx, tb, namespace, name, len(token))
		if err != nil {
			last = err
			return false, nil
		}
		last = fmt.Errorf("port-forward mapping not loaded yet (got %q)", got)
		return got == token, nil
	})
	if err != nil {
		return fmt.Errorf("wait for kwok to use the port-forward mapping of pod %s/%s: %w (last: %v)", namespace, name, err, last)
	}
	return nil
}

func readProbePort(ctx context.Context, tb *Testbed, namespace, name string, n int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fw, err := kube.PortForward(ctx, tb.RESTConfig, namespace, name, ProbePort)
	if err != nil {
		return "", err
	}
	defer fw.Close()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", fw.LocalAddr())
	if err != nil {
		return "", fmt.Errorf("dial forward: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// Read exactly the token: kwok keeps the stream open after the command exits because
	// it never sees the end of the command's stdin.
	buf := make([]byte, n)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return string(bytes.TrimRight(buf, "\x00")), fmt.Errorf("read probe port: %w", err)
	}
	return string(buf), nil
}

// ShimDir is a folder at the front of kwok's PATH. Programs written there (any time) can be
// run by `kubectl exec` into any fake pod by their base name.
func (tb *Testbed) ShimDir() string { return tb.shimDir }

// WriteShim writes an executable program into ShimDir, e.g. a shell script standing in for a
// database client inside the pods.
func (tb *Testbed) WriteShim(name string, content []byte) (string, error) {
	if name == "" || strings.ContainsRune(name, '/') {
		return "", fmt.Errorf("invalid shim name %q", name)
	}
	p := filepath.Join(tb.shimDir, name)
	// Write then rename so that a concurrent exec never runs a half-written file.
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, content, 0o755); err != nil {
		return "", fmt.Errorf("write shim %s: %w", name, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("write shim %s: %w", name, err)
	}
	return p, nil
}
