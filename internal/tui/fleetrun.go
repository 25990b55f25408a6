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

// FleetFeed hands a fleet run's messages to the fleet view over a channel, as Feed does for
// one run: Send blocks while the view is behind and returns at once after Close.
type FleetFeed struct {
	ch   chan FleetMsg
	stop chan struct{}
	once sync.Once
	mu   sync.RWMutex
	// closed: Close ran; no Send may use the channel any more.
	closed bool
}

// NewFleetFeed returns a feed buffering up to buffer messages.
func NewFleetFeed(buffer int) *FleetFeed {
	return &FleetFeed{ch: make(chan FleetMsg, max(buffer, 0)), stop: make(chan struct{})}
}

// Send delivers msg to the view, or drops it once the feed is closed.
func (f *FleetFeed) Send(msg FleetMsg) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return
	}
	select {
	case f.ch <- msg:
	case <-f.stop:
	}
}

// Target is the sink of target i's run: each event goes to the view tagged with i.
func (f *FleetFeed) Target(i int) ops.Sink { return fleetSink{f: f, i: i} }

type fleetSink struct {
	f *FleetFeed
	i int
}

func (s fleetSink) Emit(e ops.Event) { s.f.Send(FleetMsg{Target: s.i, Event: &e}) }

// Close stops accepting messages and closes the channel (the view then exits); safe to call
// more than once and concurrently with Send.
func (f *FleetFeed) Close() {
	f.once.Do(func() {
		close(f.stop)
		f.mu.Lock()
		f.closed = true
		close(f.ch)
		f.mu.Unlock()
	})
}

// RunFleet shows the fleet view until the feed is closed (the fleet ended) or the user
// forces quit; then it prints, outside the renderer, the outcome and resume line of each
// target whose run did not succeed. ctx is the fleet's context: cancelled from outside the
// view (a signal), the view shows the fleet aborting. As with Run, Bubble Tea's own signal
// handler is off and the keyboard's ctrl+c reaches the view as a key.
func RunFleet(ctx context.Context, feed *FleetFeed, opts FleetOptions, extra ...tea.ProgramOption) (FleetResult, error) {
	defer feed.Close()
	out := opts.Output
	if out == nil {
		return FleetResult{}, errors.New("tui: no output to draw on")
	}
	opts.Events = feed.ch
	popts := []tea.ProgramOption{tea.WithoutSignalHandler(), tea.WithOutput(out)}
	if opts.Input != nil {
		popts = append(popts, tea.WithInput(opts.Input))
	}
	p := tea.NewProgram(NewFleetModel(opts), append(popts, extra...)...)
	exited := make(chan struct{})
	defer close(exited)
	go func() {
		select {
		case <-ctx.Done():
			p.Send(abortingMsg{})
		case <-exited:
		}
	}()
	final, err := p.Run()
	fm, ok := final.(FleetModel)
	if !ok {
		return FleetResult{}, err
	}
	if lines := fm.afterExitLines(); len(lines) > 0 {
		if _, werr := io.WriteString(out, strings.Join(lines, "\n")+"\n"); werr != nil && err == nil {
			err = werr
		}
	}
	return fm.Result(), err
}
