package ops

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
)

// listEvents returns the namespace's events with reason.
func listEvents(t *testing.T, client *fake.Clientset, reason string) []corev1.Event {
	t.Helper()
	list, err := client.CoreV1().Events("prod").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// assertOneRestartEventPerLivePod checks what `kubectl describe pod` shows: each named pod's
// live incarnation (by UID, as describe searches) has exactly one DbopsRestartPod event, and
// no such event is left on an old incarnation.
func assertOneRestartEventPerLivePod(t *testing.T, client *fake.Clientset, names ...string) []corev1.Event {
	t.Helper()
	return assertOneEventPerLivePod(t, client, "DbopsRestartPod", names...)
}

// assertOneEventPerLivePod checks that each named pod's live incarnation has exactly one event
// with reason, and that there is no other such event (none on an old incarnation). It returns
// the events found, in the order of names.
func assertOneEventPerLivePod(t *testing.T, client *fake.Clientset, reason string, names ...string) []corev1.Event {
	t.Helper()
	evs := listEvents(t, client, reason)
	if len(evs) != len(names) {
		t.Errorf("%d %s events, want %d (one per pod): %+v", len(evs), reason, len(names), evs)
	}
	var out []corev1.Event
	for _, name := range names {
		live, err := client.CoreV1().Pods("prod").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for _, e := range evs {
			if e.InvolvedObject.Name == name && e.InvolvedObject.UID == live.UID && e.InvolvedObject.Kind == "Pod" {
				n++
				out = append(out, e)
			}
		}
		if n != 1 {
			t.Errorf("pod %s (live uid %s) has %d %s events on its live incarnation, want 1", name, live.UID, n, reason)
		}
	}
	return out
}

// A restart interrupted while the new incarnation is not Ready yet records the pod's event on
// that incarnation (a Warning); the resumed run finds it there and records no second one.
func TestRestartEventInterruptedBeforeReady(t *testing.T) {
	c, client := testCluster(map[string]int{"web": 2}, []string{"web"}, "")
	p, _ := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	locker := &memLocker{id: "me"}
	auditor := &KubeAuditor{Client: client, Clock: RealClock{}, Instance: "me"}
	runInterruptedBeforeReady(t, client, locker, auditor, p)
	evs := listEvents(t, client, "DbopsRestartPod")
	if len(evs) != 1 || evs[0].InvolvedObject.UID != "db-web-0-uid1" || evs[0].Type != corev1.EventTypeWarning ||
		!strings.Contains(evs[0].Message, "db-web-0-uid0") {
		t.Fatalf("after the interrupted run: events %+v, want one Warning on db-web-0's new incarnation naming the old uid", evs)
	}

	// The pod becomes Ready; the resumed run restarts db-web-1 and records nothing more for db-web-0.
	ready := readyPod("db-web-0", "prod", nil, "db-web-0-uid1")
	if _, err := client.CoreV1().Pods("prod").UpdateStatus(context.Background(), ready, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	fakecluster.Start(t, client, "prod")
	p2, _ := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	if err := (&Executor{Locker: locker, Sink: &Recorder{}, Auditor: auditor}).Run(context.Background(), p2); err != nil {
		t.Fatalf("re-run: %v", err)
	}
	assertOneRestartEventPerLivePod(t, client, "db-web-0", "db-web-1")
}

// runInterruptedBeforeReady runs p until it waits for db-web-0 to come back, creates db-web-0's
// new incarnation not Ready (as the StatefulSet controller would), and interrupts the run
// (Ctrl-C) while it waits for that incarnation to be Ready.
func runInterruptedBeforeReady(t *testing.T, client *fake.Clientset, locker *memLocker, auditor Auditor, p *Plan) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	created := false
	sink := SinkFunc(func(e Event) {
		if e.Type != EventStepWaiting {
			return
		}
		switch {
		case strings.Contains(e.Reason, "not Ready yet"):
			cancel() // Ctrl-C while the new incarnation starts
		case !created:
			created = true
			pod := readyPod("db-web-0", "prod", nil, "db-web-0-uid1")
			pod.Status.Conditions[0].Status = corev1.ConditionFalse
			go func() { _, _ = client.CoreV1().Pods("prod").Create(context.Background(), pod, metav1.CreateOptions{}) }()
		}
	})
	err := (&Executor{Locker: locker, Sink: sink, Auditor: auditor}).Run(ctx, p)
	if ExitCode(err) != ExitInterrupted {
		t.Fatalf("first run: %v (exit %d), want interrupted", err, ExitCode(err))
	}
}

// The operation's start and end are recorded on the StatefulSet, naming the lock ID, with the
// outcome as the reason: Normal when it succeeded, Warning when it failed, was interrupted or
// timed out.
func TestOperationEvents(t *testing.T) {
	waitStop := func(ctx context.Context, _ *StepContext) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}
	tests := []struct {
		name    string
		action  func(context.Context, *StepContext) error
		verify  func(context.Context, *StepContext) error
		cancel  bool // Ctrl-C once the step started
		timeout time.Duration
		reason  string
		warning bool
		text    string
	}{
		{name: "succeeded", action: func(context.Context, *StepContext) error { return nil },
			reason: "DbopsOperationSucceeded", text: "succeeded"},
		{name: "failed", action: func(context.Context, *StepContext) error { return errors.New("boom") },
			reason: "DbopsOperationFailed", warning: true, text: "boom"},
		{name: "interrupted", verify: waitStop, cancel: true,
			reason: "DbopsOperationInterrupted", warning: true, text: "interrupted"},
		{name: "timeout", verify: waitStop, timeout: 300 * time.Millisecond,
			reason: "DbopsOperationTimeout", warning: true, text: "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, client := testCluster(map[string]int{"web": 1}, []string{"web"}, "")
			p := NewPlan("restart", c, EngineGeneric, "--rolling")
			p.Steps = []*Step{{ID: "x/1", Target: "x", Description: "x", Mutating: true, Action: tt.action, Verify: tt.verify}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sink := SinkFunc(func(e Event) {
				if tt.cancel && e.Type == EventStepStarted {
					cancel()
				}
			})
			sts := ObjectRef{Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: "prod", Name: "db-web", UID: "sts-uid"}
			ex := &Executor{Locker: &memLocker{id: "alice"}, Sink: sink, Timeout: tt.timeout, Objects: []ObjectRef{sts},
				Auditor: &KubeAuditor{Client: client, Clock: RealClock{}, Instance: "alice"}}
			err := ex.Run(ctx, p)
			if (err == nil) != (tt.reason == "DbopsOperationSucceeded") {
				t.Fatalf("run: %v", err)
			}
			for _, want := range []struct {
				reason  string
				warning bool
				text    string
			}{{"DbopsOperationStarted", false, "started"}, {tt.reason, tt.warning, tt.text}} {
				evs := listEvents(t, client, want.reason)
				if len(evs) != 1 {
					t.Fatalf("%d %s events, want 1", len(evs), want.reason)
				}
				e := evs[0]
				wantType := corev1.EventTypeNormal
				if want.warning {
					wantType = corev1.EventTypeWarning
				}
				if e.InvolvedObject.Kind != "StatefulSet" || e.InvolvedObject.Name != "db-web" || e.InvolvedObject.UID != types.UID("sts-uid") ||
					e.Type != wantType || !strings.Contains(e.Message, "lock id alice") || !strings.Contains(e.Message, want.text) {
					t.Errorf("%s event: object %+v type %s message %q; want on StatefulSet db-web, %s, naming lock id alice and %q",
						want.reason, e.InvolvedObject, e.Type, e.Message, wantType, want.text)
				}
			}
		})
	}
}

