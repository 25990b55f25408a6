package tui

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Step marks. They carry the meaning on their own, so NO_COLOR output is
// as readable as the coloured one.
const (
	markDone    = "✓"
	markSkipped = "↷"
	markFailed  = "✗"
	markPending = "·"
	// markStopped is a step still running when the run ended, where the
	// spinner would suggest activity that is no longer there.
	markStopped = "…"
)

// abortingText is shown from the first q/ctrl+c until the done event.
const abortingText = "aborting safely — finishing current action…"

// styles are built from one renderer so NO_COLOR strips every one of them.
type styles struct {
	title   lipgloss.Style
	faint   lipgloss.Style
	key     lipgloss.Style
	ok      lipgloss.Style
	warn    lipgloss.Style
	bad     lipgloss.Style
	running lipgloss.Style
	header  lipgloss.Style
}

// newStyles uses the 16 basic colours only: they follow the user's
// terminal theme and need no background detection (a terminal query that
// would race with Bubble Tea's input reader).
func newStyles(r *lipgloss.Renderer) styles {
	return styles{
		title:   r.NewStyle().Bold(true),
		faint:   r.NewStyle().Faint(true),
		key:     r.NewStyle().Bold(true),
		ok:      r.NewStyle().Foreground(lipgloss.Color("2")),
		warn:    r.NewStyle().Foreground(lipgloss.Color("3")),
		bad:     r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		running: r.NewStyle().Foreground(lipgloss.Color("6")),
		header:  r.NewStyle().Bold(true).Underline(true),
	}
}

// Layout limits.
const (
	maxBarWidth    = 40
	minBarWidth    = 10
	maxTargetWidth = 32
	// minDescWidth is what a step's description keeps on a wide terminal
	// before the target column takes more than maxTargetWidth.
	minDescWidth = 24
	// minPodsLines is what the pods section gets before the steps take
	// the rest: summary, table header and three rows.
	minPodsLines = 5
	// minStepLines keeps the step list useful on tiny terminals.
	minStepLines = 3
)

// View renders the model. Sections are separated by blank lines; when the
// window height is known, the step list and the pods table shrink so the
// whole view fits (Bubble Tea drops lines above the window otherwise).
func (m Model) View() string {
	top := m.headerLines()
	warnings := m.warningLines()
	bottom := m.footerLines()

	detail := m.detailLines()
	stepsNeed := max(len(m.steps), 1) + len(detail)
	podsNeed := 0
	if m.havePods {
		podsNeed = 1 + 1 + len(m.pods)
		if len(m.pods) == 0 {
			podsNeed = 1
		}
	}

	stepsBudget, podsBudget := stepsNeed, podsNeed
	if m.height > 0 {
		fixed := len(top) + len(warnings) + len(bottom)
		sections := 2 // top, steps
		if len(bottom) > 0 {
			sections++
		}
		if len(warnings) > 0 {
			sections++
		}
		if podsNeed > 0 {
			sections++
		}
		// The view ends with a newline, as Bubble Tea erases the last line
		// on exit; that empty line counts against the height too.
		avail := m.height - 1 - fixed - (sections - 1)
		if stepsNeed+podsNeed > avail {
			stepsBudget = min(stepsNeed, max(minStepLines+len(detail), avail-min(podsNeed, minPodsLines)))
			podsBudget = max(avail-stepsBudget, 0)
		}
	}

	groups := [][]string{top, m.stepLines(stepsBudget, detail)}
	if len(warnings) > 0 {
		groups = append(groups, warnings)
	}
	if podsNeed > 0 {
		if pods := m.podLines(podsBudget); len(pods) > 0 {
			groups = append(groups, pods)
		}
	}
	if len(bottom) > 0 {
		groups = append(groups, bottom)
	}

	var b strings.Builder
	for gi, g := range groups {
		if gi > 0 {
			b.WriteString("\n")
		}
		for _, line := range g {
			// Wrapped lines would break the renderer's line accounting.
			if m.width > 0 {
				line = ansi.Truncate(line, m.width, "…")
			}
			b.WriteString(line)
			b.WriteString("\n")
		}
	}
	return b.String()
}

func (m Model) headerLines() []string {
	title := m.operation
	if title == "" {
		title = "dbops"
	}
	line := m.st.title.Render(title)
	if m.cluster != "" {
		target := m.cluster
		if m.namespace != "" {
			target = m.namespace + "/" + m.cluster
		}
		line += "  " + target
	}
	if m.engine != "" {
		line += m.st.faint.Render(" (engine " + m.engine + ")")
	}
	return []string{line, m.lockLine(), m.elapsedLine()}
}

