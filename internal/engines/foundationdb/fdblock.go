package foundationdb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// LockOwnerID is who this tool is in the FoundationDB operator's lock key: the tuple's owner,
// and the ID the deny keys name (`deny add --operator-instance kubectl-dbops` keeps every
// kubectl-dbops run off the key). One ID for every run: the Lease already decides which run
// of this tool acts on the cluster.
const LockOwnerID = "kubectl-dbops"

// lockConflictRetries bounds the attempts after a commit conflict (another writer of the key
// committed between our read and our commit): each attempt reads and decides again.
const lockConflictRetries = 3

// LockConfig is how a FoundationDBCluster configures the operator's lock
// (spec.lockOptions; the operator's ShouldUseLocks, GetLockPrefix, GetLockDuration).
type LockConfig struct {
	// Use: the operator coordinates its global actions (exclusions, coordinator changes,
	// bounces) through the key: spec.lockOptions.disableLocks when set, else a cluster spread
	// over several zones (spec.faultDomain.zoneCount > 1), regions, or three_data_hall.
	Use      bool
	Prefix   string
	Duration time.Duration
}

// Key is the lock key, <prefix>/global.
func (l LockConfig) Key() string { return l.Prefix + "/global" }

// DenyPrefix is where the operator keeps its deny keys, <prefix>/denyList/<id> = id.
func (l LockConfig) DenyPrefix() string { return l.Prefix + "/denyList/" }

// ReadLockConfig reads the lock configuration of a FoundationDBCluster.
func ReadLockConfig(u *unstructured.Unstructured) LockConfig {
	c := LockConfig{Prefix: defaultLockPrefix, Duration: 10 * time.Minute}
	if u == nil {
		return c
	}
	if p, _, _ := unstructured.NestedString(u.Object, "spec", "lockOptions", "lockKeyPrefix"); p != "" {
		c.Prefix = p
	}
	if m, ok, _ := unstructured.NestedInt64(u.Object, "spec", "lockOptions", "lockDurationMinutes"); ok {
		c.Duration = time.Duration(m) * time.Minute
	}
	if d, ok, _ := unstructured.NestedBool(u.Object, "spec", "lockOptions", "disableLocks"); ok {
		c.Use = !d
		return c
	}
	zones, _, _ := unstructured.NestedInt64(u.Object, "spec", "faultDomain", "zoneCount")
	regions, _, _ := unstructured.NestedSlice(u.Object, "spec", "databaseConfiguration", "regions")
	mode, _, _ := unstructured.NestedString(u.Object, "spec", "databaseConfiguration", "redundancy_mode")
	c.Use = zones > 1 || len(regions) > 1 || mode == "three_data_hall"
	return c
}

// LockValue is the lock key's value: a tuple (owner ID, start, end), times in unix seconds.
type LockValue struct {
	Owner      string
	Start, End int64
}

// Expired: the operator takes over a lock whose end is before now.
func (v LockValue) Expired(now time.Time) bool { return v.End < now.Unix() }

// FDBLockState is what the database says of the lock: the key's holder (nil: no key) and the
// deny keys' IDs.
type FDBLockState struct {
	Key    string
	Holder *LockValue
	// Raw is the key's value when it is not a lock tuple (Holder nil).
	Raw    []byte
	Denied []string
}

func (s FDBLockState) denied(id string) bool {
	for _, d := range s.Denied {
		if d == id {
			return true
		}
	}
	return false
}

// FDBLock is the operator's lock key as a run of this tool takes it (ops.CompanionLock). It
// follows the rules of the operator's own lock client (docs/procedures.md, "The operator's FDB
// lock"): denied owners never take it, an expired lock or one held by a denied owner is taken over, a
// lock of our own is extended, any other holder refuses. The read and the write are fdbcli
// transactions under `writemode on` with ACCESS_SYSTEM_KEYS; fdbcli --exec cannot branch, so
// the decision is made from a first read and checked against what the writing transaction
// itself read (its commit succeeding means nobody wrote the key between that read and it).
type FDBLock struct {
	cfg  LockConfig
	cli  *CLI
	ns   string
	name string          // the cluster, for the hints of refusals
	pods func() []string // pods to run fdbcli in, in order of preference
	now  func() time.Time

	mu    sync.Mutex
	held  bool
	start int64
	taken time.Time // when it was last taken or extended
}

