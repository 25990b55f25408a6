package etcd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseMemberListDecimalIDsToHex(t *testing.T) {
	ms, err := ParseMemberList(readTestdata(t, "member-list.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 4 {
		t.Fatalf("got %d members", len(ms))
	}
	// 4825232010898929363 = 0x42f6aaf2e07976d3; the biggest one needs all 64 bits.
	if ms[0].ID != "42f6aaf2e07976d3" || ms[0].Name != "e0" || ms[0].Learner {
		t.Errorf("member 0 = %+v", ms[0])
	}
	if ms[1].ID != "5e281dd05a859b83" || !ms[1].Learner || ms[1].Started() {
		t.Errorf("learner = %+v", ms[1])
	}
	if ms[3].ID != "eedd716e067716b1" {
		t.Errorf("member 3 ID = %s, want eedd716e067716b1", ms[3].ID)
	}
	id, err := ParseHexID(ms[3].ID)
	if err != nil || id != 17212038068248712881 {
		t.Errorf("ParseHexID round trip = %d, %v", id, err)
	}
}

func TestParseMemberAddStatusHealth(t *testing.T) {
	m, err := ParseMemberAdd(readTestdata(t, "member-add.json"))
	if err != nil || m.ID != "5e281dd05a859b83" || !m.Learner || m.PeerURLs[0] != "http://127.0.9.4:2380" {
		t.Fatalf("member add = %+v, %v", m, err)
	}
	ss, err := ParseEndpointStatus(readTestdata(t, "endpoint-status.json"))
	if err != nil || len(ss) != 2 || ss[0].Leader != "eedd716e067716b1" || ss[0].RaftIndex != 16 || ss[1].MemberID != "eedd716e067716b1" {
		t.Fatalf("endpoint status = %+v, %v", ss, err)
	}
	hs, err := ParseEndpointHealth(readTestdata(t, "endpoint-health.json"))
	if err != nil || len(hs) != 3 || !hs[0].Healthy || hs[2].Healthy || hs[2].Error != "context deadline exceeded" {
		t.Fatalf("endpoint health = %+v, %v", hs, err)
	}
	if _, err := ParseEndpointStatus(nil); err == nil {
		t.Error("empty output parsed without error")
	}
}

func TestAssembleFromRealOutput(t *testing.T) {
	ms, _ := ParseMemberList(readTestdata(t, "member-list.json"))
	ss, _ := ParseEndpointStatus(readTestdata(t, "endpoint-status.json"))
	hs, _ := ParseEndpointHealth(readTestdata(t, "endpoint-health.json"))
	st := assemble("e0", ms, ss, hs)
	if st.Voters != 3 || st.Learners != 1 || st.HealthyVoters != 2 || st.Quorum != 2 || !st.HasQuorum {
		t.Fatalf("counts: %+v", st)
	}
	if l := st.Leader(); l == nil || l.Name != "e1" {
		t.Fatalf("leader = %+v", l)
	}
	if got, want := st.HealthStatus(), "degraded"; got != want {
		t.Errorf("health = %s, want %s", got, want)
	}
	if got, want := st.Summary(), "2/4 healthy (1 learner(s)), leader e1"; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
}

// A voter that endpoint health calls healthy but that endpoint status did not hear from is
// unhealthy, and the refusal says why.
func TestAssembleVoterWithoutStatus(t *testing.T) {
	ms := []Member{
		{ID: "a1", Name: "e0", ClientURLs: []string{"http://e0:2379"}, PeerURLs: []string{"http://e0:2380"}},
		{ID: "b2", Name: "e1", ClientURLs: []string{"http://e1:2379"}, PeerURLs: []string{"http://e1:2380"}},
		{ID: "c3", Name: "e2", ClientURLs: []string{"http://e2:2379"}, PeerURLs: []string{"http://e2:2380"}},
	}
	ss := []EndpointStatus{{MemberID: "a1", Leader: "a1"}, {MemberID: "c3", Leader: "a1"}}
	hs := []EndpointHealth{{Endpoint: "http://e0:2379", Healthy: true}, {Endpoint: "http://e1:2379", Healthy: true}, {Endpoint: "http://e2:2379", Healthy: true}}
	st := assemble("e0", ms, ss, hs)
	if st.HealthyVoters != 2 || st.Members[1].Healthy || st.Members[1].Error != "no answer to endpoint status" {
		t.Fatalf("assembled %+v", st.Members)
	}
	err := checkAllHealthy(st, nil, "scale to 4")
	if err == nil || !strings.Contains(err.Error(), "e1 (no answer to endpoint status)") {
		t.Fatalf("refusal = %v", err)
	}
}

func TestCtlMessage(t *testing.T) {
	stderr := []byte(`{"level":"warn","msg":"retrying of unary invoker failed"}
Error: etcdserver: can only promote a learner member which is in sync with leader
`)
	if got := ctlMessage(stderr); got != "etcdserver: "+errTextNotInSync {
		t.Errorf("ctlMessage = %q", got)
	}
	if got := ctlMessage([]byte("Failed to get the status of endpoint x (context deadline exceeded)\n")); !strings.Contains(got, "Failed to get") {
		t.Errorf("ctlMessage fallback = %q", got)
	}
}

func TestQuorumMath(t *testing.T) {
	for _, tc := range []struct {
		voters, healthy     int
		rmVoter, rmHealthy  bool
		quorum              int
		hasQuorum, afterRem bool
	}{
		{voters: 1, healthy: 1, rmVoter: true, rmHealthy: true, quorum: 1, hasQuorum: true, afterRem: false},
		{voters: 2, healthy: 2, rmVoter: true, rmHealthy: true, quorum: 2, hasQuorum: true, afterRem: true},
		{voters: 3, healthy: 3, rmVoter: true, rmHealthy: true, quorum: 2, hasQuorum: true, afterRem: true},
		{voters: 3, healthy: 2, rmVoter: true, rmHealthy: true, quorum: 2, hasQuorum: true, afterRem: false},
		{voters: 3, healthy: 2, rmVoter: true, rmHealthy: false, quorum: 2, hasQuorum: true, afterRem: true},
		{voters: 3, healthy: 1, rmVoter: true, rmHealthy: false, quorum: 2, hasQuorum: false, afterRem: false},
		{voters: 4, healthy: 3, rmVoter: true, rmHealthy: true, quorum: 3, hasQuorum: true, afterRem: true},
		{voters: 5, healthy: 3, rmVoter: true, rmHealthy: true, quorum: 3, hasQuorum: true, afterRem: false},
		{voters: 5, healthy: 3, rmVoter: true, rmHealthy: false, quorum: 3, hasQuorum: true, afterRem: true},
		// Removing a learner never changes the vote.
		{voters: 3, healthy: 2, rmVoter: false, rmHealthy: false, quorum: 2, hasQuorum: true, afterRem: true},
		{voters: 1, healthy: 1, rmVoter: false, rmHealthy: true, quorum: 1, hasQuorum: true, afterRem: true},
	} {
		if got := Quorum(tc.voters); got != tc.quorum {
			t.Errorf("Quorum(%d) = %d, want %d", tc.voters, got, tc.quorum)
		}
		if got := tc.healthy >= Quorum(tc.voters); got != tc.hasQuorum {
			t.Errorf("%d/%d healthy has quorum = %v", tc.healthy, tc.voters, got)
		}
		if got := QuorumAfterRemoval(tc.voters, tc.healthy, tc.rmVoter, tc.rmHealthy); got != tc.afterRem {
			t.Errorf("QuorumAfterRemoval(%d, %d, voter=%v, healthy=%v) = %v, want %v",
				tc.voters, tc.healthy, tc.rmVoter, tc.rmHealthy, got, tc.afterRem)
		}
	}
}

func TestHealthLearnersAndDown(t *testing.T) {
	f := newFakeEtcd(3, 1)
	f.members[2].healthy = false
	fx := newFixture(t, 3, f, nil)
	h, err := fx.eng.Health(context.Background(), fx.c)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "degraded" || h.Message != "2/3 healthy, leader etcd-1" {
		t.Fatalf("health = %+v", h)
	}
	f.members[1].healthy = false
	h, _ = fx.eng.Health(context.Background(), fx.c)
	if h.Status != "no-quorum" {
		t.Fatalf("two of three down: health = %+v", h)
	}
	for _, m := range []int{0, 1, 2} {
		f.members[m].healthy = true
	}
	h, _ = fx.eng.Health(context.Background(), fx.c)
	if h.Status != "healthy" || h.Message != "3/3 healthy, leader etcd-1" {
		t.Fatalf("all up: health = %+v", h)
	}
}

func TestPlanScaleGolden(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int
		target   int32
		setup    func(*fakeEtcd)
	}{
		{name: "scale-3-to-5", replicas: 3, target: 5},
		{name: "scale-3-to-1", replicas: 3, target: 1},
		{name: "scale-3-to-3", replicas: 3, target: 3},
		{name: "scale-back-to-3-leftover-learner", replicas: 3, target: 3, setup: func(f *fakeEtcd) {
			// An interrupted scale to 4 added etcd-3 as a learner; its pod never came.
			f.members = append(f.members, &fakeMember{id: 0x99, peer: "http://127.0.3.4:2380", learner: true})
		}},
		{name: "scale-resume-to-4-learner", replicas: 3, target: 4, setup: func(f *fakeEtcd) {
			f.members = append(f.members, &fakeMember{id: 0x99, peer: "http://127.0.3.4:2380", learner: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEtcd(tc.replicas, 0)
			if tc.setup != nil {
				tc.setup(f)
			}
			fx := newFixture(t, tc.replicas, f, nil)
			p, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &tc.target})
			if err != nil {
				t.Fatal(err)
			}
			assertGolden(t, tc.name+".txt", planText(t, p))
			if w := fakecluster.Writes(fx.client); len(w) != 0 {
				t.Errorf("planning wrote %v", w)
			}
			if m := f.mutations(); len(m) != 0 {
				t.Errorf("planning changed membership: %v", m)
			}
		})
	}
}

