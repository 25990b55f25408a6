//go:build e2e

package e2e

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
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
	// arrivals are the requests in arrival order, for the gaps between them.
	arrivals   []proxyArrival
	kubeconfig string
	// delay is added to every request before it is forwarded (an API server that far away).
	delay time.Duration
}

type proxyArrival struct {
	At   time.Time
	Verb string
	Path string
	// Took is how long the proxy took to answer it (its delay and the API server's time):
	// the round trip the client saw, but for the client's side of the connection.
	Took time.Duration
	// Format is the media type of the answer (its Content-Type without parameters).
	Format string
	// Answered is when the answer's headers went out: no client can have the answer before.
	Answered time.Time
	// Done is, for a lease write, the step IDs its journal annotation lists as done (read from
	// the request body: the journal's JSON is a string inside the protobuf or JSON lease).
	Done []string
}

// add counts r and returns its index in arrivals, for finish.
func (c *apiRequestCounter) add(r *http.Request) int {
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
	c.arrivals = append(c.arrivals, proxyArrival{At: time.Now(), Verb: verb, Path: r.URL.Path, Done: journalDone(r)})
	return len(c.arrivals) - 1
}

// journalDoneRE finds the done list in a journal's JSON. In a JSON lease body the journal is
// an escaped string (\"done\":[\"restart/web-0\"]), in a protobuf one a plain one.
var journalDoneRE = regexp.MustCompile(`\\?"done\\?":\[([^\]]*)\]`)

// journalDone returns the step IDs a lease write's journal lists as done, leaving the
// request body readable for the proxy.
func journalDone(r *http.Request) []string {
	if r.Body == nil || (r.Method != http.MethodPut && r.Method != http.MethodPatch && r.Method != http.MethodPost) || !strings.Contains(r.URL.Path, "/leases") {
		return nil
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return nil
	}
	m := journalDoneRE.FindSubmatch(body)
	if m == nil {
		return nil
	}
	var done []string
	for _, q := range strings.Split(string(m[1]), ",") {
		if id := strings.Trim(q, `\" `); id != "" {
			done = append(done, id)
		}
	}
	return done
}

// finish records how long the i-th request took to answer.
func (c *apiRequestCounter) finish(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.arrivals[i].Took = time.Since(c.arrivals[i].At)
}

// answered records the format of the i-th request's answer as its headers go out (a watch
// answers long before it finishes).
func (c *apiRequestCounter) answered(i int, contentType string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.arrivals[i].Format, _, _ = strings.Cut(contentType, ";")
	c.arrivals[i].Answered = time.Now()
}

// formatRecorder tells the counter the answer's Content-Type when its headers are written.
type formatRecorder struct {
	http.ResponseWriter
	once   sync.Once
	header func(contentType string)
}

