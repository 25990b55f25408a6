package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

var (
	threeGroups = map[string]int{"master": 3, "hot": 2, "cold": 1}
	groupOrder  = []string{"hot", "cold", "master"} // master sorts first by role
)

func TestRollingRestartPlanGolden(t *testing.T) {
	tests := []struct {
		name   string
		groups []string
		golden string
	}{
		{"all groups", nil, "plan-restart-all.txt"},
		{"one group", []string{"hot"}, "plan-restart-hot.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, client := testCluster(threeGroups, groupOrder, "master")
			p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{Groups: tt.groups})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WritePlanText(&buf, p.View()); err != nil {
				t.Fatal(err)
			}
			assertGolden(t, tt.golden, buf.Bytes())
			if n := len(client.Actions()); n != 0 {
				t.Errorf("planning made %d API calls, want 0", n)
			}
		})
	}
}

func TestRollingRestartUnknownGroup(t *testing.T) {
	c, client := testCluster(threeGroups, groupOrder, "master")
	_, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{Groups: []string{"warm"}})
	if ExitCode(err) != ExitUsage {
		t.Fatalf("err = %v (exit %d), want usage error", err, ExitCode(err))
	}
	if !strings.Contains(err.Error(), `"warm"`) || !strings.Contains(err.Error(), "master, hot, cold") {
		t.Errorf("message should name the group and the allowed ones: %q", err)
	}
}

func TestRollingRestartExecutes(t *testing.T) {
	c, client := testCluster(threeGroups, groupOrder, "master")
	ctrl := fakecluster.Start(t, client, "prod")
	locker := &memLocker{id: "alice@api:6443"}
	rec := &Recorder{}
	p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ex := &Executor{Locker: locker, Sink: rec, Auditor: &KubeAuditor{Client: client, Clock: RealClock{}, Instance: "alice@api:6443"}, Timeout: time.Minute}
	if err := ex.Run(context.Background(), p); err != nil {
		t.Fatalf("run: %v", err)
	}
	want := []string{"db-master-0", "db-master-1", "db-master-2", "db-hot-0", "db-hot-1", "db-cold-0"}
	if got := ctrl.Deleted(); !slices.Equal(got, want) {
		t.Errorf("restart order = %v, want %v", got, want)
	}
	pods, _ := client.CoreV1().Pods("prod").List(context.Background(), metav1.ListOptions{})
	for _, pod := range pods.Items {
		if strings.HasSuffix(string(pod.UID), "-uid0") {
			t.Errorf("pod %s still has its old UID", pod.Name)
		}
	}
	events, _ := client.CoreV1().Events("prod").List(context.Background(), metav1.ListOptions{})
	if len(events.Items) != len(want) {
		t.Errorf("audit events = %d, want one per restarted pod (%d)", len(events.Items), len(want))
	}
	for _, ev := range events.Items {
		if !strings.Contains(ev.Message, "alice@api:6443") || ev.Reason != "DbopsRestartPod" {
			t.Errorf("audit event should name the lock id: %q %q", ev.Reason, ev.Message)
		}
	}
	// On the new incarnations, where `kubectl describe pod` finds them.
	assertOneRestartEventPerLivePod(t, client, want...)
	j := locker.stored(t)
	if j.State != JournalSucceeded || len(j.Done) != len(want) {
		t.Errorf("journal = %+v", j)
	}
	if locker.released != 1 {
		t.Errorf("lock released %d times, want 1", locker.released)
	}
	assertEventTypes(t, rec.Events(), EventLock, EventPlan, EventStepStarted, EventDone)
	// The views print these times: they never go backwards.
	for i, evs := 1, rec.Events(); i < len(evs); i++ {
		if evs[i].Time.Before(evs[i-1].Time) {
			t.Errorf("event %d (%s) at %s, before event %d (%s) at %s", i, evs[i].Type, evs[i].Time, i-1, evs[i-1].Type, evs[i-1].Time)
		}
	}
	last := rec.Events()[len(rec.Events())-1]
	if last.Outcome != OutcomeSucceeded {
		t.Errorf("outcome = %s", last.Outcome)
	}
}

func assertEventTypes(t *testing.T, evs []Event, types ...EventType) {
	t.Helper()
	seen := map[EventType]bool{}
	for _, e := range evs {
		seen[e.Type] = true
	}
	for _, ty := range types {
		if !seen[ty] {
			t.Errorf("no %s event in %d events", ty, len(evs))
		}
	}
}

