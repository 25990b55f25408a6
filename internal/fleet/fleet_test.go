package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: eu
  cluster: {server: "https://eu.example:6443"}
- name: us
  cluster: {server: "https://us.example:6443"}
contexts:
- name: prod-eu
  context: {cluster: eu, user: u, namespace: db}
- name: prod-us
  context: {cluster: us, user: u}
- name: staging
  context: {cluster: eu, user: u, namespace: stage}
current-context: staging
users:
- name: u
  user: {token: not-a-real-token}
`

func loadKubeconfig(t *testing.T) *clientcmdapi.Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestResolve(t *testing.T) {
	cfg := loadKubeconfig(t)
	tests := []struct {
		name    string
		spec    Spec
		want    []string
		wantErr string
	}{
		{name: "names", spec: Spec{Contexts: []string{"prod-us", "prod-eu"}}, want: []string{"prod-us/default", "prod-eu/db"}},
		{name: "glob", spec: Spec{Contexts: []string{"prod-*"}}, want: []string{"prod-eu/db", "prod-us/default"}},
		{name: "glob and name once each", spec: Spec{Contexts: []string{"prod-eu", "prod-*"}}, want: []string{"prod-eu/db", "prod-us/default"}},
		{name: "namespace flag", spec: Spec{Contexts: []string{"*"}, Namespaces: []string{"x"}, Clusters: []string{"c"}},
			want: []string{"prod-eu/x/c", "prod-us/x/c", "staging/x/c"}},
		{name: "all namespaces", spec: Spec{Contexts: []string{"staging"}, AllNamespaces: true}, want: []string{"staging"}},
		{name: "override", spec: Spec{Contexts: []string{"prod-*"}, Clusters: []string{"c"},
			Overrides: []Override{{Context: "prod-us", Namespaces: []string{"a", "b"}}, {Context: "staging", Clusters: []string{"s"}}}},
			want: []string{"prod-eu/db/c", "prod-us/a/c", "prod-us/b/c", "staging/stage/s"}},
		{name: "unknown context", spec: Spec{Contexts: []string{"prod-ap"}}, wantErr: `kubeconfig has no context "prod-ap"; allowed: prod-eu, prod-us, staging`},
		{name: "empty glob", spec: Spec{Contexts: []string{"dev-*"}}, wantErr: `context glob "dev-*" matches no kubeconfig context; allowed: prod-eu, prod-us, staging`},
		{name: "bad glob", spec: Spec{Contexts: []string{"prod-["}}, wantErr: `bad context glob "prod-["`},
		{name: "none", spec: Spec{}, wantErr: "no kubeconfig context given"},
		{name: "selector", spec: Spec{Contexts: []string{"prod-*"}, Selector: "tier=db"}, want: []string{"prod-eu/db[tier=db]", "prod-us/default[tier=db]"}},
		{name: "bad selector", spec: Spec{Contexts: []string{"staging"}, Selector: "tier==="}, wantErr: `bad cluster selector -l "tier==="`},
		{name: "selector and names", spec: Spec{Contexts: []string{"staging"}, Selector: "tier=db", Clusters: []string{"c"}}, wantErr: "not both"},
		{name: "targets only", spec: Spec{Overrides: []Override{{Context: "staging", Clusters: []string{"s", "t"}}, {Context: "prod-eu", Clusters: []string{"e"}}}},
			want: []string{"staging/stage/s", "staging/stage/t", "prod-eu/db/e"}},
		{name: "override of unknown context", spec: Spec{Contexts: []string{"staging"}, Overrides: []Override{{Context: "nope"}}}, wantErr: `context "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(cfg, tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || ops.ExitCode(err) != ops.ExitUsage || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err = %v (exit %d), want one usage line containing %q", err, ops.ExitCode(err), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, g := range got {
				n := g.String()
				if g.Selector != "" {
					n += "[" + g.Selector + "]"
				}
				names = append(names, n)
			}
			if !slices.Equal(names, tt.want) {
				t.Fatalf("targets = %v, want %v", names, tt.want)
			}
		})
	}
}

