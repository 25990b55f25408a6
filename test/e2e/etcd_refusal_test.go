//go:build e2e

package e2e

import (
	"maps"
	"strings"
	"testing"
)

// TestEtcdReplaceRefusedWithAnotherMemberDown: replacing etcd-1 while etcd-0 is stopped
// would leave one healthy voter of two once etcd-1 is removed, so replace refuses (exit 5,
// naming etcd-0: checkRemoval's health check, internal/engines/etcd/steps.go), with and
// without --dry-run, writing nothing and leaving the membership as etcd lists it.
func TestEtcdReplaceRefusedWithAnotherMemberDown(t *testing.T) {
	x := newEtcd(t, 3)
	x.waitHealthy(3)
	before, err := etcdMemberIDs(t.Context(), x.ctlTimeouts)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	x.runner.Suspend("etcd-0")
	defer x.runner.Resume("etcd-0")
	snap := snapshotNamespace(t, x.ns)
	for _, extra := range [][]string{nil, {"--dry-run"}} {
		args := append([]string{"replace", x.name, "etcd-1", "-n", x.ns, "--yes"}, extra...)
		res := runCLI(t, cliEnv(t), args...)
		if res.Code != 5 || !strings.Contains(res.Stderr, "etcd member etcd-0") {
			t.Fatalf("replace etcd-1 %v with etcd-0 stopped: want exit 5 naming etcd-0, got %s", extra, res)
		}
		t.Logf("refused: %s", strings.TrimSpace(res.Stderr))
	}
	if d := diffRVSnapshots(t, snap, snapshotNamespace(t, x.ns)); len(d) != 0 {
		t.Fatalf("refused replace wrote: %v", d)
	}
	x.runner.Resume("etcd-0")
	x.waitHealthy(3)
	after, err := etcdMemberIDs(t.Context(), x.ctlTimeouts)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	if !maps.Equal(before, after) {
		t.Fatalf("membership changed: before %v, after %v", before, after)
	}
}