// TestRollingRestartResumesAfterCrash simulates a CLI killed right after it
// deleted the second pod: the journal knows step 1 is done and the old UID
// of pod 2. The re-run must not restart pod 1 again and must not delete
// the already-replaced pod 2 a second time.
func TestRollingRestartResumesAfterCrash(t *testing.T) {
	c, client := testCluster(map[string]int{"web": 3}, []string{"web"}, "")
	ctrl := fakecluster.Start(t, client, "prod")
	p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	locker := &memLocker{id: "me"}
	// First run: "crash" inside the second step's verify, after its delete.
	crashed := errors.New("killed")
	ctx, cancel := context.WithCancel(context.Background())
	p.Steps[1].Verify = wrapVerify(p.Steps[1].Verify, func() error { cancel(); return crashed })
	auditor := &KubeAuditor{Client: client, Clock: RealClock{}, Instance: "me"}
	err = (&Executor{Locker: locker, Sink: &Recorder{}, Auditor: auditor}).Run(ctx, p)
	if ExitCode(err) != ExitInterrupted {
		t.Fatalf("first run: %v (exit %d), want interrupted", err, ExitCode(err))
	}
	j := locker.stored(t)
	if j.State != JournalInterrupted || !slices.Equal(j.Done, []string{"restart/db-web-0"}) || j.Data[uidKey("db-web-1")] != "db-web-1-uid0" {
		t.Fatalf("journal after crash = %+v", j)
	}
	ctrl.WaitDeleted(t, 2)
	ctrl.Flush() // the StatefulSet controller brought db-web-1 back meanwhile

	// Re-run with a freshly computed plan, as the user would.
	fresh, err := testClusterFromLive(t, c, client)
	if err != nil {
		t.Fatal(err)
	}
	// The re-run plans from the pods as they are now: db-web-1 is its replacement.
	if uid := fresh.Group("web").Pods[1].UID; uid == "db-web-1-uid0" || uid == "" {
		t.Fatalf("re-run plans db-web-1 with UID %q, want the replacement's (live state)", uid)
	}
	p2, err := (&RollingRestart{Client: client}).Plan(fresh, EngineGeneric, RestartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &Recorder{}
	if err := (&Executor{Locker: locker, Sink: rec, Auditor: auditor}).Run(context.Background(), p2); err != nil {
		t.Fatalf("re-run: %v", err)
	}
	// db-web-1, deleted by the crashed run before it recorded anything, gets its event from
	// the re-run, on its new incarnation.
	assertOneRestartEventPerLivePod(t, client, "db-web-0", "db-web-1", "db-web-2")
	if got, want := ctrl.Deleted(), []string{"db-web-0", "db-web-1", "db-web-2"}; !slices.Equal(got, want) {
		t.Errorf("deletions = %v, want each pod exactly once %v", got, want)
	}
	var skipped []string
	for _, e := range rec.Events() {
		if e.Type == EventStepSkipped {
			skipped = append(skipped, e.Step.ID+": "+e.Reason)
		}
	}
	wantSkipped := []string{"restart/db-web-0: done in an earlier run", "restart/db-web-1: already in the desired state"}
	if !slices.Equal(skipped, wantSkipped) {
		t.Errorf("skipped = %q, want %q", skipped, wantSkipped)
	}
	if j := locker.stored(t); j.State != JournalSucceeded {
		t.Errorf("journal state = %s", j.State)
	}
}

func wrapVerify(v func(context.Context, *StepContext) error, before func() error) func(context.Context, *StepContext) error {
	return func(ctx context.Context, sc *StepContext) error {
		if err := before(); err != nil {
			return err
		}
		return v(ctx, sc)
	}
}

// testClusterFromLive is c with each pod's UID, phase, readiness and deletion read from the
// fake API, as discovery would read them on a re-run (ops cannot import discovery). A pod
// missing from the API is dropped from its group.
func testClusterFromLive(t *testing.T, c *Cluster, client kubernetes.Interface) (*Cluster, error) {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	out := &Cluster{}
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	for i, g := range out.Groups { // the owner is not part of the document
		g.Owner = c.Groups[i].Owner
	}
	list, err := client.CoreV1().Pods(c.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	live := map[string]corev1.Pod{}
	for _, p := range list.Items {
		live[p.Name] = p
	}
	for _, g := range out.Groups {
		pods := g.Pods[:0]
		ready := int32(0)
		for _, p := range g.Pods {
			lp, ok := live[p.Name]
			if !ok {
				continue
			}
			p.UID = lp.UID
			p.Phase = string(lp.Status.Phase)
			p.Ready = kube.PodReady(&lp)
			p.Deleting = lp.DeletionTimestamp != nil
			if p.Ready {
				ready++
			}
			pods = append(pods, p)
		}
		g.Pods = pods
		g.Current, g.Ready = int32(len(pods)), ready
	}
	return out, nil
}

func TestRollingRestartRefusesWhenAnotherPodUnready(t *testing.T) {
	c, client := testCluster(map[string]int{"web": 3}, []string{"web"}, "")
	p2 := readyPod("db-web-2", "prod", nil, types.UID("db-web-2-uid0"))
	p2.Status.Conditions[0].Status = "False"
	if _, err := client.CoreV1().Pods("prod").UpdateStatus(context.Background(), p2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	p, _ := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	rec := &Recorder{}
	// Bounded: without the refusal the run would wait for db-web-0 forever (no controller here).
	err := (&Executor{Locker: &memLocker{id: "me"}, Sink: rec, Timeout: 10 * time.Second}).Run(context.Background(), p)
	if ExitCode(err) != ExitPrecondition {
		t.Fatalf("err = %v (exit %d), want precondition", err, ExitCode(err))
	}
	if !strings.Contains(err.Error(), "db-web-2 is not Ready") {
		t.Errorf("message: %q", err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "get" && a.GetVerb() != "watch" {
			t.Errorf("unexpected write %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

func TestExecutorTimeout(t *testing.T) {
	c, client := testCluster(map[string]int{"web": 1}, []string{"web"}, "")
	// No controller: the deleted pod never comes back, so verify waits
	// until the timeout.
	p, _ := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	p.SetRequest(&Request{Command: []string{"restart"}, Cluster: "db", Flags: []RequestFlag{{Name: "rolling", Values: []string{"true"}, Bool: true}}}, EngineGeneric)
	locker := &memLocker{id: "me"}
	rec := &Recorder{}
	// Long enough that a loaded machine still takes the lock before it fires.
	err := (&Executor{Locker: locker, Sink: rec, Timeout: 500 * time.Millisecond}).Run(context.Background(), p)
	if ExitCode(err) != ExitTimeout {
		t.Fatalf("err = %v (exit %d), want timeout", err, ExitCode(err))
	}
	if j := locker.stored(t); j.State != JournalTimeout {
		t.Errorf("journal state %s", j.State)
	}
	last := rec.Events()[len(rec.Events())-1]
	if last.Outcome != OutcomeTimeout || !strings.Contains(last.Resume, "kubectl dbops restart db --rolling") {
		t.Errorf("done event = %+v", last)
	}
	if locker.released != 1 {
		t.Error("lock not released after timeout")
	}
}

func TestExecutorLockRefused(t *testing.T) {
	c, client := testCluster(map[string]int{"web": 2}, []string{"web"}, "")
	p, _ := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	locker := &memLocker{id: "me", holder: "bob"}
	err := (&Executor{Locker: locker, Sink: &Recorder{}}).Run(context.Background(), p)
	if ExitCode(err) != ExitLocked || !strings.Contains(err.Error(), "bob") {
		t.Fatalf("err = %v (exit %d)", err, ExitCode(err))
	}
	if n := len(client.Actions()); n != 0 {
		t.Errorf("%d API calls after a refused lock", n)
	}
}

// A lock taken by hand before the run (lock acquire) stays held after it.
func TestExecutorKeepsManualLock(t *testing.T) {
	c, client := testCluster(map[string]int{"web": 1}, []string{"web"}, "")
	fakecluster.Start(t, client, "prod")
	p, _ := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	locker := &memLocker{id: "me", holder: "me"}
	rec := &Recorder{}
	if err := (&Executor{Locker: locker, Sink: rec}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if locker.released != 0 || locker.holder != "me" {
		t.Errorf("manual lock was released (released=%d holder=%q)", locker.released, locker.holder)
	}
	found := false
	for _, e := range rec.Events() {
		found = found || (e.Type == EventWarning && strings.Contains(e.Message, "lock stays held"))
	}
	if !found {
		t.Error("no warning that the lock stays held")
	}
}

// Ctrl-C while waiting: the stop is announced at once, the journal says
// interrupted, the lock is released and the exit code is 130.
func TestExecutorInterruptAnnouncesStop(t *testing.T) {
	c, client := testCluster(map[string]int{"web": 2}, []string{"web"}, "")
	ctrl := fakecluster.Start(t, client, "prod")
	ctrl.SetHold(true) // the pod never comes back: verify waits
	p, _ := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	p.SetRequest(&Request{Command: []string{"restart"}, Cluster: "db", Flags: []RequestFlag{{Name: "rolling", Values: []string{"true"}, Bool: true}}}, EngineGeneric)
	locker := &memLocker{id: "me"}
	ctx, cancel := context.WithCancel(context.Background())
	rec := &Recorder{}
	sink := SinkFunc(func(e Event) {
		rec.Emit(e)
		if e.Type == EventStepWaiting {
			cancel() // the user presses Ctrl-C while the step waits
		}
	})
	err := (&Executor{Locker: locker, Sink: sink}).Run(ctx, p)
	if ExitCode(err) != ExitInterrupted {
		t.Fatalf("err = %v (exit %d)", err, ExitCode(err))
	}
	var stopping, done, stepStopped bool
	for _, e := range rec.Events() {
		stopping = stopping || (e.Type == EventWarning && strings.HasPrefix(e.Message, "stopping"))
		done = done || (e.Type == EventDone && e.Outcome == OutcomeInterrupted && strings.Contains(e.Resume, "restart db --rolling"))
		stepStopped = stepStopped || (e.Type == EventStepFailed && e.ReasonCode == ReasonInterrupted)
	}
	if !stopping || !done || !stepStopped {
		t.Errorf("stopping warning %v, interrupted done with resume hint %v, step reported interrupted %v", stopping, done, stepStopped)
	}
	j := locker.stored(t)
	if j.State != JournalInterrupted || len(j.Done) != 0 || j.Data[uidKey("db-web-0")] != "db-web-0-uid0" {
		t.Errorf("journal = %+v", j)
	}
	if locker.released != 1 {
		t.Error("lock not released")
	}
	if got := ctrl.Deleted(); !slices.Equal(got, []string{"db-web-0"}) {
		t.Errorf("deleted %v; only the first pod may be touched", got)
	}
}

// A plan with nothing left to do succeeds without the lock: no Acquire,
// no journal, no API call; even a lock held by someone else does not
// matter, since nothing is changed.
func TestExecutorNothingToDo(t *testing.T) {
	c, client := testCluster(map[string]int{"web": 2}, []string{"web"}, "")
	p := &Plan{Operation: "scale", Cluster: c.Name, Namespace: c.Namespace, Engine: EngineGeneric, Args: "--replicas 2",
		Notes: []string{"already 2 pods"}}
	for _, holder := range []string{"", "bob"} {
		locker := &memLocker{id: "me", holder: holder}
		rec := &Recorder{}
		if err := (&Executor{Locker: locker, Sink: rec}).Run(context.Background(), p); err != nil {
			t.Fatalf("holder %q: %v", holder, err)
		}
		if locker.saves != 0 || locker.holder != holder {
			t.Errorf("holder %q: the lock or journal was touched (saves=%d holder=%q)", holder, locker.saves, locker.holder)
		}
		evs := rec.Events()
		if last := evs[len(evs)-1]; last.Type != EventDone || last.Outcome != OutcomeSucceeded {
			t.Errorf("holder %q: last event %+v, want done/succeeded", holder, last)
		}
		warned := false
		for _, e := range evs {
			warned = warned || (e.Type == EventWarning && strings.Contains(e.Message, "nothing to do"))
		}
		if !warned {
			t.Errorf("holder %q: no 'nothing to do' message", holder)
		}
	}
	if n := len(client.Actions()); n != 0 {
		t.Errorf("%d API calls for a plan with no steps", n)
	}
}

// A pod that is missing (a killed run deleted it and the StatefulSet has not recreated it
// yet) still has its step, is allowed down only as the next step's pod, and stops every other
// pod's restart: it is never taken for "not part of the cluster".
func TestRollingRestartMissingPod(t *testing.T) {
	c, client := testCluster(map[string]int{"web": 3}, []string{"web"}, "")
	c.Groups[0].Pods = slices.Delete(c.Groups[0].Pods, 1, 2)
	if err := client.CoreV1().Pods("prod").Delete(context.Background(), "db-web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	if want := []string{"restart/db-web-0", "restart/db-web-1", "restart/db-web-2"}; !slices.Equal(ids, want) {
		t.Fatalf("steps %v, want %v", ids, want)
	}
	// Fresh run: the first step is web-0, and web-1 is missing: refused before the lock.
	if err := p.Preflight(context.Background(), PreflightState{}); ExitCode(err) != ExitPrecondition || !strings.Contains(err.Error(), "db-web-1") {
		t.Fatalf("preflight = %v, want a refusal naming db-web-1", err)
	}
	// Resumed after web-0: web-1 is the next step's pod, so it may be down.
	done := func(id string) bool { return id == "restart/db-web-0" }
	if err := p.Preflight(context.Background(), PreflightState{Resuming: true, Done: done}); err != nil {
		t.Fatalf("resumed preflight: %v", err)
	}
	// web-2's own check refuses while web-1 is missing.
	if _, err := p.Steps[2].Precheck(context.Background(), &StepContext{exec: &Executor{}, journal: &Journal{}}); ExitCode(err) != ExitPrecondition || !strings.Contains(err.Error(), "db-web-1 does not exist") {
		t.Fatalf("web-2 precheck = %v, want a refusal naming the missing db-web-1", err)
	}
}

// TestRollingRestartJournalWrites: a restart of n pods writes the journal n+2 times: the run's
// start (naming the first step current, with the UIDs of the first two pods, read from the
// run's pod informer), each step's done (carrying the UID of the pod two steps on), and the
// end; and every UID is journaled before its pod is deleted. The step need not be: a pod's delete may overlap the write of the
// previous step's done (TestRestartDeletesWhileDoneIsWritten).
func TestRollingRestartJournalWrites(t *testing.T) {
	c, client := testCluster(map[string]int{"hot": 3}, []string{"hot"}, "")
	ctrl := fakecluster.Start(t, client, "prod")
	p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	locker := &memLocker{id: "alice@api:6443"}
	unjournaled := recordUnjournaledDeletes(client, locker)
	pods := kube.StartPods(t.Context(), client, "prod", "", "") // as the CLI starts it (internal/commands/view.go)
	if err := (&Executor{Locker: locker, Timeout: time.Minute, Pods: pods}).Run(context.Background(), p); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := len(ctrl.Deleted()); got != 3 {
		t.Fatalf("deleted %d pods, want 3", got)
	}
	if want := 3 + 2; locker.saves != want {
		t.Errorf("journal written %d times, want %d", locker.saves, want)
	}
	if u := unjournaled(); len(u) > 0 {
		t.Errorf("pods deleted before their UID was journaled: %v", u)
	}
}

// TestRunEndsInOneWrite: with a lock that can save the last journal and release in one write,
// a run's end is that one write, and it carries the last step's done too: that step is
// reported done only once it landed, before the lock's release. When it fails, the lock is
// still released, the last step is reported failed and the run says its record was not saved.
func TestRunEndsInOneWrite(t *testing.T) {
	for _, tc := range []struct {
		name     string
		finalErr error
		wantErr  string
	}{
		{name: "one write"},
		{name: "failed", finalErr: errors.New("etcdserver: request timed out"),
			wantErr: "operation finished but its record could not be saved: saving the operation journal: etcdserver: request timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, client := testCluster(map[string]int{"hot": 3}, []string{"hot"}, "")
			fakecluster.Start(t, client, "prod")
			p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			locker := &memLocker{id: "alice@api:6443", oneWriteEnd: true, finalErr: tc.finalErr}
			var evs []Event
			var mu sync.Mutex
			sink := SinkFunc(func(e Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() })
			err = (&Executor{Locker: locker, Timeout: time.Minute, Sink: sink,
				Pods: kube.StartPods(t.Context(), client, "prod", "", "")}).Run(context.Background(), p)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("run: %v, want %q", err, tc.wantErr)
			}
			if locker.released != 1 || locker.holder != "" {
				t.Errorf("released %d times, holder %q: want released once", locker.released, locker.holder)
			}
			released := 0
			for _, e := range evs {
				if e.Type == EventLock && e.Lock.Action == LockReleased {
					released++
				}
			}
			if released != 1 {
				t.Errorf("%d lock-released events, want 1", released)
			}
			var last []EventType // the last step's outcome and what follows it
			for _, e := range evs {
				if len(last) > 0 || (e.Step != nil && e.Step.Index == 3 && (e.Type == EventStepDone || e.Type == EventStepFailed)) {
					last = append(last, e.Type)
				}
			}
			if tc.finalErr != nil {
				if got := locker.stored(t).State; got == JournalSucceeded {
					t.Errorf("journal state %s although its last write failed", got)
				}
				if len(last) == 0 || last[0] != EventStepFailed {
					t.Errorf("events from the last step's outcome on: %v, want it failed", last)
				}
				return
			}
			if want := []EventType{EventStepDone, EventLock, EventDone}; !slices.Equal(last, want) {
				t.Errorf("events from the last step's outcome on: %v, want %v", last, want)
			}
			// The run's start, the first two steps' done, and the end carrying the third's.
			if locker.finals != 1 || locker.saves != 3+1 {
				t.Errorf("%d one-write ends and %d journal writes, want 1 and %d", locker.finals, locker.saves, 3+1)
			}
			if got := locker.stored(t); got.State != JournalSucceeded || len(got.Done) != 3 {
				t.Errorf("journal %+v, want succeeded with 3 steps done", got)
			}
		})
	}
}

// hotRestart plans a rolling restart of a generic 3-pod group (db-hot-0..2) served by a fake
// StatefulSet controller; replan plans it again (a resumed run).
func hotRestart(t *testing.T) (*fake.Clientset, *fakecluster.Controller, *Plan, func() *Plan) {
	t.Helper()
	c, client := testCluster(map[string]int{"hot": 3}, []string{"hot"}, "")
	ctrl := fakecluster.Start(t, client, "prod")
	replan := func() *Plan {
		p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	return client, ctrl, replan(), replan
}

// A step's "done" is written, and reported, before the next step touches anything: the
// journal, the views and the cluster agree on which steps finished, and a done write that
// finds the lock lost stops the run before the next delete. The previous pod's restart event
// is written by then too. The next pod's UID was journaled by that same write, so the delete
// needs no write of its own.
func TestRestartStepDoneBeforeNextDelete(t *testing.T) {
	client, _, p, _ := hotRestart(t)
	locker := &memLocker{id: "alice@api:6443", oneWriteEnd: true}
	sink := &Recorder{}
	var mu sync.Mutex
	var problems []string
	events := map[string]bool{}
	aud := &recordingAuditor{record: func(obj ObjectRef) {
		mu.Lock()
		defer mu.Unlock()
		events[obj.Name] = true
	}}
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.DeleteActionImpl).Name
		prevIdx := map[string]int{"db-hot-1": 1, "db-hot-2": 2}[name]
		if prevIdx == 0 {
			return false, nil, nil
		}
		prev := fmt.Sprintf("db-hot-%d", prevIdx-1)
		reported := false
		for _, ev := range sink.Events() {
			if ev.Type == EventStepDone && ev.Step != nil && ev.Step.Index == prevIdx {
				reported = true
			}
		}
		j := locker.stored(t)
		mu.Lock()
		defer mu.Unlock()
		if !reported {
			problems = append(problems, fmt.Sprintf("%s deleted before step %d was reported done", name, prevIdx))
		}
		if !j.IsDone("restart/" + prev) {
			problems = append(problems, fmt.Sprintf("%s deleted before step %d's done was journaled", name, prevIdx))
		}
		if j.Data[uidKey(name)] == "" {
			problems = append(problems, fmt.Sprintf("%s deleted before its UID was journaled", name))
		}
		if !events[prev] {
			problems = append(problems, fmt.Sprintf("%s deleted before %s's restart event was written", name, prev))
		}
		return false, nil, nil
	})
	if err := (&Executor{Locker: locker, Sink: sink, Auditor: aud, Timeout: time.Minute}).Run(context.Background(), p); err != nil {
		t.Fatalf("run: %v", err)
	}
	mu.Lock()
	for _, p := range problems {
		t.Error(p)
	}
	mu.Unlock()
	var order []string
	for _, ev := range sink.Events() {
		if ev.Step != nil && (ev.Type == EventStepStarted || ev.Type == EventStepDone) {
			order = append(order, fmt.Sprintf("%s %d", ev.Type, ev.Step.Index))
		}
	}
	want := []string{"step-started 1", "step-done 1", "step-started 2", "step-done 2", "step-started 3", "step-done 3"}
	if !slices.Equal(order, want) {
		t.Errorf("step events %v, want %v", order, want)
	}
	if j := locker.stored(t); j.State != JournalSucceeded || len(j.Done) != 3 {
		t.Errorf("journal %s with %d step(s) done, want succeeded with 3", j.State, len(j.Done))
	}
}

// A run whose lock is lost — a deny of its ID, a release or takeover by someone else, seen by
// its watch of the Lease or refused by its next journal write — deletes no further pod. The
// steps that finished stay recorded (and reported) as done, where the lock can still record
// them; the run exits as a lost lock.
func TestRestartStopsWhenLockLost(t *testing.T) {
	denied := WithReason(Lockedf("lock ID alice@api:6443 is on the deny list of cluster prod/db (denied by bob)"), ReasonDenied)
	for _, tc := range []struct {
		name    string
		watched bool
		// lose takes the lock away at the point the case is about.
		lose func(t *testing.T, l *memLocker, ctrl *fakecluster.Controller)
		// refuseDone makes step 1's done write find the lock lost.
		refuseDone bool
		deleted    []string
		steps      []string
		journal    []string // done, as the write after the loss recorded it
	}{
		{
			name: "denied while the next pod comes back", watched: true,
			lose: func(t *testing.T, l *memLocker, ctrl *fakecluster.Controller) {
				ctrl.WaitDeleted(t, 1)
				ctrl.Flush()           // db-hot-0 back
				ctrl.WaitDeleted(t, 2) // db-hot-1, its recreation held back
				l.loseLock(t, denied)
				ctrl.SetHold(false)
				ctrl.Flush()
			},
			deleted: []string{"db-hot-0", "db-hot-1"},
			steps:   []string{"done 1", "failed 2"},
			journal: []string{"restart/db-hot-0"},
		},
		{
			name: "denied before a done write", watched: true, refuseDone: true,
			lose: func(t *testing.T, l *memLocker, ctrl *fakecluster.Controller) {
				ctrl.WaitDeleted(t, 1)
				ctrl.SetHold(false)
				ctrl.Flush()
			},
			deleted: []string{"db-hot-0"},
			steps:   []string{"done 1"},
			journal: []string{"restart/db-hot-0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctrl, p, _ := hotRestart(t)
			ctrl.SetHold(true)
			refused := false
			locker := &memLocker{id: "alice@api:6443", watched: tc.watched, beforeSave: func(j *Journal) error {
				if tc.refuseDone && !refused && j.IsDone("restart/db-hot-0") {
					refused = true
					return denied
				}
				return nil
			}}
			sink := &Recorder{}
			errc := make(chan error, 1)
			go func() {
				errc <- (&Executor{Locker: locker, Sink: sink, Timeout: time.Minute}).Run(context.Background(), p)
			}()
			tc.lose(t, locker, ctrl)
			err := <-errc
			if ExitCode(err) != ExitLocked || !strings.Contains(err.Error(), "deny list") {
				t.Fatalf("run = %v (exit %d), want the deny as a lost lock (exit %d)", err, ExitCode(err), ExitLocked)
			}
			if got := ctrl.Deleted(); !slices.Equal(got, tc.deleted) {
				t.Errorf("deleted %v, want %v", got, tc.deleted)
			}
			var got []string
			for _, ev := range sink.Events() {
				if ev.Step == nil {
					continue
				}
				switch ev.Type {
				case EventStepDone:
					got = append(got, fmt.Sprintf("done %d", ev.Step.Index))
				case EventStepFailed:
					got = append(got, fmt.Sprintf("failed %d", ev.Step.Index))
				}
			}
			if !slices.Equal(got, tc.steps) {
				t.Errorf("step outcomes %v, want %v", got, tc.steps)
			}
			if evs := sink.Events(); evs[len(evs)-1].ReasonCode != ReasonDenied {
				t.Errorf("done event's reason code %q, want %s", evs[len(evs)-1].ReasonCode, ReasonDenied)
			}
			// Recorded as denied (history shows why the run stopped), not as failed.
			if j := locker.stored(t); locker.afterLoss != 1 || j.State != JournalDenied || !slices.Equal(j.Done, tc.journal) {
				t.Errorf("journal %s with done %v (%d writes after the loss), want denied with %v in one", j.State, j.Done, locker.afterLoss, tc.journal)
			}
		})
	}
}

// A lock lost in the middle of an action that deletes several pods (a zone's batch) stops the
// deletes that had not gone out: each checks the lock (kube.WithWriteGuard).
func TestBatchDeleteStopsWhenLockLost(t *testing.T) {
	c, client := zonedCluster()
	fakecluster.Start(t, client, "prod")
	p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{Mode: ModeZone})
	if err != nil {
		t.Fatal(err)
	}
	locker := &memLocker{id: "alice@api:6443", watched: true}
	var deletes atomic.Int32
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if deletes.Add(1) == 1 {
			locker.loseLock(t, Lockedf("lost the lock on cluster prod/db: it was released by someone else"))
		}
		return false, nil, nil
	})
	err = (&Executor{Locker: locker, Sink: &Recorder{}, Timeout: time.Minute}).Run(context.Background(), p)
	if ExitCode(err) != ExitLocked {
		t.Fatalf("run = %v (exit %d), want a lost lock (exit %d)", err, ExitCode(err), ExitLocked)
	}
	if n := deletes.Load(); n != 1 {
		t.Errorf("%d pod deletes sent, want 1 (the one in flight when the lock was lost)", n)
	}
}

// A pod replaced by someone else after this run staged its UID ahead (while the step before it
// ran) is still restarted by its own step: the run restarts the incarnation it finds, rather
// than count the other replacement as its own.
func TestRestartAheadStagedPodReplacedMeanwhile(t *testing.T) {
	client, ctrl, p, _ := hotRestart(t)
	// Once the write that stages db-hot-1's UID ahead is done (step 1's start, before db-hot-0
	// is deleted), db-hot-1 is replaced by someone else: deleted, and recreated Ready with a
	// new UID by the fake controller.
	foreign := types.UID("")
	locker := &memLocker{id: "me", beforeSave: func(j *Journal) error {
		if foreign != "" || j.Current != "restart/db-hot-0" || j.Data[uidKey("db-hot-1")] == "" {
			return nil
		}
		foreign = types.UID(j.Data[uidKey("db-hot-1")])
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w, err := client.CoreV1().Pods("prod").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		defer w.Stop()
		if err := client.CoreV1().Pods("prod").Delete(ctx, "db-hot-1", metav1.DeleteOptions{}); err != nil {
			return err
		}
		for {
			select {
			case ev := <-w.ResultChan():
				if cur, ok := ev.Object.(*corev1.Pod); ok && cur.Name == "db-hot-1" && cur.UID != foreign && PodReady(cur) {
					return nil
				}
			case <-ctx.Done():
				return fmt.Errorf("db-hot-1 not recreated Ready: %w", ctx.Err())
			}
		}
	}}
	if err := (&Executor{Locker: locker, Timeout: time.Minute}).Run(context.Background(), p); err != nil {
		t.Fatalf("run: %v", err)
	}
	if foreign == "" {
		t.Fatal("the journal never staged db-hot-1's UID before db-hot-0's restart")
	}
	var hot1 int
	for _, d := range ctrl.Deleted() {
		if strings.HasPrefix(d, "db-hot-1") {
			hot1++
		}
	}
	if hot1 != 2 {
		t.Errorf("db-hot-1 deleted %d time(s) (the first by someone else, uid %s), want 2: the run must restart it itself; deletions %v", hot1, foreign, ctrl.Deleted())
	}
}

// killAfterHot1Deleted returns a lock that "kills" a restart of db-hot-0..2 once it deleted
// db-hot-1 (onDelete runs then), and the context to run it with: no write after that delete
// lands, so step 2's done is lost, and the run's context ends (the run does not wait on).
func killAfterHot1Deleted(t *testing.T, client *fake.Clientset, onDelete func()) (*memLocker, context.Context) {
	t.Helper()
	ctx, kill := context.WithCancel(t.Context())
	hot1Deleted := make(chan struct{})
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.DeleteActionImpl).Name == "db-hot-1" {
			if onDelete != nil {
				onDelete()
			}
			close(hot1Deleted)
			kill()
		}
		return false, nil, nil
	})
	return &memLocker{id: "me", beforeSave: func(j *Journal) error {
		select {
		case <-hot1Deleted:
			return errors.New("killed")
		default:
			return nil
		}
	}}, ctx
}

