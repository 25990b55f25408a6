package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func TestAcquire(t *testing.T) {
	bobJournal := &ops.Journal{Operation: "restart", Args: "--rolling", Holder: bob, State: ops.JournalInterrupted,
		Started: t0.Add(-time.Hour), Updated: t0.Add(-50 * time.Minute), Steps: 3, Done: []string{"pod-0"}}
	denyMe := DenyEntry{ID: me, By: carol, At: t0.Add(-time.Hour), Reason: "runaway script"}
	denyBob := DenyEntry{ID: bob, By: carol, At: t0.Add(-time.Hour), Reason: "left the company"}

	tests := []struct {
		name  string
		lease *coordinationv1.Lease // nil: no lease yet
		// want is the action, or "" when refused.
		want string
		// errHas are substrings of the refusal message.
		errHas []string
		// wantTransitions checks the holder change counter when set.
		wantTransitions *int32
		wantJournal     *ops.Journal
	}{
		{name: "no lease", want: ops.LockAcquired},
		{name: "lease without holder", lease: testLease(withJournal(bobJournal)),
			want: ops.LockAcquired, wantJournal: bobJournal},
		{name: "held by me", lease: testLease(heldBy(me, "lock", t0.Add(-time.Minute), 600)),
			want: ops.LockExtended},
		{name: "held by me but expired", lease: testLease(heldBy(me, "lock", t0.Add(-time.Hour), 600)),
			want: ops.LockExtended},
		{name: "held by another", lease: testLease(heldBy(bob, "restart --rolling", t0.Add(-time.Minute), 600)),
			errHas: []string{"cluster prod/mycrate is locked by " + bob + " (restart --rolling) until 2026-11-22T10:09:00Z",
				"wait, ask them to release it, or take it over (stopping what it does) with: kubectl dbops lock acquire mycrate -n prod --force"}},
		{name: "held by another with a reason",
			lease:  testLease(heldBy(bob, "lock", t0.Add(-time.Minute), 600), withAnnotation(AnnotationReason, "upgrade window")),
			errHas: []string{"locked by " + bob + " (lock; reason: upgrade window)"}},
		{name: "held by another, expires exactly now", lease: testLease(heldBy(bob, "scale", t0.Add(-10*time.Minute), 600)),
			errHas: []string{"until 2026-11-22T10:00:00Z"}},
		{name: "held by another, expired a second ago",
			lease: testLease(heldBy(bob, "scale", t0.Add(-10*time.Minute-time.Second), 600), withJournal(bobJournal)),
			want:  ops.LockTakeover, wantTransitions: ptr(int32(1)), wantJournal: bobJournal},
		{name: "holder's own short duration counts",
			lease: testLease(heldBy(bob, "scale", t0.Add(-2*time.Minute), 60)),
			want:  ops.LockTakeover},
		{name: "holder's own long duration counts",
			lease:  testLease(heldBy(bob, "scale", t0.Add(-20*time.Minute), 3600)),
			errHas: []string{"until 2026-11-22T10:40:00Z"}},
		{name: "held by a denied ID", lease: testLease(heldBy(bob, "restart", t0.Add(-time.Minute), 600), withDenied(denyBob)),
			want: ops.LockTakeover, wantTransitions: ptr(int32(1))},
		{name: "me denied, lock free", lease: testLease(withDenied(denyMe)),
			errHas: []string{"lock ID " + me + " is on the deny list of cluster prod/mycrate",
				"denied by " + carol + " at 2026-11-22T09:00:00Z: runaway script"}},
		{name: "me denied while holding", lease: testLease(heldBy(me, "restart", t0.Add(-time.Minute), 600), withDenied(denyMe)),
			errHas: []string{"is on the deny list", "runaway script"}},
		{name: "me denied, lock expired", lease: testLease(heldBy(bob, "restart", t0.Add(-time.Hour), 600), withDenied(denyMe)),
			errHas: []string{"is on the deny list"}},
		{name: "damaged deny list", lease: testLease(withAnnotation(AnnotationDenyList, "[{")),
			errHas: []string{"annotation dbops.io/deny-list on lease prod/dbops-mycrate is not valid"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f *fixture
			if tc.lease != nil {
				f = newFixture(t, tc.lease)
			} else {
				f = newFixture(t)
			}
			var before *coordinationv1.Lease
			if f.exists() {
				before = f.stored()
			}
			held, err := f.manager(me).AcquireWithReason(context.Background(), "restart --rolling", "planned")

			if tc.want == "" {
				if err == nil {
					t.Fatalf("acquired (%+v), want refusal", held.Info())
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				if strings.Contains(tc.name, "damaged") {
					if errors.Is(err, ops.ErrLocked) {
						t.Errorf("damaged annotation reported as locked: %v", err)
					}
				} else if !errors.Is(err, ops.ErrLocked) || ops.ExitCode(err) != ops.ExitLocked {
					t.Errorf("error %v is not ErrLocked (exit %d)", err, ops.ExitCode(err))
				}
				f.assertNoWrites()
				return
			}

			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			info := held.Info()
			wantInfo := ops.LockInfo{Action: tc.want, Holder: me, Operation: "restart --rolling", Expires: t0.Add(10 * time.Minute)}
			if tc.want == ops.LockTakeover {
				wantInfo.Previous = bob
			}
			if info != wantInfo {
				t.Errorf("Info() = %+v, want %+v", info, wantInfo)
			}
			if held.ID() != me {
				t.Errorf("ID() = %q", held.ID())
			}
			if !journalsEqual(held.Journal(), tc.wantJournal) {
				t.Errorf("Journal() = %+v, want %+v", held.Journal(), tc.wantJournal)
			}

			l := f.stored()
			if got := holderOf(l); got != me {
				t.Errorf("holder = %q", got)
			}
			if !l.Spec.RenewTime.Time.Equal(t0) {
				t.Errorf("renewTime = %v, want %v", l.Spec.RenewTime, t0)
			}
			wantAcquire := t0
			if tc.want == ops.LockExtended {
				wantAcquire = before.Spec.AcquireTime.Time
			}
			if !l.Spec.AcquireTime.Time.Equal(wantAcquire) {
				t.Errorf("acquireTime = %v, want %v", l.Spec.AcquireTime, wantAcquire)
			}
			if *l.Spec.LeaseDurationSeconds != 600 {
				t.Errorf("leaseDurationSeconds = %d", *l.Spec.LeaseDurationSeconds)
			}
			if tc.wantTransitions != nil && (l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != *tc.wantTransitions) {
				t.Errorf("leaseTransitions = %v, want %d", l.Spec.LeaseTransitions, *tc.wantTransitions)
			}
			wantLabels := map[string]string{LabelManagedBy: ManagedByValue, LabelCluster: testCluster}
			if !maps.Equal(l.Labels, wantLabels) {
				t.Errorf("labels = %v", l.Labels)
			}
			if op := l.Annotations[AnnotationOperation]; op != "restart --rolling" {
				t.Errorf("operation annotation = %q", op)
			}
			if r := l.Annotations[AnnotationReason]; r != "planned" {
				t.Errorf("reason annotation = %q", r)
			}
			// What other writers stored must survive our write.
			if before != nil {
				for _, k := range []string{AnnotationDenyList, AnnotationDenyHistory, AnnotationJournal} {
					if l.Annotations[k] != before.Annotations[k] {
						t.Errorf("annotation %s changed from %q to %q", k, before.Annotations[k], l.Annotations[k])
					}
				}
			}
		})
	}
}

func TestAcquireWithoutReasonKeepsOrDropsReason(t *testing.T) {
	ctx := context.Background()
	// Extending keeps the reason the holder gave with `lock acquire`.
	f := newFixture(t, testLease(heldBy(me, "lock", t0.Add(-time.Minute), 600), withAnnotation(AnnotationReason, "db upgrade")))
	if _, err := f.manager(me).Acquire(ctx, "restart"); err != nil {
		t.Fatal(err)
	}
	if r := f.stored().Annotations[AnnotationReason]; r != "db upgrade" {
		t.Errorf("extend dropped the reason: %q", r)
	}
	// Taking over drops the previous holder's reason.
	f = newFixture(t, testLease(heldBy(bob, "lock", t0.Add(-time.Hour), 600), withAnnotation(AnnotationReason, "db upgrade")))
	if _, err := f.manager(me).Acquire(ctx, "restart"); err != nil {
		t.Fatal(err)
	}
	if r, ok := f.stored().Annotations[AnnotationReason]; ok {
		t.Errorf("takeover kept bob's reason %q", r)
	}
}

func TestAcquireCustomDuration(t *testing.T) {
	f := newFixture(t)
	m := f.manager(me)
	m.Duration = 90*time.Second + time.Millisecond // rounds up, never shorter
	held, err := m.Acquire(context.Background(), "scale")
	if err != nil {
		t.Fatal(err)
	}
	if got := *f.stored().Spec.LeaseDurationSeconds; got != 91 {
		t.Errorf("leaseDurationSeconds = %d, want 91", got)
	}
	if want := t0.Add(91 * time.Second); !held.Info().Expires.Equal(want) {
		t.Errorf("expires = %v, want %v", held.Info().Expires, want)
	}
}

func TestAcquireValidates(t *testing.T) {
	f := newFixture(t)
	for _, m := range []*Manager{
		NewManager(f.cs, testNS, testCluster, "", f.clock),
		NewManager(f.cs, "", testCluster, me, f.clock),
		NewManager(f.cs, testNS, "", me, f.clock),
	} {
		if _, err := m.Acquire(context.Background(), "x"); !errors.Is(err, ops.ErrUsage) {
			t.Errorf("%+v: err = %v, want ErrUsage", m, err)
		}
	}
	if _, err := (&Manager{Namespace: testNS, Cluster: testCluster, ID: me}).Acquire(context.Background(), "x"); err == nil {
		t.Error("no client: want error")
	}
	if n := len(f.cs.Actions()); n != 0 {
		t.Errorf("%d API calls for invalid managers", n)
	}
}

// A conflict on update makes Acquire decide again on fresh state.
func TestAcquireConflictReevaluates(t *testing.T) {
	tests := []struct {
		name string
		// start is the lease before; interfere is what someone else writes
		// between our read and our update.
		start     *coordinationv1.Lease
		interfere func(l *coordinationv1.Lease)
		want      string // action, or "" for refused
		check     func(t *testing.T, l *coordinationv1.Lease)
	}{
		{
			name:  "someone else acquired in between",
			start: testLease(),
			interfere: func(l *coordinationv1.Lease) {
				heldBy(bob, "restart --rolling", t0, 600)(l)
			},
			check: func(t *testing.T, l *coordinationv1.Lease) {
				if holderOf(l) != bob {
					t.Errorf("holder = %q, want bob kept", holderOf(l))
				}
			},
		},
		{
			name:  "expired holder renewed in between",
			start: testLease(heldBy(bob, "restart", t0.Add(-time.Hour), 600)),
			interfere: func(l *coordinationv1.Lease) {
				heldBy(bob, "restart", t0, 600)(l)
			},
		},
		{
			name:  "I was denied in between",
			start: testLease(),
			interfere: func(l *coordinationv1.Lease) {
				withDenied(DenyEntry{ID: me, By: carol, At: t0, Reason: "stop"})(l)
			},
		},
		{
			name:  "unrelated deny in between is kept",
			start: testLease(heldBy(bob, "restart", t0.Add(-time.Hour), 600)),
			interfere: func(l *coordinationv1.Lease) {
				withDenied(DenyEntry{ID: carol, By: bob, At: t0, Reason: "x"})(l)
			},
			want: ops.LockTakeover,
			check: func(t *testing.T, l *coordinationv1.Lease) {
				list, _ := decodeDenyList(l)
				if len(list) != 1 || list[0].ID != carol {
					t.Errorf("deny list = %+v, want carol kept", list)
				}
			},
		},
		{
			name:  "holder released in between",
			start: testLease(heldBy(bob, "restart", t0.Add(-time.Hour), 600)),
			interfere: func(l *coordinationv1.Lease) {
				clearHolder(l)
			},
			want: ops.LockAcquired,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.start)
			f.beforeUpdate = func() { f.put(tc.interfere) }
			held, err := f.manager(me).Acquire(context.Background(), "scale")
			// First attempt: get + update (conflict); second: get (+ update).
			verbs := f.verbs()
			if len(verbs) < 3 || verbs[0] != "get" || verbs[1] != "update" || verbs[2] != "get" {
				t.Errorf("calls = %v, want get, update (conflict), get...", verbs)
			}
			if tc.want == "" {
				if !errors.Is(err, ops.ErrLocked) {
					t.Fatalf("err = %v, want ErrLocked after re-evaluation", err)
				}
				if len(verbs) != 3 {
					t.Errorf("calls = %v: a refusal after the conflict must not write", verbs)
				}
			} else {
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				if held.Info().Action != tc.want {
					t.Errorf("action = %q, want %q", held.Info().Action, tc.want)
				}
				if holderOf(f.stored()) != me {
					t.Errorf("holder = %q", holderOf(f.stored()))
				}
			}
			if tc.check != nil {
				tc.check(t, f.stored())
			}
		})
	}
}