func TestPlanScaleRefusals(t *testing.T) {
	zero, two, five := int32(0), int32(2), int32(5)
	for _, tc := range []struct {
		name  string
		req   ops.ScaleRequest
		setup func(*fakeEtcd)
		code  int
		want  string
	}{
		{name: "zero replicas", req: ops.ScaleRequest{Replicas: &zero}, code: ops.ExitUsage, want: "at least 1"},
		{name: "no replicas", req: ops.ScaleRequest{}, code: ops.ExitUsage, want: "--replicas"},
		{name: "masters", req: ops.ScaleRequest{Replicas: &two, Masters: &two}, code: ops.ExitUsage, want: "--replicas N only"},
		{name: "down with a remaining member down", req: ops.ScaleRequest{Replicas: &two},
			setup: func(f *fakeEtcd) { f.members[1].healthy = false }, code: ops.ExitPrecondition, want: "etcd member etcd-1 is not healthy"},
		{name: "up with a member down", req: ops.ScaleRequest{Replicas: &five},
			setup: func(f *fakeEtcd) { f.members[2].healthy = false }, code: ops.ExitPrecondition, want: "etcd member etcd-2"},
		{name: "no quorum", req: ops.ScaleRequest{Replicas: &two},
			setup: func(f *fakeEtcd) { f.members[1].healthy, f.members[2].healthy = false, false }, code: ops.ExitPrecondition, want: "no quorum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEtcd(3, 0)
			if tc.setup != nil {
				tc.setup(f)
			}
			fx := newFixture(t, 3, f, nil)
			_, err := fx.eng.PlanScale(context.Background(), fx.c, tc.req)
			if ops.ExitCode(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v (exit %d), want exit %d with %q", err, ops.ExitCode(err), tc.code, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("refusal is not one line: %q", err)
			}
			if w := fakecluster.Writes(fx.client); len(w) != 0 {
				t.Errorf("refused request wrote %v", w)
			}
			if m := f.mutations(); len(m) != 0 {
				t.Errorf("refused request changed membership: %v", m)
			}
		})
	}
}