func TestParseFile(t *testing.T) {
	tests := []struct {
		name, data, wantErr string
	}{
		{name: "ok", data: "contexts: [prod-*]\nnamespaces: [db]\nclusters: [orders]\ntargets:\n- context: staging\n  clusters: [s]\n"},
		{name: "unknown key", data: "contexts: [a]\nclustres: [x]\n", wantErr: `unknown field "clustres"`},
		{name: "unknown target key", data: "contexts: [a]\ntargets:\n- context: a\n  namespace: x\n", wantErr: `unknown field "namespace"`},
		{name: "no contexts", data: "clusters: [x]\n", wantErr: "names no contexts"},
		{name: "target without context", data: "contexts: [a]\ntargets:\n- clusters: [x]\n", wantErr: "targets[0] has no context"},
		{name: "glob target", data: "targets:\n- context: a*\n", wantErr: "not a glob"},
		{name: "not yaml", data: "contexts: [a\n", wantErr: "fleet file f.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFile("f.yaml", []byte(tt.data))
			if tt.wantErr == "" {
				if err != nil || f == nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || ops.ExitCode(err) != ops.ExitUsage || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one usage line containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestPacingValidate(t *testing.T) {
	tests := []struct {
		p       Pacing
		n       int
		wantErr string
	}{
		{p: Pacing{MaxParallel: 1}, n: 2},
		{p: Pacing{MaxParallel: 0}, n: 2, wantErr: "--max-parallel must be at least 1"},
		{p: Pacing{MaxParallel: 1, Canary: 3}, n: 2, wantErr: "--canary 3 is more than the fleet's 2"},
		{p: Pacing{MaxParallel: 1, Canary: -1}, n: 2, wantErr: "--canary must not be negative"},
		{p: Pacing{MaxParallel: 1, PauseBetween: -1}, n: 2, wantErr: "--pause-between-clusters"},
	}
	for _, tt := range tests {
		err := tt.p.Validate(tt.n)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || ops.ExitCode(err) != ops.ExitUsage) {
			t.Errorf("%+v: err = %v, want %q", tt.p, err, tt.wantErr)
		}
	}
}

func targets(n int) []Target {
	var ts []Target
	for i := range n {
		ts = append(ts, Target{Context: fmt.Sprintf("c%d", i), Namespace: "ns", Cluster: "db"})
	}
	return ts
}

// recorder is a fake per-target runner: it logs starts and ends in order, tracks how many run
// at once, and lets the test decide when each target ends (release) and how (errs).
type recorder struct {
	mu      sync.Mutex
	log     []string
	running int
	most    int
	started chan string
	release map[string]chan error
}

func newRecorder(ts []Target) *recorder {
	r := &recorder{started: make(chan string, len(ts)), release: map[string]chan error{}}
	for _, t := range ts {
		r.release[t.Context] = make(chan error, 1)
	}
	return r
}

func (r *recorder) add(s string, d int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
	r.running += d
	r.most = max(r.most, r.running)
}

// run ends with the error released for the target, or, when the fleet asks it to stop first,
// with an abort (as the executor stops at a batch boundary).
func (r *recorder) run(_ context.Context, t Target, stop <-chan struct{}) error {
	r.add("start "+t.Context, 1)
	r.started <- t.Context
	var err error
	select {
	case err = <-r.release[t.Context]:
	case <-stop:
		err = &ops.CodedError{Kind: ops.ErrAborted, Msg: "stopped by the fleet"}
	}
	r.add("end "+t.Context, -1)
	return err
}

func TestRunCanaryAloneFirst(t *testing.T) {
	ts := targets(4)
	r := newRecorder(ts)
	for _, t := range ts {
		r.release[t.Context] <- nil
	}
	res := Run(context.Background(), ts, Pacing{MaxParallel: 3, Canary: 2, FailFast: true}, r.run)
	if !slices.Equal(r.log[:4], []string{"start c0", "end c0", "start c1", "end c1"}) {
		t.Fatalf("canaries did not run alone and first: %v", r.log)
	}
	for _, x := range res {
		if x.Outcome() != OutcomeSucceeded {
			t.Fatalf("%s: %s", x.Target, x.Outcome())
		}
	}
	if WorstExit(res) != 0 {
		t.Fatal("exit not 0")
	}
}

func TestRunMaxParallel(t *testing.T) {
	ts := targets(5)
	r := newRecorder(ts)
	done := make(chan []Result)
	go func() { done <- Run(context.Background(), ts, Pacing{MaxParallel: 2, FailFast: true}, r.run) }()
	// Two start; each release lets exactly one more start.
	for range 2 {
		<-r.started
	}
	for _, c := range []string{"c0", "c1", "c2", "c3", "c4"} {
		r.release[c] <- nil
		if c < "c3" {
			<-r.started
		}
	}
	res := <-done
	if r.most != 2 {
		t.Fatalf("at most %d ran at once, want 2: %v", r.most, r.log)
	}
	if WorstExit(res) != 0 {
		t.Fatalf("exit %d", WorstExit(res))
	}
}

func TestRunFailFast(t *testing.T) {
	ts := targets(5)
	r := newRecorder(ts)
	done := make(chan []Result)
	go func() {
		done <- Run(context.Background(), ts, Pacing{MaxParallel: 2, Canary: 1, FailFast: true}, r.run)
	}()
	r.release["c0"] <- nil // the canary succeeds
	<-r.started
	<-r.started
	<-r.started // c1 and c2 run
	r.release["c2"] <- &ops.CodedError{Kind: ops.ErrPrecondition, Msg: "pod never Ready", Reason: "PodNotReady"}
	res := <-done
	want := []string{OutcomeSucceeded, OutcomeStopped, OutcomeFailed, OutcomeNotStarted, OutcomeNotStarted}
	for i, x := range res {
		if x.Outcome() != want[i] {
			t.Fatalf("%s: %s, want %s (log %v)", x.Target, x.Outcome(), want[i], r.log)
		}
	}
	if res[2].Reason() != "PodNotReady" {
		t.Fatalf("reason %q", res[2].Reason())
	}
	if WorstExit(res) != ops.ExitPrecondition {
		t.Fatalf("exit %d", WorstExit(res))
	}
}

func TestRunWithoutFailFastContinues(t *testing.T) {
	ts := targets(3)
	r := newRecorder(ts)
	r.release["c0"] <- errors.New("boom")
	r.release["c1"] <- nil
	r.release["c2"] <- nil
	res := Run(context.Background(), ts, Pacing{MaxParallel: 1}, r.run)
	if res[1].Outcome() != OutcomeSucceeded || res[2].Outcome() != OutcomeSucceeded || WorstExit(res) != ops.ExitFailed {
		t.Fatalf("outcomes %s %s exit %d", res[1].Outcome(), res[2].Outcome(), WorstExit(res))
	}
}

func TestRunCanaryMustSucceed(t *testing.T) {
	ts := targets(3)
	r := newRecorder(ts)
	r.release["c0"] <- errors.New("boom")
	res := Run(context.Background(), ts, Pacing{MaxParallel: 2, Canary: 1}, r.run) // even without fail-fast
	if res[1].Started || res[2].Started {
		t.Fatalf("targets started after a failed canary: %v", r.log)
	}
}

func TestRunLockedTargetSkipped(t *testing.T) {
	ts := targets(3)
	r := newRecorder(ts)
	r.release["c0"] <- ops.Lockedf("cluster lock held by bob")
	r.release["c1"] <- nil
	r.release["c2"] <- nil
	res := Run(context.Background(), ts, Pacing{MaxParallel: 1, FailFast: true}, r.run)
	if res[0].Outcome() != OutcomeSkipped || res[2].Outcome() != OutcomeSucceeded || WorstExit(res) != ops.ExitLocked {
		t.Fatalf("outcomes %s %s exit %d", res[0].Outcome(), res[2].Outcome(), WorstExit(res))
	}
}

func TestRunCancelledStartsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := newRecorder(targets(2))
	res := Run(ctx, targets(2), Pacing{MaxParallel: 2}, r.run)
	if res[0].Started || res[1].Started {
		t.Fatal("started after cancel")
	}
	// Interrupted before anything ran is not a success: exit 130, the targets not-started.
	if WorstExit(res) != ops.ExitInterrupted || res[0].Outcome() != OutcomeNotStarted || res[1].Reason() != ops.ReasonInterrupted {
		t.Fatalf("exit %d, outcome %s, reason %s", WorstExit(res), res[0].Outcome(), res[1].Reason())
	}
	// So is a canary phase cut short: the canary's own result and the rest interrupted.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	res = Run(ctx, targets(2), Pacing{MaxParallel: 2, Canary: 1}, func(context.Context, Target, <-chan struct{}) error {
		cancel()
		return nil
	})
	if !res[0].Started || res[1].Started || WorstExit(res) != ops.ExitInterrupted {
		t.Fatalf("canary started %v, second started %v, exit %d", res[0].Started, res[1].Started, WorstExit(res))
	}
}

