//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/discovery"
)

// podRequests records the pod requests a client sends to the real API server, with their
// query and status.
type podRequests struct {
	mu   sync.Mutex
	seen []string
	next http.RoundTripper
}

func (r *podRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if strings.HasSuffix(req.URL.Path, "/pods") {
		status := "error"
		if err == nil {
			status = resp.Status
		}
		q := req.URL.Query()
		verb := "list"
		if q.Get("watch") == "true" {
			verb = "watch"
		}
		r.mu.Lock()
		r.seen = append(r.seen, fmt.Sprintf("%s sendInitialEvents=%s resourceVersion=%s resourceVersionMatch=%s: %s",
			verb, q.Get("sendInitialEvents"), q.Get("resourceVersion"), q.Get("resourceVersionMatch"), status))
		r.mu.Unlock()
	}
	return resp, err
}

func (r *podRequests) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// TestPodInformerStartsNotOlderThanDiscovery runs the CLI's start of a run against the real
// API server: discovery lists the pods, then the run's pod informer starts not older than that
// list. The API server must accept that watch-list (a refusal would make client-go fall back
// to a list silently, and the informer would make the slow consistent read again), and the
// informer must hold the pods discovery saw.
func TestPodInformerStartsNotOlderThanDiscovery(t *testing.T) {
	ns := newNamespace(t)
	createDBCluster(t, ns, webCluster, 3)
	ctx := t.Context()
	c, err := discovery.Discover(ctx, bed.Client, discovery.Options{Namespace: ns, Name: webCluster})
	if err != nil {
		t.Fatal(err)
	}
	if c.PodsResourceVersion == "" {
		t.Fatal("discovery recorded no resourceVersion for its pod list")
	}
	rec := &podRequests{}
	rc := rest.CopyConfig(bed.RESTConfig)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	sel := kube.SelectorFor([]*metav1.LabelSelector{c.Groups[0].Owner.PodSelector()})
	pods := kube.StartPods(ctx, client, ns, sel, c.PodsResourceVersion)
	if err := pods.Synced(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("watch sendInitialEvents=true resourceVersion=%s resourceVersionMatch=NotOlderThan: 200 OK",
		url.QueryEscape(c.PodsResourceVersion))}
	if got := rec.list(); !slices.Equal(got, want) {
		t.Errorf("the informer's pod requests:\n got %q\nwant %q", got, want)
	}
	for _, p := range c.Groups[0].Pods {
		if live := pods.Get(p.Name); live == nil || live.UID != p.UID {
			t.Errorf("informer: %s is %v, discovery saw UID %s", p.Name, live, p.UID)
		}
	}
}
