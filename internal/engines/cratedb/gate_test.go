package cratedb_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/cratedb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/fakes/cratedbtest"
)

const sqlBusy = `SELECT count(*), sum(recovery['size']['used']), sum(recovery['size']['recovered']) FROM sys.shards WHERE routing_state IN ('INITIALIZING', 'RELOCATING')`

// The restart gate waits for the evidence, not for the first green reading: shards still
// INITIALIZING or RELOCATING (a green cluster can have them), or a reading that breaks the
// stability window, keep the next pod waiting. The crate-operator's rule (GreenInARow) does
// not read sys.shards at all.
func TestRestartEvidenceGate(t *testing.T) {
	for _, tc := range []struct {
		name        string
		greenInARow bool
		stableFor   time.Duration
		busy        []int64 // sys.shards readings from the first pod's gate on
		severity    []any   // sys.health readings from the first pod's gate on
		// wantBusyReads is the fewest sys.shards reads the first pod's gate makes.
		wantBusyReads int
	}{
		{name: "waits until no shard recovers or relocates", stableFor: time.Millisecond, busy: []int64{3, 2, 1}, wantBusyReads: 4},
		{name: "green while relocating is not enough", stableFor: time.Millisecond, busy: []int64{2, 2}, severity: []any{int32(1), int32(1), int32(1)}, wantBusyReads: 3},
		{name: "a relapse inside the window starts it again", stableFor: 30 * time.Millisecond, busy: []int64{0, 2, 0}, wantBusyReads: 4},
		{name: "yellow keeps it waiting", stableFor: time.Millisecond, severity: []any{int32(2), int32(2)}, wantBusyReads: 3},
		{name: "crate-operator rule reads no sys.shards", greenInARow: true, busy: []int64{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3})
			fakecluster.Start(t, client, "prod")
			e, err := cratedb.New(ops.EngineDeps{Client: client, Exec: db.Execer()}, cratedb.Config{Connector: db.Connector(),
				HealthChecks: 2, HealthInterval: time.Millisecond, PollInterval: time.Millisecond, GreenInARow: tc.greenInARow, StableFor: tc.stableFor})
			if err != nil {
				t.Fatal(err)
			}
			p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Groups: []string{"master"}})
			if err != nil {
				t.Fatal(err)
			}
			db.Do(func(d *cratedbtest.DB) { d.BusyScript, d.SeverityScript = tc.busy, tc.severity })
			if err := (&ops.Executor{Locker: &journalLock{}, Timeout: time.Minute}).Run(context.Background(), p); err != nil {
				t.Fatalf("restart: %v", err)
			}
			// The first pod's gate: from its RESET to the second pod's SET ... 'primaries'.
			reads, total, phase := 0, 0, 0
			for _, call := range db.Calls() {
				switch {
				case call.SQL == `RESET GLOBAL "cluster.routing.allocation.enable"` && phase == 0:
					phase = 1
				case call.SQL == `SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = 'primaries'` && phase == 1:
					phase = 2
				case call.SQL == sqlBusy:
					total++
					if phase == 1 {
						reads++
					}
				}
			}
			if tc.greenInARow {
				if total != 0 {
					t.Errorf("the crate-operator rule read sys.shards %d times, want none", total)
				}
				return
			}
			if reads < tc.wantBusyReads {
				t.Errorf("the first pod's gate read sys.shards %d times, want at least %d (it went on before the evidence held)", reads, tc.wantBusyReads)
			}
			db.Do(func(d *cratedbtest.DB) {
				if len(d.BusyScript) > 0 || len(d.SeverityScript) > 0 {
					t.Errorf("readings left unread: busy %v, severity %v", d.BusyScript, d.SeverityScript)
				}
			})
		})
	}
}

// countingLock is journalLock counting journal writes, and what each carried.
type countingLock struct {
	journalLock
	db    *cratedbtest.DB
	saves []savedJournal
}

type savedJournal struct {
	calls int // statements the database had received when it was written
	marks map[string]string
}

func (l *countingLock) Acquire(context.Context, string) (ops.HeldLock, error) { return l, nil }

func (l *countingLock) SaveJournal(ctx context.Context, j *ops.Journal) error {
	marks := map[string]string{}
	for k, v := range j.Data {
		if strings.HasPrefix(k, "cratedb.gate/") {
			marks[strings.TrimPrefix(k, "cratedb.gate/")] = v
		}
	}
	l.saves = append(l.saves, savedJournal{calls: len(l.db.Calls()), marks: marks})
	return l.journalLock.SaveJournal(ctx, j)
}

// The gate's journal mark is durable before each pod's allocation change, without a journal
// write of its own: it rides on the write that carries the step before's "done".
func TestRestartGateMarkWithoutOwnWrite(t *testing.T) {
	client, c, db := setup(t, fakecluster.Group{Name: "master", Role: "master", Replicas: 3})
	fakecluster.Start(t, client, "prod")
	e := engine(client, db, nil)
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Groups: []string{"master"}})
	if err != nil {
		t.Fatal(err)
	}
	lk := &countingLock{db: db}
	if err := (&ops.Executor{Locker: lk, Timeout: time.Minute}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	k := 0
	for i, call := range db.Calls() {
		if call.SQL != `SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = 'primaries'` {
			continue
		}
		pod := p.Steps[k].Pods[0]
		k++
		var last *savedJournal
		for j := range lk.saves {
			if lk.saves[j].calls <= i {
				last = &lk.saves[j]
			}
		}
		if last == nil || last.marks[pod] != "pending" {
			t.Errorf("allocation held for %s before its gate mark was written (last write: %+v)", pod, last)
		}
	}
	// The run's first writes carry step 1's start, each step's "done" the next one's, then the
	// final write: none for the marks (they cost one more write per pod).
	if got, want := len(lk.saves), len(p.Steps)+3; got > want {
		t.Errorf("%d journal writes for %d steps, want at most %d (a mark written on its own?): %+v", got, len(p.Steps), want, lk.saves)
	}
}
