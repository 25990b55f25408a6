package fdbop

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// The operator's locking system, as the stand-in runs it:
//   - api/v1beta2/foundationdbcluster_types.go: ShouldUseLocks (spec.lockOptions.disableLocks
//     when set, else faultDomain.zoneCount > 1, more than one region, or three_data_hall),
//     GetLockPrefix, GetLockDuration (lockDurationMinutes, default 10), GetLockID (the
//     processGroupIDPrefix);
//   - fdbclient/lock_client.go: the key <prefix>/global holds tuple(owner, start, end);
//     takeLockInTransaction sets it when empty, refuses a denied owner
//     (<prefix>/denyList/<owner> present), takes over an expired lock or one of a denied
//     owner and extends its own (keeping the start), and fails otherwise; ReleaseLock clears
//     it only when ours, not started in the future and not expired; UpdateDenyList sets the
//     deny keys of spec.lockOptions.denyList entries and clears those marked allow;
//   - controllers: takeLock before exclusions (exclude_processes.go), coordinator changes
//     (change_coordinators.go), inclusions (remove_process_groups.go) and switching
//     maintenance off (maintenance_mode_checker.go), each skipped for this reconcile when the
//     lock is not granted; releaseLock once the cluster is reconciled (update_status.go);
//     updateLockConfiguration and status.locks.lockDenyList (update_status.go) when the deny
//     list is not empty, locks are used and the cluster is configured.
// Transactions go through the model's client-library transactions (fdbsim.Cluster.Transact),
// as the operator's lock client uses the FDB bindings, not fdbcli.

// lockSpec is the part of the cluster spec the locking system reads.
type lockSpec struct {
	ProcessGroupIDPrefix string `json:"processGroupIDPrefix,omitempty"`
	LockOptions          struct {
		DisableLocks        *bool  `json:"disableLocks,omitempty"`
		LockKeyPrefix       string `json:"lockKeyPrefix,omitempty"`
		LockDurationMinutes *int   `json:"lockDurationMinutes,omitempty"`
		DenyList            []struct {
			ID    string `json:"id,omitempty"`
			Allow bool   `json:"allow,omitempty"`
		} `json:"denyList,omitempty"`
	} `json:"lockOptions,omitempty"`
	FaultDomain struct {
		ZoneCount int `json:"zoneCount,omitempty"`
	} `json:"faultDomain,omitempty"`
	DatabaseConfiguration struct {
		RedundancyMode string `json:"redundancy_mode,omitempty"`
		Regions        []any  `json:"regions,omitempty"`
	} `json:"databaseConfiguration,omitempty"`
}

func readLockSpec(u *unstructured.Unstructured) *lockSpec {
	var ls lockSpec
	if err := fromUnstructured(u.Object["spec"], &ls); err != nil {
		return &lockSpec{}
	}
	return &ls
}

func (l *lockSpec) shouldUseLocks() bool {
	if d := l.LockOptions.DisableLocks; d != nil {
		return !*d
	}
	return l.FaultDomain.ZoneCount > 1 || len(l.DatabaseConfiguration.Regions) > 1 ||
		l.DatabaseConfiguration.RedundancyMode == "three_data_hall"
}

func (l *lockSpec) prefix() string {
	if l.LockOptions.LockKeyPrefix != "" {
		return l.LockOptions.LockKeyPrefix
	}
	return defaultLockPrefix
}

func (l *lockSpec) duration() time.Duration {
	m := 10
	if l.LockOptions.LockDurationMinutes != nil {
		m = *l.LockOptions.LockDurationMinutes
	}
	return time.Duration(m) * time.Minute
}

func (l *lockSpec) lockKey() string          { return l.prefix() + "/global" }
func (l *lockSpec) denyKey(id string) string { return l.prefix() + "/denyList/" + id }

// errLockHeld: the lock is someone else's; the action waits for a later reconcile.
var errLockHeld = errors.New("lock held by another owner")

// takeLock is the operator's takeLock for action ("Taking lock on cluster"): nil when locks
// are not used or the lock is granted.
func (o *Operator) takeLock(model *fdbsim.Cluster, ls *lockSpec, action string) error {
	if !ls.shouldUseLocks() {
		return nil
	}
	now := o.host.Clock().Now()
	owner := ls.ProcessGroupIDPrefix
	return model.Transact("operator", func(tx *fdbsim.Tx) error {
		update := func(start int64) {
			if start == 0 {
				start = now.Unix()
			}
			tx.Set(ls.lockKey(), packLock(owner, start, now.Add(ls.duration()).Unix()))
		}
		raw, ok := tx.Get(ls.lockKey())
		if !ok || len(raw) == 0 {
			update(0)
			return nil
		}
		cur, start, end, err := unpackLock(raw)
		if err != nil {
			return fmt.Errorf("could not decode value %q for key %q: %w", raw, ls.lockKey(), err)
		}
		if _, denied := tx.Get(ls.denyKey(owner)); denied {
			return fmt.Errorf("%s: failed to get lock due to deny list, owner ID: %s is on deny list: %w", action, owner, errLockHeld)
		}
		_, oldDenied := tx.Get(ls.denyKey(cur))
		if end < now.Unix() || oldDenied || cur == owner {
			update(start)
			return nil
		}
		return fmt.Errorf("%s: failed to get the lock, current lock owner: %s, lock will expire at: %s: %w", action, cur, time.Unix(end, 0).UTC(), errLockHeld)
	})
}

