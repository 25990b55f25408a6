package fdbop

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

const testLockKey = defaultLockPrefix + "/global"

func TestLockTuple(t *testing.T) {
	// tuple.Tuple{"a", 1, 1700000000}.Pack(), by the tuple layer's encoding.
	want := []byte{0x02, 'a', 0x00, 0x15, 0x01, 0x18, 0x65, 0x53, 0xf1, 0x00}
	if got := packLock("a", 1, 1700000000); !bytes.Equal(got, want) {
		t.Fatalf("pack = %x, want %x", got, want)
	}
	o, s, e, err := unpackLock(packLock("x\x00y", -5, 0))
	if err != nil || o != "x\x00y" || s != -5 || e != 0 {
		t.Fatalf("round trip: %q %d %d %v", o, s, e, err)
	}
	for _, bad := range [][]byte{{0x02, 'a', 0x00}, {0x15, 0x01, 0x15, 0x01, 0x15, 0x01}, {0x02, 'a'}} {
		if _, _, _, err := unpackLock(bad); err == nil {
			t.Fatalf("unpack %x: want an error", bad)
		}
	}
}

// TestStandInTakeLock: takeLockInTransaction's rules, and ReleaseLock only for its own.
func TestStandInTakeLock(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	tests := []struct {
		name      string
		holder    []byte
		deny      []string
		granted   bool
		wantStart int64
	}{
		{name: "free", granted: true, wantStart: now},
		{name: "held by another", holder: packLock("kubectl-dbops", now-5, now+60)},
		{name: "expired", holder: packLock("kubectl-dbops", now-700, now-1), granted: true, wantStart: now - 700},
		{name: "holder denied", holder: packLock("kubectl-dbops", now-5, now+60), deny: []string{"kubectl-dbops"}, granted: true, wantStart: now - 5},
		{name: "own extended", holder: packLock("", now-5, now+60), granted: true, wantStart: now - 5},
		{name: "we are denied, an expired lock", holder: packLock("kubectl-dbops", now-700, now-1), deny: []string{""}},
		// takeLockInTransaction sets an absent lock before it reads the deny list.
		{name: "we are denied, no lock", deny: []string{""}, granted: true, wantStart: now},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBed(t, zonedSpec())
			b.reconcile(t)
			b.kubelet(t)
			b.reconcile(t)
			model := b.host.Cluster("demo/myfdb")
			if err := model.Transact("test", func(tx *fdbsim.Tx) error {
				tx.Clear(testLockKey)
				if tt.holder != nil {
					tx.Set(testLockKey, tt.holder)
				}
				for _, d := range tt.deny {
					tx.Set(defaultLockPrefix+"/denyList/"+d, []byte(d))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			ls := readLockSpec(b.cr(t))
			err := b.op.takeLock(model, ls, "test")
			if (err == nil) != tt.granted {
				t.Fatalf("takeLock: %v, want granted %t", err, tt.granted)
			}
			got := model.KV(testLockKey)[testLockKey]
			if !tt.granted {
				if !bytes.Equal(got, tt.holder) {
					t.Fatalf("a refused take wrote %x", got)
				}
				return
			}
			owner, start, end, err := unpackLock(got)
			if err != nil || owner != "" || start != tt.wantStart || end != now+600 {
				t.Fatalf("lock %q %d %d %v", owner, start, end, err)
			}
			if err := b.op.releaseLock(model, ls); err != nil {
				t.Fatal(err)
			}
			if _, ok := model.KV(testLockKey)[testLockKey]; ok {
				t.Fatal("own lock not released")
			}
		})
	}
}

func zonedSpec() map[string]any {
	s := sandboxSpec()
	s["faultDomain"].(map[string]any)["zoneCount"] = int64(3)
	return s
}

// TestStandInWaitsForTheLockToExclude: while another owner (this tool) holds the lock key,
// the stand-in does not exclude the group marked for removal; once the key is cleared it
// excludes under its own lock, and releases it once reconciled. Without locks (single zone)
// it never touches the key.
func TestStandInWaitsForTheLockToExclude(t *testing.T) {
	b := newBed(t, zonedSpec())
	clock := b.host.Clock().(*fdbsim.ManualClock)
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	model := b.host.Cluster("demo/myfdb")
	theirs := packLock("kubectl-dbops", clock.Now().Unix(), clock.Now().Add(10*time.Minute).Unix())
	if err := model.Transact("kubectl-dbops", func(tx *fdbsim.Tx) error { tx.Set(testLockKey, theirs); return nil }); err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, pg := range b.status(t).ProcessGroups {
		if pg.ProcessClass == "storage" {
			victim = pg.ProcessGroupID
		}
	}
	b.setSpec(t, []any{victim}, "processGroupsToRemove")
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	b.reconcile(t)
	if ex := operatorCommands(model, "exclude"); len(ex) != 0 {
		t.Fatalf("excluded while another owner held the lock: %v", ex)
	}
	if got := model.KV(testLockKey)[testLockKey]; !bytes.Equal(got, theirs) {
		t.Fatalf("the stand-in wrote the key held by another: %x", got)
	}
	if !slices.ContainsFunc(model.Log(), func(e fdbsim.LogEntry) bool {
		return e.Client == "operator" && !e.OK && strings.HasPrefix(e.Command, "transaction: exclude processes: failed to get the lock, current lock owner: kubectl-dbops")
	}) {
		t.Fatal("the refused take of the lock is not on the command log")
	}
	if err := model.Transact("kubectl-dbops", func(tx *fdbsim.Tx) error { tx.Clear(testLockKey); return nil }); err != nil {
		t.Fatal(err)
	}
	b.reconcile(t)
	if ex := operatorCommands(model, "exclude"); !slices.Equal(ex, []string{"exclude no_wait locality_instance_id:" + victim}) {
		t.Fatalf("exclusions after the key was cleared: %v", ex)
	}
	owner, _, _, err := unpackLock(model.KV(testLockKey)[testLockKey])
	if err != nil || owner != "" {
		t.Fatalf("the stand-in excluded without its own lock: %q %v", owner, err)
	}
	clock.Advance(10 * time.Second)
	for range 4 {
		b.reconcile(t)
	}
	if st := b.status(t); st.Generations["reconciled"] != 3 {
		t.Fatalf("not reconciled: %v", st.Generations)
	}
	if v, ok := model.KV(testLockKey)[testLockKey]; ok {
		t.Fatalf("lock kept after reconciling: %x", v)
	}
}

// TestStandInDenyKeys: spec.lockOptions.denyList entries become deny keys (allow clears them)
// and status.locks.lockDenyList, where locks are used.
func TestStandInDenyKeys(t *testing.T) {
	b := newBed(t, zonedSpec())
	b.reconcile(t)
	b.kubelet(t)
	b.reconcile(t)
	model := b.host.Cluster("demo/myfdb")
	key := defaultLockPrefix + "/denyList/kubectl-dbops"
	b.setSpec(t, []any{map[string]any{"id": "kubectl-dbops"}}, "lockOptions", "denyList")
	b.reconcile(t)
	if v := model.KV(key)[key]; string(v) != "kubectl-dbops" {
		t.Fatalf("deny key %q", v)
	}
	if st := b.status(t); !slices.Equal(st.Locks.DenyList, []string{"kubectl-dbops"}) {
		t.Fatalf("status.locks %v", st.Locks.DenyList)
	}
	b.setSpec(t, []any{map[string]any{"id": "kubectl-dbops", "allow": true}}, "lockOptions", "denyList")
	b.reconcile(t)
	if _, ok := model.KV(key)[key]; ok {
		t.Fatal("allowed, the deny key stays")
	}
	if st := b.status(t); len(st.Locks.DenyList) != 0 {
		t.Fatalf("status.locks %v", st.Locks.DenyList)
	}
}

func (b *bed) cr(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u, err := b.dyn.Resource(GVR).Namespace("demo").Get(context.Background(), "myfdb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}