// A create race (AlreadyExists) is re-evaluated like a conflict.
func TestAcquireCreateRace(t *testing.T) {
	ctx := context.Background()

	f := newFixture(t)
	f.beforeCreate = func() { f.putNew(testLease(heldBy(bob, "restart", t0, 600))) }
	_, err := f.manager(me).Acquire(ctx, "scale")
	if !errors.Is(err, ops.ErrLocked) || !strings.Contains(err.Error(), bob) {
		t.Fatalf("err = %v, want ErrLocked naming bob", err)
	}
	if got := f.verbs(); !slices.Equal(got, []string{"get", "create", "get"}) {
		t.Errorf("calls = %v", got)
	}

	// The racing writer only created the lease to deny carol: we take the
	// free lock by update and keep its deny list.
	f = newFixture(t)
	f.beforeCreate = func() { f.putNew(testLease(withDenied(DenyEntry{ID: carol, By: bob, At: t0}))) }
	held, err := f.manager(me).Acquire(ctx, "scale")
	if err != nil {
		t.Fatal(err)
	}
	if held.Info().Action != ops.LockAcquired {
		t.Errorf("action = %q", held.Info().Action)
	}
	if got := f.verbs(); !slices.Equal(got, []string{"get", "create", "get", "update"}) {
		t.Errorf("calls = %v", got)
	}
	if list, _ := decodeDenyList(f.stored()); len(list) != 1 || list[0].ID != carol {
		t.Errorf("deny list = %+v, want carol kept", list)
	}
}