// A run killed after it deleted a pod but before it journaled that pod's step done leaves a
// journal naming that step current, with the deleted pod's UID staged: the resumed run counts
// that pod as restarted by the interrupted run, deletes nothing twice, and records each pod's
// restart event once.
func TestRestartResumeAfterKillAfterDelete(t *testing.T) {
	client, ctrl, p, replan := hotRestart(t)
	locker, killCtx := killAfterHot1Deleted(t, client, nil)
	auditor := &KubeAuditor{Client: client, Clock: RealClock{}, Instance: "me"}
	if err := (&Executor{Locker: locker, Auditor: auditor, Timeout: time.Minute}).Run(killCtx, p); err == nil {
		t.Fatal("the killed run succeeded")
	}
	if j := locker.stored(t); j.Current != "restart/db-hot-1" || !slices.Equal(j.Done, []string{"restart/db-hot-0"}) || j.Data[uidKey("db-hot-1")] == "" {
		t.Fatalf("journal left by the killed run: current %q, done %v, data %v; want step 2 current, step 1 done, db-hot-1's UID staged", j.Current, j.Done, j.Data)
	}
	locker.beforeSave = nil
	ctrl.WaitDeleted(t, 2)
	ctrl.Flush() // the StatefulSet controller brought db-hot-1 back meanwhile
	if err := (&Executor{Locker: locker, Auditor: auditor, Timeout: time.Minute}).Run(context.Background(), replan()); err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	count := map[string]int{}
	for _, d := range ctrl.Deleted() {
		count[d]++
	}
	if count["db-hot-0"] != 1 || count["db-hot-1"] != 1 || count["db-hot-2"] != 1 {
		t.Errorf("deletions %v, want each pod deleted once", ctrl.Deleted())
	}
	assertOneEventPerLivePod(t, client, "DbopsRestartPod", "db-hot-0", "db-hot-1", "db-hot-2")
}