func (w *formatRecorder) WriteHeader(code int) {
	w.once.Do(func() { w.header(w.Header().Get("Content-Type")) })
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets the proxy flush a watch's events through (http.ResponseController).
func (w *formatRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// formats counts the answers by "<resource path> <format>", for the requests whose path
// contains one of resources ("/pods", "/leases", ...).
func (c *apiRequestCounter) formats(resources ...string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, a := range c.arrivals {
		for _, r := range resources {
			if strings.Contains(a.Path, r) {
				out[r+" "+a.Format]++
			}
		}
	}
	return out
}

// longestBetween is the longest answer time of a request that arrived in [from, to) and was
// answered by to: the round trip(s) a client waited for in that window.
func (c *apiRequestCounter) longestBetween(from, to time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var longest time.Duration
	for _, a := range c.arrivals {
		if !a.At.Before(from) && a.At.Before(to) && a.Took > 0 && !a.At.Add(a.Took).After(to) && a.Took > longest {
			longest = a.Took
		}
	}
	return longest
}

// perPodBetweenDeletes is the steady-state cost of one restarted pod: the requests from the
// first pod DELETE up to (not including) the last one, divided by the pods restarted in
// between. Fixed costs (discovery, RBAC checks, taking and releasing the lock, the informer's
// list and watch) fall outside the window.
func (c *apiRequestCounter) perPodBetweenDeletes() (float64, []string) {
	return c.perPodBetweenDeletesFrom(0)
}

// perPodBetweenDeletesFrom is perPodBetweenDeletes for the requests from the from-th on (one
// run of several through the same proxy).
func (c *apiRequestCounter) perPodBetweenDeletesFrom(from int) (float64, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first, last, deletes := -1, -1, 0
	for i, a := range c.arrivals {
		if i < from {
			continue
		}
		if a.Verb == "DELETE" && strings.Contains(a.Path, "/pods/") {
			if first < 0 {
				first = i
			}
			last = i
			deletes++
		}
	}
	if deletes < 2 {
		return 0, nil
	}
	var window []string
	for _, a := range c.arrivals[first:last] {
		window = append(window, a.Verb+" "+a.Path)
	}
	return float64(last-first) / float64(deletes-1), window
}

// deleteArrival is when the DELETE of pod name reached the proxy.
func (c *apiRequestCounter) deleteArrival(name string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.arrivals {
		if a.Verb == "DELETE" && strings.HasSuffix(a.Path, "/pods/"+name) {
			return a.At, true
		}
	}
	return time.Time{}, false
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
	return delayingKubeconfig(t, 0)
}

// delayingKubeconfig is countingKubeconfig with delay added to every request before the proxy
// forwards it: an API server one round trip of delay away.
func delayingKubeconfig(t testing.TB, delay time.Duration) (string, *apiRequestCounter) {
	t.Helper()
	target, err := url.Parse(bed.APIServerURL)
	if err != nil {
		t.Fatalf("parse API server URL: %v", err)
	}
	transport, err := rest.TransportFor(bed.RESTConfig)
	if err != nil {
		t.Fatalf("transport: %v", err)
	}
	counter := &apiRequestCounter{counts: map[string]int{}, start: time.Now(), delay: delay}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // stream watches
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := counter.add(r) // on arrival: a watch only ends when the client goes away
		if counter.delay > 0 {
			time.Sleep(counter.delay) // the test's simulated distance to the API server
		}
		proxy.ServeHTTP(&formatRecorder{ResponseWriter: w, header: func(ct string) { counter.answered(i, ct) }}, r)
		counter.finish(i)
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
// restarted pod, through a counting proxy, and holds the generic engine to at most 4 per pod
// (delete, event, the step's journal write; the informer's watch and lease renewals
// amortised). The done event reports the same requests as the tool counted them.
func TestRollingRestartAPIRequests(t *testing.T) {
	res, counter, _ := restartThroughProxy(t, 3, 0)
	total, deletes := counter.total, counter.counts["DELETE pods"]
	if deletes != 3 {
		t.Errorf("the tool sent %d pod DELETEs, want 3 (one per pod): %s", deletes, counter)
	}
	perPod, window := counter.perPodBetweenDeletes()
	t.Logf("API requests for a rolling restart of 3 pods: %d total; %.1f per restarted pod between the first and the last delete (%s)",
		total, perPod, counter)
	if perPod > 4 {
		t.Errorf("%.1f API requests per restarted pod, want at most 4; between the deletes:\n  %s", perPod, strings.Join(window, "\n  "))
	}
	if testing.Verbose() {
		counter.mu.Lock()
		t.Logf("requests in arrival order:\n  %s", strings.Join(counter.log, "\n  "))
		counter.mu.Unlock()
	}
	var done *ndEvent
	for _, e := range parseNDJSON(t, res.cliResult) {
		if e.Type == "done" {
			done = &e
		}
	}
	switch {
	case done == nil:
		t.Fatalf("no done event:\n%s", res)
	case done.APIRequests["delete pods"] != 3 || done.APIRequests["total"] < 3*4:
		t.Errorf("done event apiRequests = %v, want delete pods=3 and a plausible total", done.APIRequests)
	case done.APIRequests["total"] > total:
		t.Errorf("done event counts %d requests, the proxy saw only %d", done.APIRequests["total"], total)
	}

	// Built-in types travel as protobuf (client-go's typed clients' default), as between the
	// control plane's own components: the API server encodes each pod watch event once per
	// format, and decoding protobuf costs the run less CPU beside the restarting database.
	for k, n := range counter.formats("/pods", "/leases", "/events") {
		if !strings.HasSuffix(k, " application/vnd.kubernetes.protobuf") {
			t.Errorf("%d answers %q, want every pod, lease and event request answered in protobuf", n, k)
		}
	}

	// The same request count for a status, to compare with the per-pod cost.
	env := proxyEnv(t, counter.kubeconfig)
	before := counter.total
	if res := runCLI(t, env, "status", webCluster, "-n", res.namespace, "-v", "1"); res.Code != 0 {
		t.Fatalf("status: want exit 0: %s", res)
	}
	t.Logf("API requests for one status: %d", counter.total-before)
}

// TestRollingRestartRemoteAPI restarts through a proxy that adds 20 ms to every request (a
// remote API server) and checks by order, not by how long anything took, that each step's
// "done" journal write has landed before the next pod is touched (Executor.runStep: a deny
// or a release by someone else is then seen before the next delete): a pod's DELETE arrives
// after the answer to the lease write whose journal first lists the previous step done (read
// from its body). The gaps between a pod Ready and the next delete (one round trip: that
// write, with the pod's restart event beside it) are logged as a measurement; the request
// count per pod is asserted.
func TestRollingRestartRemoteAPI(t *testing.T) {
	const latency = 20 * time.Millisecond
	const replicas = 9
	_, counter, ready := restartThroughProxy(t, replicas, latency)
	var gaps, beyond []time.Duration
	for i := 0; i+1 < replicas; i++ {
		cur, next := fmt.Sprintf("%s-%d", webCluster, i), fmt.Sprintf("%s-%d", webCluster, i+1)
		del, ok := counter.deleteArrival(next)
		if !ok || ready[cur].IsZero() {
			t.Fatalf("no Ready time for %s or no DELETE of %s (%v)", cur, next, counter)
		}
		step := "restart/" + cur
		w, ok := counter.firstDoneWrite(step)
		switch {
		case !ok:
			t.Errorf("no lease write records %s done", step)
		case w.Answered.IsZero():
			t.Errorf("the write that records %s done (%s %s) was never answered", step, w.Verb, w.Path)
		case del.Before(w.Answered):
			// Answered is when the proxy began to send the answer: a client that waited for
			// it cannot send its next request earlier.
			t.Errorf("the DELETE of %s arrived %s before the proxy answered the write that records %s done (%s %s): it did not wait for that write",
				next, w.Answered.Sub(del), step, w.Verb, w.Path)
		}
		gap := del.Sub(ready[cur])
		rtt := max(counter.longestBetween(ready[cur], del), latency)
		gaps, beyond = append(gaps, gap), append(beyond, gap-rtt)
	}
	median := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	t.Logf("measured, not asserted: Ready -> next delete with %s per request: %v (median %s); beyond its longest round trip: %v (median %s)",
		latency, gaps, median(gaps), beyond, median(beyond))
	if perPod, _ := counter.perPodBetweenDeletes(); perPod > 4 {
		t.Errorf("%.1f API requests per restarted pod, want at most 4", perPod)
	}
}

// firstDoneWrite is the first lease write whose journal lists step as done.
func (c *apiRequestCounter) firstDoneWrite(step string) (proxyArrival, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.arrivals {
		if slices.Contains(a.Done, step) {
			return a, true
		}
	}
	return proxyArrival{}, false
}

// restartThroughProxy creates a generic cluster of n pods and restarts it with -o json through
// a counting (and, with latency, delaying) proxy. It returns the run, the counter and when each
// pod's new incarnation was first seen Ready.
func restartThroughProxy(t *testing.T, n int32, latency time.Duration) (proxiedRun, *apiRequestCounter, map[string]time.Time) {
	t.Helper()
	ns := newNamespace(t)
	old := uidsByName(createDBCluster(t, ns, webCluster, n))
	names := make([]string, 0, n)
	for i := range n {
		names = append(names, fmt.Sprintf("%s-%d", webCluster, i))
	}
	pods := recordPodWatch(t, ns)
	kubeconfig, counter := delayingKubeconfig(t, latency)
	counter.kubeconfig = kubeconfig
	res := runCLI(t, proxyEnv(t, kubeconfig), "restart", webCluster, "-n", ns, "--rolling", "--yes", "-o", "json", "--timeout", "5m")
	if res.Code != 0 {
		t.Fatalf("want exit 0: %s", res)
	}
	changes := waitReplacementsReady(t, pods, names, old)
	checkRestartOrder(t, changes, names, old)
	ready := map[string]time.Time{}
	for _, c := range changes {
		if c.Ready && !c.Terminating && c.UID != old[c.Name] && ready[c.Name].IsZero() {
			ready[c.Name] = c.At
		}
	}
	return proxiedRun{cliResult: res, namespace: ns}, counter, ready
}

type proxiedRun struct {
	cliResult
	namespace string
}

// proxyEnv is the CLI environment with the kubeconfig pointing at the proxy.
func proxyEnv(t *testing.T, kubeconfig string) []string {
	env := cliEnv(t)
	for i, kv := range env {
		if strings.HasPrefix(kv, "KUBECONFIG=") {
			env[i] = "KUBECONFIG=" + kubeconfig
		}
	}
	return env
}
