//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/foundationdb"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbop"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbwire"
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
// zoneCount 3, where the operator uses its FDB lock), `deny add --operator-instance
// kubectl-dbops` (a deny key the stand-in writes) refuses a restart until `deny allow`; a
// restart takes the operator's lock key
// as kubectl-dbops before its first bounce (seen on the simulator's command log) and leaves no
// key behind; while the stand-in operator holds the key (excluding a process group marked for
// removal), lock status shows it with its expiry, and a restart is refused with exit 5 and one
// line naming the holder, with the CR and the key unchanged and nothing run.
func TestFoundationDBOperatorLockKey(t *testing.T) {
	ns := newNamespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	model := multiZoneFDB(t, ctx, ns)
	env := cliEnv(t)

	// 0. Denied through the operator's deny list (the stand-in writes the deny key), the tool
	// may not take the key; allowed again, it may.
	denyKey := "\xff\x02/org.foundationdb.kubernetes-operator/denyList/" + foundationdb.LockOwnerID
	hasDenyKey := func(want bool) func(fdbsim.LogEntry) bool {
		return func(fdbsim.LogEntry) bool { _, ok := model.KV(denyKey)[denyKey]; return ok == want }
	}
	if r := runCLI(t, env, "deny", "add", "myfdb", "--operator-instance", foundationdb.LockOwnerID, "-n", ns); r.Code != 0 {
		t.Fatalf("deny add: %s", r)
	}
	waitLog(t, ctx, model, "the deny key of kubectl-dbops", hasDenyKey(true))
	if r := runCLI(t, env, "deny", "list", "myfdb", "-n", ns); r.Code != 0 || !strings.Contains(r.Stdout, `FDB deny keys:               "kubectl-dbops"`) {
		t.Fatalf("deny list: %s", r)
	}
	if r := runCLI(t, env, "restart", "myfdb", "--rolling", "--mode", "zone", "-n", ns, "--yes", "--no-tui"); r.Code != 5 || !strings.Contains(r.Stderr, "kubectl-dbops is on the FoundationDB operator's deny list") {
		t.Fatalf("restart while denied: want exit 5: %s", r)
	}
	if r := runCLI(t, env, "deny", "allow", "myfdb", "--operator-instance", foundationdb.LockOwnerID, "-n", ns); r.Code != 0 {
		t.Fatalf("deny allow: %s", r)
	}
	waitLog(t, ctx, model, "the deny key of kubectl-dbops cleared", hasDenyKey(false))

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
	markStorageForRemoval(t, ctx, ns)
	held := waitOperatorLock(t, ctx, model, "dc1")

	r = runCLI(t, env, "lock", "status", "myfdb", "-n", ns)
	// The stand-in extends its own lock at each reconcile, keeping the start (the operator's
	// takeLockInTransaction): the start is fixed, the end may have moved on since.
	if r.Code != 0 || !strings.Contains(r.Stdout, `FDB lock holder:             "dc1" since `+time.Unix(held.Start, 0).UTC().Format(time.RFC3339)+", until ") ||
		!untilAtLeast(r.Stdout, ", until ", held.End) {
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
	if r.Code != 5 || !untilAtLeast(r.Stderr, `held by "dc1" until `, held.End) || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
		t.Fatalf("restart while the operator holds its lock: want exit 5 and one line naming the holder: %s", r)
	}
	_, after := fdbGroups(t, ns)
	if after.GetGeneration() != before.GetGeneration() || !reflect.DeepEqual(after.Object["spec"], before.Object["spec"]) {
		t.Fatalf("the refused restart changed the FoundationDBCluster's spec")
	}
	// Only the stand-in's own extension (same owner and start) may have changed the key.
	if got := model.KV(fdbLockKey)[fdbLockKey]; !sameLockHolder(keyBefore, got) {
		t.Fatalf("the refused restart changed the lock key: %q -> %q", keyBefore, got)
	}
	for _, e := range model.Log()[logBefore:] {
		if e.Client != "operator" && (strings.HasPrefix(e.Command, "set") || strings.HasPrefix(e.Command, "clear") ||
			strings.HasPrefix(e.Command, "kill") || strings.HasPrefix(e.Command, "maintenance on")) {
			t.Fatalf("the refused restart ran %q", e.Command)
		}
	}
}