func (m Model) lockLine() string {
	l := m.lock
	if l == nil {
		return m.st.faint.Render("lock: not acquired yet")
	}
	switch l.Action {
	case ops.LockReleased:
		return m.st.faint.Render("lock: released")
	case ops.LockDisabled:
		return m.st.warn.Render("lock: disabled — other operators are not kept out")
	}
	s := "lock: held by " + l.Holder
	if l.Action == ops.LockTakeover {
		s = "lock: taken over by " + l.Holder
	}
	if l.Expires.IsZero() {
		return s
	}
	left := l.Expires.Sub(m.now())
	s += " · expires " + l.Expires.UTC().Format("15:04:05") + " UTC"
	if left <= 0 {
		// The renewer should have extended it; another operator may now
		// take the lock.
		return m.st.bad.Render(s + " (expired " + formatDuration(-left) + " ago)")
	}
	return s + m.st.faint.Render(" (in "+formatDuration(left)+")")
}

// blockedTimes says since when a step is blocked and when it gives up.
func (m Model) blockedTimes(b *ops.Blocked) string {
	s := ""
	if !b.Since.IsZero() {
		s += " · since " + b.Since.UTC().Format("15:04:05")
		if d := m.now().Sub(b.Since).Round(time.Second); d > 0 {
			s += " (" + formatDuration(d) + ")"
		}
	}
	if !b.GiveUpAt.IsZero() {
		s += " · gives up at " + b.GiveUpAt.UTC().Format("15:04:05") + " UTC"
	}
	return s
}

func (m Model) elapsedLine() string {
	var elapsed time.Duration
	switch {
	case m.done != nil && m.done.Elapsed > 0:
		elapsed = m.done.Elapsed
	case !m.elapsedAt.IsZero():
		elapsed = m.elapsed + m.now().Sub(m.elapsedAt)
	default:
		elapsed = m.now().Sub(m.start)
	}
	s := "elapsed " + formatDuration(elapsed)
	if m.eta != nil && m.done == nil {
		s += " · ETA " + m.eta.Range()
	}
	if m.timeout <= 0 {
		return s
	}
	s += " / timeout " + formatDuration(m.timeout)
	if m.done == nil && elapsed >= m.timeout*4/5 {
		return m.st.warn.Render(s)
	}
	return s
}

// currentRow returns the step whose live detail is shown, or nil.
func (m Model) currentRow() *stepRow {
	if m.current < 0 || m.current >= len(m.steps) {
		return nil
	}
	r := &m.steps[m.current]
	if r.state != stateRunning && r.state != stateFailed {
		return nil
	}
	return r
}

// detailLines are shown under the current step: what it waits for, its
// last message and its progress, or its error.
func (m Model) detailLines() []string {
	r := m.currentRow()
	if r == nil {
		return nil
	}
	indent := strings.Repeat(" ", 5+len(fmt.Sprint(len(m.steps))))
	var out []string
	if r.state == stateFailed {
		if r.err != "" {
			for _, l := range wrapText(indent+"error: "+oneLine(r.err), m.width, indent+"       ") {
				out = append(out, m.st.bad.Render(l))
			}
		}
		return out
	}
	if r.reason != "" {
		waiting := "waiting: "
		if !r.started.IsZero() {
			if d := m.now().Sub(r.started).Round(time.Second); d > 0 {
				waiting = "waiting " + formatDuration(d) + ": "
			}
		}
		out = append(out, indent+m.st.warn.Render(waiting)+oneLine(r.reason))
	}
	if b := r.blocked; b != nil {
		out = append(out, indent+m.st.warn.Render("blocked on: ")+oneLine(b.On)+m.st.faint.Render(m.blockedTimes(b)))
		if b.ToUnblock != "" {
			out = append(out, indent+m.st.faint.Render("to unblock: ")+oneLine(b.ToUnblock))
		}
		if b.Stalled != "" {
			out = append(out, indent+m.st.bad.Render(oneLine(b.Stalled)))
		}
	}
	if r.message != "" {
		out = append(out, indent+m.st.faint.Render(oneLine(r.message)))
	}
	if r.progress != nil {
		out = append(out, indent+m.progressBar(r.progress, len(indent)))
	}
	return out
}

// progressBar is drawn with lipgloss rather than bubbles/progress: the
// latter pulls in harmonica, which is not in go.sum, and its spring
// animation adds nothing to counts that change every few seconds.
func (m Model) progressBar(p *ops.Progress, indent int) string {
	f := fraction(p)
	text := fmt.Sprintf(" %s  %3.0f%%", progressText(p), math.Floor(f*100))
	w := maxBarWidth
	if m.width > 0 {
		w = min(maxBarWidth, max(minBarWidth, m.width-indent-ansi.StringWidth(text)))
	}
	filled := int(math.Round(f * float64(w)))
	return m.st.ok.Render(strings.Repeat("█", filled)) + m.st.faint.Render(strings.Repeat("░", w-filled)) + text
}

