package discovery

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// statefulSetRecognizers are opts' StatefulSet recognizers of the engines opts allows, in order.
func (opts Options) statefulSetRecognizers() []ops.StatefulSetRecognizer {
	var out []ops.StatefulSetRecognizer
	for _, r := range opts.Recognizers {
		if s, ok := r.(ops.StatefulSetRecognizer); ok && slices.Contains(opts.engines(), r.Engine()) {
			out = append(out, s)
		}
	}
	return out
}

// resourceRecognizers are opts' resource recognizers of engine ("" = of every engine opts
// allows), in order.
func (opts Options) resourceRecognizers(engine string) []ops.ResourceRecognizer {
	var out []ops.ResourceRecognizer
	for _, r := range ops.ResourceRecognizers(opts.Recognizers) {
		if (engine == "" || r.Engine() == engine) && slices.Contains(opts.engines(), r.Engine()) {
			out = append(out, r)
		}
	}
	return out
}

// statefulSetRecognizer is the recognizer of a cluster found by StatefulSets: the one whose
// layout found it, else the engine's first; nil for an engine without one (generic).
func (opts Options) statefulSetRecognizer(layout, engine string) ops.StatefulSetRecognizer {
	var first ops.StatefulSetRecognizer
	for _, r := range opts.statefulSetRecognizers() {
		if r.Layout() == layout {
			return r
		}
		if first == nil && r.Engine() == engine {
			first = r
		}
	}
	return first
}

// recognizeResourceOnly is discovery under --engine for the engine's operator resources (it
// has some): the first that exists is the cluster. None is a usage error naming the first
// (the caller then tries StatefulSets).
func recognizeResourceOnly(ctx context.Context, client kubernetes.Interface, opts Options) (*ops.Cluster, error) {
	rs := opts.resourceRecognizers(opts.Engine)
	if opts.Dynamic == nil {
		return nil, fmt.Errorf("discovering %s %s/%s: no dynamic client", rs[0].Kind(), opts.Namespace, opts.Name)
	}
	for _, r := range rs {
		c, found, err := r.RecognizeResource(ctx, client, opts.Dynamic, opts.Namespace, opts.Name)
		if err != nil || found {
			return c, err
		}
	}
	return nil, ops.Usagef("no %s %q in namespace %q", rs[0].Kind(), opts.Name, opts.Namespace)
}

// finish lets the recognizer of the cluster's engine attach its own (ops.ClusterFinisher), and,
// for engines ordering data groups (ops.GroupOrderer) without a master group, makes the first
// data group in procedure order master-eligible (CrateDB's nodes are then all
// master-eligible, and the first data group is the one procedures treat so). A recognizer of
// another engine (whose layout found a cluster given another --engine) only named the groups.
func finish(c *ops.Cluster, rec ops.StatefulSetRecognizer) {
	if rec == nil || rec.Engine() != c.Engine {
		return
	}
	if _, ok := rec.(ops.GroupOrderer); ok && MasterEligible(c) == nil {
		var first *ops.NodeGroup
		for _, g := range c.Groups {
			if first == nil || cmp.Or(cmp.Compare(g.Order, first.Order), cmp.Compare(g.Name, first.Name)) < 0 {
				first = g
			}
		}
		if first != nil {
			first.MasterEligible = true
		}
	}
	if f, ok := rec.(ops.ClusterFinisher); ok {
		f.Finish(c)
	}
}
