package cratedb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// The evidence gate (docs/procedures.md, CrateDB rolling restart): a restarted pod counts as
// back when its node is in sys.nodes again (matched to the new pod, its ID read there), every
// node the StatefulSets want is in, shard allocation is back to all, every table is green,
// a master is elected and no shard copy is INITIALIZING or RELOCATING (sys.shards), and all
// of that has held for Config.StableFor. Green alone is not enough: a cluster is green while
// the balancer relocates copies, and a gate that goes on while copies still move or recover
// takes the next node down under them. The crate-operator's rule (green N times in a row, an
// interval apart: Config.GreenInARow) stays available as greenInARow.

const (
	// DefaultStableFor is how long the evidence must hold before the next pod goes: long
	// enough to see a node that rejoined drop out again or the balancer start moving copies,
	// short enough that a pod costs at most ~2s beyond its start and its shards' recovery.
	DefaultStableFor = 1500 * time.Millisecond
	// gateFirstPoll and gateMaxPoll bound the gate's backoff: the database cannot be
	// watched, and most of a gate is shard recovery, which takes seconds.
	gateFirstPoll = 25 * time.Millisecond
	gateMaxPoll   = 250 * time.Millisecond

	// hintRecovery is how to watch the recoveries the gate waits for.
	hintRecovery = "watch them: SELECT table_name, id, node['name'], recovery['size']['percent'] FROM sys.shards WHERE routing_state = 'INITIALIZING'"

	// sqlShardsBusy also reads, in the same round trip, how far the busy copies' recoveries
	// are: recovery['size']['used'] is a shard's total bytes and ['recovered'] the bytes it
	// has (existing and reused included), so their difference is what is still to copy
	// (CrateDB's docs/admin/system-information.rst, "Shards"). NULL where CrateDB keeps no
	// recovery state (sum skips it).
	sqlShardsBusy = `SELECT count(*), sum(recovery['size']['used']), sum(recovery['size']['recovered']) FROM sys.shards WHERE routing_state IN ('INITIALIZING', 'RELOCATING')`
)

// evidence is one reading of what the gate waits for.
type evidence struct {
	// node is the pod's node as sys.nodes lists it ("" when not there), id its ID there;
	// joined says why it does not count yet ("" when it does).
	node, id, joined string
	nodes, expected  int64
	alloc            string
	severity         int64
	master           string
	busy             int64
	// recovering is the bytes the busy copies still have to recover (0 when unknown).
	recovering int64
}

// missing lists what the reading lacks; empty when the pod counts as back.
func (v evidence) missing() []string {
	var out []string
	if v.joined != "" {
		out = append(out, v.joined)
	}
	if v.nodes != v.expected {
		out = append(out, fmt.Sprintf("%d/%d nodes in sys.nodes", v.nodes, v.expected))
	}
	if v.alloc != "all" {
		out = append(out, fmt.Sprintf("shard allocation is %q, not all", v.alloc))
	}
	switch {
	case v.severity >= 3:
		out = append(out, "a table is red")
	case v.severity == 2:
		out = append(out, "a table is yellow")
	}
	if v.master == "" {
		out = append(out, "no master elected")
	}
	if v.busy > 0 {
		out = append(out, fmt.Sprintf("%d shard copies INITIALIZING or RELOCATING", v.busy))
	}
	return out
}