// stepLines renders the plan within budget lines (detail included). Long
// plans show a window around the current step.
func (m Model) stepLines(budget int, detail []string) []string {
	if len(m.steps) == 0 {
		return []string{m.st.faint.Render("waiting for the plan…")}
	}
	idxW := len(fmt.Sprint(len(m.steps)))
	targetW := 0
	for _, r := range m.steps {
		targetW = max(targetW, ansi.StringWidth(r.ref.Target))
	}
	// The target column is as wide as the longest target, up to what the
	// window leaves a description (a fixed cap cut targets on wide
	// terminals); with the width unknown, nothing is cut.
	if m.width > 0 {
		targetW = min(targetW, max(maxTargetWidth, m.width-(5+idxW)-2-minDescWidth))
	}

	focus := m.current
	if focus < 0 {
		// Before anything runs, or between steps: the first step not
		// finished is the interesting one.
		focus = len(m.steps) - 1
		for i, r := range m.steps {
			if r.state == statePending || r.state == stateRunning {
				focus = i
				break
			}
		}
	}
	lo, hi := stepWindow(len(m.steps), focus, budget-len(detail))

	var out []string
	if lo > 0 {
		out = append(out, m.st.faint.Render(fmt.Sprintf("  … %d earlier steps", lo)))
	}
	for i := lo; i < hi; i++ {
		r := m.steps[i]
		target := ansi.Truncate(r.ref.Target, targetW, "…")
		target += strings.Repeat(" ", targetW-ansi.StringWidth(target))
		line := fmt.Sprintf(" %s %*d. %s  %s", m.mark(r), idxW, r.ref.Index, target, r.ref.Description)
		if r.ref.Target == "" && r.ref.Description == "" {
			line = fmt.Sprintf(" %s %*d. %s", m.mark(r), idxW, r.ref.Index, m.st.faint.Render("(not in plan)"))
		}
		if r.state == stateSkipped && r.reason != "" {
			line += m.st.faint.Render(" (" + oneLine(r.reason) + ")")
		}
		out = append(out, line)
		if i == m.current {
			out = append(out, detail...)
		}
	}
	if hi < len(m.steps) {
		out = append(out, m.st.faint.Render(fmt.Sprintf("  … %d more steps", len(m.steps)-hi)))
	}
	return out
}

func (m Model) mark(r stepRow) string {
	switch r.state {
	case stateRunning:
		if m.done != nil || m.forced || m.closed {
			return m.st.warn.Render(markStopped)
		}
		return m.spinner.View()
	case stateDone:
		return m.st.ok.Render(markDone)
	case stateSkipped:
		return m.st.faint.Render(markSkipped)
	case stateFailed:
		return m.st.bad.Render(markFailed)
	default:
		return m.st.faint.Render(markPending)
	}
}

// stepWindow picks steps [lo, hi) of n to show in budget lines, keeping
// focus visible with a little done context above it and counting the
// "… more" marker lines against the budget.
func stepWindow(n, focus, budget int) (lo, hi int) {
	budget = max(budget, 1)
	if n <= budget {
		return 0, n
	}
	rows := max(budget-2, 1) // room for both markers
	focus = min(max(focus, 0), n-1)
	lo = max(focus-rows/3, 0)
	hi = lo + rows
	if hi > n {
		hi = n
		lo = max(n-rows, 0)
	}
	// A side without hidden steps needs no marker; give its line back.
	if lo == 0 && hi < n {
		hi++
	} else if hi == n && lo > 0 {
		lo--
	}
	return lo, hi
}

// warningLines wraps rather than truncates: the end of a warning is often
// the part that explains it.
func (m Model) warningLines() []string {
	var out []string
	if m.paused != "" {
		for _, l := range wrapText("PAUSED: "+m.paused, m.width, "  ") {
			out = append(out, m.st.warn.Render(l))
		}
	}
	for _, w := range m.warnings {
		for _, l := range wrapText("WARNING: "+w, m.width, "  ") {
			out = append(out, m.st.warn.Render(l))
		}
	}
	return out
}

// wrapText breaks plain text into lines of at most width cells (0: no
// limit), indenting continuation lines.
func wrapText(s string, width int, indent string) []string {
	if width <= 0 || ansi.StringWidth(s) <= width {
		return []string{s}
	}
	limit := max(width-len(indent), 10)
	lines := strings.Split(ansi.Wrap(s, limit, ""), "\n")
	for i := 1; i < len(lines); i++ {
		lines[i] = indent + strings.TrimLeft(lines[i], " ")
	}
	return lines
}