// The run killed after db-hot-1's delete, as above, but resumed before the StatefulSet
// controller brought db-hot-1 back: that pod was deleted by this request (its UID is journaled
// and gone), so neither the preflight nor step 2's precheck refuses for it. Step 2 deletes
// nothing and waits for db-hot-1, and step 3 deletes db-hot-2 only once db-hot-1 is Ready.
func TestRestartResumeAfterKillWhileNextPodDown(t *testing.T) {
	c, client := testCluster(map[string]int{"hot": 3}, []string{"hot"}, "")
	ctrl := fakecluster.Start(t, client, "prod")
	p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// db-hot-1 stays down until the resumed run's precheck is past.
	locker, killCtx := killAfterHot1Deleted(t, client, func() { ctrl.SetHold(true) })
	if err := (&Executor{Locker: locker, Timeout: time.Minute}).Run(killCtx, p); err == nil {
		t.Fatal("the killed run succeeded")
	}
	j := locker.stored(t)
	if j.Current != "restart/db-hot-1" || !slices.Equal(j.Done, []string{"restart/db-hot-0"}) || j.Data[uidKey("db-hot-1")] != "db-hot-1-uid0" {
		t.Fatalf("journal left by the killed run: current %q, done %v, data %v; want step 2 current, step 1 done, db-hot-1's UID staged", j.Current, j.Done, j.Data)
	}
	locker.beforeSave = nil

	// What a re-run's discovery sees: db-hot-0 back with a new UID, db-hot-1 missing.
	live, err := client.CoreV1().Pods("prod").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh := &Cluster{Name: c.Name, Namespace: c.Namespace, Engine: c.Engine, Layout: c.Layout}
	g := *c.Groups[0]
	g.Pods = nil
	for _, lp := range live.Items {
		if lp.Name == "db-hot-1" {
			t.Fatalf("db-hot-1 is back (%s) before the resumed run", lp.UID)
		}
		for _, dp := range c.Groups[0].Pods {
			if dp.Name == lp.Name {
				dp.UID = lp.UID
				g.Pods = append(g.Pods, dp)
			}
		}
	}
	fresh.Groups = []*NodeGroup{&g}
	p2, err := (&RollingRestart{Client: client}).Plan(fresh, EngineGeneric, RestartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Preflight(context.Background(), PreflightState{Resuming: true, Done: j.IsDone, Data: j.Data}); err != nil {
		t.Fatalf("resumed preflight: %v", err)
	}

	// db-hot-1 comes back only once the resumed run's step 2 waits for it (past its precheck).
	rec := &Recorder{}
	var once sync.Once
	sink := SinkFunc(func(e Event) {
		rec.Emit(e)
		if e.Step != nil && e.Step.ID == "restart/db-hot-1" && e.Type == EventStepWaiting {
			once.Do(func() {
				ctrl.SetHold(false)
				go ctrl.Flush()
			})
		}
	})
	if err := (&Executor{Locker: locker, Sink: sink, Timeout: time.Minute}).Run(context.Background(), p2); err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	if got, want := ctrl.Deleted(), []string{"db-hot-0", "db-hot-1", "db-hot-2"}; !slices.Equal(got, want) {
		t.Errorf("deletions %v, want each pod deleted once, in order %v", got, want)
	}
	var skipped []string
	for _, e := range rec.Events() {
		if e.Type == EventStepSkipped {
			skipped = append(skipped, e.Step.ID)
		}
	}
	if want := []string{"restart/db-hot-0"}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}
	if j := locker.stored(t); j.State != JournalSucceeded {
		t.Errorf("journal state %s, want succeeded", j.State)
	}
}