// untilAtLeast: out has prefix followed by an RFC 3339 time no earlier than the Unix time min.
func untilAtLeast(out, prefix string, min int64) bool {
	_, rest, ok := strings.Cut(out, prefix)
	if !ok || len(rest) < len(time.RFC3339)-5 {
		return false
	}
	end := strings.IndexAny(rest, " ,;()\n")
	if end < 0 {
		end = len(rest)
	}
	at, err := time.Parse(time.RFC3339, rest[:end])
	return err == nil && at.Unix() >= min
}

// sameLockHolder: both lock values hold the same owner since the same start.
func sameLockHolder(a, b []byte) bool {
	va, erra := foundationdb.DecodeLockValue(a)
	vb, errb := foundationdb.DecodeLockValue(b)
	return erra == nil && errb == nil && va.Owner == vb.Owner && va.Start == vb.Start
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

// multiZoneFDB starts the stand-in and a FoundationDBCluster myfdb with spec.faultDomain.zoneCount
// 3 (the operator uses its FDB lock) and processGroupIDPrefix dc1 (the operator's lock ID), and
// returns its model once reconciled. Data moves slowly: an exclusion of the stand-in (and so its
// hold of the key, until the cluster is reconciled again) outlasts a test.
func multiZoneFDB(t *testing.T, ctx context.Context, ns string) *fdbsim.Cluster {
	t.Helper()
	b, err := fdbwire.Start(ctx, bed, bed.Client, bed.Dynamic, ns, fdbsim.Config{RestartDelay: time.Second, DataMove: time.Hour}, fdbE2EPacing())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	spec := fdbwire.ClusterSpec{Namespace: ns, Name: "myfdb", Storage: 3, Log: 3, Stateless: 3, RedundancyMode: "triple", ZoneFromNodeLabel: true,
		WaitBetweenRemovalsSeconds: fdbE2EWaitBetweenRemovals()}
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
	return fdbModel(t, ns, b.Host)
}

// markStorageForRemoval adds a storage process group of myfdb to spec.processGroupsToRemove
// and returns its ID.
func markStorageForRemoval(t *testing.T, ctx context.Context, ns string) string {
	t.Helper()
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
	return victim
}

// waitLog waits until the model's command log has an entry matching ok, and returns its index.
func waitLog(t *testing.T, ctx context.Context, m *fdbsim.Cluster, what string, ok func(fdbsim.LogEntry) bool) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond) // the model has no watch
	defer tick.Stop()
	for {
		for i, e := range m.Log() {
			if ok(e) {
				return i
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("never on the simulator's command log: %s", what)
		case <-tick.C:
		}
	}
}

// TestFoundationDBOperatorWaitsForOurLock: while a restart holds the operator's lock key (paused
// between batches), the stand-in operator does not exclude a process group marked for removal
// even once its replacement runs — its take of the key is refused and logged — and excludes it
// only after the run, stopped by SIGINT, has cleared the key.
func TestFoundationDBOperatorWaitsForOurLock(t *testing.T) {
	ns := newNamespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	model := multiZoneFDB(t, ctx, ns)
	env := cliEnv(t)

	run := startCLI(t, env, "restart", "myfdb", "--rolling", "--mode", "zone", "--pause-between", "10m", "-n", ns, "--yes", "-o", "json")
	run.waitEvent("the first batch done", func(ev ndEvent) bool { return ev.Type == "step-done" })
	if w := lockKeyWrites(t, model); len(w) == 0 || w[0] != "set kubectl-dbops" {
		t.Fatalf("the run does not hold the key: %v", w)
	}
	victim := markStorageForRemoval(t, ctx, ns)
	refused := waitLog(t, ctx, model, "the stand-in's refused take of the lock to exclude", func(e fdbsim.LogEntry) bool {
		return e.Client == "operator" && !e.OK && strings.HasPrefix(e.Command, "transaction: exclude processes: failed to get the lock, current lock owner: kubectl-dbops")
	})
	for _, e := range model.Log()[:refused+1] {
		if e.Client == "operator" && strings.HasPrefix(e.Command, "exclude") {
			t.Fatalf("the stand-in excluded while the run held the key: %q", e.Command)
		}
	}
	if err := run.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	run.wait()
	w := lockKeyWrites(t, model)
	if w[len(w)-1] != "clear" {
		t.Fatalf("the interrupted run left its key: %v", w)
	}
	cleared := -1
	for i, e := range model.Log() {
		if e.Client != "operator" && e.OK && e.Command == "clear "+fdbLockKey {
			cleared = i
		}
	}
	excluded := waitLog(t, ctx, model, "the stand-in's exclusion", func(e fdbsim.LogEntry) bool {
		return e.Client == "operator" && e.OK && e.Command == "exclude no_wait locality_instance_id:"+victim
	})
	if excluded < cleared {
		t.Fatalf("the stand-in excluded (log entry %d) before the run cleared its key (entry %d)", excluded, cleared)
	}
	held := waitOperatorLock(t, ctx, model, "dc1")
	if held.End <= time.Now().Unix() {
		t.Fatalf("the stand-in's lock: %+v", held)
	}
}

