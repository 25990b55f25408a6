package tui

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// FleetTarget is one target of a fleet run (a kube context, a namespace, a cluster).
type FleetTarget struct{ Context, Namespace, Cluster string }

// String is "context/namespace/cluster", as the fleet's plain lines prefix them.
func (t FleetTarget) String() string {
	s := t.Context
	if t.Namespace != "" {
		s += "/" + t.Namespace
	}
	if t.Cluster != "" {
		s += "/" + t.Cluster
	}
	return s
}

// A fleet target's states before its outcome; the outcomes (succeeded, failed, skipped,
// stopped, not-started, ...) are the fleet summary's words, given by the caller.
const (
	FleetWaiting = "waiting"
	FleetRunning = "running"
)

// FleetMsg is one message of a fleet run to the fleet view, about target Target (an index
// into FleetOptions.Targets): one event of the target's run (Event: the same events the
// plain and NDJSON printers get), a change of its state in the fleet (State: FleetRunning
// when the fleet starts it, its outcome when it ended, with Error), or a line the target
// wrote beside its events (Line).
type FleetMsg struct {
	Target int
	Event  *ops.Event
	State  string
	Error  string
	Line   string
}

// fleetEndMsg reports that the fleet's feed was closed: every target has ended.
type fleetEndMsg struct{}

// FleetOptions configures the fleet view.
type FleetOptions struct {
	// Title is the fleet's command ("restart", "resume").
	Title   string
	Targets []FleetTarget
	// Events is the stream the model waits on (see FleetFeed); nil: messages arrive only
	// through Update (tests).
	Events <-chan FleetMsg
	// Abort asks the fleet to stop safely (the cancel of its context: the targets stop at
	// a safe point, no new one starts). Called at most once; nil: q/ctrl+c quit the view.
	Abort    func()
	NoColor  bool
	Renderer *lipgloss.Renderer
	// Now is the clock for elapsed times; defaults to time.Now.
	Now func() time.Time
	// Output and Input are where RunFleet draws and reads keys (as Options').
	Output io.Writer
	Input  io.Reader
}

// FleetResult is how the fleet view ended.
type FleetResult struct {
	// Forced: the user forced the view to quit before the fleet ended.
	Forced bool
}

// maxRecent is how many recent event lines the focused target shows.
const maxRecent = 4

// fleetRow is one target's live state: its state in the fleet and, for its detail, the
// single-cluster model fed with its events and its last plain lines.
type fleetRow struct {
	target FleetTarget
	state  string
	err    string
	detail Model
	recent *recentLines
	plain  *Plain
}

// recentLines keeps the last lines written to it.
type recentLines struct {
	lines   []string
	partial string
}

func (r *recentLines) Write(p []byte) (int, error) {
	s := r.partial + string(p)
	parts := strings.Split(s, "\n")
	r.partial = parts[len(parts)-1]
	for _, l := range parts[:len(parts)-1] {
		r.add(l)
	}
	return len(p), nil
}

func (r *recentLines) add(l string) {
	r.lines = append(r.lines, l)
	if len(r.lines) > maxRecent {
		r.lines = r.lines[len(r.lines)-maxRecent:]
	}
}

// fleetKeyMap is the fleet view's keys: the single-cluster view's abort and force quit, and
// the focus moves.
type fleetKeyMap struct {
	keyMap
	Up   key.Binding
	Down key.Binding
}

func newFleetKeyMap() fleetKeyMap {
	return fleetKeyMap{
		keyMap: newKeyMap(),
		Up:     key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "focus up")),
		Down:   key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "focus down")),
	}
}

// ShortHelp implements help.KeyMap.
func (k fleetKeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Up, k.Down, k.Abort, k.Force}
}

// FullHelp implements help.KeyMap.
func (k fleetKeyMap) FullHelp() [][]key.Binding { return [][]key.Binding{k.ShortHelp()} }