// NewFDBLock is the lock of cluster c's FoundationDBCluster as configured by cfg.
func (e *Engine) NewFDBLock(c *ops.Cluster, cfg LockConfig) *FDBLock {
	return &FDBLock{cfg: cfg, cli: e.cli(), ns: c.Namespace, name: c.Name, now: time.Now, pods: func() []string {
		var out []string
		for _, p := range ReadyPods(c, nil) {
			out = append(out, p.Name)
		}
		return out
	}}
}

// run runs cmds in the first pod that answers.
func (l *FDBLock) run(ctx context.Context, cmds string) (string, error) {
	pods := l.pods()
	if len(pods) == 0 {
		return "", fmt.Errorf("no Ready pod of the cluster to run fdbcli in")
	}
	var err error
	for i, p := range pods {
		var out string
		out, err = l.cli.runLock(ctx, l.ns, p, cmds)
		if err == nil || isConflict(err) || ctx.Err() != nil || i == 1 {
			return out, err
		}
	}
	return "", err
}

// isConflict: the commit failed with not_committed (1020): another transaction wrote a key
// ours read.
func isConflict(err error) bool { return err != nil && strings.Contains(err.Error(), "(1020)") }

// Read reads the lock key and the deny keys.
func (l *FDBLock) Read(ctx context.Context) (FDBLockState, error) {
	deny := l.cfg.DenyPrefix()
	out, err := l.run(ctx, "option on READ_SYSTEM_KEYS; get "+escapeToken(l.cfg.Key())+"; getrange "+escapeToken(deny)+" "+escapeToken(strinc(deny))+" 100000")
	if err != nil {
		return FDBLockState{}, fmt.Errorf("reading the FoundationDB lock key: %w", err)
	}
	return l.parse(out)
}

func (l *FDBLock) parse(out string) (FDBLockState, error) {
	st := FDBLockState{Key: l.cfg.Key()}
	gets := parseGets(out)
	if v, ok := gets[st.Key]; ok {
		lv, err := DecodeLockValue(v)
		if err != nil {
			st.Raw = v
		} else {
			st.Holder = &lv
		}
	}
	deny := l.cfg.DenyPrefix()
	for k := range gets {
		if strings.HasPrefix(k, deny) {
			st.Denied = append(st.Denied, strings.TrimPrefix(k, deny))
		}
	}
	sort.Strings(st.Denied)
	return st, nil
}

// decision is what the operator's takeLockInTransaction would do with st: the start to write,
// or a refusal.
func (l *FDBLock) decide(st FDBLockState, now time.Time) (start int64, err error) {
	if st.denied(LockOwnerID) {
		return 0, ops.Preconditionf("%s is on the FoundationDB operator's deny list (key %s); it may not take the operator's lock: allow it with `kubectl dbops deny allow %s -n %s --operator-instance %s`",
			LockOwnerID, printableKey(l.cfg.DenyPrefix()+LockOwnerID), shellWord(l.name), shellWord(l.ns), LockOwnerID)
	}
	h := st.Holder
	switch {
	case h == nil && st.Raw != nil:
		return 0, ops.Preconditionf("the FoundationDB lock key %s holds %q, which is not an (owner, start, end) tuple; refusing to overwrite it", printableKey(st.Key), st.Raw)
	case h == nil:
		return now.Unix(), nil
	case h.Expired(now) || st.denied(h.Owner) || h.Owner == LockOwnerID:
		// The operator keeps the old start when it takes over or extends (updateLock with
		// currentLockStartTime).
		return h.Start, nil
	}
	return 0, ops.Preconditionf("the FoundationDB lock of this cluster (key %s) is held by %q until %s (%s from now); refusing: wait for it (the operator releases it once the cluster is reconciled), or keep that holder off it with `kubectl dbops deny add %s -n %s --operator-instance %s`",
		printableKey(st.Key), h.Owner, time.Unix(h.End, 0).UTC().Format(time.RFC3339), time.Unix(h.End, 0).Sub(now).Round(time.Second),
		shellWord(l.name), shellWord(l.ns), shellWord(h.Owner))
}

