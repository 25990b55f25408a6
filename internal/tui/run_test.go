package tui

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// syncBuffer is written by the program's renderer goroutine.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // closed and replaced on every write
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written != nil {
		close(b.written)
	}
	b.written = make(chan struct{})
	return b.buf.Write(p)
}

// shows returns a channel closed once the output contains s.
func (b *syncBuffer) shows(s string) <-chan struct{} {
	found := make(chan struct{})
	go func() {
		for {
			b.mu.Lock()
			if b.written == nil {
				b.written = make(chan struct{})
			}
			ok, ch := strings.Contains(b.buf.String(), s), b.written
			b.mu.Unlock()
			if ok {
				close(found)
				return
			}
			<-ch
		}
	}()
	return found
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type runResult struct {
	res Result
	err error
}

// startRun runs the program headless (no terminal input) in the background.
func startRun(ctx context.Context, feed *Feed, opts Options) (<-chan runResult, *syncBuffer) {
	out := &syncBuffer{}
	opts.Output = out
	opts.NoColor = true
	ch := make(chan runResult, 1)
	go func() {
		res, err := Run(ctx, feed, opts, tea.WithInput(nil))
		ch <- runResult{res, err}
	}()
	return ch, out
}

func waitRun(t *testing.T, ch <-chan runResult) runResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
		return runResult{}
	}
}

func TestRunUntilDone(t *testing.T) {
	feed := NewFeed(0)
	ch, out := startRun(context.Background(), feed, Options{Abort: func() {}})
	for _, e := range fixtureEvents() {
		feed.Emit(e)
	}
	r := waitRun(t, ch)
	if r.err != nil || r.res != (Result{Outcome: ops.OutcomeInterrupted}) {
		t.Fatalf("Run = %+v, %v; want interrupted, nil", r.res, r.err)
	}
	// The resume hint is printed after the program, whole, on its own line.
	wantTail := "✗ interrupted after 3m12s in step 3/4 (pod/crate-data-1: restart pod)\n" +
		"re-run the same command to resume: kubectl dbops rolling-restart prod/crate-main --rolling --group data\n"
	if !strings.HasSuffix(out.String(), wantTail) {
		t.Errorf("output does not end with the outcome block:\n%q", out.String())
	}
	// The view has gone: later events must not block the executor.
	emitted := make(chan struct{})
	go func() {
		feed.Emit(ops.Event{Type: ops.EventWarning})
		close(emitted)
	}()
	select {
	case <-emitted:
	case <-time.After(5 * time.Second):
		t.Fatal("Emit blocked after the view exited")
	}
}

func TestRunFeedClosedWithoutDone(t *testing.T) {
	feed := NewFeed(4)
	ch, _ := startRun(context.Background(), feed, Options{})
	feed.Emit(ops.Event{Type: ops.EventPlan, Plan: fixturePlan()})
	feed.Close()
	if r := waitRun(t, ch); r.err != nil || r.res != (Result{}) {
		t.Fatalf("Run = %+v, %v; want zero result, nil", r.res, r.err)
	}
}

// TestRunKeepsGoingWhenContextCancelled: a signal cancels the operation;
// the view must stay until the executor reports done.
func TestRunKeepsGoingWhenContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	feed := NewFeed(0)
	ch, out := startRun(ctx, feed, Options{Abort: cancel})
	feed.Emit(ops.Event{Type: ops.EventPlan, Plan: fixturePlan()})
	cancel()
	// The view took the cancellation in (it shows that it is aborting) and did not return.
	select {
	case r := <-ch:
		t.Fatalf("Run returned on cancellation (%+v, %v) before the done event", r.res, r.err)
	case <-out.shows(abortingText):
	case <-time.After(10 * time.Second):
		t.Fatalf("the view never showed %q after the cancellation:\n%s", abortingText, out)
	}
	select {
	case r := <-ch:
		t.Fatalf("Run returned on cancellation (%+v, %v) before the done event", r.res, r.err)
	default:
	}
	feed.Emit(ops.Event{Type: ops.EventDone, Outcome: ops.OutcomeInterrupted})
	if r := waitRun(t, ch); r.err != nil || r.res.Outcome != ops.OutcomeInterrupted {
		t.Fatalf("Run = %+v, %v; want interrupted", r.res, r.err)
	}
}

