package etcd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// catchUpClock is the run's clock in TestPromoteETAFromCatchUpRate: one second per 700 raft
// entries the learner has gained, so it catches up at 700 entries/s whatever the polling.
type catchUpClock struct {
	f     *fakeEtcd
	start uint64
	t0    time.Time
}

func (c *catchUpClock) Now() time.Time {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	gained := c.f.member("etcd-3").index - c.start
	return c.t0.Add(time.Duration(gained) * time.Second / 700)
}

// A learner catching up feeds the entries it is behind (beyond the lag allowed) to the promote
// step's ETA: its waiting events carry the step's part as those entries over the rate it
// gains them at, unknown at the first reading.
func TestPromoteETAFromCatchUpRate(t *testing.T) {
	f := newFakeEtcd(3, 0)
	for _, m := range f.members {
		m.index = 5000
	}
	f.members = append(f.members, &fakeMember{id: 0x99, name: "etcd-3", peer: "http://127.0.3.4:2380",
		client: "http://127.0.3.4:2379", learner: true, healthy: true, index: 10})
	f.catchUp = 700
	fx := newFixture(t, 4, f, nil)
	fx.eng.Options.PollInterval = 1
	s, _, err := fx.eng.prepare(context.Background(), fx.c)
	if err != nil {
		t.Fatal(err)
	}
	step := fx.eng.promoteStep(s, "promote/etcd-3", 3, "http://127.0.3.4:2380")
	p := &ops.Plan{Operation: "scale", Cluster: "etcd", Namespace: testNS, Steps: []*ops.Step{step}}
	rec := &ops.Recorder{}
	clock := &catchUpClock{f: f, start: 10, t0: time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)}
	if err := (&ops.Executor{LockID: "test", Sink: rec, Clock: clock}).Run(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
	var got []string
	ranged := 0
	for _, ev := range rec.Events() {
		if ev.Type != ops.EventStepWaiting || !strings.Contains(ev.Reason, "catching up with the leader (raft index") {
			continue
		}
		if ev.ETA == nil || ev.ETA.Step == nil {
			t.Fatalf("a catching-up learner's waiting event without the step's ETA: %+v", ev)
		}
		st := ev.ETA.Step
		got = append(got, st.String())
		if st.Unknown != "" {
			continue
		}
		var idx, leader uint64
		if _, err := fmt.Sscanf(ev.Reason[strings.Index(ev.Reason, "raft index"):], "raft index %d, leader %d", &idx, &leader); err != nil {
			t.Fatal(err)
		}
		left := leader - idx - fx.eng.maxLag()
		if want := time.Duration(left) * time.Second / 700; st.Low > want || st.High < want {
			t.Errorf("%d entries left at 700/s: the step's ETA is %s, want it to hold %s", left, st.Range(), want)
		}
		ranged++
	}
	t.Logf("step ETAs %q", got)
	if len(got) == 0 || !strings.Contains(got[0], "raft entries left, one reading so far") || ranged == 0 {
		t.Errorf("the catch-up's step ETAs: %q", got)
	}
}
