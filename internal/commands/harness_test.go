package commands

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// fixedClock is the API server clock in tests.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

var testNow = time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: "https://api.prod.example:6443"}
contexts:
- name: prod
  context: {cluster: prod, user: alice, namespace: prod}
- name: staging
  context: {cluster: prod, user: bob, namespace: staging}
current-context: prod
users:
- name: alice
  user: {token: not-a-real-token}
- name: bob
  user: {token: not-a-real-token}
`

// harness runs the real command tree against a fake clientset.
type harness struct {
	t        *testing.T
	client   *fake.Clientset
	env      map[string]string
	terminal bool
	stdin    string
	clock    ops.Clock
	// denied are permissions (ops.Permission.String()) access reviews
	// refuse; reviewed records every review asked.
	mu       sync.Mutex
	denied   map[string]bool
	reviewed []string
	// ctx, when set, is the parent of the command's context (a test cancels it as Ctrl-C
	// does).
	ctx context.Context
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, client: fake.NewClientset(objs...), clock: fixedClock{testNow},
		env:    map[string]string{"KUBECONFIG": kc, "HOME": dir, "XDG_CONFIG_HOME": filepath.Join(dir, "config")},
		denied: map[string]bool{}}
	// The fake clientset echoes a review back unanswered (not allowed);
	// answer it as RBAC would, denying what the test lists.
	h.client.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		ra := r.Spec.ResourceAttributes
		perm := ops.Permission{Verb: ra.Verb, Group: ra.Group, Resource: ra.Resource, Subresource: ra.Subresource}
		h.mu.Lock()
		h.reviewed = append(h.reviewed, perm.String())
		r.Status.Allowed = !h.denied[perm.String()]
		h.mu.Unlock()
		return true, r, nil
	})
	return h
}

type result struct {
	out, err string
	code     int
	runErr   error
}

func (h *harness) run(args ...string) result {
	h.t.Helper()
	return h.runWith(nil, args...)
}

// wire points a Factory at the harness's fakes: its clientset and clock, its terminal
// answer, environment and kubeconfig.
func (h *harness) wire(f *Factory) {
	f.NewClients = func() (*Clients, error) { return &Clients{Kube: h.client, Clock: h.clock}, nil }
	f.IsTerminal = func() bool { return h.terminal }
	f.Getenv = func(k string) string { return h.env[k] }
	kc := h.env["KUBECONFIG"]
	f.ConfigFlags.KubeConfig = &kc
}

// runWith runs the command tree with the fakes wired in; configure adds
// engine-specific fakes (nil for none).
func (h *harness) runWith(configure func(*GlobalOptions), args ...string) result {
	h.t.Helper()
	var out, errb bytes.Buffer
	streams := genericiooptions.IOStreams{In: bytes.NewBufferString(h.stdin), Out: &out, ErrOut: &errb}
	root := NewRootCmd(streams, func(g *GlobalOptions) {
		h.wire(g.Factory)
		if configure != nil {
			configure(g)
		}
	})
	root.SetArgs(args)
	parent := h.ctx
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if line := ""; err != nil {
		if line = ErrorLine(err); line != "" {
			errb.WriteString(line + "\n")
		}
	}
	return result{out: out.String(), err: errb.String(), code: ops.ExitCode(err), runErr: err}
}