// Under constant conflicts Acquire gives up with the conflict, not a
// success it cannot vouch for.
func TestAcquireGivesUpAfterRepeatedConflicts(t *testing.T) {
	f := newFixture(t, testLease())
	var interfere func()
	interfere = func() {
		f.put(func(l *coordinationv1.Lease) { setAnnotation(l, "noise", l.ResourceVersion) })
		f.beforeUpdate = interfere
	}
	f.beforeUpdate = interfere
	_, err := f.manager(me).Acquire(context.Background(), "scale")
	if err == nil || errors.Is(err, ops.ErrLocked) || !strings.Contains(err.Error(), "prod/dbops-mycrate") {
		t.Fatalf("err = %v, want a wrapped conflict naming the lease", err)
	}
	if holderOf(f.stored()) != "" {
		t.Error("lock taken despite conflicts")
	}
}

func TestRenew(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		interfere func(l *coordinationv1.Lease) // after our Acquire
		errHas    string                        // "" means renewal succeeds
	}{
		{name: "still mine"},
		{name: "still mine though expired", interfere: func(l *coordinationv1.Lease) {
			heldBy(me, "scale", t0.Add(-time.Hour), 600)(l)
		}},
		{name: "taken over", interfere: func(l *coordinationv1.Lease) {
			heldBy(bob, "restart --rolling", t0, 600)(l)
		}, errHas: "lost the lock on cluster prod/mycrate: it is now held by " + bob + " (restart --rolling) until 2026-11-22T10:10:00Z"},
		{name: "released by someone", interfere: clearHolder, errHas: "it was released by someone else"},
		{name: "denied meanwhile", interfere: func(l *coordinationv1.Lease) {
			withDenied(DenyEntry{ID: me, By: bob, At: t0, Reason: "stop now"})(l)
		}, errHas: "stop now"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			held, err := f.manager(me).Acquire(ctx, "scale")
			if err != nil {
				t.Fatal(err)
			}
			if tc.interfere != nil {
				f.put(tc.interfere)
			}
			before := f.stored()
			f.cs.ClearActions()
			f.clock.Set(t0.Add(5 * time.Minute))

			info, err := held.Renew(ctx)
			if tc.errHas != "" {
				if !errors.Is(err, ops.ErrLocked) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want ErrLocked containing %q", err, tc.errHas)
				}
				f.assertUnchanged(before.ResourceVersion)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := ops.LockInfo{Action: ops.LockRenewed, Holder: me, Operation: "scale", Expires: t0.Add(15 * time.Minute)}
			if info != want || held.Info() != want {
				t.Errorf("Renew = %+v, Info = %+v, want %+v", info, held.Info(), want)
			}
			if got := f.stored().Spec.RenewTime.Time; !got.Equal(t0.Add(5 * time.Minute)) {
				t.Errorf("renewTime = %v", got)
			}
		})
	}
}

