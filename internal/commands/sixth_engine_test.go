package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// The sixth engine of docs/architecture.md's checklist, operator-managed: an operator's custom
// resource (a ToyCluster) is the cluster and creates its pods itself, with no StatefulSet, as
// the FoundationDB operator's FoundationDBCluster does. It is one package's worth of code (the
// engine, its recognizer, its contract) and one registry line (withToyOperator), and nothing
// else in discovery or the commands knows of it.

// toyClusterGVR is the toy operator's resource.
var toyClusterGVR = schema.GroupVersionResource{Group: "toy.example.com", Version: "v1", Resource: "toyclusters"}

// The toy operator's labels on the pods it creates.
const (
	toyLabelCluster = "toy.example.com/cluster"
	toyLabelMember  = "toy.example.com/member"
)

// toyOperatorRecognizer recognises a ToyCluster named as the cluster (the engine package's
// recognize.go).
type toyOperatorRecognizer struct{}

// The toy operator engine's contract (its package's contract.go).
var (
	_ ops.ResourceRecognizer = toyOperatorRecognizer{}
	_ ops.Engine             = (*toyOperatorEngine)(nil)
)

func (toyOperatorRecognizer) Engine() string                        { return "toyop" }
func (toyOperatorRecognizer) Layout() string                        { return "toy-operator" }
func (toyOperatorRecognizer) Resource() schema.GroupVersionResource { return toyClusterGVR }
func (toyOperatorRecognizer) Kind() string                          { return "ToyCluster" }

// RecognizeResource reads the ToyCluster and the pods it controls: one group, whose desired
// count is spec.members and whose pods' member IDs are the operator's label.
func (toyOperatorRecognizer) RecognizeResource(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, namespace, name string) (*ops.Cluster, bool, error) {
	u, err := dyn.Resource(toyClusterGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading ToyCluster %s/%s: %w", namespace, name, err)
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{toyLabelCluster: name}}
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: toyLabelCluster + "=" + name})
	if err != nil {
		return nil, true, err
	}
	members, _, _ := unstructured.NestedInt64(u.Object, "spec", "members")
	g := &ops.NodeGroup{Name: "members", Role: ops.RoleData, Desired: int32(members),
		Owner: &toyOwner{u: u, sel: sel, desired: int32(members)}}
	for i := range pods.Items {
		p := &pods.Items[i]
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != u.GetUID() {
			continue
		}
		ready := p.Status.Phase == corev1.PodRunning
		g.Pods = append(g.Pods, ops.Pod{Name: p.Name, Member: p.Labels[toyLabelMember], Group: g.Name, Ordinal: len(g.Pods), UID: p.UID,
			Phase: string(p.Status.Phase), Ready: ready})
		g.Current++
		if ready {
			g.Ready++
		}
	}
	return &ops.Cluster{Name: name, Namespace: namespace, Engine: "toyop", Layout: "toy-operator", Groups: []*ops.NodeGroup{g}}, true, nil
}

// toyOwner is the engine's ops.PodOwner: the ToyCluster, whose operator names its pods
// itself and labels each with its member ID.
type toyOwner struct {
	u       *unstructured.Unstructured
	sel     *metav1.LabelSelector
	desired int32
}

func (o *toyOwner) Ref(namespace string) ops.ObjectRef {
	return ops.ObjectRef{Kind: o.u.GetKind(), APIVersion: o.u.GetAPIVersion(), Namespace: namespace, Name: o.u.GetName(), UID: string(o.u.GetUID())}
}
func (o *toyOwner) String() string                     { return o.u.GetKind() + "/" + o.u.GetName() }
func (o *toyOwner) PodSelector() *metav1.LabelSelector { return o.sel }
func (o *toyOwner) Member(p *corev1.Pod) (string, int, bool) {
	if p.Labels[toyLabelCluster] != o.u.GetName() {
		return "", -1, false
	}
	return p.Labels[toyLabelMember], -1, true
}
func (o *toyOwner) PodName(int) string { return "" }
func (o *toyOwner) Desired() int32     { return o.desired }

// toyOperatorEngine is the engine: health from the resource's status, the shared rolling
// restart (pods deleted for the operator to recreate).
type toyOperatorEngine struct {
	client kubernetes.Interface
}

func (e *toyOperatorEngine) Name() string { return "toyop" }

func (e *toyOperatorEngine) Health(_ context.Context, c *ops.Cluster) (*ops.Health, error) {
	state, _, _ := unstructured.NestedString(c.Groups[0].Owner.(*toyOwner).u.Object, "status", "state")
	return &ops.Health{Status: "toy-operator-" + state}, nil
}