// recordingAuditor records nothing; record sees each DbopsRestartPod event's object.
type recordingAuditor struct{ record func(ObjectRef) }

func (a *recordingAuditor) Record(_ context.Context, obj ObjectRef, reason, _ string) error {
	if reason == "DbopsRestartPod" {
		a.record(obj)
	}
	return nil
}

func (a *recordingAuditor) Recorded(context.Context, ObjectRef, string) (bool, error) {
	return false, nil
}

// With a lock that stores the first journal with the write that takes it (JournalAcquirer),
// a run's start is that one write: a restart of n pods then writes n+1 more (each step's done
// and the end), every UID still journaled before its pod is deleted. The journal decided is
// the same whether the lock asks for it once or again after a conflict.
func TestRunStartsInOneWrite(t *testing.T) {
	for _, calls := range []int{1, 2} {
		t.Run(fmt.Sprintf("first called %d times", calls), func(t *testing.T) {
			client, ctrl, p, _ := hotRestart(t)
			locker := &memJournalLocker{memLocker: &memLocker{id: "alice@api:6443"}, calls: calls}
			unjournaled := recordUnjournaledDeletes(client, locker.memLocker)
			var first *Journal
			locker.onSave = func(saves int) {
				if saves == 1 {
					first = &Journal{}
					_ = json.Unmarshal(locker.journal, first)
				}
			}
			pods := kube.StartPods(t.Context(), client, "prod", "", "")
			if err := (&Executor{Locker: locker, Timeout: time.Minute, Pods: pods}).Run(context.Background(), p); err != nil {
				t.Fatalf("run: %v", err)
			}
			if got := len(ctrl.Deleted()); got != 3 {
				t.Fatalf("deleted %d pods, want 3", got)
			}
			if locker.acquireWrites != 1 || locker.firstCalls != calls {
				t.Errorf("%d acquiring writes, first called %d times; want 1 and %d", locker.acquireWrites, locker.firstCalls, calls)
			}
			if want := 3 + 1; locker.saves != want {
				t.Errorf("journal written %d times after the acquisition, want %d", locker.saves, want)
			}
			if u := unjournaled(); len(u) > 0 {
				t.Errorf("pods deleted before their UID was journaled: %v", u)
			}
			// The first save after the acquisition is db-hot-0's done: the acquiring write
			// carried the run's start.
			if first == nil || !slices.Equal(first.Done, []string{"restart/db-hot-0"}) {
				t.Errorf("first save after acquiring = %+v, want restart/db-hot-0 done", first)
			}
			if got := locker.stored(t); got.State != JournalSucceeded || len(got.Done) != 3 {
				t.Errorf("journal %+v, want succeeded with 3 steps done", got)
			}
		})
	}
}