func (m Model) footerLines() []string {
	switch {
	case m.done != nil && m.outcomeAfterExit:
		return nil
	case m.done != nil:
		return m.outcomeLines(m.width)
	case m.forced:
		return []string{m.st.bad.Render("forced quit: the operation had not reported completion; check the lock and re-run the command to resume")}
	case m.closed:
		return []string{m.st.warn.Render("the operation ended without reporting an outcome")}
	case m.aborting:
		return []string{m.st.warn.Render(abortingText), m.help.View(m.keys)}
	default:
		return []string{m.help.View(m.keys)}
	}
}

// outcomeLines renders the done event wrapped to width (0: unwrapped).
// Wrapping is a fallback for a bare Model; Run prints these lines after the
// program exits instead, so a long resume command stays one line that
// copies and pastes intact.
func (m Model) outcomeLines(width int) []string {
	if m.done == nil {
		return nil
	}
	e := *m.done
	mark, style := markFailed, m.st.bad
	switch e.Outcome {
	case ops.OutcomeSucceeded, ops.OutcomeDryRun:
		mark, style = markDone, m.st.ok
	case ops.OutcomeInterrupted:
		style = m.st.warn
	case ops.OutcomePaused, ops.OutcomeAborted:
		// Stopped where the user asked (--pause-after, abort): not a failure.
		mark, style = markStopped, m.st.warn
	}
	var out []string
	for _, l := range wrapText(mark+" "+oneLine(outcomeText(e)), width, "  ") {
		out = append(out, style.Render(l))
	}
	if e.Resume != "" {
		out = append(out, wrapText(oneLine(e.Resume), width, "  ")...)
	}
	return out
}

// podColumn is one column of the pods table. Columns with a drop rank
// are hidden, lowest rank first, when the window is too narrow.
type podColumn struct {
	title string
	cell  func(ops.PodSummary) string
	drop  int // 0: never dropped
	max   int // 0: no cap
}

func podColumns() []podColumn {
	return []podColumn{
		{title: "NAME", cell: func(p ops.PodSummary) string { return p.Name }, max: 48},
		{title: "GROUP", cell: func(p ops.PodSummary) string { return p.Group }, drop: 4, max: 20},
		{title: "READY", cell: func(p ops.PodSummary) string {
			if p.Ready {
				return "yes"
			}
			return "no"
		}},
		{title: "PHASE", cell: func(p ops.PodSummary) string { return p.Phase }, max: 20},
		{title: "NODE", cell: func(p ops.PodSummary) string { return p.Node }, drop: 2, max: 32},
		{title: "ZONE", cell: func(p ops.PodSummary) string { return p.Zone }, drop: 1, max: 20},
		{title: "RESTARTS", cell: func(p ops.PodSummary) string { return fmt.Sprint(p.Restarts) }, drop: 3},
	}
}

const (
	tableIndent = "  "
	tableSep    = "  "
)

// podLines renders the pods summary and table in at most budget lines.
func (m Model) podLines(budget int) []string {
	ready := 0
	for _, p := range m.pods {
		if p.Ready {
			ready++
		}
	}
	summary := fmt.Sprintf("pods: %d/%d ready", ready, len(m.pods))
	if ready < len(m.pods) {
		summary = m.st.warn.Render(summary)
	}
	if budget <= 0 {
		return nil
	}
	out := []string{summary}
	// A header without at least one row is noise.
	if len(m.pods) == 0 || budget < 3 {
		return out
	}
	ordered, current := m.procedurePods()
	rows := ordered
	more := 0
	if 1+1+len(rows) > budget {
		rows, more = pickPods(ordered, current, budget-3)
	}

	cols := podColumns()
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = ansi.StringWidth(c.title)
		for _, p := range rows {
			widths[i] = max(widths[i], ansi.StringWidth(c.cell(p)))
		}
		if c.max > 0 {
			widths[i] = min(widths[i], c.max)
		}
	}
	cols, widths = fitColumns(cols, widths, m.width)

	cells := make([]string, len(cols))
	render := func(get func(c podColumn) string) string {
		for i, c := range cols {
			s := ansi.Truncate(get(c), widths[i], "…")
			if i < len(cols)-1 {
				s += strings.Repeat(" ", widths[i]-ansi.StringWidth(s))
			}
			cells[i] = s
		}
		return tableIndent + strings.Join(cells, tableSep)
	}
	out = append(out, m.st.header.Render(render(func(c podColumn) string { return c.title })))
	for _, p := range rows {
		line := render(func(c podColumn) string { return oneLine(c.cell(p)) })
		if current[p.Name] {
			// The pod the running step works on.
			line = currentMark + strings.TrimPrefix(line, tableIndent)
		}
		if !p.Ready {
			line = m.st.warn.Render(line)
		}
		out = append(out, line)
	}
	if more > 0 {
		out = append(out, m.st.faint.Render(fmt.Sprintf("%s… %d more pods", tableIndent, more)))
	}
	return out
}

