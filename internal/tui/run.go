package tui

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Feed is an ops.Sink that hands events to the interactive view over a
// channel. Emit blocks while the view is behind (no event is dropped, so
// the view never misses a step change) and returns at once after Close, so
// an executor can never hang on a view that has gone away.
type Feed struct {
	ch   chan ops.Event
	stop chan struct{}
	once sync.Once
	// mu orders Close against in-flight Emits: the channel is closed only
	// once no Emit can send on it.
	mu     sync.RWMutex
	closed bool
}

var _ ops.Sink = (*Feed)(nil)

// NewFeed returns a feed buffering up to buffer events.
func NewFeed(buffer int) *Feed {
	return &Feed{ch: make(chan ops.Event, max(buffer, 0)), stop: make(chan struct{})}
}

// Emit delivers e to the view, or drops it once the feed is closed.
func (f *Feed) Emit(e ops.Event) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return
	}
	select {
	case f.ch <- e:
	case <-f.stop:
	}
}

// Events is the channel the view reads (Options.Events). It is closed by
// Close after the events already buffered.
func (f *Feed) Events() <-chan ops.Event {
	return f.ch
}

// Close stops accepting events and closes the channel; buffered events are
// still delivered. Call it when the executor has returned (the view then
// exits even if no done event came) and when the view has exited (Run does
// this). It is safe to call more than once and concurrently with Emit.
func (f *Feed) Close() {
	f.once.Do(func() {
		close(f.stop) // release Emits blocked on a full channel
		f.mu.Lock()
		f.closed = true
		close(f.ch)
		f.mu.Unlock()
	})
}

// Run shows the interactive view for one operation until the done event
// arrives, the feed is closed, or the user forces quit. opts.Events is set
// from feed.
//
// ctx is the operation's context: when it is cancelled from outside the
// view (a signal handler), the view switches to "aborting safely" and keeps
// running until the executor reports done. Bubble Tea's own signal handler
// is disabled because it would quit the view on SIGINT while the operation
// is still winding down; the command must handle SIGINT/SIGTERM itself
// (signal.NotifyContext). Keyboard ctrl+c reaches the view as a key.
//
// The view is drawn on opts.Output; extra options go to tea.NewProgram
// (tea.WithInput, tea.WithAltScreen...).
func Run(ctx context.Context, feed *Feed, opts Options, extra ...tea.ProgramOption) (Result, error) {
	defer feed.Close()
	out := opts.Output
	if out == nil {
		return Result{}, errors.New("tui: no output to draw on")
	}
	opts.Events = feed.Events()
	m := NewModel(opts)
	m.outcomeAfterExit = true
	popts := []tea.ProgramOption{tea.WithoutSignalHandler(), tea.WithOutput(out)}
	if opts.Input != nil {
		// The command's own stdin, not the process's: keys come from the
		// streams the command was given.
		popts = append(popts, tea.WithInput(opts.Input))
	}
	popts = append(popts, extra...)
	p := tea.NewProgram(m, popts...)

	exited := make(chan struct{})
	defer close(exited)
	go func() {
		select {
		case <-ctx.Done():
			// Send blocks until received or the program ends.
			p.Send(abortingMsg{})
		case <-exited:
		}
	}()

	final, err := p.Run()
	fm, ok := final.(Model)
	if !ok {
		return Result{}, err
	}
	if lines := fm.outcomeLines(0); len(lines) > 0 {
		if _, werr := io.WriteString(out, strings.Join(lines, "\n")+"\n"); werr != nil && err == nil {
			err = werr
		}
	}
	return fm.Result(), err
}