func TestRenewLeaseDeleted(t *testing.T) {
	f := newFixture(t)
	held, err := f.manager(me).Acquire(context.Background(), "scale")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cs.Tracker().Delete(leaseGVR, testNS, leaseName); err != nil {
		t.Fatal(err)
	}
	f.cs.ClearActions()
	if _, err := held.Renew(context.Background()); !errors.Is(err, ops.ErrLocked) || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("err = %v, want ErrLocked about the deleted lease", err)
	}
	// The update from the cached lease finds it gone (404) and changes nothing; no create.
	for _, a := range f.cs.Actions() {
		if v := a.GetVerb(); v == "create" {
			t.Errorf("renewal tried to recreate the lease; calls %v", f.verbs())
		}
	}
	if f.exists() {
		t.Error("renewal recreated a deleted lease")
	}
}

func TestSaveJournal(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, testLease(withDenied(DenyEntry{ID: carol, By: bob, At: t0})))
	held, err := f.manager(me).Acquire(ctx, "restart --rolling")
	if err != nil {
		t.Fatal(err)
	}
	if held.Journal() != nil {
		t.Fatalf("Journal() = %+v on a fresh lease", held.Journal())
	}
	j := &ops.Journal{Operation: "restart", Args: "--rolling", Holder: me, State: ops.JournalRunning,
		Started: t0, Updated: t0.Add(time.Minute), Steps: 4, Done: []string{"pod-2", "pod-1"}, Current: "pod-0",
		Data: map[string]string{"pod-0.uid": "1234-abcd"}}
	// A conflicting unrelated write must not make the save fail or lose it.
	f.beforeUpdate = func() { f.put(func(l *coordinationv1.Lease) { setAnnotation(l, "other", "x") }) }
	if err := held.SaveJournal(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}

	l := f.stored()
	if holderOf(l) != "" || l.Annotations["other"] != "x" || l.Annotations[AnnotationDenyList] == "" {
		t.Errorf("after release: holder %q, annotations %v", holderOf(l), l.Annotations)
	}
	// The next run, by anyone, finds the journal.
	held2, err := f.manager(bob).Acquire(ctx, "restart --rolling")
	if err != nil {
		t.Fatal(err)
	}
	if !journalsEqual(held2.Journal(), j) {
		t.Errorf("round-tripped journal = %+v, want %+v", held2.Journal(), j)
	}
	if !held2.Journal().Resumable("restart", "--rolling") || !held2.Journal().IsDone("pod-1") {
		t.Error("round-tripped journal not resumable")
	}
	st, err := f.manager(me).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !journalsEqual(st.Journal, j) {
		t.Errorf("Status journal = %+v", st.Journal)
	}

	// nil clears it.
	if err := held2.SaveJournal(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.stored().Annotations[AnnotationJournal]; ok {
		t.Error("SaveJournal(nil) left the annotation")
	}
}

