package foundationdb

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

func TestLockValueEncoding(t *testing.T) {
	tests := []struct {
		v    LockValue
		want []byte
	}{
		// The tuple layer: 0x02 string 0x00, integers as 0x14+n and n big-endian bytes.
		{LockValue{"a", 1, 1700000000}, []byte{0x02, 'a', 0x00, 0x15, 0x01, 0x18, 0x65, 0x53, 0xf1, 0x00}},
		{LockValue{"", 0, 256}, []byte{0x02, 0x00, 0x14, 0x16, 0x01, 0x00}},
		{LockValue{"x\x00y", -1, 1}, []byte{0x02, 'x', 0x00, 0xff, 'y', 0x00, 0x13, 0xfe, 0x15, 0x01}},
	}
	for _, tt := range tests {
		got := EncodeLockValue(tt.v)
		if !bytes.Equal(got, tt.want) {
			t.Fatalf("encode %+v = %x, want %x", tt.v, got, tt.want)
		}
		back, err := DecodeLockValue(got)
		if err != nil || back != tt.v {
			t.Fatalf("decode %x = %+v %v", got, back, err)
		}
	}
	for _, bad := range [][]byte{nil, []byte("plain"), {0x02, 'a', 0x00, 0x15, 0x01}, {0x02, 'a', 0x00, 0x15, 0x01, 0x15, 0x01, 0x15, 0x01}, {0x02, 'a'}} {
		if _, err := DecodeLockValue(bad); err == nil {
			t.Fatalf("decode %x: want an error", bad)
		}
	}
}

func TestReadLockConfig(t *testing.T) {
	tests := []struct {
		name string
		spec map[string]any
		use  bool
	}{
		{"single zone", map[string]any{}, false},
		{"zoneCount 3", map[string]any{"faultDomain": map[string]any{"zoneCount": int64(3)}}, true},
		{"zoneCount 1", map[string]any{"faultDomain": map[string]any{"zoneCount": int64(1)}}, false},
		{"three_data_hall", map[string]any{"databaseConfiguration": map[string]any{"redundancy_mode": "three_data_hall"}}, true},
		{"two regions", map[string]any{"databaseConfiguration": map[string]any{"regions": []any{map[string]any{}, map[string]any{}}}}, true},
		{"disableLocks true wins", map[string]any{"faultDomain": map[string]any{"zoneCount": int64(3)}, "lockOptions": map[string]any{"disableLocks": true}}, false},
		{"disableLocks false", map[string]any{"lockOptions": map[string]any{"disableLocks": false}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ReadLockConfig(&unstructured.Unstructured{Object: map[string]any{"spec": tt.spec}})
			if c.Use != tt.use || c.Key() != "\xff\x02/org.foundationdb.kubernetes-operator/global" || c.Duration != 10*time.Minute {
				t.Fatalf("%+v", c)
			}
		})
	}
	c := ReadLockConfig(&unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"lockOptions": map[string]any{"lockKeyPrefix": "\xff\x02/p", "lockDurationMinutes": int64(2)}}}})
	if c.Key() != "\xff\x02/p/global" || c.DenyPrefix() != "\xff\x02/p/denyList/" || c.Duration != 2*time.Minute {
		t.Fatalf("%+v", c)
	}
}

const lockKey = "\xff\x02/org.foundationdb.kubernetes-operator/global"