// shellWord is s as one shell word in a hint: as is when it is plain, quoted otherwise.
func shellWord(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._/:@", c) >= 0) {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// Check refuses (exit 5) when the key would not be ours to take now; nothing is written.
func (l *FDBLock) Check(ctx context.Context) error {
	st, err := l.Read(ctx)
	if err != nil {
		return err
	}
	_, err = l.decide(st, l.now())
	return err
}

// Take takes the key, or extends it when it is ours (the operator's TakeLock before each of
// its global actions).
func (l *FDBLock) Take(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for attempt := 1; ; attempt++ {
		err := l.takeOnce(ctx)
		if !isConflict(err) {
			return err
		}
		if attempt == lockConflictRetries {
			return ops.Preconditionf("the FoundationDB lock key %s: %d commit conflicts in a row, another holder keeps winning it; refusing", printableKey(l.cfg.Key()), attempt)
		}
	}
}

func (l *FDBLock) takeOnce(ctx context.Context) error {
	st, err := l.Read(ctx)
	if err != nil {
		return err
	}
	now := l.now()
	start, err := l.decide(st, now)
	if err != nil {
		return err
	}
	val := EncodeLockValue(LockValue{Owner: LockOwnerID, Start: start, End: now.Add(l.cfg.Duration).Unix()})
	gets := []string{l.cfg.Key(), l.cfg.DenyPrefix() + LockOwnerID}
	if st.Holder != nil && st.Holder.Owner != LockOwnerID {
		gets = append(gets, l.cfg.DenyPrefix()+st.Holder.Owner)
	}
	out, err := l.transact(ctx, gets, "set "+escapeToken(l.cfg.Key())+" "+escapeToken(string(val)))
	if err != nil {
		return err
	}
	// What the writing transaction read is what its write was based on: decide again from
	// it, with the deny keys it read.
	seen := parseGets(out)
	again := FDBLockState{Key: l.cfg.Key()}
	if v, ok := seen[l.cfg.Key()]; ok {
		if lv, derr := DecodeLockValue(v); derr == nil {
			again.Holder = &lv
		} else {
			again.Raw = v
		}
	}
	for _, k := range gets[1:] {
		if _, ok := seen[k]; ok {
			again.Denied = append(again.Denied, strings.TrimPrefix(k, l.cfg.DenyPrefix()))
		}
	}
	// A holder that changed since the first read is judged without its deny key (the
	// transaction did not read it): conservatively, as not denied.
	if _, derr := l.decide(again, now); derr != nil {
		// Someone took the key (or denied us) between our read and our write, and we
		// overwrote it: put back what our transaction read, and refuse. (A third writer
		// between our write and this one would be overwritten too; it could only have taken
		// the key from us, which nobody may while it is not expired.)
		restore := "clear " + escapeToken(l.cfg.Key())
		if v, ok := seen[l.cfg.Key()]; ok {
			restore = "set " + escapeToken(l.cfg.Key()) + " " + escapeToken(string(v))
		}
		if _, rerr := l.transact(ctx, []string{l.cfg.Key()}, restore); rerr != nil {
			return fmt.Errorf("%w; and putting the key back failed: %v", derr, rerr)
		}
		return derr
	}
	l.held, l.start, l.taken = true, start, now
	return nil
}

func holderChanged(a, b FDBLockState) bool {
	if (a.Holder == nil) != (b.Holder == nil) || string(a.Raw) != string(b.Raw) {
		return true
	}
	return a.Holder != nil && *a.Holder != *b.Holder
}

// transact runs one fdbcli transaction: read gets, then write (a set or clear), then commit.
func (l *FDBLock) transact(ctx context.Context, gets []string, write string) (string, error) {
	cmds := []string{"writemode on", "option on ACCESS_SYSTEM_KEYS", "begin"}
	for _, k := range gets {
		cmds = append(cmds, "get "+escapeToken(k))
	}
	cmds = append(cmds, write, "commit")
	return l.run(ctx, strings.Join(cmds, "; "))
}

// Held reports whether this run holds the key (as far as it knows).
func (l *FDBLock) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// Renew extends the key when this run holds it and a third of its duration has passed since it
// was last taken (ops.CompanionLock: called at every Lease renewal, far more often than a
// lock of minutes needs).
func (l *FDBLock) Renew(ctx context.Context) error {
	l.mu.Lock()
	due := l.held && l.now().Sub(l.taken) >= l.cfg.Duration/3
	l.mu.Unlock()
	if !due {
		return nil
	}
	if err := l.Take(ctx); err != nil {
		if errors.Is(err, ops.ErrPrecondition) {
			return ops.Lockedf("lost the FoundationDB lock key: %v", err)
		}
		return fmt.Errorf("the FoundationDB lock key: %w", err)
	}
	return nil
}

// Release clears the key only while this run holds it: ours, started when we took it, not
// expired (the operator's ReleaseLock), all checked by the clearing transaction itself.
func (l *FDBLock) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held {
		return nil
	}
	for attempt := 1; ; attempt++ {
		st, err := l.Read(ctx)
		if err != nil {
			return err
		}
		now := l.now()
		h := st.Holder
		if h == nil || h.Owner != LockOwnerID || h.Start > now.Unix() || h.Expired(now) {
			l.held = false
			return nil
		}
		out, err := l.transact(ctx, []string{l.cfg.Key()}, "clear "+escapeToken(l.cfg.Key()))
		if isConflict(err) && attempt < lockConflictRetries {
			continue
		}
		if err != nil {
			return fmt.Errorf("clearing the FoundationDB lock key: %w", err)
		}
		seen := FDBLockState{}
		if v, ok := parseGets(out)[l.cfg.Key()]; ok {
			if lv, derr := DecodeLockValue(v); derr == nil {
				seen.Holder = &lv
			}
		}
		if holderChanged(st, seen) {
			// Not ours any more when cleared: put it back.
			if v, ok := parseGets(out)[l.cfg.Key()]; ok {
				if _, rerr := l.transact(ctx, []string{l.cfg.Key()}, "set "+escapeToken(l.cfg.Key())+" "+escapeToken(string(v))); rerr != nil {
					return fmt.Errorf("the FoundationDB lock key changed hands while it was cleared, and putting it back failed: %w", rerr)
				}
			}
		}
		l.held = false
		return nil
	}
}