func (e *toyOperatorEngine) PlanRestart(_ context.Context, c *ops.Cluster, opts ops.RestartOptions) (*ops.Plan, error) {
	return (&ops.RollingRestart{Client: e.client}).Plan(c, "toyop", opts)
}

// toyOperatorObjects are a ToyCluster "db" of three members and the pods its operator made.
func toyOperatorObjects() (*unstructured.Unstructured, []runtime.Object) {
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "toy.example.com/v1", "kind": "ToyCluster",
		"metadata": map[string]any{"name": "db", "namespace": "prod", "uid": "toy-uid"},
		"spec":     map[string]any{"members": int64(3)},
		"status":   map[string]any{"state": "ok"},
	}}
	var pods []runtime.Object
	for i := range 3 {
		id := fmt.Sprintf("m%d", i+7)
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "db-" + id, Namespace: "prod", UID: types.UID("pod-" + id),
				Labels: map[string]string{toyLabelCluster: "db", toyLabelMember: id},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "toy.example.com/v1", Kind: "ToyCluster", Name: "db",
					UID: "toy-uid", Controller: ptrTo(true)}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		})
	}
	return cr, pods
}

func ptrTo[T any](v T) *T { return &v }

// withToyOperator is the registry line (an EngineKind with its recognizer, as
// internal/commands/engines.go lists the built-in ones) and the clients with the operator's
// resource.
func withToyOperator(dyn dynamic.Interface, register bool) func(*GlobalOptions) {
	return func(g *GlobalOptions) {
		kube := g.NewClients
		g.NewClients = func() (*Clients, error) {
			cl, err := kube()
			if err != nil {
				return nil, err
			}
			cl.Dynamic = dyn
			return cl, nil
		}
		if register {
			g.Engines = append(g.Engines, EngineKind{Name: "toyop", Recognizers: []ops.Recognizer{toyOperatorRecognizer{}},
				Build: func(_ context.Context, d EngineDeps) (ops.Engine, error) {
					return &toyOperatorEngine{client: d.deps().Client}, nil
				}})
		}
	}
}

func TestSixthEngineOperatorManaged(t *testing.T) {
	setup := func(t *testing.T) (*harness, *dynamicfake.FakeDynamicClient) {
		cr, pods := toyOperatorObjects()
		h := newHarness(t, pods...)
		// The built-in engines' resources are listed too (a misspelled name's "did you mean").
		kinds := map[schema.GroupVersionResource]string{toyClusterGVR: "ToyClusterList"}
		for _, r := range ops.ResourceRecognizers((&Factory{Engines: builtinEngines()}).recognizers()) {
			kinds[r.Resource()] = r.Kind() + "List"
		}
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds, cr)
		return h, dyn
	}
	noWrites := func(t *testing.T, h *harness, dyn *dynamicfake.FakeDynamicClient) {
		t.Helper()
		if w := fakecluster.Writes(h.client); len(w) > 0 {
			t.Errorf("wrote: %v", w)
		}
		for _, a := range dyn.Actions() {
			if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
				t.Errorf("wrote the operator's resource: %v", a)
			}
		}
	}
	t.Run("discovery finds it and status shows it", func(t *testing.T) {
		h, dyn := setup(t)
		r := h.runWith(withToyOperator(dyn, true), "status", "db")
		if r.code != 0 {
			t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
		}
		for _, want := range []string{"(engine toyop, layout toy-operator)", "toy-operator-ok", "db-m7", "db-m9"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("status lacks %q:\n%s", want, r.out)
			}
		}
		noWrites(t, h, dyn)
	})
	t.Run("a restart dry-run plans it", func(t *testing.T) {
		h, dyn := setup(t)
		r := h.runWith(withToyOperator(dyn, true), "restart", "db", "--rolling", "--dry-run")
		if r.code != 0 || !strings.Contains(r.out, "(engine toyop)") {
			t.Fatalf("exit %d, stdout:\n%s\nstderr: %s", r.code, r.out, r.err)
		}
		var at []int
		for _, p := range []string{"db-m7", "db-m8", "db-m9"} {
			at = append(at, strings.Index(r.out, p))
		}
		if slices.Contains(at, -1) || !slices.IsSorted(at) {
			t.Errorf("plan does not restart db-m7, db-m8, db-m9 in order:\n%s", r.out)
		}
		noWrites(t, h, dyn)
	})
	t.Run("without its registry line there is no such cluster", func(t *testing.T) {
		h, dyn := setup(t)
		r := h.runWith(withToyOperator(dyn, false), "status", "db")
		if r.code != ops.ExitUsage || !strings.Contains(r.err, `no database cluster "db"`) {
			t.Errorf("exit %d, stderr %q", r.code, r.err)
		}
	})
}