// TestScaleDownRemovingTheDownMember: the member to remove may be down,
// the rest must be healthy.
func TestScaleDownRemovingTheDownMember(t *testing.T) {
	f := newFakeEtcd(3, 0)
	f.members[2].healthy = false
	fx := newFixture(t, 3, f, nil)
	two := int32(2)
	if _, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &two}); err != nil {
		t.Fatalf("removing the down member: %v", err)
	}
}

func TestCleanupStepRemovesLeftoverLearner(t *testing.T) {
	f := newFakeEtcd(3, 0)
	f.members = append(f.members, &fakeMember{id: 0x99, peer: "http://127.0.3.4:2380", learner: true})
	fx := newFixture(t, 3, f, nil)
	three := int32(3)
	p, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &three})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&ops.Executor{LockID: "test"}).Run(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
	if got := f.mutations(); len(got) != 1 || !strings.HasSuffix(got[0], "member remove 99") {
		t.Fatalf("mutations = %v, want one removal of learner 99", got)
	}
	// Idempotent: a second run has nothing to do.
	p, err = fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &three})
	if err != nil || len(p.Steps) != 0 {
		t.Fatalf("second plan: %v steps, %v", len(p.Steps), err)
	}
}

func TestPromoteRetriesWhileNotInSync(t *testing.T) {
	f := newFakeEtcd(3, 0)
	f.members = append(f.members, &fakeMember{id: 0x99, name: "etcd-3", peer: "http://127.0.3.4:2380",
		client: "http://127.0.3.4:2379", learner: true, healthy: true})
	f.notReady = 2
	fx := newFixture(t, 4, f, nil)
	fx.eng.Options.PollInterval = 1 // nanosecond: the fake answers at once
	s, _, err := fx.eng.prepare(context.Background(), fx.c)
	if err != nil {
		t.Fatal(err)
	}
	step := fx.eng.promoteStep(s, "promote/etcd-3", 3, "http://127.0.3.4:2380")
	p := &ops.Plan{Operation: "scale", Cluster: "etcd", Namespace: testNS, Steps: []*ops.Step{step}}
	rec := &ops.Recorder{}
	if err := (&ops.Executor{LockID: "test", Sink: rec}).Run(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
	if got := f.mutations(); len(got) != 3 {
		t.Fatalf("promote calls = %v, want 2 refused and 1 accepted", got)
	}
	// While etcd refuses the promotion, the step is blocked on the learner, named by pod, peer
	// URL and the member ID etcd gave it (what etcdctl member promote takes).
	var on []string
	for _, e := range rec.Events() {
		if e.Type == ops.EventStepWaiting && e.Blocked != nil && strings.Contains(e.Reason, "not yet in sync") {
			on = append(on, e.Blocked.On)
		}
	}
	if want := "etcd learner etcd-3 (peer URL http://127.0.3.4:2380, member ID 99)"; len(on) == 0 || on[0] != want {
		t.Fatalf("blocked on %q, want %q", on, want)
	}
	if f.member("etcd-3").learner {
		t.Fatal("etcd-3 still a learner")
	}
}

// TestPromoteWaitsForLearnerToCatchUp: a learner far behind the leader is not
// promoted (no member promote call at all) until its raft index is within
// MaxLag of the leader's; then the step also waits for the pod to be Ready,
// which a /readyz probe grants only to voters.
func TestPromoteWaitsForLearnerToCatchUp(t *testing.T) {
	f := newFakeEtcd(3, 0)
	for _, m := range f.members {
		m.index = 5000
	}
	f.members = append(f.members, &fakeMember{id: 0x99, name: "etcd-3", peer: "http://127.0.3.4:2380",
		client: "http://127.0.3.4:2379", learner: true, healthy: true, index: 10})
	f.catchUp = 700
	fx := newFixture(t, 4, f, nil)
	fx.eng.Options.PollInterval = 1
	// The learner's pod runs but is not Ready (a learner fails /readyz).
	pod, err := fx.client.CoreV1().Pods(testNS).Get(context.Background(), "etcd-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if _, err := fx.client.CoreV1().Pods(testNS).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s, _, err := fx.eng.prepare(context.Background(), fx.c)
	if err != nil {
		t.Fatal(err)
	}
	step := fx.eng.promoteStep(s, "promote/etcd-3", 3, "http://127.0.3.4:2380")
	p := &ops.Plan{Operation: "scale", Cluster: "etcd", Namespace: testNS, Steps: []*ops.Step{step}}
	done := make(chan error, 1)
	waitingReady := make(chan struct{}) // the step reported that it waits for Ready
	var once sync.Once
	sink := ops.SinkFunc(func(e ops.Event) {
		if e.Type == ops.EventStepWaiting && strings.Contains(e.Reason, "not Ready yet") {
			once.Do(func() { close(waitingReady) })
		}
	})
	go func() { done <- (&ops.Executor{LockID: "test", Sink: sink}).Run(testCtx(t), p) }()

	// Promoted once caught up, but the step is still waiting for Ready.
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		at, promoted := f.promotedAt["etcd-3"]
		f.mu.Unlock()
		if promoted {
			if at+fx.eng.maxLag() < 5000 {
				t.Fatalf("promoted at raft index %d, leader at 5000 (max lag %d)", at, fx.eng.maxLag())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("learner never promoted")
		}
		time.Sleep(time.Millisecond)
	}
	// The step says it waits for the pod to be Ready before it may end (an event, not a
	// window of time in which it did not end).
	select {
	case err := <-done:
		t.Fatalf("step finished (%v) before the pod was Ready", err)
	case <-waitingReady:
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := fx.client.CoreV1().Pods(testNS).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("step did not finish after the pod became Ready")
	}
}

func TestCaughtUp(t *testing.T) {
	tests := []struct {
		name            string
		learner, leader *Member
		ok              bool
	}{
		{"level", &Member{RaftIndex: 500}, &Member{RaftIndex: 500}, true},
		{"within lag", &Member{RaftIndex: 400}, &Member{RaftIndex: 500}, true},
		{"behind", &Member{RaftIndex: 399}, &Member{RaftIndex: 500}, false},
		{"unknown learner index", &Member{}, &Member{RaftIndex: 5}, false},
		{"no leader", &Member{RaftIndex: 5}, nil, false},
	}
	for _, tt := range tests {
		if ok, why := CaughtUp(tt.learner, tt.leader, 100); ok != tt.ok {
			t.Errorf("%s: CaughtUp = %v (%s), want %v", tt.name, ok, why, tt.ok)
		}
	}
}

func TestRestartLeaderLast(t *testing.T) {
	f := newFakeEtcd(3, 0)
	fx := newFixture(t, 3, f, nil)
	p, err := fx.eng.PlanRestart(context.Background(), fx.c, ops.RestartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "restart-leader-etcd-0.txt", planText(t, p))
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	if want := []string{"restart/etcd-1", "restart/etcd-2", "restart/etcd-0"}; !slices.Equal(ids, want) {
		t.Fatalf("order = %v, want %v", ids, want)
	}
}

func TestPlanRepairGolden(t *testing.T) {
	f := newFakeEtcd(3, 0)
	f.members[1].healthy = false
	fx := newFixture(t, 3, f, nil)
	p, err := fx.eng.PlanRepair(context.Background(), fx.c, "etcd-1")
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "repair-etcd-1.txt", planText(t, p))
	if _, err := fx.eng.PlanRepair(context.Background(), fx.c, "etcd-7"); ops.ExitCode(err) != ops.ExitUsage {
		t.Errorf("repair of a pod beyond replicas: %v", err)
	}
	f.members[2].healthy = false
	if _, err := fx.eng.PlanRepair(context.Background(), fx.c, "etcd-1"); ops.ExitCode(err) != ops.ExitPrecondition {
		t.Errorf("repair with another member down: %v", err)
	}
}

func TestPeerURLTemplateSources(t *testing.T) {
	ctx := context.Background()
	// Members advertising DNS names: derived by substituting the pod name.
	f := newFakeEtcd(3, 0)
	for _, m := range f.members {
		m.peer = "https://" + m.name + ".etcd-headless.db.svc.cluster.local:2380"
	}
	fx := newFixture(t, 3, f, func(_ *corev1.Container, ann map[string]string) { delete(ann, AnnotationPeerURLTemplate) })
	s, _, err := fx.eng.prepare(ctx, fx.c)
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := s.peerURL(4); u != "https://etcd-4.etcd-headless.db.svc.cluster.local:2380" || s.tmplSource != "existing members" {
		t.Errorf("derived URL = %s (from %s)", u, s.tmplSource)
	}
	// Option beats everything.
	fx.eng.Options.PeerURLTemplate = "http://{{.Pod}}.x:2380"
	s, _, _ = fx.eng.prepare(ctx, fx.c)
	if u, _ := s.peerURL(1); u != "http://etcd-1.x:2380" || s.tmplSource != "option" {
		t.Errorf("option URL = %s (from %s)", u, s.tmplSource)
	}
	// Bitnami pod spec, members not started yet (no names): from the env.
	c := &corev1.Container{Env: []corev1.EnvVar{
		{Name: "MY_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "ETCD_INITIAL_ADVERTISE_PEER_URLS", Value: "http://$(MY_POD_NAME).foo-etcd-headless.db.svc.cluster.local:2380"},
	}}
	if got, want := deriveFromSpec(c), "http://{{.Pod}}.foo-etcd-headless.db.svc.cluster.local:2380"; got != want {
		t.Errorf("deriveFromSpec = %q, want %q", got, want)
	}
	if _, err := ParsePeerURLTemplate("http://{{.Nope"); ops.ExitCode(err) != ops.ExitUsage {
		t.Errorf("bad template: %v", err)
	}
}

func TestRestartRefusedWithoutQuorumAfter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int
		down     int // member down before the restart (-1: none)
	}{
		{name: "single member", replicas: 1, down: -1},
		{name: "another member down", replicas: 3, down: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEtcd(tc.replicas, 0)
			if tc.down >= 0 {
				f.members[tc.down].healthy = false
			}
			fx := newFixture(t, tc.replicas, f, nil)
			p, err := fx.eng.PlanRestart(context.Background(), fx.c, ops.RestartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			err = (&ops.Executor{LockID: "test"}).Run(testCtx(t), p)
			if ops.ExitCode(err) != ops.ExitPrecondition {
				t.Fatalf("got %v (exit %d), want a precondition refusal", err, ops.ExitCode(err))
			}
			for _, w := range fakecluster.Writes(fx.client) {
				if strings.HasPrefix(w, "delete") {
					t.Errorf("refused restart deleted something: %v", fakecluster.Writes(fx.client))
				}
			}
		})
	}
}

