package commands

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/tui"
)

// fleetView is a mutating fleet run's terminal UI (tui.RunFleet), chosen as the
// single-cluster one is (runWithView): on a terminal, without --no-tui, on -o text, and not
// for --dry-run. Each target's run sends its events, the ones the plain and NDJSON printers
// get, to the view through its factory's fleetSink, tagged with the target; the fleet's own
// results give each target's state (running, then its outcome as the summary names it). The
// lines a target writes beside its events go to the view too, and are printed, prefixed with
// the target, once the view has exited; the summary follows as without the view. A nil
// *fleetView is the plain or NDJSON stream: every method passes through.
type fleetView struct {
	r       *Runner
	title   string
	ts      []fleet.Target
	outcome func(fleet.Result) string
	feed    *tui.FleetFeed

	mu          sync.Mutex
	out, errOut bytes.Buffer
}

// newFleetView returns the view of a fleet run over ts, or nil when the run prints plain
// lines or NDJSON; outcome names a target's outcome (the summary's word).
func newFleetView(r *Runner, title string, ts []fleet.Target, outcome func(fleet.Result) string) *fleetView {
	if r.Clusters.outputFormat() != "text" || r.DryRun || r.NoTUI || !r.IsTerminal() {
		return nil
	}
	return &fleetView{r: r, title: title, ts: ts, outcome: outcome, feed: tui.NewFleetFeed(64)}
}

// sink is the sink of target t's run (its factory's fleetSink); nil without the view.
func (v *fleetView) sink(t fleet.Target) ops.Sink {
	if v == nil {
		return nil
	}
	return v.feed.Target(indexOf(v.ts, t))
}

// streams are where target t's text goes (through its targetWriter, a whole prefixed line
// at a time): out and errOut, or under the view held for after it.
func (v *fleetView) streams(t fleet.Target, out, errOut io.Writer) (io.Writer, io.Writer) {
	if v == nil {
		return out, errOut
	}
	i := indexOf(v.ts, t)
	return &heldLines{v: v, buf: &v.out, i: i}, &heldLines{v: v, buf: &v.errOut, i: i}
}

// heldLines keeps a target's lines for after the view and shows them in it.
type heldLines struct {
	v   *fleetView
	buf *bytes.Buffer
	i   int
}

func (h *heldLines) Write(p []byte) (int, error) {
	h.v.mu.Lock()
	h.buf.Write(p)
	h.v.mu.Unlock()
	line := strings.TrimSuffix(string(p), "\n")
	line = strings.TrimPrefix(line, "["+h.v.ts[h.i].String()+"] ")
	h.v.feed.Send(tui.FleetMsg{Target: h.i, Line: line})
	return len(p), nil
}

// show sends r's state to the view: its outcome and error.
func (v *fleetView) show(r fleet.Result) {
	if v == nil {
		return
	}
	msg := tui.FleetMsg{Target: indexOf(v.ts, r.Target), State: v.outcome(r)}
	if r.Err != nil {
		msg.Error = oneLineErr(r.Err)
	}
	v.feed.Send(msg)
}

// target runs target t (run), showing it running, then its outcome.
func (v *fleetView) target(t fleet.Target, run func() error) error {
	if v == nil {
		return run()
	}
	v.feed.Send(tui.FleetMsg{Target: indexOf(v.ts, t), State: tui.FleetRunning})
	err := run()
	v.show(fleet.Result{Target: t, Started: true, Err: err})
	return err
}

// run runs the fleet (body) and returns its results, one per target of the view. Under the
// view body runs over a context that the view's q or ctrl+c cancels: the fleet's interrupt,
// as a signal's (no new target starts, the running ones stop at a safe point and report);
// cmd's context becomes that one too, since a target's run reads its context from cmd, as
// a signal reaches it. Every target's final state goes to the view, which exits when the
// fleet has ended; then the held lines are printed. A forced quit returns at once, as the
// single-cluster view's.
func (v *fleetView) run(ctx context.Context, cmd *cobra.Command, body func(context.Context) []fleet.Result) ([]fleet.Result, error) {
	if v == nil {
		return body(ctx), nil
	}
	opCtx, abort := context.WithCancel(ctx)
	defer abort()
	// Not set back: the command ends with the fleet (and a forced quit leaves targets
	// running that read it).
	cmd.SetContext(opCtx)
	done := make(chan []fleet.Result, 1)
	go func() {
		rs := body(opCtx)
		for _, r := range rs {
			v.show(r)
		}
		v.feed.Close()
		done <- rs
	}()
	targets := make([]tui.FleetTarget, len(v.ts))
	for i, t := range v.ts {
		targets[i] = tui.FleetTarget{Context: t.Context, Namespace: t.Namespace, Cluster: t.Cluster}
	}
	res, err := tui.RunFleet(opCtx, v.feed, tui.FleetOptions{Title: v.title, Targets: targets, Abort: abort,
		NoColor: v.r.Getenv("NO_COLOR") != "", Output: v.r.Out, Input: v.r.In})
	switch {
	case err != nil:
		// The terminal failed; the fleet goes on without a view.
		fmt.Fprintf(v.r.ErrOut, "WARNING: terminal UI failed (%v); waiting for the fleet to finish\n", err)
	case res.Forced:
		return nil, &ops.CodedError{Kind: ops.ErrInterrupted,
			Msg: "forced quit: targets may still be in flight; run `kubectl dbops status` on each and `resume --fleet` to continue"}
	}
	rs := <-done
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, err := v.r.Out.Write(v.out.Bytes()); err != nil {
		return rs, fmt.Errorf("writing output: %w", err)
	}
	_, _ = v.r.ErrOut.Write(v.errOut.Bytes())
	return rs, nil
}
