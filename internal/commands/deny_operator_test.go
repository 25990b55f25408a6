package commands

import (
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestOperatorLocksText: lock status and deny list show, for a cluster whose operator uses its
// own lock in the database (a FoundationDBCluster's FDB lock key), the key, its holder and
// expiry and the deny keys, with what the database supplied escaped (golden). Keys come
// printable from the engine (internal/engines/foundationdb/operatorctl.go).
func TestOperatorLocksText(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	key := `\xff\x02/org.foundationdb.kubernetes-operator/global`
	base := func() *operatorLocks {
		return &operatorLocks{now: now, OperatorLocks: &ops.OperatorLocks{
			Resource: ops.ObjectRef{Kind: "FoundationDBCluster", Name: "myfdb"}, Operator: "FoundationDB operator",
			DocumentField: "foundationdbOperator", DBLockField: "fdbLock", DBName: "FDB", PauseField: "spec.skip",
			DenyListField: "spec.lockOptions.denyList", StatusLocksField: "status.locks.lockDenyList",
			DenyList: []ops.OperatorDenyEntry{{ID: "dc2"}, {ID: "dc3", Allow: true}}, StatusLocks: []string{"dc2"}}}
	}
	holder := func(owner string, start, end time.Duration) *ops.OperatorLockHolder {
		return &ops.OperatorLockHolder{Owner: owner, Start: now.Add(start), End: now.Add(end)}
	}
	var b strings.Builder
	for _, tt := range []struct {
		name string
		set  func(*operatorLocks)
	}{
		{"no FDB lock (single zone)", func(*operatorLocks) {}},
		{"held", func(l *operatorLocks) {
			l.DBLock = &ops.OperatorDBLock{Key: key, Holder: holder("dc1", -time.Minute, 9*time.Minute), DenyKeys: []string{"dc2"}}
		}},
		{"expired, hostile owner", func(l *operatorLocks) {
			l.DBLock = &ops.OperatorDBLock{Key: key, Holder: holder("evil\x1b[31m\n", -time.Hour, -time.Minute), DenyKeys: []string{"bad\x1b]0;x\a"}}
		}},
		{"free", func(l *operatorLocks) { l.DBLock = &ops.OperatorDBLock{Key: key} }},
		{"not a tuple", func(l *operatorLocks) { l.DBLock = &ops.OperatorDBLock{Key: key, Raw: `\x00junk`} }},
		{"unreadable", func(l *operatorLocks) { l.DBLockError = "no Ready pod of the cluster to run fdbcli in" }},
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
