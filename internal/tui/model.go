package tui

import (
	"io"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Options configures the interactive view.
type Options struct {
	// Events is the stream the model waits on (see Feed). Nil means events
	// arrive only as EventMsg, e.g. through tea.Program.Send or in tests.
	Events <-chan ops.Event
	// Abort asks the operation to stop safely, typically the cancel func
	// of the operation's context. The model calls it at most once. When
	// nil, q/ctrl+c quit the view immediately.
	Abort func()
	// NoColor disables all styling. The caller decides (NO_COLOR, --no-color);
	// the model never reads the environment.
	NoColor bool
	// Renderer styles the view when NoColor is false. Nil means basic
	// 16-colour ANSI, which every colour terminal supports and which
	// follows the user's terminal theme.
	Renderer *lipgloss.Renderer
	// Timeout is the operation's overall timeout, shown against elapsed
	// time; a Timeout carried by an event replaces it. Zero hides it.
	Timeout time.Duration
	// Now is the clock for elapsed time and lock expiry. Defaults to
	// time.Now.
	Now func() time.Time
	// Output is where Run draws the view and, after the program exits,
	// prints the outcome and resume hint (outside the renderer, which
	// truncates to the window width). Required by Run. The model itself
	// does not write anywhere.
	Output io.Writer
	// Input is where Run reads keys from (the command's stdin); nil
	// leaves Bubble Tea's default.
	Input io.Reader
}

// EventMsg carries one ops.Event into the model.
type EventMsg ops.Event

// streamEndMsg reports that the events channel was closed.
type streamEndMsg struct{}

// abortingMsg reports that the operation is being aborted from outside the
// view (a signal cancelled its context).
type abortingMsg struct{}

// Result is what the view saw by the time it exited.
type Result struct {
	// Outcome is the done event's outcome; "" when the view exited before
	// one arrived.
	Outcome string
	// Forced is true when the user forced the view to quit before the
	// operation reported done.
	Forced bool
}

type stepState int

const (
	statePending stepState = iota
	stateRunning
	stateDone
	stateSkipped
	stateFailed
)

// stepRow is the live state of one plan step.
type stepRow struct {
	ref      ops.StepRef
	state    stepState
	reason   string // what a running step waits for, or why it was skipped
	message  string // last free-text message
	err      string
	progress *ops.Progress
	// started is when the step started: its wait is shown with how long it has lasted.
	started time.Time
	// blocked is what the step's latest wait said it is blocked on.
	blocked *ops.Blocked
}

// maxWarnings bounds the warnings kept on screen; the plain and JSON views
// have the full history.
const maxWarnings = 3

// Model is the Bubble Tea model of a running operation.
type Model struct {
	// eta is the run's remaining time as last estimated (step-started, step-done).
	eta     *ops.ETA
	events  <-chan ops.Event
	abort   func()
	now     func() time.Time
	timeout time.Duration
	start   time.Time
	// elapsed is the run time the executor last reported and elapsedAt the
	// local time it arrived: elapsed time then follows the executor's clock
	// (which started before the view did) and still ticks between events.
	elapsed   time.Duration
	elapsedAt time.Time

	keys    keyMap
	help    help.Model
	spinner spinner.Model
	st      styles

	width, height int

	operation string
	cluster   string
	namespace string
	engine    string
	lock      *ops.LockInfo
	steps     []stepRow
	current   int // index into steps of the step whose detail is shown; -1 for none
	pods      []ops.PodSummary
	havePods  bool
	warnings  []string
	// paused is the pause the run waits in (a control event), shown above the warnings
	// until a continue or an abort.
	paused string

	// outcomeAfterExit leaves the outcome out of the final view because
	// Run prints it once the program has exited.
	outcomeAfterExit bool

	aborting bool
	forced   bool
	closed   bool
	done     *ops.Event
}

var _ tea.Model = Model{}

// NewModel returns the interactive view.
func NewModel(opts Options) Model {
	r := opts.Renderer
	if opts.NoColor || r == nil {
		// An explicit profile keeps the output independent of the
		// environment and of terminal queries.
		r = lipgloss.NewRenderer(io.Discard)
		if opts.NoColor {
			r.SetColorProfile(termenv.Ascii)
		} else {
			r.SetColorProfile(termenv.ANSI)
		}
	}
	st := newStyles(r)
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	h := help.New()
	h.Styles = help.Styles{
		Ellipsis:       st.faint,
		ShortKey:       st.key,
		ShortDesc:      st.faint,
		ShortSeparator: st.faint,
		FullKey:        st.key,
		FullDesc:       st.faint,
		FullSeparator:  st.faint,
	}
	return Model{
		events:  opts.Events,
		abort:   opts.Abort,
		now:     now,
		timeout: opts.Timeout,
		start:   now(),
		keys:    newKeyMap(),
		help:    h,
		spinner: spinner.New(spinner.WithSpinner(spinner.MiniDot), spinner.WithStyle(st.running)),
		st:      st,
		current: -1,
	}
}

// Init starts the spinner and the wait for the first event.
func (m Model) Init() tea.Cmd {
	return tea.Batch(m.spinner.Tick, m.waitForEvent())
}

// waitForEvent is the standard Bubble Tea subscription: a command that
// blocks on the channel and is re-issued after each event.
func (m Model) waitForEvent() tea.Cmd {
	ch := m.events
	if ch == nil {
		return nil
	}
	return func() tea.Msg {
		e, ok := <-ch
		if !ok {
			return streamEndMsg{}
		}
		return EventMsg(e)
	}
}

// Update handles keys, window size, events and spinner ticks.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.Width = msg.Width
		return m, nil

	case tea.KeyMsg:
		return m.handleKey(msg)

	case EventMsg:
		m.apply(ops.Event(msg).Printable())
		if m.done != nil {
			return m, tea.Quit
		}
		return m, m.waitForEvent()

	case streamEndMsg:
		// The command closes the feed once the executor returned; without
		// a done event there is nothing more to wait for.
		m.closed = true
		return m, tea.Quit

	case abortingMsg:
		m.setAborting()
		return m, nil

	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spinner, cmd = m.spinner.Update(msg)
		return m, cmd
	}
	return m, nil
}