func TestSaveJournalRefusedWhenLockLost(t *testing.T) {
	ctx := context.Background()
	writes := map[string]func(ops.HeldLock, *ops.Journal) error{
		"save": func(h ops.HeldLock, j *ops.Journal) error { return h.SaveJournal(ctx, j) },
		"save and release": func(h ops.HeldLock, j *ops.Journal) error {
			return h.(ops.JournalReleaser).SaveJournalAndRelease(ctx, j)
		},
	}
	for name, interfere := range map[string]func(*coordinationv1.Lease){
		"taken over": heldBy(bob, "restart", t0, 600),
		"denied":     withDenied(DenyEntry{ID: me, By: bob, At: t0, Reason: "stop"}),
		"released":   clearHolder,
	} {
		for wname, write := range writes {
			t.Run(name+"/"+wname, func(t *testing.T) {
				f := newFixture(t)
				held, err := f.manager(me).Acquire(ctx, "scale")
				if err != nil {
					t.Fatal(err)
				}
				f.put(interfere)
				rv := f.stored().ResourceVersion
				f.cs.ClearActions()
				err = write(held, &ops.Journal{Operation: "scale", State: ops.JournalRunning})
				if !errors.Is(err, ops.ErrLocked) {
					t.Fatalf("err = %v, want ErrLocked", err)
				}
				f.assertUnchanged(rv)
				if _, ok := f.stored().Annotations[AnnotationJournal]; ok {
					t.Error("journal written to a lock that is not ours")
				}
			})
		}
	}
}

