package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/tui"
)

// confirm asks on the terminal; only called when stdin is one.
func confirm(in io.Reader, out io.Writer, question string) (bool, error) {
	ok, err := tui.Confirm(in, out, question)
	if err != nil {
		return false, fmt.Errorf("reading the confirmation: %w", err)
	}
	return ok, nil
}

// runWithView runs the executor with one of the three views of its events:
// NDJSON for -o json, the Bubble Tea TUI on a terminal, plain lines
// otherwise (CI).
func (g *Runner) runWithView(ctx context.Context, exec *ops.Executor, plan *ops.Plan, cl *Clients, c *ops.Cluster) (err error) {
	// One pod informer for the whole run: the steps' waits, preconditions and UID reads
	// and the pods table all read it (one LIST and one WATCH per run).
	podsCtx, stopInformer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopInformer()
	pods := kube.StartPods(podsCtx, cl.Kube, c.Namespace, clusterSelector(c), c.PodsResourceVersion)
	exec.Pods = pods
	exec.Requests = cl.Requests
	if cl.Requests != nil && g.Clusters.verbosity() > 0 {
		defer func() { fmt.Fprintf(g.ErrOut, "API requests: %s\n", cl.Requests) }()
	}
	// The pods table follows the cluster while the operation runs; it
	// stops before the view closes.
	withPods := func(ctx context.Context, sink ops.Sink) func() {
		pctx, stop := context.WithCancel(ctx)
		watchPods(pctx, pods, cl.Kube, c, cl.Clock, sink)
		return stop
	}
	switch {
	case g.Clusters.outputFormat() == "json":
		// The documented NDJSON stream carries the pods table too; pod events stop at the
		// final done event so that it stays the last line.
		js := tui.NewJSON(g.Out)
		sink := &untilDone{inner: js}
		exec.Sink = sink
		stopPods := withPods(ctx, sink)
		err := exec.Run(ctx, plan)
		g.streamEnded = true
		stopPods()
		return withSinkErr(err, js.Err())
	case g.fleetSink != nil:
		// One target of a fleet shown in the fleet's terminal UI: the same events, to the
		// fleet's view.
		exec.Sink = g.fleetSink
		stopPods := withPods(ctx, g.fleetSink)
		err := exec.Run(ctx, plan)
		stopPods()
		return shownInterruption(err)
	case g.NoTUI || !g.IsTerminal():
		ps := tui.NewPlain(g.Out, tui.PlainOptions{})
		exec.Sink = ps
		err := exec.Run(ctx, plan)
		if ps.Err() == nil {
			err = shownInterruption(err)
		}
		return withSinkErr(err, ps.Err())
	}
	opCtx, abort := context.WithCancel(ctx)
	defer abort()
	feed := tui.NewFeed(64)
	exec.Sink = feed
	stopPods := withPods(ctx, feed)
	errc := make(chan error, 1)
	go func() {
		errc <- exec.Run(opCtx, plan)
		stopPods()
		feed.Close()
	}()
	res, err := tui.Run(opCtx, feed, tui.Options{Abort: abort, NoColor: g.Getenv("NO_COLOR") != "",
		Timeout: exec.Timeout, Output: g.Out, Input: g.In})
	if err != nil {
		// The terminal failed; the operation goes on without a view.
		fmt.Fprintf(g.ErrOut, "WARNING: terminal UI failed (%v); waiting for the operation to finish\n", err)
		return <-errc
	}
	if res.Forced {
		return &ops.CodedError{Kind: ops.ErrInterrupted,
			Msg: "forced quit: the current step may still be in flight; run `kubectl dbops status` and re-run the same command to resume"}
	}
	return shownInterruption(<-errc)
}

// shownError is an error the run's view has shown already, with the way to continue (the
// done event): the command's own error line would only repeat it.
type shownError struct{ error }

func (e shownError) Unwrap() error { return e.error }

// shownInterruption marks a Ctrl-C's error as shown: the plain and terminal views printed the
// step it stopped in and the command that resumes. Other failures keep their error line (CI
// logs grep stderr for it).
func shownInterruption(err error) error {
	if err != nil && errors.Is(err, ops.ErrInterrupted) {
		return shownError{err}
	}
	return err
}

// untilDone passes events on and drops pods events once the done event went out, so a pod
// watcher racing the end of a run never writes after the last line. Pods events before the
// plan event are held (the latest one) and follow it: the stream starts with the lock and
// the plan, whichever is quicker, the run's pod informer or taking the lock.
type untilDone struct {
	mu      sync.Mutex
	inner   ops.Sink
	planned bool
	held    *ops.Event
	done    bool
}

func (u *untilDone) Emit(e ops.Event) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.done && e.Type == ops.EventPods:
		return
	case !u.planned && e.Type == ops.EventPods:
		u.held = &e
		return
	}
	u.inner.Emit(e)
	u.done = u.done || e.Type == ops.EventDone
	if e.Type == ops.EventPlan && !u.planned {
		u.planned = true
		if u.held != nil && !u.done {
			u.inner.Emit(*u.held)
		}
		u.held = nil
	}
}

// withSinkErr reports a failed write of the output stream (a closed pipe):
// the operation ran, but its record did not reach the reader.
func withSinkErr(runErr, sinkErr error) error {
	if runErr != nil || sinkErr == nil {
		return runErr
	}
	return fmt.Errorf("writing output: %w", sinkErr)
}