// TestScaleDeletesLeftoverClaims: a run killed between a member's removal
// and its PVC deletion leaves data-etcd-N behind with no pod and no
// member; the next plan must find it from live state and delete it, for a
// repeated shrink as well as before a scale-up that would reuse it.
func TestScaleDeletesLeftoverClaims(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int
		target   int32
		claims   []string
		want     []string // pvc step IDs
	}{
		{name: "re-run of 5 to 3 after the kill", replicas: 3, target: 3, claims: []string{"data-etcd-3", "data-etcd-4"},
			want: []string{"pvc/etcd-3", "pvc/etcd-4"}},
		{name: "scale up over old data", replicas: 3, target: 4, claims: []string{"data-etcd-3"},
			want: []string{"pvc/etcd-3"}},
		{name: "other StatefulSets' claims untouched", replicas: 3, target: 3, claims: []string{"data-etcdx-4", "logs-etcd-4", "data-etcd-04"}},
		{name: "nothing left", replicas: 3, target: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEtcd(tc.replicas, 0)
			fx := newFixture(t, tc.replicas, f, nil)
			for _, n := range tc.claims {
				pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: testNS}}
				if _, err := fx.client.CoreV1().PersistentVolumeClaims(testNS).Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			fx.client.ClearActions()
			p, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &tc.target})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range p.Steps {
				if strings.HasPrefix(s.ID, "pvc/") {
					got = append(got, s.ID)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("PVC steps = %v, want %v", got, tc.want)
			}
			if len(tc.want) > 0 && p.Steps[0].ID != tc.want[0] {
				t.Errorf("first step %s, want the PVC deletion before anything else", p.Steps[0].ID)
			}
			if w := fakecluster.Writes(fx.client); len(w) != 0 {
				t.Errorf("planning wrote %v", w)
			}
			if tc.target > int32(tc.replicas) {
				return // the scale-up steps need a StatefulSet controller
			}
			if err := (&ops.Executor{LockID: "test"}).Run(testCtx(t), p); err != nil {
				t.Fatal(err)
			}
			left, err := fx.client.CoreV1().PersistentVolumeClaims(testNS).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, pvc := range left.Items {
				if slices.Contains(tc.want, "pvc/"+strings.TrimPrefix(pvc.Name, "data-")) {
					t.Errorf("PVC %s still exists", pvc.Name)
				}
			}
			if p, err = fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &tc.target}); err != nil || len(p.Steps) != 0 {
				t.Fatalf("second plan: %d steps, %v", len(p.Steps), err)
			}
		})
	}
}