func TestHeldRelease(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	held, err := f.manager(me).Acquire(ctx, "scale")
	if err != nil {
		t.Fatal(err)
	}
	if err := held.SaveJournal(ctx, &ops.Journal{Operation: "scale", State: ops.JournalSucceeded}); err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := f.stored()
	if holderOf(l) != "" || l.Spec.RenewTime != nil || l.Annotations[AnnotationOperation] != "" {
		t.Errorf("not released: %+v %v", l.Spec, l.Annotations)
	}
	if l.Annotations[AnnotationJournal] == "" {
		t.Error("release dropped the journal")
	}

	// Released after a takeover: bob's lock is left alone, nothing written.
	held, err = f.manager(me).Acquire(ctx, "scale")
	if err != nil {
		t.Fatal(err)
	}
	f.put(heldBy(bob, "restart", t0, 600))
	rv := f.stored().ResourceVersion
	f.cs.ClearActions()
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release after takeover: %v", err)
	}
	f.assertUnchanged(rv)
	if holderOf(f.stored()) != bob {
		t.Error("released bob's lock")
	}
}

// TestSaveJournalAndRelease: a run's end writes its last journal and frees the lock in one
// update, keeping what others wrote meanwhile (a lock lost meanwhile gets neither:
// TestSaveJournalRefusedWhenLockLost).
func TestSaveJournalAndRelease(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	held, err := f.manager(me).Acquire(ctx, "restart --rolling")
	if err != nil {
		t.Fatal(err)
	}
	jr, ok := held.(ops.JournalReleaser)
	if !ok {
		t.Fatal("the held lock cannot save its journal and release in one write")
	}
	j := &ops.Journal{Operation: "restart", Args: "--rolling", Holder: me, State: ops.JournalSucceeded,
		Started: t0, Updated: t0.Add(time.Minute), Steps: 2, Done: []string{"pod-0", "pod-1"}}
	f.beforeUpdate = func() { f.put(func(l *coordinationv1.Lease) { setAnnotation(l, "other", "x") }) }
	f.cs.ClearActions()
	if err := jr.SaveJournalAndRelease(ctx, j); err != nil {
		t.Fatal(err)
	}
	f.beforeUpdate = nil
	if got := f.verbs(); strings.Count(strings.Join(got, " "), "update") != 2 {
		// The interfering write conflicts once; the retry is the second update.
		t.Errorf("requests %v, want one update and its retry after the conflict", got)
	}
	l := f.stored()
	if holderOf(l) != "" || l.Spec.RenewTime != nil || l.Annotations[AnnotationOperation] != "" || l.Annotations["other"] != "x" {
		t.Errorf("not released, or another's write lost: %+v %v", l.Spec, l.Annotations)
	}
	st, err := f.manager(bob).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !journalsEqual(st.Journal, j) {
		t.Errorf("journal = %+v, want %+v", st.Journal, j)
	}

}