func (m Model) handleKey(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	if m.done != nil || m.forced {
		return m, nil
	}
	switch {
	case key.Matches(msg, m.keys.Force):
		// Only enabled while aborting: the user gave up waiting.
		m.forced = true
		return m, tea.Quit
	case key.Matches(msg, m.keys.Abort):
		if m.abort == nil {
			// Nothing to stop safely; leaving is all we can do.
			m.forced = true
			return m, tea.Quit
		}
		// Do not quit: the executor finishes or safely abandons the
		// current action and reports done with outcome interrupted.
		m.setAborting()
		m.abort()
		return m, nil
	}
	return m, nil
}

func (m *Model) setAborting() {
	if m.aborting {
		return
	}
	m.aborting = true
	m.keys.aborting()
}

// Result reports how the view ended.
func (m Model) Result() Result {
	r := Result{Forced: m.forced}
	if m.done != nil {
		r.Outcome = m.done.Outcome
	}
	return r
}

// apply folds one event into the model.
func (m *Model) apply(e ops.Event) {
	if e.Operation != "" {
		m.operation = e.Operation
	}
	if e.Cluster != "" {
		m.cluster = e.Cluster
	}
	if e.Timeout > 0 {
		m.timeout = e.Timeout
	}
	if e.Elapsed > 0 {
		m.elapsed, m.elapsedAt = e.Elapsed, m.now()
	}
	if e.ETA != nil {
		t := *e.ETA
		m.eta = &t
	}
	switch e.Type {
	case ops.EventPlan:
		if e.Plan != nil {
			m.setPlan(e.Plan)
		}
	case ops.EventLock:
		if e.Lock != nil {
			l := *e.Lock
			// A renewal moves the expiry; it need not repeat who holds the lock.
			if l.Holder == "" && m.lock != nil && l.Action == ops.LockRenewed {
				l.Holder = m.lock.Holder
			}
			m.lock = &l
		}
	case ops.EventStepStarted:
		if i := m.row(e.Step); i >= 0 {
			r := &m.steps[i]
			r.state, r.reason, r.message, r.err, r.progress, r.blocked = stateRunning, "", e.Message, "", nil, nil
			r.started = e.Time
			if r.started.IsZero() {
				r.started = m.now()
			}
			m.current = i
		}
	case ops.EventStepWaiting:
		// The detail shows one reading, the latest: a wait replaces the
		// progress before it (CrateDB's green streak starts again when the
		// cluster turns yellow; a bar still at 2/3 under "waiting: cluster
		// yellow" would say both at once).
		if i := m.row(e.Step); i >= 0 {
			r := &m.steps[i]
			r.state = stateRunning
			r.reason, r.message, r.progress = e.Reason, e.Message, nil
			r.blocked = nil
			if e.Blocked != nil {
				b := *e.Blocked
				r.blocked = &b
			}
			m.current = i
		}
	case ops.EventStepProgress:
		// And progress ends the wait before it.
		if i := m.row(e.Step); i >= 0 {
			r := &m.steps[i]
			r.state = stateRunning
			r.reason = ""
			if e.Progress != nil {
				p := *e.Progress
				r.progress = &p
			}
			if e.Message != "" {
				r.message = e.Message
			}
			m.current = i
		}
	case ops.EventStepDone:
		if i := m.row(e.Step); i >= 0 {
			m.steps[i].state = stateDone
		}
	case ops.EventStepSkipped:
		if i := m.row(e.Step); i >= 0 {
			r := &m.steps[i]
			r.state = stateSkipped
			r.reason = e.Reason
		}
	case ops.EventStepFailed:
		if i := m.row(e.Step); i >= 0 {
			r := &m.steps[i]
			r.state = stateFailed
			r.err = e.Error
			if r.err == "" {
				r.err = e.Message
			}
			if l := FailedLabel(e.ReasonCode); l != "FAILED" {
				r.err = strings.ToLower(l) + ": " + r.err
			}
			m.current = i
		}
	case ops.EventPods:
		m.pods = e.Pods
		m.havePods = true
	case ops.EventWarning:
		msg := e.Message
		if msg == "" {
			msg = e.Error
		}
		if l := stepLabel(e.Step); l != "" {
			msg = l + ": " + msg
		}
		m.warnings = append(m.warnings, oneLine(msg))
		if len(m.warnings) > maxWarnings {
			m.warnings = m.warnings[len(m.warnings)-maxWarnings:]
		}
	case ops.EventControl:
		m.paused = ""
		if e.Control != nil && e.Control.Action == ops.ControlPause {
			m.paused = oneLine(e.Message)
		}
	case ops.EventDone:
		d := e
		m.done = &d
		m.paused = ""
	}
}