// A run resuming through a JournalAcquirer says so, keeps the steps done and does not do them
// again; one replacing another request's unfinished journal warns that it does.
func TestRunStartsInOneWriteResumes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		op       string
		warning  string
		skipped  int
		restarts int
	}{
		{name: "same request", op: "restart", warning: "resuming restart started", skipped: 1, restarts: 2},
		{name: "another request", op: "scale", warning: "was left interrupted; its record is replaced by this restart", restarts: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctrl, p, _ := hotRestart(t)
			prev, err := json.Marshal(&Journal{Operation: tc.op, Args: p.Args, Holder: "bob@api:6443", State: JournalInterrupted,
				Started: time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC), Steps: 3, Done: []string{"restart/db-hot-0"}})
			if err != nil {
				t.Fatal(err)
			}
			locker := &memJournalLocker{memLocker: &memLocker{id: "alice@api:6443", journal: prev}}
			rec := &Recorder{}
			if err := (&Executor{Locker: locker, Timeout: time.Minute, Sink: rec}).Run(context.Background(), p); err != nil {
				t.Fatalf("run: %v", err)
			}
			warned, skipped := false, 0
			for _, e := range rec.Events() {
				warned = warned || (e.Type == EventWarning && strings.Contains(e.Message, tc.warning))
				if e.Type == EventStepSkipped {
					skipped++
				}
			}
			if !warned {
				t.Errorf("no warning containing %q", tc.warning)
			}
			if skipped != tc.skipped || len(ctrl.Deleted()) != tc.restarts {
				t.Errorf("%d steps skipped, %d pods restarted; want %d and %d", skipped, len(ctrl.Deleted()), tc.skipped, tc.restarts)
			}
			if got := locker.stored(t); got.State != JournalSucceeded || len(got.Done) != 3 || got.Holder != "alice@api:6443" {
				t.Errorf("journal %+v, want alice's, succeeded with 3 steps done", got)
			}
		})
	}
}