func TestManagerRelease(t *testing.T) {
	tests := []struct {
		name     string
		lease    *coordinationv1.Lease
		wantKind error // nil: released
		errHas   string
	}{
		{name: "mine", lease: testLease(heldBy(me, "lock", t0, 600), withAnnotation(AnnotationReason, "upgrade"))},
		{name: "mine, expired", lease: testLease(heldBy(me, "lock", t0.Add(-time.Hour), 600))},
		{name: "held by another", lease: testLease(heldBy(bob, "restart", t0, 600)), wantKind: ops.ErrLocked,
			errHas: "cluster prod/mycrate is locked by " + bob + " (restart), not by " + me + "; only the holder can release it"},
		{name: "held by another, expired", lease: testLease(heldBy(bob, "restart", t0.Add(-time.Hour), 600)), wantKind: ops.ErrLocked},
		{name: "free", lease: testLease(), wantKind: ops.ErrPrecondition, errHas: "cluster prod/mycrate is not locked"},
		{name: "no lease", wantKind: ops.ErrPrecondition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f *fixture
			if tc.lease != nil {
				f = newFixture(t, tc.lease)
			} else {
				f = newFixture(t)
			}
			err := f.manager(me).Release(context.Background())
			if tc.wantKind != nil {
				if !errors.Is(err, tc.wantKind) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want %v containing %q", err, tc.wantKind, tc.errHas)
				}
				f.assertNoWrites()
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l := f.stored()
			if holderOf(l) != "" {
				t.Errorf("holder = %q", holderOf(l))
			}
			if _, ok := l.Annotations[AnnotationReason]; ok {
				t.Error("reason kept after release")
			}
		})
	}
}