// FleetModel is the Bubble Tea model of a fleet run: one line per target and the focused
// target's detail.
type FleetModel struct {
	title   string
	rows    []*fleetRow
	events  <-chan FleetMsg
	abort   func()
	now     func() time.Time
	start   time.Time
	keys    fleetKeyMap
	help    help.Model
	spinner spinner.Model
	st      styles

	width, height int
	// focus is the index of the target whose detail is shown; pinned once the user moved
	// it (until then it follows the target that started or failed last).
	focus  int
	pinned bool

	aborting bool
	forced   bool
	closed   bool
}

var _ tea.Model = FleetModel{}

// NewFleetModel returns the fleet view over opts.Targets, all waiting.
func NewFleetModel(opts FleetOptions) FleetModel {
	r := opts.Renderer
	if opts.NoColor || r == nil {
		r = lipgloss.NewRenderer(io.Discard)
		if opts.NoColor {
			r.SetColorProfile(termenv.Ascii)
		} else {
			r.SetColorProfile(termenv.ANSI)
		}
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	// The per-target models share the fleet's renderer and clock.
	inner := NewModel(Options{Renderer: r, Now: now})
	m := FleetModel{
		title:  opts.Title,
		events: opts.Events,
		abort:  opts.Abort,
		now:    now,
		start:  now(),
		keys:   newFleetKeyMap(),
		help:   inner.help,
		st:     inner.st,
	}
	m.spinner = spinner.New(spinner.WithSpinner(spinner.MiniDot), spinner.WithStyle(m.st.running))
	for _, t := range opts.Targets {
		rec := &recentLines{}
		m.rows = append(m.rows, &fleetRow{target: t, state: FleetWaiting, detail: inner, recent: rec,
			plain: NewPlain(rec, PlainOptions{Now: now, TimeFormat: "15:04:05"})})
	}
	return m
}

// Init starts the spinner and the wait for the first message.
func (m FleetModel) Init() tea.Cmd { return tea.Batch(m.spinner.Tick, m.waitForMsg()) }

func (m FleetModel) waitForMsg() tea.Cmd {
	ch := m.events
	if ch == nil {
		return nil
	}
	return func() tea.Msg {
		msg, ok := <-ch
		if !ok {
			return fleetEndMsg{}
		}
		return msg
	}
}

// Update handles keys, window size, the fleet's messages and spinner ticks.
func (m FleetModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.Width = msg.Width
		return m, nil
	case tea.KeyMsg:
		return m.handleKey(msg)
	case FleetMsg:
		m.apply(msg)
		return m, m.waitForMsg()
	case fleetEndMsg:
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

func (m FleetModel) handleKey(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	if m.closed || m.forced {
		return m, nil
	}
	switch {
	case key.Matches(msg, m.keys.Up):
		if m.focus > 0 {
			m.focus--
		}
		m.pinned = true
	case key.Matches(msg, m.keys.Down):
		if m.focus < len(m.rows)-1 {
			m.focus++
		}
		m.pinned = true
	case key.Matches(msg, m.keys.Force):
		m.forced = true
		return m, tea.Quit
	case key.Matches(msg, m.keys.Abort):
		if m.abort == nil {
			m.forced = true
			return m, tea.Quit
		}
		// The fleet's interrupt: the running targets stop at a safe point and report;
		// the view stays until the fleet has ended.
		m.setAborting()
		m.abort()
	}
	return m, nil
}

func (m *FleetModel) setAborting() {
	if m.aborting {
		return
	}
	m.aborting = true
	m.keys.aborting()
}

// Result reports how the view ended.
func (m FleetModel) Result() FleetResult { return FleetResult{Forced: m.forced} }

// apply folds one message into its target's row.
func (m *FleetModel) apply(msg FleetMsg) {
	if msg.Target < 0 || msg.Target >= len(m.rows) {
		return
	}
	r := m.rows[msg.Target]
	switch {
	case msg.Event != nil:
		e := *msg.Event
		if e.Type != ops.EventPlan {
			// The plan is the step list; the recent lines are what happened since.
			r.plain.Emit(e)
		}
		r.detail.apply(e.Printable())
		if r.state == FleetWaiting {
			r.state = FleetRunning
		}
		if e.Type == ops.EventStepFailed && !m.pinned {
			m.focus = msg.Target
		}
	case msg.State != "":
		r.state, r.err = msg.State, msg.Error
		if !m.pinned && (msg.State == FleetRunning || msg.Error != "" && m.rows[m.focus].state != FleetRunning) {
			// A start; or a target that did not succeed (failed, skipped, stopped) while
			// the focused one is not running.
			m.focus = msg.Target
		}
	case msg.Line != "":
		r.recent.add(oneLine(msg.Line))
	}
}

// final reports whether state is an outcome (the target has ended).
func final(state string) bool { return state != FleetWaiting && state != FleetRunning }

// View renders the fleet: a header, one line per target, the focused target's detail and
// the keys. When the window height is known, the target list and the detail shrink to fit.
func (m FleetModel) View() string {
	header := []string{m.headerLine()}
	footer := m.fleetFooter()
	detailAll := m.focusLines(-1)
	targetsNeed := len(m.rows)
	targetsBudget, detailBudget := targetsNeed, -1
	if m.height > 0 {
		sections := 2
		if len(detailAll) > 0 {
			sections++
		}
		if len(footer) > 0 {
			sections++
		}
		// The trailing newline's empty line counts against the height too.
		avail := m.height - 1 - len(header) - len(footer) - (sections - 1)
		if targetsNeed+len(detailAll) > avail {
			// The targets get up to a third of the room (at least three lines), the detail the rest.
			targetsBudget = min(targetsNeed, max(3, avail/3))
			detailBudget = max(avail-targetsBudget, 1)
		}
	}
	groups := [][]string{header, m.targetLines(targetsBudget)}
	if d := m.focusLines(detailBudget); len(d) > 0 {
		groups = append(groups, d)
	}
	if len(footer) > 0 {
		groups = append(groups, footer)
	}
	var b strings.Builder
	for gi, g := range groups {
		if gi > 0 {
			b.WriteString("\n")
		}
		for _, line := range g {
			if m.width > 0 {
				line = ansi.Truncate(line, m.width, "…")
			}
			b.WriteString(line)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// fleetStates is the order the header counts the states in.
var fleetStates = []string{FleetRunning, FleetWaiting, "succeeded", "failed", "skipped", "stopped", "not-started"}

func (m FleetModel) headerLine() string {
	title := "fleet"
	if m.title != "" {
		title += " " + m.title
	}
	counts := map[string]int{}
	order := slices.Clone(fleetStates)
	for _, r := range m.rows {
		if counts[r.state] == 0 && !slices.Contains(order, r.state) {
			order = append(order, r.state)
		}
		counts[r.state]++
	}
	var parts []string
	for _, st := range order {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	n := "targets"
	if len(m.rows) == 1 {
		n = "target"
	}
	line := m.st.title.Render(title) + fmt.Sprintf("  %d %s", len(m.rows), n)
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, ", ")
	}
	return line + m.st.faint.Render(" · elapsed "+formatDuration(m.now().Sub(m.start)))
}

// stateWidth fits the longest state word ("not-started").
const stateWidth = 11

// targetLines is one line per target within budget lines (a window around the focus).
func (m FleetModel) targetLines(budget int) []string {
	targetW := 0
	for _, r := range m.rows {
		targetW = max(targetW, ansi.StringWidth(oneLine(r.target.String())))
	}
	if m.width > 0 {
		// On a narrow terminal the name gives way to the state and step columns.
		targetW = min(targetW, max(12, m.width-2-2-2-stateWidth-2-10))
	}
	lo, hi := stepWindow(len(m.rows), m.focus, budget)
	var out []string
	if lo > 0 {
		out = append(out, m.st.faint.Render(fmt.Sprintf("  … %d targets above", lo)))
	}
	for i := lo; i < hi; i++ {
		out = append(out, m.targetLine(i, targetW))
	}
	if hi < len(m.rows) {
		out = append(out, m.st.faint.Render(fmt.Sprintf("  … %d more targets", len(m.rows)-hi)))
	}
	return out
}

func (m FleetModel) targetLine(i, targetW int) string {
	r := m.rows[i]
	cursor := tableIndent
	if i == m.focus {
		cursor = currentMark
	}
	name := ansi.Truncate(oneLine(r.target.String()), targetW, "…")
	name += strings.Repeat(" ", targetW-ansi.StringWidth(name))
	state := r.state + strings.Repeat(" ", max(stateWidth-ansi.StringWidth(r.state), 0))
	line := cursor + m.rowMark(r) + " " + name + "  " + m.stateStyle(r.state).Render(state)
	if s := r.stepText(); s != "" {
		line += "  step " + s
	}
	if x := m.rowExtra(r); x != "" {
		line += "  " + x
	}
	return strings.TrimRight(line, " ")
}

func (m FleetModel) rowMark(r *fleetRow) string {
	switch r.state {
	case FleetRunning:
		if m.closed || m.forced {
			return m.st.warn.Render(markStopped)
		}
		return m.spinner.View()
	case FleetWaiting, "not-started":
		return m.st.faint.Render(markPending)
	case "succeeded", "nothing-to-resume":
		return m.st.ok.Render(markDone)
	case "skipped":
		return m.st.warn.Render(markSkipped)
	case "stopped":
		return m.st.warn.Render(markStopped)
	default:
		return m.st.bad.Render(markFailed)
	}
}

func (m FleetModel) stateStyle(state string) lipgloss.Style {
	switch state {
	case FleetRunning:
		return m.st.running
	case "succeeded", "nothing-to-resume":
		return m.st.ok
	case "skipped", "stopped":
		return m.st.warn
	case "failed":
		return m.st.bad
	}
	return m.st.faint
}

// stepText is "i/n": the step running (or failed) and the plan's length; between steps and
// at the end, the steps finished.
func (r *fleetRow) stepText() string {
	d := r.detail
	if len(d.steps) == 0 {
		return ""
	}
	if c := d.currentRow(); c != nil {
		return fmt.Sprintf("%d/%d", c.ref.Index, len(d.steps))
	}
	finished := 0
	for _, s := range d.steps {
		if s.state == stateDone || s.state == stateSkipped {
			finished++
		}
	}
	return fmt.Sprintf("%d/%d", finished, len(d.steps))
}

// rowExtra is what a target's line ends with: a running target's ETA and what it is blocked
// on (else what it waits for), an ended target's error.
func (m FleetModel) rowExtra(r *fleetRow) string {
	d := r.detail
	if final(r.state) {
		if r.err != "" {
			return m.st.faint.Render(oneLine(r.err))
		}
		return ""
	}
	var parts []string
	if d.eta != nil && d.done == nil {
		parts = append(parts, "ETA "+d.eta.Range())
	}
	if c := d.currentRow(); c != nil && c.state == stateRunning {
		switch {
		case c.blocked != nil:
			parts = append(parts, m.st.warn.Render("blocked on "+oneLine(c.blocked.On)))
		case c.reason != "":
			parts = append(parts, m.st.faint.Render("waiting: "+oneLine(c.reason)))
		}
	}
	return strings.Join(parts, "  ")
}

// focusLines is the focused target's detail within budget lines (-1: no limit): a title,
// its lock and elapsed time, its steps with the current one's detail, warnings, pods, its
// recent event lines and its outcome.
func (m FleetModel) focusLines(budget int) []string {
	if len(m.rows) == 0 {
		return nil
	}
	r := m.rows[m.focus]
	d := r.detail
	d.width, d.spinner = m.width, m.spinner
	// A target that ended shows its running step as stopped, not spinning.
	d.closed = final(r.state) || m.closed || m.forced
	title := currentMark + m.st.title.Render(oneLine(r.target.String()))
	if d.operation != "" {
		title += "  " + d.operation
	}
	if d.engine != "" {
		title += m.st.faint.Render(" (engine " + d.engine + ")")
	}
	if len(d.steps) == 0 && d.done == nil && d.lock == nil {
		// Nothing of its run yet (waiting, or refused before it started).
		out := []string{title + m.st.faint.Render("  "+r.state)}
		if r.err != "" {
			for _, l := range wrapText("error: "+oneLine(r.err), m.width, "       ") {
				out = append(out, m.st.bad.Render(l))
			}
		}
		out = append(out, m.recentLines()...)
		return limit(out, budget)
	}
	top := []string{title, d.lockLine(), d.elapsedLine()}
	warnings := d.warningLines()
	var pods []string
	if d.havePods {
		pods = d.podLines(1)
	}
	outcome := d.outcomeLines(m.width)
	if len(outcome) == 0 && r.err != "" && final(r.state) {
		outcome = wrapText("error: "+oneLine(r.err), m.width, "       ")
	}
	recent := m.recentLines()
	detail := d.detailLines()
	stepsNeed := max(len(d.steps), 1) + len(detail)
	stepsBudget := stepsNeed
	if budget >= 0 {
		fixed := len(top) + len(warnings) + len(pods) + len(outcome)
		avail := budget - fixed
		// The recent lines give way first (the latest kept), then the step list down to a
		// few lines.
		if stepsNeed+len(recent) > avail {
			keep := max(avail-min(stepsNeed, minStepLines+len(detail)), 0)
			switch {
			case keep < 2:
				recent = nil
			case keep < len(recent):
				recent = append([]string{recent[0]}, recent[len(recent)-(keep-1):]...)
			}
			stepsBudget = max(min(stepsNeed, avail-len(recent)), minStepLines+len(detail))
		}
	}
	out := append(top, d.stepLines(stepsBudget, detail)...)
	out = append(out, warnings...)
	out = append(out, pods...)
	out = append(out, recent...)
	out = append(out, outcome...)
	return limit(out, budget)
}

// recentLines is the focused target's last event lines under a heading.
func (m FleetModel) recentLines() []string {
	r := m.rows[m.focus]
	if len(r.recent.lines) == 0 {
		return nil
	}
	out := []string{m.st.faint.Render("recent:")}
	for _, l := range r.recent.lines {
		out = append(out, "  "+l)
	}
	return out
}

// limit cuts lines to budget (-1: no limit).
func limit(lines []string, budget int) []string {
	if budget >= 0 && len(lines) > budget {
		return lines[:budget]
	}
	return lines
}

func (m FleetModel) fleetFooter() []string {
	switch {
	case m.closed:
		return nil
	case m.forced:
		return []string{m.st.bad.Render("forced quit: the fleet had not ended; check each target's lock and run resume --fleet")}
	case m.aborting:
		return []string{m.st.warn.Render("aborting safely — running targets finish their current action, no new target starts…"), m.help.View(m.keys)}
	default:
		return []string{m.help.View(m.keys)}
	}
}

// afterExitLines are printed once the view has exited (outside the renderer, whole): each
// target whose run did not succeed, its outcome and the command that resumes it, prefixed
// with the target as the plain lines are.
func (m FleetModel) afterExitLines() []string {
	var out []string
	for _, r := range m.rows {
		d := r.detail
		if d.done == nil || d.done.Outcome == ops.OutcomeSucceeded {
			continue
		}
		prefix := "[" + oneLine(r.target.String()) + "] "
		for _, l := range d.outcomeLines(0) {
			out = append(out, prefix+l)
		}
	}
	return out
}