// ReadFDBLock reads the lock key and deny keys of cluster c for `lock status` and `deny
// list`; ok is false when the cluster does not use the operator's lock.
func (e *Engine) ReadFDBLock(ctx context.Context, c *ops.Cluster) (st FDBLockState, cfg LockConfig, ok bool, err error) {
	u := Resource(c)
	if u == nil {
		return st, cfg, false, nil
	}
	cfg = ReadLockConfig(u)
	if !cfg.Use {
		return st, cfg, false, nil
	}
	st, err = e.NewFDBLock(c, cfg).Read(ctx)
	return st, cfg, true, err
}

// ClearOwnFDBLock clears the operator's lock key of cluster c when kubectl-dbops holds it (not
// expired), for `lock release`: a run holds the key only while it holds the Lease, so once
// the Lease is released a key of ours is left by a run killed outright, and keeps the
// operator from its exclusions and coordinator changes until it expires. The clearing
// transaction checks the key is still ours as FDBLock.Release does. It returns the holder it
// cleared; nil when the cluster does not use the operator's lock or the key is not ours.
func (e *Engine) ClearOwnFDBLock(ctx context.Context, c *ops.Cluster) (*LockValue, error) {
	u := Resource(c)
	if u == nil {
		return nil, nil
	}
	cfg := ReadLockConfig(u)
	if !cfg.Use {
		return nil, nil
	}
	l := e.NewFDBLock(c, cfg)
	st, err := l.Read(ctx)
	if err != nil {
		return nil, err
	}
	h := st.Holder
	if h == nil || h.Owner != LockOwnerID || h.Expired(l.now()) {
		return nil, nil
	}
	// Release clears only a key it holds: adopt the one found, then let it check and clear.
	l.mu.Lock()
	l.held, l.start = true, h.Start
	l.mu.Unlock()
	if err := l.Release(ctx); err != nil {
		return nil, err
	}
	after, err := l.Read(ctx)
	if err != nil {
		return nil, err
	}
	if after.Holder != nil && after.Holder.Owner == LockOwnerID && *after.Holder == *h {
		return nil, fmt.Errorf("the FoundationDB lock key is still held as %s after clearing it", LockOwnerID)
	}
	return h, nil
}