// recordUnjournaledDeletes notes each pod deleted while locker's stored journal does not hold
// its UID; the returned function lists them.
func recordUnjournaledDeletes(client *fake.Clientset, locker *memLocker) func() []string {
	var out []string
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.DeleteActionImpl).Name
		locker.mu.Lock()
		defer locker.mu.Unlock()
		var j Journal
		if err := json.Unmarshal(locker.journal, &j); err != nil || j.Data[uidKey(name)] == "" {
			out = append(out, name)
		}
		return false, nil, nil
	})
	return func() []string {
		locker.mu.Lock()
		defer locker.mu.Unlock()
		return slices.Clone(out)
	}
}

// The plan shown for a resume marks exactly the steps the resumed run skips: done in the
// journal, or a pod whose journaled UID is gone and which is back Ready (its precheck finds
// it done); a pod still on its old UID, or not Ready yet, is not.
func TestSkippedOnResume(t *testing.T) {
	c, client := testCluster(map[string]int{"hot": 4}, []string{"hot"}, "")
	hot := c.Groups[0]
	hot.Pods[2].Ready = false
	p, err := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j := &Journal{Done: []string{"restart/db-hot-0"}, Data: map[string]string{
		uidKey("db-hot-1"): "db-hot-1-old", // restarted, back Ready
		uidKey("db-hot-2"): "db-hot-2-old", // restarted, not Ready yet
		uidKey("db-hot-3"): string(hot.Pods[3].UID),
	}}
	got := p.SkippedOnResume(j)
	want := map[string]bool{"restart/db-hot-0": true, "restart/db-hot-1": true}
	if len(got) != len(want) || !got["restart/db-hot-0"] || !got["restart/db-hot-1"] {
		t.Errorf("skipped on resume %v, want %v", got, want)
	}
}

