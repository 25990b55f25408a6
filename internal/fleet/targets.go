// Package fleet runs one command over many clusters in many kubeconfig contexts: it resolves
// the targets (contexts, namespaces, clusters) and paces their runs (canary, max-parallel,
// fail-fast). It knows nothing of cobra or the terminal; each target runs the normal
// single-cluster path, which the caller hands in.
package fleet

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Target is one cluster of a fleet: a kubeconfig context, a namespace in it and (when known)
// a cluster name. Namespace "" with AllNamespaces: every namespace of the context.
type Target struct {
	Context   string `json:"context"`
	Namespace string `json:"namespace,omitempty"`
	Cluster   string `json:"cluster,omitempty"`
	// Selector (-l) picks the target's clusters by label when Cluster is "".
	Selector string `json:"selector,omitempty"`
}

// String names the target as plain lines prefix it: context/namespace/cluster.
func (t Target) String() string {
	s := t.Context
	if t.Namespace != "" {
		s += "/" + t.Namespace
	}
	if t.Cluster != "" {
		s += "/" + t.Cluster
	}
	return s
}

// Spec is what the user asked for: context names and globs (--context A,B, --contexts 'p-*'),
// namespaces (-n, or every one with -A) and clusters (an argument, or a fleet file's list).
type Spec struct {
	// Contexts are names or path.Match globs over the kubeconfig's context names.
	Contexts      []string
	Namespaces    []string
	AllNamespaces bool
	Clusters      []string
	// Selector is a label selector over clusters (-l), for targets without a cluster name.
	Selector string
	// Overrides are per-context namespaces and clusters (a fleet file's targets).
	Overrides []Override
}

// IsGlob reports whether a context pattern has glob characters.
func IsGlob(p string) bool { return strings.ContainsAny(p, "*?[") }

// SplitList splits comma separated values, dropping empty ones.
func SplitList(vals ...string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// ResolveContexts matches patterns against the kubeconfig's contexts, in the order given
// (each context once). An unknown name, a bad glob or a glob that matches nothing is a usage
// error naming the contexts the kubeconfig has.
func ResolveContexts(cfg *clientcmdapi.Config, patterns []string) ([]string, error) {
	names := make([]string, 0, len(cfg.Contexts))
	for n := range cfg.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	allowed := strings.Join(names, ", ")
	if allowed == "" {
		allowed = "none: the kubeconfig has no contexts"
	}
	if len(patterns) == 0 {
		return nil, ops.Usagef("no kubeconfig context given for the fleet; allowed: %s", allowed)
	}
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, p := range patterns {
		if !IsGlob(p) {
			if _, ok := cfg.Contexts[p]; !ok {
				return nil, ops.Usagef("kubeconfig has no context %q; allowed: %s", p, allowed)
			}
			add(p)
			continue
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, ops.Usagef("bad context glob %q: %v; allowed contexts: %s", p, err, allowed)
		}
		matched := false
		for _, n := range names {
			if ok, _ := path.Match(p, n); ok {
				matched = true
				add(n)
			}
		}
		if !matched {
			return nil, ops.Usagef("context glob %q matches no kubeconfig context; allowed: %s", p, allowed)
		}
	}
	return out, nil
}

// Resolve turns a spec into targets: for each context (resolved from the kubeconfig), each
// namespace (the spec's, else the context's own, else "default"; "" with AllNamespaces), each
// cluster (none given: one target with Cluster "" for the caller to list). Overrides replace
// the namespaces and clusters of their context.
func Resolve(cfg *clientcmdapi.Config, s Spec) ([]Target, error) {
	var ctxs []string
	// A fleet file may name its contexts by its targets alone (ParseFile).
	if len(s.Contexts) > 0 || len(s.Overrides) == 0 {
		var err error
		if ctxs, err = ResolveContexts(cfg, s.Contexts); err != nil {
			return nil, err
		}
	}
	if s.Selector != "" {
		if _, err := labels.Parse(s.Selector); err != nil {
			return nil, ops.Usagef("bad cluster selector -l %q: %s; allowed: key=value, key!=value, key in (a,b), key, !key", s.Selector, oneLine(err.Error()))
		}
		if len(s.Clusters) > 0 {
			return nil, ops.Usagef("give cluster names or a selector (-l %q), not both", s.Selector)
		}
	}
	for _, o := range s.Overrides {
		if _, ok := cfg.Contexts[o.Context]; !ok {
			return nil, ops.Usagef("fleet target names context %q, which the kubeconfig does not have", o.Context)
		}
		if !slices.Contains(ctxs, o.Context) {
			ctxs = append(ctxs, o.Context)
		}
	}
	var out []Target
	for _, c := range ctxs {
		nss, clusters, all := s.Namespaces, s.Clusters, s.AllNamespaces
		for _, o := range s.Overrides {
			if o.Context != c {
				continue
			}
			if len(o.Namespaces) > 0 {
				nss, all = o.Namespaces, false
			}
			if len(o.Clusters) > 0 {
				clusters = o.Clusters
			}
		}
		switch {
		case all:
			nss = []string{""}
		case len(nss) == 0:
			ns := ""
			if kc := cfg.Contexts[c]; kc != nil {
				ns = kc.Namespace
			}
			if ns == "" {
				ns = "default"
			}
			nss = []string{ns}
		}
		for _, ns := range nss {
			if len(clusters) == 0 {
				out = append(out, Target{Context: c, Namespace: ns, Selector: s.Selector})
				continue
			}
			for _, cl := range clusters {
				out = append(out, Target{Context: c, Namespace: ns, Cluster: cl})
			}
		}
	}
	return out, nil
}

// File is a fleet file (--fleet FILE), for repeatable runs:
//
//	contexts: [prod-eu, "prod-us-*"]
//	namespaces: [db]
//	clusters: [orders]
//	targets:
//	- context: prod-ap
//	  namespaces: [db-ap]
type File struct {
	Contexts      []string   `json:"contexts"`
	Namespaces    []string   `json:"namespaces,omitempty"`
	AllNamespaces bool       `json:"allNamespaces,omitempty"`
	Clusters      []string   `json:"clusters,omitempty"`
	Targets       []Override `json:"targets,omitempty"`
}

// Override sets the namespaces and clusters of one context.
type Override struct {
	Context    string   `json:"context"`
	Namespaces []string `json:"namespaces,omitempty"`
	Clusters   []string `json:"clusters,omitempty"`
}

// ReadFile reads and strictly decodes a fleet file: an unknown key, a duplicate key or a
// target without a context is a usage error naming the file.
func ReadFile(name string) (*File, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, ops.Usagef("fleet file: %v", err)
	}
	return ParseFile(name, data)
}

