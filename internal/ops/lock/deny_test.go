package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func TestDenyAndAllowRecordHistory(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t) // no lease yet: deny creates it
	m := f.manager(me)

	if err := m.Deny(ctx, bob, "runaway script"); err != nil {
		t.Fatal(err)
	}
	f.clock.Set(t0.Add(time.Minute))
	if err := m.Deny(ctx, " "+carol+" ", ""); err != nil {
		t.Fatal(err)
	}
	l := f.stored()
	if holderOf(l) != "" {
		t.Errorf("deny took the lock: holder %q", holderOf(l))
	}
	if l.Labels[LabelCluster] != testCluster || l.Labels[LabelManagedBy] != ManagedByValue {
		t.Errorf("labels = %v", l.Labels)
	}
	list, err := m.DenyList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []DenyEntry{
		{ID: bob, By: me, At: t0, Reason: "runaway script"},
		{ID: carol, By: me, At: t0.Add(time.Minute)},
	}
	if !slices.Equal(list, want) {
		t.Errorf("deny list = %+v\nwant %+v", list, want)
	}

	f.clock.Set(t0.Add(2 * time.Minute))
	if err := f.manager(carol).Allow(ctx, bob, "fixed"); err != nil {
		t.Fatal(err)
	}
	list, err = m.DenyList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(list, want[1:]) {
		t.Errorf("after allow: %+v", list)
	}

	s, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantHistory := []DenyRecord{
		{Action: ActionDeny, ID: bob, By: me, At: t0, Reason: "runaway script"},
		{Action: ActionDeny, ID: carol, By: me, At: t0.Add(time.Minute)},
		{Action: ActionAllow, ID: bob, By: carol, At: t0.Add(2 * time.Minute), Reason: "fixed"},
	}
	if !slices.Equal(s.DenyHistory, wantHistory) {
		t.Errorf("history = %+v\nwant %+v", s.DenyHistory, wantHistory)
	}

	// The last allow removes the annotation; the history stays.
	if err := m.Allow(ctx, carol, ""); err != nil {
		t.Fatal(err)
	}
	l = f.stored()
	if _, ok := l.Annotations[AnnotationDenyList]; ok {
		t.Errorf("empty deny list left behind: %q", l.Annotations[AnnotationDenyList])
	}
	if h, _ := decodeDenyHistory(l); len(h) != 4 {
		t.Errorf("history has %d entries, want 4", len(h))
	}
	if list, err := m.DenyList(ctx); err != nil || list == nil || len(list) != 0 {
		t.Errorf("DenyList = %#v, %v; want empty non-nil", list, err)
	}
}

func TestDenyAgainReplacesEntry(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if err := f.manager(me).Deny(ctx, bob, "first"); err != nil {
		t.Fatal(err)
	}
	f.clock.Set(t0.Add(time.Hour))
	if err := f.manager(carol).Deny(ctx, bob, "second"); err != nil {
		t.Fatal(err)
	}
	list, _ := f.manager(me).DenyList(ctx)
	want := []DenyEntry{{ID: bob, By: carol, At: t0.Add(time.Hour), Reason: "second"}}
	if !slices.Equal(list, want) {
		t.Errorf("deny list = %+v, want %+v", list, want)
	}
	if h, _ := decodeDenyHistory(f.stored()); len(h) != 2 {
		t.Errorf("history = %+v, want both denies", h)
	}
}

func TestAllowNotDenied(t *testing.T) {
	ctx := context.Background()
	for name, lease := range map[string]*coordinationv1.Lease{
		"no lease":     nil,
		"empty list":   testLease(),
		"other denied": testLease(withDenied(DenyEntry{ID: carol, By: me, At: t0})),
	} {
		t.Run(name, func(t *testing.T) {
			var f *fixture
			if lease != nil {
				f = newFixture(t, lease)
			} else {
				f = newFixture(t)
			}
			err := f.manager(me).Allow(ctx, bob, "why not")
			if !errors.Is(err, ops.ErrUsage) || ops.ExitCode(err) != ops.ExitUsage {
				t.Fatalf("err = %v, want ErrUsage", err)
			}
			if !strings.Contains(err.Error(), "lock ID "+bob+" is not on the deny list of cluster prod/mycrate") {
				t.Errorf("message = %q", err)
			}
			f.assertNoWrites()
		})
	}
}