// releaseLock is the operator's ReleaseLock.
func (o *Operator) releaseLock(model *fdbsim.Cluster, ls *lockSpec) error {
	now := o.host.Clock().Now()
	return model.Transact("operator", func(tx *fdbsim.Tx) error {
		raw, ok := tx.Get(ls.lockKey())
		if !ok || len(raw) == 0 {
			return nil
		}
		cur, start, end, err := unpackLock(raw)
		if err != nil {
			return err
		}
		if cur != ls.ProcessGroupIDPrefix || start > now.Unix() || end < now.Unix() {
			return nil
		}
		tx.Clear(ls.lockKey())
		return nil
	})
}

// updateDenyList is UpdateDenyList, and returns GetDenyList's IDs afterwards.
func (o *Operator) updateDenyList(model *fdbsim.Cluster, ls *lockSpec) ([]string, error) {
	var list []string
	err := model.Transact("operator", func(tx *fdbsim.Tx) error {
		keys, vals := tx.GetPrefix(ls.prefix() + "/denyList/")
		present := map[string]bool{}
		for _, k := range keys {
			present[string(vals[k])] = true
		}
		for _, e := range ls.LockOptions.DenyList {
			switch {
			case e.Allow && present[e.ID]:
				tx.Clear(ls.denyKey(e.ID))
			case !e.Allow && !present[e.ID]:
				tx.Set(ls.denyKey(e.ID), []byte(e.ID))
			}
		}
		keys, vals = tx.GetPrefix(ls.prefix() + "/denyList/")
		list = nil
		for _, k := range keys {
			list = append(list, string(vals[k]))
		}
		return nil
	})
	return list, err
}

// packLock is tuple.Tuple{owner, start, end}.Pack() (the FDB tuple layer, design/tuple.md:
// a string is 0x02, its bytes with 0x00 escaped as 0x00 0xff, then 0x00; an integer is 0x14
// for zero, else 0x14+n (0x14-n negative, bytes inverted) then its n big-endian bytes).
func packLock(owner string, start, end int64) []byte {
	out := []byte{0x02}
	for _, b := range []byte(owner) {
		out = append(out, b)
		if b == 0x00 {
			out = append(out, 0xff)
		}
	}
	out = append(out, 0x00)
	for _, n := range []int64{start, end} {
		out = packInt(out, n)
	}
	return out
}

func packInt(out []byte, n int64) []byte {
	if n == 0 {
		return append(out, 0x14)
	}
	mag := uint64(n)
	if n < 0 {
		mag = uint64(-n)
	}
	var digits []byte
	for m := mag; m > 0; m >>= 8 {
		digits = append([]byte{byte(m)}, digits...)
	}
	if n > 0 {
		return append(append(out, byte(0x14+len(digits))), digits...)
	}
	out = append(out, byte(0x14-len(digits)))
	for _, d := range digits {
		out = append(out, ^d)
	}
	return out
}

// unpackLock is tuple.Unpack with the checks of takeLockInTransaction: at least three
// elements, a string and two integers (extra elements are ignored, as the operator does).
func unpackLock(b []byte) (owner string, start, end int64, err error) {
	var elems []any
	for i := 0; i < len(b); {
		switch code := b[i]; {
		case code == 0x01 || code == 0x02:
			var s []byte
			i++
			for {
				if i >= len(b) {
					return "", 0, 0, errors.New("unterminated string")
				}
				if b[i] == 0x00 {
					if i+1 < len(b) && b[i+1] == 0xff {
						s = append(s, 0x00)
						i += 2
						continue
					}
					i++
					break
				}
				s = append(s, b[i])
				i++
			}
			if code == 0x02 {
				elems = append(elems, string(s))
			} else {
				elems = append(elems, s)
			}
		case code >= 0x0c && code <= 0x1c:
			n := int(code) - 0x14
			neg := n < 0
			if neg {
				n = -n
			}
			if i+1+n > len(b) || n > 8 {
				return "", 0, 0, errors.New("bad integer")
			}
			var m uint64
			for _, d := range b[i+1 : i+1+n] {
				if neg {
					d = ^d
				}
				m = m<<8 | uint64(d)
			}
			v := int64(m)
			if neg {
				v = -v
			}
			elems = append(elems, v)
			i += 1 + n
		default:
			return "", 0, 0, fmt.Errorf("unsupported tuple type 0x%02x", code)
		}
	}
	if len(elems) < 3 {
		return "", 0, 0, errors.New("fewer than three elements")
	}
	var ok1, ok2, ok3 bool
	owner, ok1 = elems[0].(string)
	start, ok2 = elems[1].(int64)
	end, ok3 = elems[2].(int64)
	if !ok1 || !ok2 || !ok3 {
		return "", 0, 0, errors.New("not (string, int, int)")
	}
	return owner, start, end, nil
}
