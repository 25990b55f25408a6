package commands

import (
	"context"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// clusterIdentity is what says which Kubernetes cluster a context reaches: the UID of its
// kube-system namespace, read from the API (a cluster's own identity, whatever URL reaches
// it), and the API server URL of the kubeconfig (when the namespace cannot be read).
type clusterIdentity struct {
	uid, server string
}

func (a clusterIdentity) same(b clusterIdentity) bool {
	return (a.uid != "" && a.uid == b.uid) || (a.server != "" && a.server == b.server)
}

func (a clusterIdentity) String() string {
	if a.uid != "" {
		return "kube-system namespace UID " + a.uid
	}
	return "API server " + a.server
}

// checkDistinctTargets refuses (exit 2) a fleet mutation that would act on one database
// cluster twice: two contexts that reach the same Kubernetes cluster (two names for one
// cluster in a kubeconfig are common) with the same namespace and cluster. Run one after
// the other, the second target would restart it again; at once, the second is refused by the
// first's lock and reads as someone else's. Only contexts whose targets share a namespace and
// cluster are read: one GET each.
func checkDistinctTargets(ctx context.Context, g *GlobalOptions, ts []fleet.Target) error {
	type key struct{ ns, cluster string }
	byKey := map[key][]string{}
	for _, t := range ts {
		k := key{t.Namespace, t.Cluster}
		if !slices.Contains(byKey[k], t.Context) {
			byKey[k] = append(byKey[k], t.Context)
		}
	}
	need := map[string]bool{}
	for _, cs := range byKey {
		if len(cs) > 1 {
			for _, c := range cs {
				need[c] = true
			}
		}
	}
	if len(need) == 0 {
		return nil
	}
	ids := map[string]clusterIdentity{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range need {
		wg.Go(func() {
			id := contextIdentity(ctx, g, c)
			mu.Lock()
			ids[c] = id
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, t := range ts {
		cs := byKey[key{t.Namespace, t.Cluster}]
		for i := range cs {
			for j := i + 1; j < len(cs); j++ {
				if a, b := ids[cs[i]], ids[cs[j]]; a.same(b) {
					return ops.Usagef("contexts %s and %s reach the same Kubernetes cluster (%s): the fleet would act on %s/%s twice; name each cluster once (drop one of the contexts, or use --fleet targets)",
						cs[i], cs[j], a, t.Namespace, t.Cluster)
				}
			}
		}
	}
	return nil
}

// contextIdentity reads context c's identity; what cannot be read stays empty.
func contextIdentity(ctx context.Context, g *GlobalOptions, c string) clusterIdentity {
	var id clusterIdentity
	f := g.ForContext(c)
	if cfg, err := f.ConfigFlags.ToRESTConfig(); err == nil {
		id.server = strings.TrimSuffix(cfg.Host, "/")
	}
	if cl, err := f.Clients(); err == nil {
		if ns, err := cl.Kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err == nil {
			id.uid = string(ns.UID)
		}
	}
	return id
}
