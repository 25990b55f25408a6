package commands

import (
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/foundationdb"
)

// TestOperatorLocksText: lock status and deny list show, for a FoundationDBCluster that uses
// the operator's lock, the key, its holder and expiry and the deny keys, with what the
// database supplied escaped (golden).
func TestOperatorLocksText(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	key := "\xff\x02/org.foundationdb.kubernetes-operator/global"
	base := func() *operatorLocks {
		return &operatorLocks{resource: "myfdb", deny: []foundationdb.OperatorDenyEntry{{ID: "dc2"}, {ID: "dc3", Allow: true}},
			locks: []string{"dc2"}, now: now}
	}
	var b strings.Builder
	for _, tt := range []struct {
		name string
		set  func(*operatorLocks)
	}{
		{"no FDB lock (single zone)", func(*operatorLocks) {}},
		{"held", func(l *operatorLocks) {
			l.fdb = &foundationdb.FDBLockState{Key: key, Holder: &foundationdb.LockValue{Owner: "dc1", Start: now.Add(-time.Minute).Unix(), End: now.Add(9 * time.Minute).Unix()},
				Denied: []string{"dc2"}}
		}},
		{"expired, hostile owner", func(l *operatorLocks) {
			l.fdb = &foundationdb.FDBLockState{Key: key, Holder: &foundationdb.LockValue{Owner: "evil\x1b[31m\n", Start: now.Add(-time.Hour).Unix(), End: now.Add(-time.Minute).Unix()},
				Denied: []string{"bad\x1b]0;x\a"}}
		}},
		{"free", func(l *operatorLocks) { l.fdb = &foundationdb.FDBLockState{Key: key} }},
		{"not a tuple", func(l *operatorLocks) { l.fdb = &foundationdb.FDBLockState{Key: key, Raw: []byte("\x00junk")} }},
		{"unreadable", func(l *operatorLocks) { l.fdbErr = "no Ready pod of the cluster to run fdbcli in" }},
	} {
		l := base()
		tt.set(l)
		b.WriteString("== " + tt.name + "\n")
		l.writeText(&b)
	}
	if strings.Contains(b.String(), "\x1b") || strings.Contains(b.String(), "\a") {
		t.Fatalf("control characters printed:\n%q", b.String())
	}
	assertGolden(t, "operator-locks.text", b.String())
}
