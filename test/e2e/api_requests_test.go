//go:build e2e

package e2e

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// apiRequestCounter counts the requests that pass through a counting proxy, by verb and resource.
type apiRequestCounter struct {
	mu     sync.Mutex
	total  int
	counts map[string]int
	start  time.Time
	log    []string // "+elapsed VERB path", in arrival order
}

func (c *apiRequestCounter) add(r *http.Request) {
	verb := r.Method
	if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
		verb = "WATCH"
	}
	// /api/v1/namespaces/NS/pods/NAME -> pods; /apis/G/V/namespaces/NS/leases -> leases.
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	resource := r.URL.Path
	for i, p := range parts {
		if p == "namespaces" && i+2 < len(parts) {
			resource = parts[i+2]
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total++
	c.counts[verb+" "+resource]++
	c.log = append(c.log, fmt.Sprintf("+%s %s %s", time.Since(c.start).Round(time.Millisecond), verb, r.URL.Path))
}

func (c *apiRequestCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for k, n := range c.counts {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// countingKubeconfig starts a TLS reverse proxy in front of the testbed's API server that
// counts every request, and returns a kubeconfig pointing at it (user "admin", the proxy
// authenticating upstream with the testbed's credentials).
func countingKubeconfig(t *testing.T) (string, *apiRequestCounter) {
	t.Helper()
	target, err := url.Parse(bed.APIServerURL)
	if err != nil {
		t.Fatalf("parse API server URL: %v", err)
	}
	transport, err := rest.TransportFor(bed.RESTConfig)
	if err != nil {
		t.Fatalf("transport: %v", err)
	}
	counter := &apiRequestCounter{counts: map[string]int{}, start: time.Now()}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // stream watches
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		counter.add(r) // on arrival: a watch only ends when the client goes away
		proxy.ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "admin"}
	cfg.CurrentContext = "proxy"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path, counter
}

// TestRollingRestartAPIRequests measures how many API requests a rolling restart makes per
// restarted pod, through a counting proxy. It only logs the numbers.
func TestRollingRestartAPIRequests(t *testing.T) {
	ns := newNamespace(t)
	old := uidsByName(createDBCluster(t, ns, webCluster, 3))
	pods := recordPodWatch(t, ns)
	kubeconfig, counter := countingKubeconfig(t)
	env := cliEnv(t)
	for i, kv := range env {
		if strings.HasPrefix(kv, "KUBECONFIG=") {
			env[i] = "KUBECONFIG=" + kubeconfig
		}
	}

	res := runCLI(t, env, "restart", webCluster, "-n", ns, "--rolling", "--yes", "-o", "json")
	if res.Code != 0 {
		t.Fatalf("want exit 0: %s", res)
	}
	// Per-step timings from the NDJSON events: where a restart spends its time.
	started := map[string]time.Duration{}
	for _, e := range parseNDJSON(t, res) {
		switch e.Type {
		case "step-started":
			started[e.stepID()] = e.Elapsed
		case "step-waiting":
			t.Logf("  %s at +%s: waiting: %s", e.stepID(), e.Elapsed.Round(time.Millisecond), e.Reason)
		case "step-done":
			t.Logf("step %s took %s (done at +%s)", e.stepID(), (e.Elapsed - started[e.stepID()]).Round(time.Millisecond), e.Elapsed.Round(time.Millisecond))
		}
	}
	checkRestartOrder(t, waitReplacementsReady(t, pods, webPods, old), webPods, old)
	counter.mu.Lock()
	total, deletes := counter.total, counter.counts["DELETE pods"]
	counter.mu.Unlock()
	// The tool's own deletions, as sent: exactly one per pod.
	if deletes != len(webPods) {
		t.Errorf("the tool sent %d pod DELETEs, want %d (one per pod): %s", deletes, len(webPods), counter)
	}
	t.Logf("API requests for a rolling restart of %d pods: %d total, %.1f per restarted pod (%s)",
		len(webPods), total, float64(total)/float64(len(webPods)), counter)
	if testing.Verbose() {
		counter.mu.Lock()
		t.Logf("requests in arrival order:\n  %s", strings.Join(counter.log, "\n  "))
		counter.mu.Unlock()
	}

	// The same request count for a status, to compare with the per-pod cost.
	before := total
	if res := runCLI(t, env, "status", webCluster, "-n", ns); res.Code != 0 {
		t.Fatalf("status: want exit 0: %s", res)
	}
	counter.mu.Lock()
	t.Logf("API requests for one status: %d", counter.total-before)
	counter.mu.Unlock()
}