func TestWorstExit(t *testing.T) {
	tests := []struct {
		errs []error
		want int
	}{
		{nil, 0},
		{[]error{nil, &ops.CodedError{Kind: ops.ErrAborted}}, ops.ExitAborted},
		{[]error{ops.Lockedf("x"), &ops.CodedError{Kind: ops.ErrAborted}}, ops.ExitLocked},
		{[]error{ops.Lockedf("x"), ops.Preconditionf("x")}, ops.ExitPrecondition},
		{[]error{ops.Forbiddenf("x"), ops.Preconditionf("x")}, ops.ExitForbidden},
		{[]error{ops.Forbiddenf("x"), context.DeadlineExceeded}, ops.ExitTimeout},
		{[]error{errors.New("x"), context.DeadlineExceeded}, ops.ExitFailed},
		{[]error{errors.New("x"), ops.Usagef("x")}, ops.ExitUsage},
		{[]error{context.Canceled, ops.Usagef("x")}, ops.ExitInterrupted},
	}
	for _, tt := range tests {
		var rs []Result
		for _, e := range tt.errs {
			rs = append(rs, Result{Started: true, Err: e})
		}
		rs = append(rs, Result{Started: false})
		if got := WorstExit(rs); got != tt.want {
			t.Errorf("%v: %d, want %d", tt.errs, got, tt.want)
		}
	}
}

