package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// notifyBuffer is an output buffer a test can read while the command writes,
// told about each write.
type notifyBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func (n *notifyBuffer) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	defer func() {
		select {
		case n.wrote <- struct{}{}:
		default:
		}
	}()
	return n.b.Write(p)
}

func (n *notifyBuffer) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.b.String()
}

// jsonDocs decodes a stream of JSON documents.
func jsonDocs(t *testing.T, s string) []ClusterStatus {
	t.Helper()
	var out []ClusterStatus
	dec := json.NewDecoder(strings.NewReader(s))
	for {
		var st ClusterStatus
		err := dec.Decode(&st)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			// A document being written; the caller waits for more.
			return out
		}
		out = append(out, st)
	}
}

// startStatusWatch runs `status db --watch -o format --timeout 60s` in the background with
// h's fakes; cancel is Ctrl-C.
func startStatusWatch(t *testing.T, h *harness, format string, configure ...func(*GlobalOptions)) (out *notifyBuffer, errb *bytes.Buffer, done chan error, cancel context.CancelFunc) {
	t.Helper()
	out, errb = &notifyBuffer{wrote: make(chan struct{}, 1)}, &bytes.Buffer{}
	root := NewRootCmd(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errb}, func(g *GlobalOptions) {
		g.NewClients = func() (*Clients, error) { return &Clients{Kube: h.client, Clock: h.clock}, nil }
		g.IsTerminal = func() bool { return false }
		g.Getenv = func(k string) string { return h.env[k] }
		kc := h.env["KUBECONFIG"]
		g.ConfigFlags.KubeConfig = &kc
		for _, f := range configure {
			f(g)
		}
	})
	root.SetArgs([]string{"status", "db", "--watch", "-o", format, "--timeout", "60s"})
	ctx, cancel := context.WithCancel(t.Context())
	done = make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	return out, errb, done, cancel
}

// waitWatchOutput waits, on each write, until the watch's output satisfies cond, and returns
// it; the test fails if the watch ends or 20 s pass first.
func waitWatchOutput(t *testing.T, out *notifyBuffer, errb *bytes.Buffer, done chan error, what string, cond func(string) bool) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if s := out.String(); cond(s) {
			return s
		}
		select {
		case <-out.wrote:
		case err := <-done:
			t.Fatalf("watch ended (%v) before %s:\n%s\n%s", err, what, out.String(), errb.String())
		case <-deadline:
			t.Fatalf("no output for %s:\n%s", what, out.String())
		}
	}
}

// TestStatusWatch: --watch -o json prints the status, then one document
// per change (a pod going not Ready, the lock taken), and ends with exit 0
// when the context ends (Ctrl-C).
func TestStatusWatch(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	out, errb, done, cancel := startStatusWatch(t, h, "json")
	defer cancel()

	waitDocs := func(n int, what string) []ClusterStatus {
		t.Helper()
		return jsonDocs(t, waitWatchOutput(t, out, errb, done, what, func(s string) bool { return len(jsonDocs(t, s)) >= n }))
	}
	docs := waitDocs(1, "the first status")
	if docs[0].Kind != "ClusterStatus" || len(docs[0].Cluster.AllPods()) != 3 {
		t.Fatalf("first document: %+v", docs[0])
	}

	pod, err := h.client.CoreV1().Pods("prod").Get(t.Context(), "db-web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if _, err := h.client.CoreV1().Pods("prod").UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	docs = waitDocs(2, "the pod going not Ready")
	for _, p := range docs[1].Cluster.AllPods() {
		if p.Name == "db-web-1" && p.Ready {
			t.Errorf("second document still has db-web-1 Ready")
		}
	}

	if r := h.run("lock", "acquire", "db", "--id", "bob@test"); r.code != 0 {
		t.Fatalf("lock acquire: %s", r.err)
	}
	docs = waitDocs(3, "the lock taken")
	if docs[2].Lock == nil || docs[2].Lock.Holder != "bob@test" {
		t.Errorf("third document lock: %+v", docs[2].Lock)
	}

	cancel()
	select {
	case err := <-done:
		if code := ops.ExitCode(err); code != 0 {
			t.Errorf("exit %d after Ctrl-C: %v", code, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the watch did not end after Ctrl-C")
	}
	if n := len(jsonDocs(t, out.String())); n != 3 {
		t.Errorf("%d documents, want 3 (one per change):\n%s", n, out.String())
	}
}

// TestStatusWatchTimeout: --timeout ends the watch with exit 0; -o text
// prints each document under a line with the time it was read.
//
// It runs in a synctest bubble: the 300 ms pass on the bubble's clock, which moves only
// once every goroutine waits, so the first document is printed before the timeout however
// slow the machine (under -race on a loaded machine it was not, with the real clock).
func TestStatusWatchTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
		r := h.run("status", "db", "-w", "--timeout", "300ms")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		if !strings.HasPrefix(r.out, "--- 2026-11-22T07:00:00Z ---\nCluster:  prod/db") || strings.Count(r.out, "Cluster: ") != 1 {
			t.Errorf("got:\n%s", r.out)
		}
		if w := fakecluster.Writes(h.client); len(w) > 0 {
			t.Errorf("wrote: %v", w)
		}
	})
}

// TestStatusWatchTextPrintsChanges: in text, --watch prints the status once, then only the
// lines that changed, as kubectl get -w does: a pod going not Ready prints its row and its
// group's, not the other pods' rows.
func TestStatusWatchTextPrintsChanges(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	out, errb, done, cancel := startStatusWatch(t, h, "wide")
	defer cancel()
	waitFor := func(what string, cond func(string) bool) string {
		t.Helper()
		return waitWatchOutput(t, out, errb, done, what, cond)
	}
	first := waitFor("the first status", func(s string) bool { return strings.Contains(s, "db-web-2") })
	if !strings.Contains(first, "UID") || !strings.Contains(first, "db-web-0-uid0") {
		t.Errorf("-o wide lacks the UID column:\n%s", first)
	}
	pod, err := h.client.CoreV1().Pods("prod").Get(t.Context(), "db-web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if _, err := h.client.CoreV1().Pods("prod").UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	all := waitFor("the change", func(s string) bool { return strings.Count(s, "--- ") >= 2 && strings.Count(s, "db-web-1") >= 2 })
	cancel()
	<-done
	change := all[len(first):]
	change = change[strings.Index(change, "--- "):]
	if !strings.Contains(change, "db-web-1") || strings.Contains(change, "db-web-0") || strings.Contains(change, "db-web-2") ||
		!strings.Contains(change, "web ") {
		t.Errorf("the change printed:\n%s\nwant db-web-1's row and its group's, nothing else of the pods", change)
	}
}