// fitColumns drops low-priority columns, then narrows NAME, until the table
// fits width (0: unknown, fit everything).
func fitColumns(cols []podColumn, widths []int, width int) ([]podColumn, []int) {
	total := func() int {
		t := len(tableIndent) + len(tableSep)*(len(cols)-1)
		for _, w := range widths {
			t += w
		}
		return t
	}
	for width > 0 && total() > width {
		drop := -1
		for i, c := range cols {
			if c.drop > 0 && (drop < 0 || c.drop < cols[drop].drop) {
				drop = i
			}
		}
		if drop < 0 {
			// Only essential columns left: the name gives way, the final
			// line truncation handles anything narrower still.
			widths[0] = max(8, widths[0]-(total()-width))
			break
		}
		cols = append(cols[:drop:drop], cols[drop+1:]...)
		widths = append(widths[:drop:drop], widths[drop+1:]...)
	}
	return cols, widths
}

// currentMark replaces the table indent on the rows of the pods the running
// step works on.
const currentMark = "▸ "

// procedurePods returns the pods in procedure order (the plan step that
// restarts or replaces each one; pods no step names last, in their own
// order) and the names of the pods the running step works on.
func (m Model) procedurePods() ([]ops.PodSummary, map[string]bool) {
	order := map[string]int{}
	for i, r := range m.steps {
		for _, name := range stepPods(r.ref.Target, m.pods) {
			if _, ok := order[name]; !ok {
				order[name] = i
			}
		}
	}
	pods := slices.Clone(m.pods)
	slices.SortStableFunc(pods, func(a, b ops.PodSummary) int {
		ia, oka := order[a.Name]
		ib, okb := order[b.Name]
		if !oka {
			ia = len(m.steps)
		}
		if !okb {
			ib = len(m.steps)
		}
		return ia - ib
	})
	current := map[string]bool{}
	if m.current >= 0 && m.current < len(m.steps) && m.steps[m.current].state == stateRunning {
		for _, name := range stepPods(m.steps[m.current].ref.Target, m.pods) {
			current[name] = true
		}
	}
	return pods, current
}

// stepPods names the pods a step target covers: pod/NAME, pods/A,B (a
// batch), zone/Z (every pod in zone Z) or all.
func stepPods(target string, pods []ops.PodSummary) []string {
	kind, rest, _ := strings.Cut(target, "/")
	switch {
	case kind == "pod":
		return []string{rest}
	case kind == "pods":
		return strings.Split(rest, ",")
	case kind == "zone":
		var out []string
		for _, p := range pods {
			if p.Zone == rest {
				out = append(out, p.Name)
			}
		}
		return out
	case target == "all":
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	return nil
}

// pickPods chooses n rows from pods (in procedure order) when not all fit:
// first the pods the running step works on, then the not-ready ones (what
// an operator watches), then the next ones in procedure order from the
// current pod on, then the earlier ones. The rows keep the procedure
// order. It returns them and how many were left out.
func pickPods(pods []ops.PodSummary, current map[string]bool, n int) ([]ops.PodSummary, int) {
	n = max(n, 1)
	keep := make([]bool, len(pods))
	picked := 0
	from := 0
	for i, p := range pods {
		if current[p.Name] {
			from = i
			break
		}
	}
	// Rotated procedure order: from the current pod to the end, then the start.
	rotated := make([]int, 0, len(pods))
	for i := range pods {
		rotated = append(rotated, (from+i)%len(pods))
	}
	for _, want := range []func(ops.PodSummary) bool{
		func(p ops.PodSummary) bool { return current[p.Name] },
		func(p ops.PodSummary) bool { return !p.Ready },
		func(ops.PodSummary) bool { return true },
	} {
		for _, i := range rotated {
			if picked == n {
				break
			}
			if !keep[i] && want(pods[i]) {
				keep[i] = true
				picked++
			}
		}
	}
	out := make([]ops.PodSummary, 0, picked)
	for i, p := range pods {
		if keep[i] {
			out = append(out, p)
		}
	}
	return out, len(pods) - picked
}