// A resumed run does not pause (--pause-between) before a step it finds done already (a pod
// the interrupted run restarted), nor count it: the pause is between pods this run restarts.
func TestResumedRunDoesNotPauseBeforeSkippedSteps(t *testing.T) {
	_, ctrl, p, _ := hotRestart(t)
	j := &Journal{Operation: p.Operation, Args: p.Args, Holder: "me", State: JournalInterrupted, Steps: 3,
		Done: []string{"restart/db-hot-0"}, Current: "restart/db-hot-1",
		Data: map[string]string{uidKey("db-hot-0"): "db-hot-0-old", uidKey("db-hot-1"): "db-hot-1-old"}}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	locker := &memLocker{id: "me", journal: b}
	rec := &Recorder{}
	ex := &Executor{Locker: locker, Sink: rec, Timeout: time.Minute, Pacing: Pacing{Between: time.Millisecond}}
	if err := ex.Run(context.Background(), p); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, e := range rec.Events() {
		if e.Type == EventWarning && strings.HasPrefix(e.Message, "pausing") {
			t.Errorf("paused: %q; the resumed run restarted one pod only", e.Message)
		}
	}
	if got := ctrl.Deleted(); !slices.Equal(got, []string{"db-hot-2"}) {
		t.Errorf("deleted %v, want only db-hot-2", got)
	}
}

// Ctrl-C between two steps: the run stops at the boundary and says before which step, once
// (it said "interrupted: interrupted"); the first step is journaled done, the second never
// began.
func TestExecutorInterruptAtStepBoundary(t *testing.T) {
	c, client := testCluster(map[string]int{"web": 2}, []string{"web"}, "")
	ctrl := fakecluster.Start(t, client, "prod")
	p, _ := (&RollingRestart{Client: client}).Plan(c, EngineGeneric, RestartOptions{})
	locker := &memLocker{id: "me"}
	ctx, cancel := context.WithCancel(context.Background())
	rec := &Recorder{}
	sink := SinkFunc(func(e Event) {
		rec.Emit(e)
		if e.Type == EventStepDone {
			cancel() // Ctrl-C right after the first step finished
		}
	})
	err := (&Executor{Locker: locker, Sink: sink}).Run(ctx, p)
	if ExitCode(err) != ExitInterrupted {
		t.Fatalf("err = %v (exit %d)", err, ExitCode(err))
	}
	want := "interrupted before step 2/2 (pod/db-web-1: "
	if !strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "interrupted") != 1 {
		t.Errorf("err %q, want it to start %q and say interrupted once", err, want)
	}
	evs := rec.Events()
	if last := evs[len(evs)-1]; last.Type != EventDone || !strings.HasPrefix(last.Error, want) {
		t.Errorf("last event %+v", last)
	}
	if j := locker.stored(t); j.State != JournalInterrupted || len(j.Done) != 1 {
		t.Errorf("journal = %+v", j)
	}
	if got := ctrl.Deleted(); !slices.Equal(got, []string{"db-web-0"}) {
		t.Errorf("deleted %v", got)
	}
}
