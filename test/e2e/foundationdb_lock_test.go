//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/foundationdb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/fdbsim/fdbop"
	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/fdbsim/fdbwire"
)

const fdbLockKey = "\xff\x02/org.foundationdb.kubernetes-operator/global"

// lockKeyWrites are the writes of the operator's lock key made from pods (this tool's fdbcli
// transactions), in order: "set <owner>" or "clear".
func lockKeyWrites(t *testing.T, m *fdbsim.Cluster) []string {
	t.Helper()
	var out []string
	for _, e := range m.Log() {
		if e.Client == "operator" || !e.OK {
			continue
		}
		switch {
		case strings.HasPrefix(e.Command, "set "+fdbLockKey+" "):
			v, err := foundationdb.DecodeLockValue([]byte(strings.TrimPrefix(e.Command, "set "+fdbLockKey+" ")))
			if err != nil {
				t.Fatalf("lock key set to a value that is not the operator's tuple: %q: %v", e.Command, err)
			}
			out = append(out, "set "+v.Owner)
		case e.Command == "clear "+fdbLockKey:
			out = append(out, "clear")
		case strings.HasPrefix(e.Command, "kill "):
			out = append(out, "kill")
		}
	}
	return out
}

// TestFoundationDBOperatorLockKey: on a multi-zone FoundationDBCluster (spec.faultDomain.
// zoneCount 3, where the operator uses its FDB lock), a restart takes the operator's lock key
// as kubectl-dbops before its first bounce (seen on the simulator's command log) and leaves no
// key behind; while the stand-in operator holds the key (excluding a process group marked for
// removal), lock status shows it with its expiry, and a restart is refused with exit 5 and one
// line naming the holder, with the CR and the key unchanged and nothing run.
func TestFoundationDBOperatorLockKey(t *testing.T) {
	ns := newNamespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	// Data moves slowly: the stand-in's exclusion (and so its hold of the key, until the
	// cluster is reconciled again) outlasts the test.
	b, err := fdbwire.Start(ctx, bed, bed.Client, bed.Dynamic, ns, fdbsim.Config{RestartDelay: time.Second, DataMove: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	spec := fdbwire.ClusterSpec{Namespace: ns, Name: "myfdb", Storage: 3, Log: 3, Stateless: 3, RedundancyMode: "triple", ZoneFromNodeLabel: true}
	obj := spec.Object()
	_ = unstructured.SetNestedField(obj.Object, int64(3), "spec", "faultDomain", "zoneCount")
	_ = unstructured.SetNestedField(obj.Object, "dc1", "spec", "processGroupIDPrefix")
	if _, err := bed.Dynamic.Resource(fdbop.GVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, waitTimeout)
	defer wcancel()
	if err := b.WaitReconciled(wctx, ns, "myfdb"); err != nil {
		t.Fatal(err)
	}
	model := fdbModel(t, ns, b.Host)
	env := cliEnv(t)

	// 1. A restart takes the key before bouncing, and clears it at the end.
	r := runCLI(t, env, "restart", "myfdb", "--rolling", "--mode", "zone", "-n", ns, "--yes", "--no-tui")
	if r.Code != 0 {
		t.Fatalf("restart: %s", r)
	}
	w := lockKeyWrites(t, model)
	if len(w) < 5 || w[0] != "set kubectl-dbops" || w[len(w)-1] != "clear" {
		t.Fatalf("lock key writes and kills from pods: %v (want the key set as kubectl-dbops before the first kill, cleared after the last)", w)
	}
	for _, x := range w[1 : len(w)-1] {
		if x != "kill" && x != "set kubectl-dbops" {
			t.Fatalf("lock key writes and kills: %v", w)
		}
	}
	if v, ok := model.KV(fdbLockKey)[fdbLockKey]; ok {
		t.Fatalf("key left after the run: %q", v)
	}

	// 2. The stand-in excludes a storage group marked for removal, under its own lock.
	groups, u := fdbGroups(t, ns)
	var victim string
	for id, g := range groups {
		if g["processClass"] == "storage" {
			victim = id
		}
	}
	_ = unstructured.SetNestedStringSlice(u.Object, []string{victim}, "spec", "processGroupsToRemove")
	if _, err := bed.Dynamic.Resource(fdbop.GVR).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	held := waitOperatorLock(t, ctx, model, "dc1")

	r = runCLI(t, env, "lock", "status", "myfdb", "-n", ns)
	if r.Code != 0 || !strings.Contains(r.Stdout, `FDB lock holder:             "dc1" since `) || !strings.Contains(r.Stdout, time.Unix(held.End, 0).UTC().Format(time.RFC3339)) {
		t.Fatalf("lock status: %s", r)
	}
	r = runCLI(t, env, "deny", "list", "myfdb", "-n", ns, "-o", "jsonpath={.foundationdbOperator.fdbLock.holder.owner}")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "dc1" {
		t.Fatalf("deny list -o jsonpath: %s", r)
	}

	// 3. A restart now is refused before anything is written.
	_, before := fdbGroups(t, ns)
	keyBefore := model.KV(fdbLockKey)[fdbLockKey]
	logBefore := len(model.Log())
	r = runCLI(t, env, "restart", "myfdb", "--rolling", "--mode", "zone", "-n", ns, "--yes", "--no-tui")
	if r.Code != 5 || !strings.Contains(r.Stderr, `held by "dc1" until `+time.Unix(held.End, 0).UTC().Format(time.RFC3339)) || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
		t.Fatalf("restart while the operator holds its lock: want exit 5 and one line naming the holder: %s", r)
	}
	_, after := fdbGroups(t, ns)
	if after.GetGeneration() != before.GetGeneration() || !reflect.DeepEqual(after.Object["spec"], before.Object["spec"]) {
		t.Fatalf("the refused restart changed the FoundationDBCluster's spec")
	}
	if got := model.KV(fdbLockKey)[fdbLockKey]; !bytes.Equal(got, keyBefore) {
		t.Fatalf("the refused restart changed the lock key: %q -> %q", keyBefore, got)
	}
	for _, e := range model.Log()[logBefore:] {
		if e.Client != "operator" && (strings.HasPrefix(e.Command, "set") || strings.HasPrefix(e.Command, "clear") ||
			strings.HasPrefix(e.Command, "kill") || strings.HasPrefix(e.Command, "maintenance on")) {
			t.Fatalf("the refused restart ran %q", e.Command)
		}
	}
}

// waitOperatorLock waits until the lock key is held by owner, and returns it.
func waitOperatorLock(t *testing.T, ctx context.Context, m *fdbsim.Cluster, owner string) foundationdb.LockValue {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond) // the model has no watch
	defer tick.Stop()
	for {
		if raw, ok := m.KV(fdbLockKey)[fdbLockKey]; ok {
			if v, err := foundationdb.DecodeLockValue(raw); err == nil && v.Owner == owner {
				return v
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the lock key never held by %q: %v", owner, m.KV(fdbLockKey))
		case <-tick.C:
		}
	}
}
