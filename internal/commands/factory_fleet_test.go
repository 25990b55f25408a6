package commands

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

const twoContexts = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.invalid:6443"}
- name: b
  cluster: {server: "https://b.invalid:6443"}
contexts:
- name: ctx-a
  context: {cluster: a, user: u, namespace: ns-a}
- name: ctx-b
  context: {cluster: b, user: u, namespace: ns-b}
current-context: ctx-a
users:
- name: u
  user: {token: not-a-real-token}
`

// TestFactoryForContext: each fleet context gets its own factory over the same kubeconfig
// file, reading that context's namespace and server, without touching the parent's flags and
// without building clients before they are asked for.
func TestFactoryForContext(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	f := NewFactory(genericiooptions.NewTestIOStreamsDiscard())
	f.ConfigFlags.KubeConfig = &p
	ns := "from-flag"
	f.ConfigFlags.Namespace = &ns

	for _, tc := range []struct{ ctx, ns, server string }{
		{"ctx-a", "ns-a", "https://a.invalid:6443"},
		{"ctx-b", "ns-b", "https://b.invalid:6443"},
	} {
		g := f.ForContext(tc.ctx)
		if g.clients != nil {
			t.Fatalf("%s: clients built before use", tc.ctx)
		}
		got, err := g.Namespace()
		if err != nil || got != tc.ns {
			t.Fatalf("%s: namespace %q, %v; want %q", tc.ctx, got, err, tc.ns)
		}
		cfg, err := g.ConfigFlags.ToRESTConfig()
		if err != nil || cfg.Host != tc.server {
			t.Fatalf("%s: server %v, %v; want %s", tc.ctx, cfg, err, tc.server)
		}
	}
	if f.ConfigFlags.Context != nil && *f.ConfigFlags.Context != "" {
		t.Fatalf("parent factory's context changed to %q", *f.ConfigFlags.Context)
	}
	if _, err := f.ForContext("ctx-c").Namespace(); err == nil {
		t.Fatal("unknown context accepted")
	}
}