func TestDenyAllowEmptyID(t *testing.T) {
	f := newFixture(t)
	m := f.manager(me)
	if err := m.Deny(context.Background(), "  ", "x"); !errors.Is(err, ops.ErrUsage) {
		t.Errorf("Deny(empty) = %v", err)
	}
	if err := m.Allow(context.Background(), "", "x"); !errors.Is(err, ops.ErrUsage) {
		t.Errorf("Allow(empty) = %v", err)
	}
	if len(f.cs.Actions()) != 0 {
		t.Errorf("calls = %v", f.verbs())
	}
}

func TestDenyHistoryBounded(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	m := f.manager(me)
	for i := range MaxDenyHistory + 5 {
		f.clock.Set(t0.Add(time.Duration(i) * time.Minute))
		if err := m.Deny(ctx, fmt.Sprintf("user%d@h", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	h, err := decodeDenyHistory(f.stored())
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != MaxDenyHistory {
		t.Fatalf("history has %d entries, want %d", len(h), MaxDenyHistory)
	}
	if h[0].ID != "user5@h" || h[len(h)-1].ID != fmt.Sprintf("user%d@h", MaxDenyHistory+4) {
		t.Errorf("kept %s..%s, want the most recent", h[0].ID, h[len(h)-1].ID)
	}
	// The list itself is not bounded: every deny stands until allowed.
	if list, _ := m.DenyList(ctx); len(list) != MaxDenyHistory+5 {
		t.Errorf("deny list has %d entries", len(list))
	}
}

// Two people denying at the same time: neither entry is lost.
func TestDenyConflictKeepsConcurrentEntries(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, testLease(heldBy(bob, "restart", t0, 600)))
	f.beforeUpdate = func() {
		f.put(func(l *coordinationv1.Lease) {
			list, _ := decodeDenyList(l)
			withDenied(append(list, DenyEntry{ID: "dave@h", By: carol, At: t0, Reason: "parallel"})...)(l)
		})
	}
	if err := f.manager(me).Deny(ctx, bob, "stop"); err != nil {
		t.Fatal(err)
	}
	list, _ := f.manager(me).DenyList(ctx)
	var ids []string
	for _, d := range list {
		ids = append(ids, d.ID)
	}
	if !slices.Equal(ids, []string{"dave@h", bob}) {
		t.Errorf("deny list IDs = %v, want both", ids)
	}
	// Deny does not touch the holder.
	if holderOf(f.stored()) != bob {
		t.Error("deny changed the holder")
	}
}

// Two Deny calls racing to create the lease: the loser re-reads and adds.
func TestDenyCreateRace(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.beforeCreate = func() {
		f.putNew(testLease(withDenied(DenyEntry{ID: carol, By: bob, At: t0})))
	}
	if err := f.manager(me).Deny(ctx, bob, "x"); err != nil {
		t.Fatal(err)
	}
	list, _ := f.manager(me).DenyList(ctx)
	if len(list) != 2 || list[0].ID != carol || list[1].ID != bob {
		t.Errorf("deny list = %+v", list)
	}
}

// Allowing races with a deny of the same ID by someone else: the allow is
// decided on the fresh list.
func TestAllowConflictReevaluates(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, testLease(withDenied(DenyEntry{ID: bob, By: me, At: t0})))
	f.beforeUpdate = func() {
		f.put(func(l *coordinationv1.Lease) { setAnnotation(l, AnnotationDenyList, "") })
	}
	err := f.manager(me).Allow(ctx, bob, "")
	if !errors.Is(err, ops.ErrUsage) {
		t.Fatalf("err = %v, want ErrUsage after someone else allowed bob first", err)
	}
}

// A denied holder's lock can be taken over, and the denied ID can take it
// again once allowed.
func TestDenyThenAllowLifecycle(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.manager(bob).Acquire(ctx, "restart"); err != nil {
		t.Fatal(err)
	}
	if err := f.manager(me).Deny(ctx, bob, "stuck"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.manager(bob).Acquire(ctx, "restart"); !errors.Is(err, ops.ErrLocked) {
		t.Fatalf("denied holder re-acquired: %v", err)
	}
	held, err := f.manager(me).Acquire(ctx, "recreate")
	if err != nil {
		t.Fatal(err)
	}
	if held.Info().Action != ops.LockTakeover {
		t.Errorf("action = %q, want takeover", held.Info().Action)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.manager(carol).Allow(ctx, bob, "unstuck"); err != nil {
		t.Fatal(err)
	}
	held, err = f.manager(bob).Acquire(ctx, "restart")
	if err != nil {
		t.Fatalf("allowed ID refused: %v", err)
	}
	if held.Info().Action != ops.LockAcquired {
		t.Errorf("action = %q", held.Info().Action)
	}
}