// A replacement interrupted while the new incarnation is not Ready yet records the pod's
// DbopsReplacePod event on that incarnation (a Warning naming the old UID and the PVC); the
// resumed run finds it there and records no second one, and the next pod gets one on its
// new incarnation.
func TestReplaceEventInterruptedBeforeReady(t *testing.T) {
	c, client := testCluster(map[string]int{"web": 2}, []string{"web"}, "")
	withPVCs(t, c, client)
	req := ReplaceRequest{Pods: []string{"db-web-0", "db-web-1"}, MaxConcurrent: 1}
	p, err := (&Replacement{Client: client}).Plan(c, EngineGeneric, req)
	if err != nil {
		t.Fatal(err)
	}
	locker := &memLocker{id: "me"}
	auditor := &KubeAuditor{Client: client, Clock: RealClock{}, Instance: "me"}
	runInterruptedBeforeReady(t, client, locker, auditor, p)
	evs := listEvents(t, client, "DbopsReplacePod")
	if len(evs) != 1 || evs[0].InvolvedObject.UID != "db-web-0-uid1" || evs[0].Type != corev1.EventTypeWarning ||
		!strings.Contains(evs[0].Message, "db-web-0-uid0") || !strings.Contains(evs[0].Message, "PVC data-db-web-0") {
		t.Fatalf("after the interrupted run: events %+v, want one Warning on db-web-0's new incarnation naming the old uid and the PVC", evs)
	}

	// The pod becomes Ready; the resumed run replaces db-web-1 and records nothing more for db-web-0.
	ready := readyPod("db-web-0", "prod", nil, "db-web-0-uid1")
	if _, err := client.CoreV1().Pods("prod").UpdateStatus(context.Background(), ready, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	fakecluster.Start(t, client, "prod")
	p2, err := (&Replacement{Client: client}).Plan(c, EngineGeneric, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Executor{Locker: locker, Sink: &Recorder{}, Auditor: auditor}).Run(context.Background(), p2); err != nil {
		t.Fatalf("re-run: %v", err)
	}
	got := assertOneEventPerLivePod(t, client, "DbopsReplacePod", "db-web-0", "db-web-1")
	if len(got) == 2 {
		if e := got[1]; e.Type != corev1.EventTypeNormal || !strings.Contains(e.Message, "db-web-1-uid0") ||
			!strings.Contains(e.Message, "PVC data-db-web-1 (old uid data-db-web-1-uid0, new uid data-db-web-1-new") {
			t.Errorf("db-web-1's event: %s %q; want Normal, naming the old pod uid and the PVC's old and new uids", e.Type, e.Message)
		}
	}
}

// The restart event on a pod's new incarnation is written while the executor writes the
// step's "done" to the journal, not before it (a remote API server's round trip between one
// pod Ready and the next delete), and the step is reported done only once the event is
// written. The auditor holds each restart event until the journal is written: written one
// after the other, the run would stall on it.
func TestRestartEventWrittenBesideJournal(t *testing.T) {
	c, client := testCluster(map[string]int{"hot": 3}, []string{"hot"}, "")
	fakecluster.Start(t, client, "prod")
	p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saved := newBroadcast()
	locker := &memLocker{id: "alice@api:6443", onSave: func(int) { saved.notify() }}
	sink := &Recorder{}
	aud := &journalWaitingAuditor{locker: locker, saved: saved, sink: sink}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := (&Executor{Locker: locker, Sink: sink, Auditor: aud, Timeout: time.Minute}).Run(ctx, p); err != nil {
		t.Fatalf("run: %v", err)
	}
	aud.mu.Lock()
	defer aud.mu.Unlock()
	if aud.restarts != 3 {
		t.Errorf("%d restart events, want 3", aud.restarts)
	}
	for _, p := range aud.problems {
		t.Error(p)
	}
}

// journalWaitingAuditor records nothing; it holds each DbopsRestartPod event until the
// journal has the pod's step done (bounded), and notes whether the step was already reported
// done by then.
type journalWaitingAuditor struct {
	locker   *memLocker
	saved    *broadcast
	sink     *Recorder
	mu       sync.Mutex
	restarts int
	problems []string
}

func (a *journalWaitingAuditor) Record(ctx context.Context, obj ObjectRef, reason, _ string) error {
	if reason != "DbopsRestartPod" {
		return nil
	}
	step := "restart/" + obj.Name
	journaled := func() bool {
		a.locker.mu.Lock()
		defer a.locker.mu.Unlock()
		var j Journal
		return json.Unmarshal(a.locker.journal, &j) == nil && j.IsDone(step)
	}
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	problem := ""
	for problem == "" {
		// Several events may wait at once (a step runs while the previous step's "done" is
		// written): each save wakes them all.
		next := a.saved.wait()
		if journaled() {
			break
		}
		select {
		case <-next: // look again
		case <-timeout.C:
			problem = "the event on " + obj.Name + " held the journal write of its step's done: they were written one after the other"
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, ev := range a.sink.Events() {
		if ev.Type == EventStepDone && ev.Step != nil && ev.Step.ID == step {
			problem = "step " + step + " was reported done before its restart event was written"
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.restarts++
	if problem != "" {
		a.problems = append(a.problems, problem)
	}
	return nil
}

func (a *journalWaitingAuditor) Recorded(context.Context, ObjectRef, string) (bool, error) {
	return false, nil
}

// broadcast wakes every waiter at each notify.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

// wait returns a channel closed at the next notify.
func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.ch)
	b.ch = make(chan struct{})
}