func (m *Model) setPlan(p *ops.PlanView) {
	m.operation, m.cluster, m.namespace, m.engine = p.Operation, p.Cluster, p.Namespace, p.Engine
	m.steps = make([]stepRow, 0, len(p.Steps))
	m.current = -1
	for i, s := range p.Steps {
		r := stepRow{ref: ops.StepRef{Index: i + 1, Total: len(p.Steps), ID: s.ID, Target: s.Target, Description: s.Description}}
		if s.Index > 0 {
			r.ref.Index = s.Index
		}
		if s.Done {
			// The executor will report it skipped; show it so from the start.
			r.state = stateSkipped
			r.reason = "done earlier"
		}
		m.steps = append(m.steps, r)
	}
}

// row finds the step an event refers to, by ID first (stable) and then by
// index, growing the list when events arrive without a plan. It returns -1
// for events without a step.
func (m *Model) row(ref *ops.StepRef) int {
	if ref == nil {
		return -1
	}
	if ref.ID != "" {
		for i := range m.steps {
			if m.steps[i].ref.ID == ref.ID {
				return i
			}
		}
	}
	i := ref.Index - 1
	if i < 0 || (i < len(m.steps) && ref.ID != "" && m.steps[i].ref.ID != "" && m.steps[i].ref.ID != ref.ID) {
		// No usable index, or it names a different step: keep it apart.
		m.steps = append(m.steps, stepRow{ref: *ref})
		return len(m.steps) - 1
	}
	for len(m.steps) < max(ref.Total, ref.Index) {
		n := len(m.steps) + 1
		m.steps = append(m.steps, stepRow{ref: ops.StepRef{Index: n, Total: ref.Total}})
	}
	r := &m.steps[i]
	if r.ref.ID == "" {
		r.ref = *ref
	}
	return i
}