func TestStatus(t *testing.T) {
	ctx := context.Background()
	j := &ops.Journal{Operation: "restart", State: ops.JournalFailed, Error: "boom"}
	tests := []struct {
		name  string
		lease *coordinationv1.Lease
		check func(t *testing.T, s *State)
	}{
		{name: "no lease", check: func(t *testing.T, s *State) {
			if s.Holder != "" || s.Held || s.Expired || s.Expires != nil || s.Journal != nil {
				t.Errorf("%+v", s)
			}
			if s.DenyList == nil || s.DenyHistory == nil {
				t.Error("nil lists would render as null")
			}
		}},
		{name: "held by bob", lease: testLease(heldBy(bob, "restart --rolling", t0.Add(-time.Minute), 600),
			withAnnotation(AnnotationReason, "upgrade"), withJournal(j)),
			check: func(t *testing.T, s *State) {
				if s.Holder != bob || !s.Held || s.Mine || s.Expired || s.HolderDenied || s.Operation != "restart --rolling" ||
					s.Reason != "upgrade" || s.DurationSeconds != 600 {
					t.Errorf("%+v", s)
				}
				if !s.Expires.Equal(t0.Add(9*time.Minute)) || !s.Renewed.Equal(t0.Add(-time.Minute)) ||
					!s.Acquired.Equal(t0.Add(-2*time.Minute)) || !s.ServerTime.Equal(t0) {
					t.Errorf("times: %v %v %v %v", s.Acquired, s.Renewed, s.Expires, s.ServerTime)
				}
				if !journalsEqual(s.Journal, j) {
					t.Errorf("journal %+v", s.Journal)
				}
			}},
		{name: "mine, expired", lease: testLease(heldBy(me, "scale", t0.Add(-time.Hour), 600)),
			check: func(t *testing.T, s *State) {
				if !s.Mine || s.Held || !s.Expired {
					t.Errorf("%+v", s)
				}
			}},
		{name: "holder denied", lease: testLease(heldBy(bob, "scale", t0, 600), withDenied(DenyEntry{ID: bob, By: me, At: t0})),
			check: func(t *testing.T, s *State) {
				if !s.HolderDenied || len(s.DenyList) != 1 {
					t.Errorf("%+v", s)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f *fixture
			if tc.lease != nil {
				f = newFixture(t, tc.lease)
			} else {
				f = newFixture(t)
			}
			s, err := f.manager(me).Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if s.Namespace != testNS || s.Cluster != testCluster || s.Lease != leaseName || s.Self != me {
				t.Errorf("identity fields: %+v", s)
			}
			tc.check(t, s)
			f.assertNoWrites()
		})
	}
}

// The JSON keys are the documented `lock status -o json` schema.
func TestStatusJSONSchema(t *testing.T) {
	f := newFixture(t)
	s, err := f.manager(me).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	want := []string{"acquired", "cluster", "control", "denyHistory", "denyList", "durationSeconds", "expired", "expires",
		"held", "holder", "holderDenied", "journal", "lease", "mine", "namespace", "operation", "reason",
		"renewed", "self", "serverTime"}
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
		t.Errorf("keys = %v\nwant   %v", got, want)
	}
	if string(mustJSON(m["denyList"])) != "[]" {
		t.Errorf("denyList = %v, want []", m["denyList"])
	}
}

func journalsEqual(a, b *ops.Journal) bool {
	return mustJSON(a) == mustJSON(b)
}

func ptr[T any](v T) *T { return &v }

// A held lock renews and saves its journal from the lease it last wrote: one request per
// write while nobody else touches the lease, and a conflict re-reads and decides again.
func TestHeldWritesFromCache(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	held, err := f.manager(me).Acquire(ctx, "scale")
	if err != nil {
		t.Fatal(err)
	}
	f.cs.ClearActions()
	for i := range 3 {
		if err := held.SaveJournal(ctx, &ops.Journal{Operation: "scale", State: ops.JournalRunning, Done: []string{fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := held.Renew(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.verbs(); len(got) != 6 || slices.Contains(got, "get") {
		t.Errorf("calls = %v, want 6 updates and no reads", got)
	}
	// Someone else writes (a deny of another ID, say): the next save conflicts, re-reads, succeeds.
	f.put(withDenied(DenyEntry{ID: bob, By: me, At: t0, Reason: "x"}))
	f.cs.ClearActions()
	if err := held.SaveJournal(ctx, &ops.Journal{Operation: "scale", State: ops.JournalRunning}); err != nil {
		t.Fatal(err)
	}
	if got := f.verbs(); !slices.Equal(got, []string{"update", "get", "update"}) {
		t.Errorf("calls after a foreign write = %v, want update (409), get, update", got)
	}
	if ds, _ := decodeDenyList(f.stored()); len(ds) != 1 {
		t.Errorf("the foreign write was lost: deny list %v", ds)
	}
}
