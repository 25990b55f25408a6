//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// etcdCtlFunc runs etcdctl on every member's client URL with the given dial and command
// timeouts, returning stdout also on an error (`endpoint status` prints what the members that
// answered said and exits non-zero when one did not).
type etcdCtlFunc func(ctx context.Context, dial, command string, args ...string) ([]byte, error)

// etcdOracle judges an operation on etcd by what etcd itself answers, with no time limit:
//
//   - elections: the raft term (the highest one the members answer `endpoint status` with)
//     rises once per election round. Read before the operation and after it has converged, the
//     rise must be exactly the elections the procedure is designed to cause: one per
//     move-leader hand-off, none while the leader stays. etcd runs raft with CheckQuorum and
//     pre-vote: a leader that hears from no quorum for an election timeout steps down, and a
//     new leader can only be elected at a higher term once quorum is back, while a member that
//     restarts alone cannot raise the term (its pre-vote is refused while the leader is live).
//     So a quorum loss shows as an election the procedure did not plan; TestEtcdQuorumOracle
//     proves both halves.
//   - linearizability and durability: a load puts keys <prefix>/<i> one after the other and
//     reads the prefix with linearizable gets throughout. Every read's revision is at least
//     that of every put acknowledged before the read began and of every earlier read, its key
//     count at least the puts acknowledged before it, and at the end every acknowledged key
//     reads back with its value. Failed requests are counted and named, not judged: a request
//     may fail at a leader change by design.
type etcdOracle struct {
	ctl    etcdCtlFunc
	prefix string
	term0  uint64
	lead0  uint64
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu         sync.Mutex
	acked      map[string]string
	ackedRev   int64 // revision of the last acknowledged put
	readRev    int64 // revision of the last successful read
	reads      int
	violations []string
	failures   map[string]int // failed requests by error line
	terms      []string       // "term T: leader L" as sampled, for the log
}

// etcdRaft is the highest raft term among the members that answer `endpoint status`, the
// leader they name at it (0: none), and whether every answering member names no leader.
func etcdRaft(ctx context.Context, ctl etcdCtlFunc) (term, leader uint64, noLeader bool, err error) {
	// Short timeouts: etcdctl asks the addresses one after the other, and one without a
	// member would hold every sample up for the command timeout.
	out, err := ctl(ctx, "500ms", "1500ms", "endpoint", "status", "-w", "json")
	var sts []struct {
		Status struct {
			Leader   uint64 `json:"leader"`
			RaftTerm uint64 `json:"raftTerm"`
		} `json:"Status"`
	}
	if jerr := json.Unmarshal(out, &sts); jerr != nil || len(sts) == 0 {
		return 0, 0, false, fmt.Errorf("no member answered endpoint status: %w", errors.Join(err, jerr))
	}
	noLeader = true
	for _, s := range sts {
		if s.Status.RaftTerm > term || (s.Status.RaftTerm == term && leader == 0) {
			term, leader = s.Status.RaftTerm, s.Status.Leader
		}
		if s.Status.Leader != 0 {
			noLeader = false
		}
	}
	return term, leader, noLeader, nil
}