// ParseFile decodes a fleet file's content (see ReadFile).
func ParseFile(name string, data []byte) (*File, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, ops.Usagef("fleet file %s: %s; allowed keys: contexts, namespaces, allNamespaces, clusters, targets (context, namespaces, clusters)",
			name, oneLine(err.Error()))
	}
	if len(f.Contexts) == 0 && len(f.Targets) == 0 {
		return nil, ops.Usagef("fleet file %s names no contexts (give contexts: or targets:)", name)
	}
	for i, t := range f.Targets {
		if t.Context == "" {
			return nil, ops.Usagef("fleet file %s: targets[%d] has no context", name, i)
		}
		if IsGlob(t.Context) {
			return nil, ops.Usagef("fleet file %s: targets[%d].context %q must be a context name, not a glob", name, i, t.Context)
		}
	}
	return &f, nil
}

// Spec is the file as a spec.
func (f *File) Spec() Spec {
	return Spec{Contexts: f.Contexts, Namespaces: f.Namespaces, AllNamespaces: f.AllNamespaces, Clusters: f.Clusters, Overrides: f.Targets}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "error unmarshaling JSON: while decoding JSON: ", "")), " ")
}

// describeContexts names contexts for prompts: "a, b and c".
func describeContexts(ctxs []string) string {
	switch len(ctxs) {
	case 0:
		return ""
	case 1:
		return ctxs[0]
	}
	return strings.Join(ctxs[:len(ctxs)-1], ", ") + " and " + ctxs[len(ctxs)-1]
}

// Contexts lists the distinct contexts of targets, in order.
func Contexts(ts []Target) []string {
	var out []string
	for _, t := range ts {
		if !slices.Contains(out, t.Context) {
			out = append(out, t.Context)
		}
	}
	return out
}

// Describe is the prompt's line: "3 clusters in contexts a and b".
func Describe(ts []Target) string {
	ctxs := Contexts(ts)
	word := "contexts"
	if len(ctxs) == 1 {
		word = "context"
	}
	cl := "clusters"
	if len(ts) == 1 {
		cl = "cluster"
	}
	return fmt.Sprintf("%d %s in %s %s", len(ts), cl, word, describeContexts(ctxs))
}
