package fdbsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Host is the one simulator process of a test bed: the clusters it models and which pod runs
// which process of which cluster. fdbcli in a pod (test/cmd/fdbcli-shim) reaches it over HTTP on
// loopback, naming its pod; the pod's cluster answers, as the pod's cluster file would lead a
// real fdbcli to it.
type Host struct {
	clock Clock

	mu       sync.Mutex
	clusters map[string]*Cluster // by "namespace/name" of the FoundationDBCluster
	pods     map[string]string   // "namespace/pod" -> cluster key
	traces   map[string][]string // "namespace/pod" -> client trace files fdbcli left there (trace.go)
}

// NewHost makes an empty host.
func NewHost(clock Clock) *Host {
	return &Host{clock: clock, clusters: map[string]*Cluster{}, pods: map[string]string{}, traces: map[string][]string{}}
}

// Clock is the host's clock, shared by its clusters.
func (h *Host) Clock() Clock { return h.clock }

// SetCluster registers (or replaces) the model of a cluster.
func (h *Host) SetCluster(key string, c *Cluster) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clusters[key] = c
}

// Cluster is the model registered under key, or nil.
func (h *Host) Cluster(key string) *Cluster {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clusters[key]
}

// BindPod says that fdbcli in the pod "namespace/name" talks to the cluster under key.
func (h *Host) BindPod(pod, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pods[pod] = key
}

// Exec runs fdbcli with args as it runs in pod. A pod of no known cluster (or of a cluster not
// configured yet) reaches no coordinator: fdbcli waits, until its --timeout if there is one.
func (h *Host) Exec(ctx context.Context, pod string, args []string, stdout, stderr io.Writer) int {
	return h.ExecEnv(ctx, pod, args, nil, stdout, stderr)
}

// ExecEnv is Exec with fdbcli's FDB_NETWORK_OPTION_* environment, which decides (with --log)
// whether it leaves a client trace file in the pod (trace.go).
func (h *Host) ExecEnv(ctx context.Context, pod string, args []string, env map[string]string, stdout, stderr io.Writer) int {
	h.recordTrace(pod, args, env)
	h.mu.Lock()
	c := h.clusters[h.pods[pod]]
	h.mu.Unlock()
	if c != nil {
		return c.RunAs(ctx, pod, args, stdout, stderr)
	}
	_, timeout, code, done := parseOptions(args, stdout, stderr)
	if done {
		return code
	}
	if timeout == 0 {
		<-ctx.Done()
		return 1
	}
	if err := h.clock.Sleep(ctx, time.Duration(timeout)*time.Second); err != nil {
		return 1
	}
	fmt.Fprintf(stderr, "Specified timeout reached -- exiting...\n")
	return 1
}

// ExecRequest is what the fdbcli shim sends: its pod, its arguments and its
// FDB_NETWORK_OPTION_* environment.
type ExecRequest struct {
	Pod  string            `json:"pod"`
	Args []string          `json:"args"`
	Env  map[string]string `json:"env,omitempty"`
}

// ExecResponse is the outcome of one fdbcli run.
type ExecResponse struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Code   int    `json:"code"`
}

// ExecPath is the HTTP path of Handler.
const ExecPath = "/v1/fdbcli"

// Handler serves ExecPath: POST an ExecRequest, get an ExecResponse. A client that goes away
// cancels the run, as killing fdbcli does; what it sent to the cluster stays done.
func (h *Host) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+ExecPath, func(w http.ResponseWriter, r *http.Request) {
		var req ExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Pod == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var out, errb bytes.Buffer
		code := h.ExecEnv(r.Context(), req.Pod, req.Args, req.Env, &out, &errb)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ExecResponse{Stdout: out.String(), Stderr: errb.String(), Code: code})
	})
	return mux
}