// etcdRaftSettled reads etcdRaft until a leader is named (bounded by a minute).
func etcdRaftSettled(t *testing.T, ctl etcdCtlFunc) (term, leader uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		term, leader, _, err := etcdRaft(ctx, ctl)
		if err == nil && leader != 0 {
			return term, leader
		}
		select {
		case <-ctx.Done():
			t.Fatalf("etcd names no leader: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// startEtcdOracle reads the raft term and starts the load. Call it with the cluster settled.
func startEtcdOracle(t *testing.T, ctl etcdCtlFunc) *etcdOracle {
	t.Helper()
	o := &etcdOracle{ctl: ctl, prefix: fmt.Sprintf("/e2e-oracle/%d/", time.Now().UnixNano()),
		acked: map[string]string{}, failures: map[string]int{}}
	o.term0, o.lead0 = etcdRaftSettled(t, ctl)
	ctx, cancel := context.WithCancel(t.Context())
	o.cancel = cancel
	o.done.Go(func() { o.load(ctx) })
	o.done.Go(func() { o.sample(ctx) })
	return o
}

// etcdHeader is the response header etcdctl prints with -w json.
type etcdHeader struct {
	Header struct {
		Revision int64  `json:"revision"`
		RaftTerm uint64 `json:"raft_term"`
	} `json:"header"`
	Count int `json:"count"`
}

func (o *etcdOracle) fail(what string, err error) {
	line := err.Error()
	if i := strings.LastIndex(line, ": "); i >= 0 {
		line = line[i+2:]
	}
	o.failures[what+": "+line]++
}

func (o *etcdOracle) load(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		// A linearizable read: it must see every put acknowledged before it began.
		o.mu.Lock()
		floorRev, floorCount := o.ackedRev, len(o.acked)
		o.mu.Unlock()
		// count is the number of keys in the range, whatever the limit.
		out, err := o.ctl(ctx, "1s", "3s", "get", o.prefix, "--prefix", "--keys-only", "--limit=1", "-w", "json")
		var h etcdHeader
		if err == nil {
			err = json.Unmarshal(out, &h)
		}
		o.mu.Lock()
		switch {
		case ctx.Err() != nil:
		case err != nil:
			o.fail("get", err)
		default:
			o.reads++
			if h.Header.Revision < floorRev || h.Header.Revision < o.readRev {
				o.violations = append(o.violations, fmt.Sprintf("linearizable read at revision %d after a put acknowledged at %d and a read at %d", h.Header.Revision, floorRev, o.readRev))
			}
			if h.Count < floorCount {
				o.violations = append(o.violations, fmt.Sprintf("linearizable read counts %d keys after %d puts were acknowledged", h.Count, floorCount))
			}
			o.readRev = max(o.readRev, h.Header.Revision)
		}
		o.mu.Unlock()

		k, v := fmt.Sprintf("%s%06d", o.prefix, i), strconv.Itoa(i)
		out, err = o.ctl(ctx, "1s", "3s", "put", k, v, "-w", "json")
		h = etcdHeader{}
		if err == nil {
			err = json.Unmarshal(out, &h)
		}
		o.mu.Lock()
		switch {
		case ctx.Err() != nil:
		case err != nil:
			o.fail("put", err)
		default:
			o.acked[k] = v
			o.ackedRev = max(o.ackedRev, h.Header.Revision)
		}
		o.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // pacing of a background load, not a wait for state
		}
	}
}

// sample logs the raft terms and leaders the members answer with, for the verdict's message.
func (o *etcdOracle) sample(ctx context.Context) {
	for ctx.Err() == nil {
		if term, leader, _, err := etcdRaft(ctx, o.ctl); err == nil {
			s := fmt.Sprintf("term %d: leader %x", term, leader)
			o.mu.Lock()
			if n := len(o.terms); n == 0 || o.terms[n-1] != s {
				o.terms = append(o.terms, s)
			}
			o.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond): // pacing of the samples, not a wait for state
		}
	}
}