// TestRestartTakesOperatorLock: on a cluster that uses the operator's lock, a restart takes the
// key before its first bounce, holds it as kubectl-dbops, and clears it at the end; another
// holder whose lock has not expired refuses the run before anything is written (exit 5, the
// key unchanged); an expired lock or a denied holder is taken over; a denied kubectl-dbops
// refuses.
func TestRestartTakesOperatorLock(t *testing.T) {
	now := time.Now().Unix()
	tests := []struct {
		name   string
		holder *LockValue
		deny   []string
		refuse string // substring of the refusal; "" = the run succeeds
	}{
		{name: "free"},
		{name: "held by another operator instance", holder: &LockValue{"dc2", now - 10, now + 600}, refuse: `held by "dc2" until`},
		{name: "held by an odd owner", holder: &LockValue{"a b\x1b", now - 10, now + 600}, refuse: `held by "a b\x1b" until`},
		{name: "expired", holder: &LockValue{"dc2", now - 700, now - 100}},
		{name: "holder denied", holder: &LockValue{"dc2", now - 10, now + 600}, deny: []string{"dc2"}},
		{name: "we are denied", deny: []string{LockOwnerID}, refuse: "is on the FoundationDB operator's deny list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, model, e := liveCluster(t, 3, 3)
			ops.ControllerOf(c.Groups[0]).Object["spec"] = map[string]any{"faultDomain": map[string]any{"zoneCount": int64(3)}}
			if err := model.Transact("operator", func(tx *fdbsim.Tx) error {
				if tt.holder != nil {
					tx.Set(lockKey, EncodeLockValue(*tt.holder))
				}
				for _, d := range tt.deny {
					tx.Set("\xff\x02/org.foundationdb.kubernetes-operator/denyList/"+d, []byte(d))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			before := model.KV(lockKey)[lockKey]
			logBefore := len(model.Log())
			p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
			if err != nil {
				t.Fatal(err)
			}
			if p.Companion == nil {
				t.Fatal("no companion lock on a multi-zone cluster")
			}
			err = p.Preflight(context.Background(), ops.PreflightState{})
			if tt.refuse != "" {
				if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tt.refuse) || strings.ContainsAny(err.Error(), "\n\x1b") ||
					(tt.holder != nil && !strings.Contains(err.Error(), "deny add myfdb -n demo --operator-instance "+shellWord(tt.holder.Owner))) {
					t.Fatalf("preflight: %v (exit %d)", err, ops.ExitCode(err))
				}
				for _, l := range model.Log()[logBefore:] {
					if strings.HasPrefix(l.Command, "set") || strings.HasPrefix(l.Command, "kill") || strings.HasPrefix(l.Command, "clear") {
						t.Fatalf("a refused run wrote: %q", l.Command)
					}
				}
				if got := model.KV(lockKey)[lockKey]; !bytes.Equal(got, before) {
					t.Fatalf("key changed: %x -> %x", before, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := (&ops.Executor{LockID: "test", Timeout: time.Minute}).Run(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			// The key was set as ours before the first kill, and is gone now.
			var setAt, killAt, clearAt = -1, -1, -1
			for i, l := range model.Log() {
				switch {
				case setAt < 0 && strings.HasPrefix(l.Command, "set "+lockKey) && l.OK:
					setAt = i
				case killAt < 0 && strings.HasPrefix(l.Command, "kill "):
					killAt = i
				case strings.HasPrefix(l.Command, "clear "+lockKey) && l.OK:
					clearAt = i
				}
			}
			if setAt < 0 || killAt < setAt || clearAt < killAt {
				t.Fatalf("set %d, first kill %d, clear %d", setAt, killAt, clearAt)
			}
			for _, l := range model.Log() {
				if strings.HasPrefix(l.Command, "set "+lockKey) {
					v, err := DecodeLockValue([]byte(strings.TrimPrefix(l.Command, "set "+lockKey+" ")))
					if err != nil || v.Owner != LockOwnerID || v.End <= v.Start {
						t.Fatalf("set %q: %+v %v", l.Command, v, err)
					}
				}
			}
			if got, ok := model.KV(lockKey)[lockKey]; ok {
				t.Fatalf("key left after the run: %x", got)
			}
		})
	}
}

// TestRestartByPodTakesNoOperatorLock: --method pod deletes pods and takes no FDB key (the
// operator needs its own lock to move coordinators off recreated pods).
func TestRestartByPodTakesNoOperatorLock(t *testing.T) {
	c, _, e := liveCluster(t, 3, 3)
	ops.ControllerOf(c.Groups[0]).Object["spec"] = map[string]any{"faultDomain": map[string]any{"zoneCount": int64(3)}}
	p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone, Method: MethodPod})
	if err != nil {
		t.Fatal(err)
	}
	if p.Companion != nil {
		t.Fatal("--method pod takes the FDB lock key")
	}
}

// hookExec runs before() once, just before the first fdbcli call that opens a transaction.
type hookExec struct {
	inner  *simExec
	before func()
	done   bool
}

func (h *hookExec) Exec(ctx context.Context, namespace, pod, container string, argv []string, stdin io.Reader) ([]byte, []byte, error) {
	if !h.done && strings.Contains(execArg(argv), "begin") {
		h.done = true
		h.before()
	}
	return h.inner.Exec(ctx, namespace, pod, container, argv, stdin)
}

// TestFDBLockTakenBetweenReadAndWrite: fdbcli --exec cannot branch, so the key is read, decided
// on, then written in a transaction that reads it again. When another holder takes the key in
// between, the write (based on a stale read) is undone — the other holder's value is put back —
// and the take is refused; when what changed in between still lets us take it (an expired
// lock), the take stands. Release never clears a key that is not ours.
func TestFDBLockTakenBetweenReadAndWrite(t *testing.T) {
	now := time.Now().Unix()
	tests := []struct {
		name     string
		between  *LockValue
		deny     bool // kubectl-dbops denied in between
		refuse   bool
		wantHeld string // owner of the key afterwards ("": no key)
	}{
		{name: "another holder took it", between: &LockValue{"dc2", now, now + 600}, refuse: true, wantHeld: "dc2"},
		{name: "an expired lock appeared", between: &LockValue{"dc2", now - 700, now - 100}, wantHeld: LockOwnerID},
		{name: "we were denied", deny: true, refuse: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, model, e := liveCluster(t, 3, 3)
			cfg := LockConfig{Use: true, Prefix: defaultLockPrefix, Duration: 10 * time.Minute}
			l := e.NewFDBLock(c, cfg)
			l.cli = &CLI{Exec: &hookExec{inner: e.deps.Exec.(*simExec), before: func() {
				if err := model.Transact("other", func(tx *fdbsim.Tx) error {
					if tt.between != nil {
						tx.Set(lockKey, EncodeLockValue(*tt.between))
					}
					if tt.deny {
						tx.Set(defaultLockPrefix+"/denyList/"+LockOwnerID, []byte(LockOwnerID))
					}
					return nil
				}); err != nil {
					t.Error(err)
				}
			}}}
			err := l.Take(context.Background())
			if tt.refuse != (err != nil) || (tt.refuse && ops.ExitCode(err) != ops.ExitPrecondition) {
				t.Fatalf("take: %v", err)
			}
			raw, present := model.KV(lockKey)[lockKey]
			if tt.wantHeld == "" {
				if present {
					t.Fatalf("key afterwards: %q, want none", raw)
				}
				return
			}
			v, derr := DecodeLockValue(raw)
			if derr != nil || v.Owner != tt.wantHeld {
				t.Fatalf("key afterwards: %+v %v", v, derr)
			}
			if tt.refuse {
				if v != *tt.between {
					t.Fatalf("the other holder's value was not put back: %+v", v)
				}
				l.held = true // as if it had been ours: release must still leave dc2's key
				if err := l.Release(context.Background()); err != nil {
					t.Fatal(err)
				}
				if got, _ := DecodeLockValue(model.KV(lockKey)[lockKey]); got != *tt.between {
					t.Fatalf("release cleared another holder's key: %+v", got)
				}
			}
		})
	}
}

// TestFDBLockRenew: a renewal (called at every Lease renewal) extends our key once a third of
// its duration has passed, keeping its start, and does nothing before; a key someone else
// holds by then (ours expired and taken over) stops the run (ErrLocked).
func TestFDBLockRenew(t *testing.T) {
	c, model, e := liveCluster(t, 3, 3)
	l := e.NewFDBLock(c, LockConfig{Use: true, Prefix: defaultLockPrefix, Duration: 10 * time.Minute})
	now := time.Now()
	l.now = func() time.Time { return now }
	if err := l.Take(context.Background()); err != nil {
		t.Fatal(err)
	}
	first, _ := DecodeLockValue(model.KV(lockKey)[lockKey])
	writes := func() int {
		n := 0
		for _, e := range model.Log() {
			if strings.HasPrefix(e.Command, "set "+lockKey) {
				n++
			}
		}
		return n
	}
	n := writes()
	now = now.Add(time.Minute)
	if err := l.Renew(context.Background()); err != nil || writes() != n {
		t.Fatalf("renewed before a third of the duration: %v, %d writes", err, writes()-n)
	}
	now = now.Add(3 * time.Minute)
	if err := l.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	second, _ := DecodeLockValue(model.KV(lockKey)[lockKey])
	if second.Owner != LockOwnerID || second.Start != first.Start || second.End != now.Add(10*time.Minute).Unix() {
		t.Fatalf("renewed: %+v, first %+v", second, first)
	}
	if err := model.Transact("other", func(tx *fdbsim.Tx) error {
		tx.Set(lockKey, EncodeLockValue(LockValue{"dc2", now.Unix(), now.Add(time.Hour).Unix()}))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(4 * time.Minute)
	if err := l.Renew(context.Background()); !errors.Is(err, ops.ErrLocked) {
		t.Fatalf("renewal of a key taken over: %v", err)
	}
}