// A rolling restart with a member down is refused before the lock (the
// preflight), naming the member and how to repair it; a resumed run only
// needs quorum, and no quorum is refused even then.
func TestRestartPreflight(t *testing.T) {
	for _, tc := range []struct {
		name     string
		down     []int
		resuming bool
		want     string // "" = allowed
	}{
		{name: "all healthy"},
		{name: "one down", down: []int{2}, want: "etcd member etcd-2 is not healthy"},
		{name: "one down, resuming", down: []int{2}, resuming: true},
		{name: "two down", down: []int{1, 2}, want: "no quorum"},
		{name: "two down, resuming", down: []int{1, 2}, resuming: true, want: "no quorum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEtcd(3, 0)
			for _, o := range tc.down {
				f.members[o].healthy = false
			}
			fx := newFixture(t, 3, f, nil)
			p, err := fx.eng.PlanRestart(context.Background(), fx.c, ops.RestartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Preflight == nil {
				t.Fatal("restart plan has no preflight")
			}
			err = p.Preflight(context.Background(), ops.PreflightState{Resuming: tc.resuming})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || ops.ExitCode(err) != ops.ExitPrecondition):
				t.Fatalf("got %v (exit %d), want exit %d with %q", err, ops.ExitCode(err), ops.ExitPrecondition, tc.want)
			}
			if err != nil && tc.want == "etcd member etcd-2 is not healthy" && !strings.Contains(err.Error(), "kubectl dbops replace etcd etcd-2") {
				t.Errorf("refusal does not say how to repair: %v", err)
			}
			if w := fakecluster.Writes(fx.client); len(w) != 0 {
				t.Errorf("preflight wrote %v", w)
			}
			if m := f.mutations(); len(m) != 0 {
				t.Errorf("preflight changed membership: %v", m)
			}
		})
	}
}