// verdict stops the load and returns what etcd says went wrong, empty when nothing did. Call it
// once the operation converged: elections is the number the procedure is designed to cause.
func (o *etcdOracle) verdict(t *testing.T, what string, elections int) []string {
	t.Helper()
	o.cancel()
	o.done.Wait()
	term1, lead1 := etcdRaftSettled(t, o.ctl)
	o.mu.Lock()
	defer o.mu.Unlock()
	var probs []string
	probs = append(probs, o.violations...)
	if got := int(term1 - o.term0); got != elections {
		probs = append(probs, fmt.Sprintf("raft term %d before, %d after: %d elections, the procedure is designed for %d (an unplanned election: a leader lost its quorum or was stopped without a hand-off); sampled %v",
			o.term0, term1, got, elections, o.terms))
	}
	if len(o.acked) == 0 || o.reads == 0 {
		probs = append(probs, fmt.Sprintf("the load did not run: %d puts acknowledged, %d reads", len(o.acked), o.reads))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := o.ctl(ctx, "1s", "10s", "get", o.prefix, "--prefix", "-w", "json")
	var resp struct {
		Kvs []struct {
			Key   []byte `json:"key"`
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	if err == nil {
		err = json.Unmarshal(out, &resp)
	}
	if err != nil {
		probs = append(probs, fmt.Sprintf("reading the load's keys back: %v", err))
	} else {
		got := map[string]string{}
		for _, kv := range resp.Kvs {
			got[string(kv.Key)] = string(kv.Value)
		}
		lost := 0
		for k, v := range o.acked {
			if got[k] != v {
				lost++
			}
		}
		if lost > 0 {
			probs = append(probs, fmt.Sprintf("%d of %d acknowledged puts lost", lost, len(o.acked)))
		}
	}
	t.Logf("%s: raft term %d (leader %x) before, %d (leader %x) after; %d puts acknowledged, %d linearizable reads, failed requests %v",
		what, o.term0, o.lead0, term1, lead1, len(o.acked), o.reads, o.failures)
	return probs
}

// check fails the test with every problem verdict finds.
func (o *etcdOracle) check(t *testing.T, what string, elections int) {
	t.Helper()
	for _, p := range o.verdict(t, what, elections) {
		t.Errorf("%s: %s", what, p)
	}
}

// etcdMemberIDs maps member names to IDs from `member list -w json`.
func etcdMemberIDs(ctx context.Context, ctl etcdCtlFunc) (map[string]uint64, error) {
	out, err := ctl(ctx, "1s", "5s", "member", "list", "-w", "json")
	if err != nil {
		return nil, err
	}
	var ml struct {
		Members []etcdMember `json:"members"`
	}
	if err := json.Unmarshal(out, &ml); err != nil {
		return nil, fmt.Errorf("decode member list: %w", err)
	}
	ids := map[string]uint64{}
	for _, m := range ml.Members {
		ids[m.Name] = m.ID
	}
	return ids, nil
}

// etcdLeaderName is the name of the member etcd names leader.
func etcdLeaderName(t *testing.T, ctl etcdCtlFunc) string {
	t.Helper()
	_, leader := etcdRaftSettled(t, ctl)
	ids, err := etcdMemberIDs(t.Context(), ctl)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	for name, id := range ids {
		if id == leader {
			return name
		}
	}
	t.Fatalf("leader %x is not in member list %v", leader, ids)
	return ""
}

// pinEtcdLeader makes member name the leader (etcdctl move-leader) unless it leads already, so
// a procedure that neither restarts nor removes it is designed to cause no election.
func pinEtcdLeader(t *testing.T, ctl etcdCtlFunc, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ids, err := etcdMemberIDs(ctx, ctl)
	if err != nil || ids[name] == 0 {
		t.Fatalf("member list: %v (IDs %v, want %s)", err, ids, name)
	}
	for {
		_, leader, _, err := etcdRaft(ctx, ctl)
		if err == nil && leader == ids[name] {
			return
		}
		if err == nil && leader != 0 {
			if out, err := ctl(ctx, "1s", "10s", "move-leader", strconv.FormatUint(ids[name], 16)); err != nil {
				t.Logf("move-leader to %s: %v: %s", name, err, out)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not become the etcd leader: %v", name, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// TestEtcdQuorumOracle proves the oracles the etcd e2e tests judge procedures by: with etcd-0
// leading, a quorum-safe restart by hand (etcd-1's pod deleted and back healthy, then etcd-2's)
// passes etcdOracle with no election and has one member down at a time (downAtOnce); a
// quorum-unsafe one (etcd-1 and etcd-2 stopped together until etcd-0, the leader, says it leads
// no more, then both back) fails etcdOracle by etcd's own term, and has two down at once; so
// does deleting both pods at once, whose outage may be too short for etcd to notice.
func TestEtcdQuorumOracle(t *testing.T) {
	x := newEtcd(t, 3)
	ctx := t.Context()
	x.pinLeader("etcd-0")

	o, mark := x.oracle(), len(x.runner.Transitions())
	for _, pod := range []string{"etcd-1", "etcd-2"} {
		if err := bed.Client.CoreV1().Pods(x.ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := bed.WaitPodsReady(ctx, x.ns, "app.kubernetes.io/instance=etcd", 3); err != nil {
			t.Fatal(err)
		}
		x.waitHealthy(3)
	}
	if probs := o.verdict(t, "one member at a time", 0); len(probs) != 0 {
		t.Fatalf("a quorum-safe restart fails the oracle: %v", probs)
	}
	if d := x.downAtOnce(mark); d != 1 {
		t.Fatalf("one member at a time: %d members down at once, want 1", d)
	}

	o, mark = x.oracle(), len(x.runner.Transitions())
	x.runner.Suspend("etcd-1")
	x.runner.Suspend("etcd-2")
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		// etcd-0 alone answers; it steps down once it has heard from no quorum for an
		// election timeout (CheckQuorum).
		if _, _, noLeader, err := etcdRaft(wctx, x.ctlTimeouts); err == nil && noLeader {
			break
		}
		select {
		case <-wctx.Done():
			t.Fatal("etcd-0 still names a leader with etcd-1 and etcd-2 stopped")
		case <-time.After(200 * time.Millisecond):
		}
	}
	x.runner.Resume("etcd-1")
	x.runner.Resume("etcd-2")
	x.waitHealthy(3)
	probs := o.verdict(t, "two members at once", 0)
	t.Logf("two members at once: %v", probs)
	if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, "elections, the procedure is designed for 0") }) {
		t.Fatalf("a quorum loss passes the oracle: %v", probs)
	}
	if d := x.downAtOnce(mark); d != 2 {
		t.Fatalf("two members stopped together: %d members down at once, want 2", d)
	}

	mark = len(x.runner.Transitions())
	for _, pod := range []string{"etcd-1", "etcd-2"} {
		if err := bed.Client.CoreV1().Pods(x.ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := bed.WaitPodsReady(ctx, x.ns, "app.kubernetes.io/instance=etcd", 3); err != nil {
		t.Fatal(err)
	}
	x.waitHealthy(3)
	if d := x.downAtOnce(mark); d != 2 {
		t.Fatalf("two pods deleted together: %d members down at once, want 2", d)
	}
}