func TestPoolBuildsOncePerContext(t *testing.T) {
	var mu sync.Mutex
	built := map[string]int{}
	p := &Pool[string]{Build: func(c string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		built[c]++
		return "client-" + c, nil
	}}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if v, _ := p.Get(fmt.Sprint(i % 3)); !strings.HasPrefix(v, "client-") {
				t.Error(v)
			}
		})
	}
	wg.Wait()
	for c, n := range built {
		if n != 1 {
			t.Errorf("context %s built %d times", c, n)
		}
	}
}

// PauseBetween waits before every start but the first (canary or not), on the pacing's timer:
// each target starts only after the pause before it has elapsed; a stop during a pause starts
// nothing more.
func TestRunPauseBetween(t *testing.T) {
	ts := targets(3)
	var mu sync.Mutex
	var log []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, s)
	}
	elapsed := func(d time.Duration) <-chan time.Time {
		record("pause " + d.String())
		c := make(chan time.Time, 1)
		c <- time.Time{}
		return c
	}
	run := func(_ context.Context, t Target, _ <-chan struct{}) error {
		record("run " + t.Context)
		return nil
	}
	Run(context.Background(), ts, Pacing{MaxParallel: 1, Canary: 1, PauseBetween: time.Minute, After: elapsed}, run)
	if want := "run c0,pause 1m0s,run c1,pause 1m0s,run c2"; strings.Join(log, ",") != want {
		t.Errorf("log %v, want %s", log, want)
	}

	// A failure while the next pause runs (it never elapses) stops the fleet: c1 never starts.
	log = nil
	paused := make(chan struct{})
	never := func(d time.Duration) <-chan time.Time {
		record("pause " + d.String())
		close(paused)
		return nil
	}
	fail := func(_ context.Context, t Target, _ <-chan struct{}) error {
		record("run " + t.Context)
		if t.Context == "c0" {
			<-paused
			return errors.New("broke")
		}
		return nil
	}
	res := Run(context.Background(), ts, Pacing{MaxParallel: 2, FailFast: true, PauseBetween: time.Minute, After: never}, fail)
	if !slices.Contains(log, "pause 1m0s") || res[1].Started || res[2].Started {
		t.Errorf("log %v, results %+v", log, res)
	}
}
