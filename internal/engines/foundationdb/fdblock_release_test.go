package foundationdb

import (
	"bytes"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// TestClearOwnFDBLock: `lock release` clears the operator's lock key only when kubectl-dbops
// holds it and it has not expired (left by a run killed outright), and says whom it cleared;
// someone else's key, or our own expired one, is left as it is.
func TestClearOwnFDBLock(t *testing.T) {
	now := time.Now().Unix()
	for _, tt := range []struct {
		name    string
		holder  *LockValue
		cleared bool
	}{
		{name: "ours", holder: &LockValue{LockOwnerID, now - 10, now + 600}, cleared: true},
		{name: "another operator instance's", holder: &LockValue{"dc2", now - 10, now + 600}},
		{name: "ours, expired", holder: &LockValue{LockOwnerID, now - 700, now - 100}},
		{name: "none"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, model, e := liveCluster(t, 3, 3)
			ops.ControllerOf(c.Groups[0]).Object["spec"] = map[string]any{"faultDomain": map[string]any{"zoneCount": int64(3)}}
			if tt.holder != nil {
				if err := model.Transact("operator", func(tx *fdbsim.Tx) error {
					tx.Set(lockKey, EncodeLockValue(*tt.holder))
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			before, had := model.KV(lockKey)[lockKey]
			got, err := e.ClearOwnFDBLock(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			after, has := model.KV(lockKey)[lockKey]
			if tt.cleared {
				if got == nil || *got != *tt.holder || has {
					t.Fatalf("cleared %+v, key left %v (%x); want our key cleared", got, has, after)
				}
				return
			}
			if got != nil || has != had || !bytes.Equal(after, before) {
				t.Fatalf("cleared %+v, key %x -> %x; want it left alone", got, before, after)
			}
		})
	}
}