// readEvidence reads one evidence reading for pod: sys.nodes (matched to the pod as it is
// now, from the run's pod informer), the allocation setting, health, master and sys.shards.
func (e *Engine) readEvidence(ctx context.Context, c *ops.Cluster, pod string, expected int64) (evidence, error) {
	v := evidence{expected: expected}
	rows, err := e.readNodes(ctx, c, nil)
	if err != nil {
		return v, err
	}
	v.nodes = int64(len(rows))
	live, err := e.livePods(ctx, c, []string{pod})
	if err != nil {
		return v, err
	}
	pn := buildNodeMap([]string{pod}, live, rows).pods[pod]
	switch {
	case pn == nil || !pn.Facts.Ready:
		v.joined = "pod " + pod + " not Ready"
	case pn.Problem != "":
		v.joined = pn.Problem
	case pn.Row == nil:
		v.joined = pod + " (" + pn.Facts.describe() + ") not in sys.nodes"
	default:
		v.node, v.id = pn.Row.Name, pn.Row.ID
	}
	s := e.session(c)
	for _, q := range []struct {
		sql string
		set func([][]any)
	}{
		{sqlAllocEnable, func(r [][]any) { v.alloc = strings.ToLower(cellString(r, 0)) }},
		{sqlMaxSeverity, func(r [][]any) { v.severity = cellInt(r, 0) }},
		{sqlMasterNode, func(r [][]any) { v.master = cellString(r, 0) }},
		{sqlShardsBusy, func(r [][]any) {
			v.busy = cellInt(r, 0)
			v.recovering = max(cellInt(r, 1)-cellInt(r, 2), 0)
		}},
	} {
		r, err := s.query(ctx, nil, q.sql)
		if err != nil {
			return v, sqlErr(q.sql, err)
		}
		q.set(r)
	}
	return v, nil
}

// waitSettled waits until the evidence for pod has held for StableFor, polling with a
// backoff from gateFirstPoll to gateMaxPoll; it proceeds the moment the window is over. Any
// reading that lacks something, or shows the node under another ID (it restarted again),
// starts the window again. Database errors are ridden out as pollDB does.
func (e *Engine) waitSettled(ctx context.Context, sc *ops.StepContext, c *ops.Cluster, pod string) error {
	expected := expectedNodes(c)
	stable := e.cfg.StableFor
	var since time.Time
	id, last := "", ""
	delay := gateFirstPoll
	failures := 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to settle: %w", pod, context.Cause(ctx))
		case <-timer.C:
		}
		v, err := e.readEvidence(ctx, c, pod, expected)
		now := time.Now()
		var msg string
		switch {
		case err != nil:
			if ctx.Err() != nil || errors.Is(err, ops.ErrUsage) || errors.Is(err, ops.ErrLocked) {
				return err
			}
			if failures++; failures > e.cfg.PollErrors {
				return fmt.Errorf("waiting for %s to settle: %d database errors in a row, the last: %w", pod, failures, err)
			}
			since = time.Time{}
			msg = fmt.Sprintf("database error %d of at most %d in a row, retrying: %v", failures, e.cfg.PollErrors, err)
		case len(v.missing()) > 0:
			failures = 0
			since = time.Time{}
			msg = "waiting for " + pod + ": " + strings.Join(v.missing(), "; ")
			if v.busy > 0 && v.recovering > 0 {
				// Copies recover: the step's ETA is the bytes left over the rate they arrive at,
				// published with the wait as the drain does (every reading, so the rate moves).
				sc.Remaining(v.recovering, ops.UnitBytes)
				last = msg
				sc.Block(ctx, ops.BlockedShard,
					fmt.Sprintf("%d shard copies recovering, %s left, after %s's restart (sys.shards)", v.busy, ops.FormatBytes(v.recovering), pod),
					hintRecovery, msg)
			}
		default:
			failures = 0
			if v.id != id {
				// First sight of the node, or it came back under a new ID: start over.
				id, since = v.id, time.Time{}
			}
			if since.IsZero() {
				since = now
			}
			if now.Sub(since) >= stable {
				sc.Progress(1, 1, "checks", fmt.Sprintf("%s (node %s) settled: green, allocation all, no shard initializing or relocating, for %s", pod, v.node, stable))
				return nil
			}
			msg = fmt.Sprintf("%s (node %s) settled: green, allocation all, no shard initializing or relocating; holding for %s", pod, v.node, stable)
		}
		if msg != last {
			last = msg
			sc.Waiting(msg)
		}
		next := delay
		delay = min(delay*2, gateMaxPoll)
		if !since.IsZero() {
			// Read again exactly when the window ends: proceed the moment it holds.
			next = min(next, max(since.Add(stable).Sub(time.Now()), 0))
		}
		timer.Reset(next)
	}
}