func TestFeed(t *testing.T) {
	// synctest.Wait returns once every goroutine of the bubble is blocked: the observable
	// point at which an Emit that waits for the view is waiting (no window of time).
	synctest.Test(t, func(t *testing.T) {
		f := NewFeed(1)
		f.Emit(ops.Event{Type: ops.EventWarning, Message: "first"})
		sent := make(chan struct{})
		go func() {
			f.Emit(ops.Event{Type: ops.EventWarning, Message: "second"}) // buffer full
			close(sent)
		}()
		synctest.Wait()
		select {
		case <-sent:
			t.Fatal("Emit returned with the buffer full: it did not wait for the view")
		default:
		}
		// The view gets both, in order.
		for _, want := range []string{"first", "second"} {
			if e := <-f.Events(); e.Message != want {
				t.Fatalf("view got %q, want %q", e.Message, want)
			}
		}
		<-sent

		f.Emit(ops.Event{Type: ops.EventWarning, Message: "buffered"})
		blocked := make(chan struct{})
		go func() {
			f.Emit(ops.Event{Type: ops.EventWarning, Message: "blocked"}) // buffer full
			close(blocked)
		}()
		synctest.Wait() // the Emit is blocked
		f.Close()
		<-blocked // Close released it (else the bubble deadlocks and the test fails)
		f.Close() // idempotent
		f.Emit(ops.Event{Type: ops.EventWarning, Message: "late"})

		var got []string
		for e := range f.Events() {
			got = append(got, e.Message)
		}
		// The buffered event survives Close; the blocked one may or may not have made it
		// (Close and the view race for it), the late one never does.
		if len(got) == 0 || got[0] != "buffered" || slices.Contains(got, "late") {
			t.Errorf("events after Close = %v", got)
		}
	})
}

// TestFeedConcurrent: emits racing with Close (run under -race too). The
// view gets each emitter's events in the order they were emitted, none twice
// and none it was not sent; Close releases every Emit and closes the channel;
// an Emit after Close is dropped.
func TestFeedConcurrent(t *testing.T) {
	const emitters, perEmitter, closeAfter = 4, 100, 50
	f := NewFeed(8)
	var wg sync.WaitGroup
	for w := range emitters {
		wg.Go(func() {
			for i := range perEmitter {
				f.Emit(ops.Event{Type: ops.EventPods, Message: fmt.Sprintf("%d/%d", w, i)})
			}
		})
	}
	// Close once the view has read closeAfter events, so Close meets Emits in
	// flight (an observable point, not a sleep).
	var got []string
	reachedClose, viewDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(viewDone)
		for e := range f.Events() {
			got = append(got, e.Message)
			if len(got) == closeAfter {
				close(reachedClose)
			}
		}
	}()
	select {
	case <-reachedClose:
	case <-time.After(10 * time.Second):
		t.Fatalf("the view did not get %d events", closeAfter)
	}
	f.Close()
	emitsDone := make(chan struct{})
	go func() { wg.Wait(); close(emitsDone) }()
	select {
	case <-emitsDone:
	case <-time.After(10 * time.Second):
		t.Fatal("Emits still blocked after Close")
	}
	select {
	case <-viewDone:
	case <-time.After(10 * time.Second):
		t.Fatal("Events() not closed after Close")
	}
	f.Emit(ops.Event{Type: ops.EventPods, Message: "late"})

	if len(got) < closeAfter || len(got) > emitters*perEmitter {
		t.Fatalf("view got %d events, want %d..%d", len(got), closeAfter, emitters*perEmitter)
	}
	next := make([]int, emitters) // next index expected from each emitter
	for _, m := range got {
		var w, i int
		if _, err := fmt.Sscanf(m, "%d/%d", &w, &i); err != nil || w < 0 || w >= emitters {
			t.Fatalf("view got an event nobody emitted: %q", m)
		}
		if i < next[w] {
			t.Fatalf("emitter %d: event %d after %d (out of order or twice): %v", w, i, next[w]-1, got)
		}
		next[w] = i + 1
	}
}
