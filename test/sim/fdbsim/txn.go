package fdbsim

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Transactions as fdbcli runs them (fdbcli/fdbcli.cpp: begin, commit, rollback, reset, and the
// catch of its command loop) over FoundationDB's optimistic concurrency: a transaction reads at
// a read version, buffers its writes, and its commit fails with not_committed (1020) when a
// key it read was written by a transaction that committed after that read version
// (fdbserver/Resolver: read conflict ranges against the writes committed since). Outside a
// transaction every set/clear is its own committed transaction (autocommit).
//
// Stricter or simpler than the real client, on purpose:
//   - reads inside a transaction see the latest committed value (overlaid with the
//     transaction's own writes), not a snapshot at its read version; any read that would differ
//     from the snapshot is of a key written after the read version, so the commit fails anyway;
//   - a read-only commit prints "Nothing to commit" (no committed version, as the client
//     reports for a transaction without mutations).

// kvVersions are the commit versions of the key-value store: the last one, and per key the
// version of its last write (a set or a clear).
type kvVersions struct {
	current int64
	written map[string]int64
}

// mutation is one buffered write: a set of begin, or a clear of [begin, end).
type mutation struct {
	clear      bool
	begin, end string
	value      []byte
}

type keyRange struct{ begin, end string }

// txn is an open fdbcli transaction.
type txn struct {
	// options are the transaction's own options: a copy of the session's at `begin`, changed
	// by `option` inside the transaction only (fdbcli's activeOptions).
	options     map[string]bool
	readVersion int64 // set by the first read
	reads       []keyRange
	writes      []mutation
}

// opts are the options in force: the transaction's inside one, the session's otherwise.
func (s *session) opts() map[string]bool {
	if s.tx != nil {
		return s.tx.options
	}
	return s.options
}

func (s *session) txnCommand(tokens []string) (bool, error) {
	if len(tokens) != 1 {
		fmt.Fprintf(s.stdout, "Usage: %s\n", tokens[0])
		return false, nil
	}
	switch tokens[0] {
	case "begin":
		if s.tx != nil {
			fmt.Fprintf(s.stderr, "ERROR: Already in transaction\n")
			return false, nil
		}
		s.tx = &txn{options: map[string]bool{}}
		for k, v := range s.options {
			s.tx.options[k] = v
		}
		fmt.Fprintf(s.stdout, "Transaction started\n")
		return true, nil
	}
	if s.tx == nil {
		fmt.Fprintf(s.stderr, "ERROR: No active transaction\n")
		return false, nil
	}
	switch tokens[0] {
	case "rollback":
		s.tx = nil
		fmt.Fprintf(s.stdout, "Transaction rolled back\n")
		return true, nil
	case "reset":
		s.tx = &txn{options: map[string]bool{}}
		for k, v := range s.options {
			s.tx.options[k] = v
		}
		fmt.Fprintf(s.stdout, "Transaction reset\n")
		return true, nil
	}
	return s.commit()
}

// commit is fdbcli's commitTransaction on the open transaction.
func (s *session) commit() (bool, error) {
	tx := s.tx
	var conflict bool
	var version int64
	if err := s.waitUntil(func(now time.Time) bool {
		if !s.c.available(now) {
			return false
		}
		if len(tx.writes) == 0 {
			return true
		}
		if conflict = s.c.conflicts(tx); !conflict {
			version = s.c.applyLocked(now, tx.writes)
		}
		return true
	}); err != nil {
		return false, err
	}
	if conflict {
		return false, s.fdbError("Transaction not committed due to conflict with another transaction", 1020)
	}
	s.tx = nil
	if len(tx.writes) == 0 {
		fmt.Fprintf(s.stdout, "Nothing to commit\n")
		return true, nil
	}
	fmt.Fprintf(s.stdout, "Committed (%d)\n", version)
	return true, nil
}

// rollbackOnError is the catch of fdbcli's command loop: an error thrown inside a transaction
// rolls it back.
func (s *session) rollbackOnError(err error) {
	if s.tx != nil && errors.Is(err, errThrown) {
		fmt.Fprintf(s.stdout, "Rolling back current transaction\n")
		s.tx = nil
	}
}

// conflicts reports whether a key tx read was written after its read version. Called with
// c.mu held.
func (c *Cluster) conflicts(tx *txn) bool {
	if len(tx.reads) == 0 {
		return false
	}
	for k, v := range c.versions.written {
		if v <= tx.readVersion {
			continue
		}
		for _, r := range tx.reads {
			if k >= r.begin && k < r.end {
				return true
			}
		}
	}
	return false
}

// applyLocked commits writes as one transaction and returns its version. Versions advance by
// about a million a second (fdbserver knob VERSIONS_PER_SECOND), and always forward. Called
// with c.mu held.
func (c *Cluster) applyLocked(now time.Time, writes []mutation) int64 {
	v := max(now.UnixMicro(), c.versions.current+1)
	c.versions.current = v
	if c.versions.written == nil {
		c.versions.written = map[string]int64{}
	}
	if c.kv == nil {
		c.kv = map[string][]byte{}
	}
	for _, m := range writes {
		if !m.clear {
			c.kv[m.begin] = m.value
			c.versions.written[m.begin] = v
			continue
		}
		for k := range c.kv {
			if k >= m.begin && k < m.end {
				delete(c.kv, k)
				c.versions.written[k] = v
			}
		}
		if m.end == m.begin+"\x00" {
			c.versions.written[m.begin] = v
		}
	}
	return v
}

// mutate runs one set or clear: buffered inside a transaction, committed at once otherwise.
func (s *session) mutate(m mutation) (bool, error) {
	if s.tx != nil {
		s.tx.writes = append(s.tx.writes, m)
		return true, nil
	}
	return s.write(func(now time.Time) int64 { return s.c.applyLocked(now, []mutation{m}) })
}

// readRange reads [begin, end) as the session sees it: committed keys overlaid with the open
// transaction's writes, recording the read for the commit's conflict check.
func (s *session) readRange(begin, end string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := s.waitUntil(func(now time.Time) bool {
		if !s.c.available(now) {
			return false
		}
		clear(out)
		for k, v := range s.c.kv {
			if k >= begin && k < end {
				out[k] = v
			}
		}
		if tx := s.tx; tx != nil {
			if len(tx.reads) == 0 {
				tx.readVersion = s.c.versions.current
			}
			tx.reads = append(tx.reads, keyRange{begin, end})
			for _, m := range tx.writes {
				switch {
				case !m.clear && m.begin >= begin && m.begin < end:
					out[m.begin] = m.value
				case m.clear:
					for k := range out {
						if k >= m.begin && k < m.end {
							delete(out, k)
						}
					}
				}
			}
		}
		return true
	})
	return out, err
}

// Tx is a transaction of the FDB client library as the stand-in operator uses it
// (fdb.Transaction: Get, Set, Clear, GetRange over a prefix). It runs under the model's lock,
// so it never conflicts itself; a Transact that writes makes an fdbcli transaction that read
// the same keys fail its commit.
type Tx struct {
	c      *Cluster
	writes []mutation
	log    []string
}

// Get reads key (nil, false when absent), seeing the transaction's own writes.
func (t *Tx) Get(key string) ([]byte, bool) {
	v, ok := t.c.kv[key]
	for _, m := range t.writes {
		switch {
		case !m.clear && m.begin == key:
			v, ok = m.value, true
		case m.clear && key >= m.begin && key < m.end:
			v, ok = nil, false
		}
	}
	return v, ok
}

// GetPrefix reads every key starting with prefix (fdb.PrefixRange), in key order.
func (t *Tx) GetPrefix(prefix string) (keys []string, values map[string][]byte) {
	values = map[string][]byte{}
	for k := range t.c.kv {
		if strings.HasPrefix(k, prefix) {
			if v, ok := t.Get(k); ok {
				values[k] = v
			}
		}
	}
	for _, m := range t.writes {
		if !m.clear && strings.HasPrefix(m.begin, prefix) {
			values[m.begin] = m.value
		}
	}
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, values
}

// Set writes key.
func (t *Tx) Set(key string, value []byte) {
	t.writes = append(t.writes, mutation{begin: key, end: key + "\x00", value: append([]byte(nil), value...)})
	t.log = append(t.log, "set "+printable(key)+" "+printable(string(value)))
}

// Clear clears key.
func (t *Tx) Clear(key string) {
	t.writes = append(t.writes, mutation{clear: true, begin: key, end: key + "\x00"})
	t.log = append(t.log, "clear "+printable(key))
}

// ErrUnavailable is returned by Transact while the database cannot serve transactions.
var ErrUnavailable = errors.New("database unavailable")

// Transact runs fn as one transaction of client and commits what it wrote, logged as one
// entry "transaction: <writes>" when it wrote anything. When fn fails nothing is written and
// the failure is logged ("transaction: <error>", not OK), as the client's own log would show
// it.
func (c *Cluster) Transact(client string, fn func(*Tx) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.advance(now)
	if !c.available(now) {
		return ErrUnavailable
	}
	t := &Tx{c: c}
	if err := fn(t); err != nil {
		c.log = append(c.log, LogEntry{Time: now, Client: client, Command: "transaction: " + err.Error(), OK: false})
		return err
	}
	if len(t.writes) == 0 {
		return nil
	}
	c.applyLocked(now, t.writes)
	c.log = append(c.log, LogEntry{Time: now, Client: client, Command: "transaction: " + strings.Join(t.log, "; "), OK: true})
	return nil
}