// TestFoundationDBLockReleaseClearsKilledRunsKey: a restart killed outright (SIGKILL, between
// batches) leaves the operator's lock key held as kubectl-dbops, which would keep the operator
// from its exclusions until it expires. `lock release --dry-run` says it would clear it and
// changes nothing; `lock release` releases the Lease and clears the key, and says so in -o
// json.
func TestFoundationDBLockReleaseClearsKilledRunsKey(t *testing.T) {
	ns := newNamespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	model := multiZoneFDB(t, ctx, ns)
	env := cliEnv(t)

	run := startCLI(t, env, "restart", "myfdb", "--rolling", "--mode", "zone", "--pause-between", "10m", "-n", ns, "--yes", "-o", "json")
	run.waitEvent("the first batch done", func(ev ndEvent) bool { return ev.Type == "step-done" })
	if err := run.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	run.wait()
	keyWrites := func() []string {
		var out []string
		for _, w := range lockKeyWrites(t, model) {
			if w != "kill" {
				out = append(out, w)
			}
		}
		return out
	}
	if w := keyWrites(); len(w) == 0 || w[len(w)-1] != "set kubectl-dbops" {
		t.Fatalf("the killed run does not hold the key: %v", w)
	}
	held := waitOperatorLock(t, ctx, model, "kubectl-dbops")

	dry := runCLI(t, env, "lock", "release", "myfdb", "-n", ns, "--dry-run")
	if dry.Code != 0 || !strings.Contains(dry.Stdout, "would also clear the FoundationDB operator's lock key held as kubectl-dbops") {
		t.Fatalf("lock release --dry-run does not say it would clear the key: %s", dry)
	}
	if now := waitOperatorLock(t, ctx, model, "kubectl-dbops"); now != held {
		t.Fatalf("--dry-run changed the key: %+v -> %+v", held, now)
	}

	res := runCLI(t, env, "lock", "release", "myfdb", "-n", ns, "-o", "json")
	if res.Code != 0 {
		t.Fatalf("lock release: %s", res)
	}
	var out struct {
		Action  string `json:"action"`
		Cleared *struct {
			Owner string    `json:"owner"`
			End   time.Time `json:"end"`
		} `json:"fdbLockCleared"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("lock release -o json: %v\n%s", err, res.Stdout)
	}
	if out.Action != "released" || out.Cleared == nil || out.Cleared.Owner != "kubectl-dbops" || out.Cleared.End.Unix() != held.End {
		t.Fatalf("lock release -o json does not report the cleared key: %s", res.Stdout)
	}
	if w := keyWrites(); w[len(w)-1] != "clear" {
		t.Fatalf("lock release left the key: %v", w)
	}
	if kv := model.KV(fdbLockKey); len(kv) != 0 {
		t.Fatalf("key left after lock release: %q", kv)
	}
	lease, err := bed.Client.CoordinationV1().Leases(ns).Get(ctx, "dbops-myfdb", metav1.GetOptions{})
	if err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Fatalf("the Lease is still held by %s", *lease.Spec.HolderIdentity)
	}
}