// The leader restarts last in every mode, and hands leadership to a caught-up member outside
// its own step (move-leader, run in the leader's pod) before its pod goes: the leader changes
// exactly once.
func TestRestartMovesLeadershipOnce(t *testing.T) {
	for _, mode := range []string{ops.ModePod, ops.ModeZone} {
		t.Run(mode, func(t *testing.T) {
			f := newFakeEtcd(3, 1)
			f.members[2].index = 120 // furthest along: the transferee
			fx := newFixture(t, 3, f, nil)
			for i := range fx.c.Groups[0].Pods {
				fx.c.Groups[0].Pods[i].Zone = fmt.Sprintf("zone-%c", 'a'+i)
			}
			fakecluster.Start(t, fx.client, testNS)
			p, err := fx.eng.PlanRestart(context.Background(), fx.c, ops.RestartOptions{Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			if last := p.Steps[len(p.Steps)-1]; !slices.Contains(last.Pods, "etcd-1") {
				t.Fatalf("last step %s (pods %v) does not hold the leader etcd-1", last.ID, last.Pods)
			}
			fx.client.ClearActions()
			if err := (&ops.Executor{LockID: "test"}).Run(testCtx(t), p); err != nil {
				t.Fatal(err)
			}
			// The gates poll etcd's status many times; its pods come from the run's one pod
			// informer (one list, one watch), never a list or get of their own.
			if got := fakecluster.PodReads(fx.client); got != "list 1, get 0" {
				t.Errorf("pod reads during the run: %s, want list 1, get 0 (the run's informer)", got)
			}
			if got := f.mutations(); !slices.Equal(got, []string{fmt.Sprintf("etcd-1: move-leader %x", 0xa2)}) {
				t.Fatalf("mutations = %v, want one move-leader to etcd-2 run in etcd-1", got)
			}
			if f.leader != 0xa2 {
				t.Errorf("leader = %x, want etcd-2 (a2)", f.leader)
			}
		})
	}
}

// TestRecreateEventOnNewIncarnation: member repair's recreate step (what `replace` runs for
// etcd) records one DbopsEtcdReplace event, on the pod's new incarnation where `kubectl
// describe pod` finds it (by the live UID), naming the old pod and PVC UIDs; none on the
// deleted incarnation.
func TestRecreateEventOnNewIncarnation(t *testing.T) {
	fx := newFixture(t, 3, newFakeEtcd(3, 0), nil)
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-etcd-1", Namespace: testNS, UID: "pvc-uid-1"}}
	if _, err := fx.client.CoreV1().PersistentVolumeClaims(testNS).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fakecluster.Start(t, fx.client, testNS)
	s, err := fx.eng.newSite(fx.c)
	if err != nil {
		t.Fatal(err)
	}
	p := ops.NewPlan("repair", fx.c, ops.EngineEtcd, "--member etcd-1")
	p.Steps = []*ops.Step{fx.eng.recreateStep(s, 1)}
	ex := &ops.Executor{LockID: "test", Auditor: &ops.KubeAuditor{Client: fx.client, Clock: ops.RealClock{}, Instance: "test"}}
	if err := ex.Run(ctx, p); err != nil {
		t.Fatal(err)
	}
	live, err := fx.client.CoreV1().Pods(testNS).Get(ctx, "etcd-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if live.UID == "uid-1" {
		t.Fatalf("etcd-1 was not recreated (uid %s)", live.UID)
	}
	list, err := fx.client.CoreV1().Events(testNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []corev1.Event
	for _, e := range list.Items {
		if e.Reason == "DbopsEtcdReplace" {
			got = append(got, e)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d DbopsEtcdReplace events, want 1: %+v", len(got), got)
	}
	e := got[0]
	if e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.Name != "etcd-1" || e.InvolvedObject.UID != live.UID ||
		!strings.Contains(e.Message, "old uid uid-1") || !strings.Contains(e.Message, "PVC data-etcd-1 (old uid pvc-uid-1)") ||
		!strings.Contains(e.Message, "lock id test") {
		t.Errorf("event on %s %s uid %s: %q; want on etcd-1's live incarnation %s, naming the old pod and PVC uids and the lock id",
			e.InvolvedObject.Kind, e.InvolvedObject.Name, e.InvolvedObject.UID, e.Message, live.UID)
	}
}

// A restarted member's step ends only once it is caught up with the leader, and the done
// event reports how long that took after its pod was Ready (stepTimes catchUpNs).
func TestRestartWaitsForCatchUpAndReportsIt(t *testing.T) {
	f := newFakeEtcd(3, 0)
	for _, m := range f.members {
		m.index = 5000 // far ahead of a lagging answer's index 0
	}
	fx := newFixture(t, 3, f, nil)
	fakecluster.Start(t, fx.client, testNS)
	p, err := fx.eng.PlanRestart(context.Background(), fx.c, ops.RestartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.lagReads = map[string]int{"etcd-1": 3}
	f.mu.Unlock()
	rec := &ops.Recorder{}
	if err := (&ops.Executor{LockID: "test", Sink: rec}).Run(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	left := f.lagReads["etcd-1"]
	f.mu.Unlock()
	if left != 0 {
		t.Errorf("etcd-1 still had %d lagging answers to give: the gate did not wait for its catch-up", left)
	}
	waited := false
	var done ops.Event
	for _, e := range rec.Events() {
		if e.Type == ops.EventStepWaiting && strings.Contains(e.Reason, "member etcd-1 catching up") {
			waited = true
			// What the step is blocked on names the member behind, for `status` elsewhere.
			if b := e.Blocked; b == nil || b.Kind != ops.BlockedMember || b.On != "etcd member etcd-1" || !strings.Contains(b.ToUnblock, "kubectl logs -n "+testNS+" etcd-1") {
				t.Errorf("blocked on %+v, want etcd member etcd-1", b)
			}
			// The entries it is behind feed the step's ETA (a rate once they shrink).
			if e.ETA == nil || e.ETA.Step == nil || !strings.Contains(e.ETA.Step.String(), "raft entries left") {
				t.Errorf("catching-up event's ETA %+v, want the step's part in raft entries", e.ETA)
			}
		}
		if e.Type == ops.EventDone {
			done = e
		}
	}
	if !waited {
		t.Error("no waiting event for etcd-1 catching up")
	}
	var got []string
	for _, st := range done.StepTimes {
		if st.CatchUp <= 0 || st.Gate < st.CatchUp {
			t.Errorf("step %s: catch-up %s, gate %s; want a positive catch-up within the gate time", st.Step, st.CatchUp, st.Gate)
		}
		got = append(got, st.Step)
	}
	if want := []string{"restart/etcd-1", "restart/etcd-2", "restart/etcd-0"}; !slices.Equal(got, want) {
		t.Errorf("stepTimes for %v, want %v", got, want)
	}
}
