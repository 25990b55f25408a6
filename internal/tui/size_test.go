package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// bigRestart is a rolling restart of a 30-pod cluster with long pod names,
// at pod 20 (not Ready, waited for), pod 5 down as well.
func bigRestart() []tea.Msg {
	name := func(i int) string { return fmt.Sprintf("crate-data-hot-analytics-prod-eu-west-1-%d", i) }
	plan := &ops.PlanView{Operation: "restart", Cluster: "analytics", Namespace: "prod", Engine: ops.EngineCrateDB, Args: "--rolling"}
	var pods []ops.PodSummary
	for i := range 30 {
		plan.Steps = append(plan.Steps, ops.StepView{Index: i + 1, ID: "restart/" + name(i), Target: "pod/" + name(i),
			Description: "delete the pod, wait for it to come back with a new UID and be Ready"})
		p := ops.PodSummary{Name: name(i), Group: "hot", Ready: true, Phase: "Running",
			Node: fmt.Sprintf("ip-10-0-%d-17.eu-west-1.compute.internal", i), Zone: fmt.Sprintf("eu-west-1%c", 'a'+i%3)}
		if i == 5 || i == 19 {
			p.Ready, p.Phase, p.Node = false, "Pending", ""
		}
		pods = append(pods, p)
	}
	ref := func(i int) *ops.StepRef {
		s := plan.Steps[i-1]
		return &ops.StepRef{Index: i, Total: 30, ID: s.ID, Target: s.Target, Description: s.Description}
	}
	msgs := []tea.Msg{
		EventMsg{Type: ops.EventLock, Time: t0, Lock: &ops.LockInfo{Action: ops.LockAcquired, Holder: "alice@laptop", Expires: at(10 * time.Minute)}},
		EventMsg{Type: ops.EventPlan, Time: t0, Plan: plan, Timeout: time.Hour},
	}
	for i := 1; i < 20; i++ {
		msgs = append(msgs, EventMsg{Type: ops.EventStepStarted, Step: ref(i)}, EventMsg{Type: ops.EventStepDone, Step: ref(i)})
	}
	msgs = append(msgs,
		EventMsg{Type: ops.EventStepStarted, Step: ref(20)},
		EventMsg{Type: ops.EventStepWaiting, Step: ref(20), Reason: "new pod Ready (UID changed)", Elapsed: 9 * time.Minute},
		EventMsg{Type: ops.EventPods, Pods: pods},
	)
	return msgs
}

// checkFits fails when the view is wider or taller than the window.
func checkFits(t *testing.T, view string, width, height int) {
	t.Helper()
	lines := strings.Split(view, "\n")
	if len(lines) > height {
		t.Errorf("%d lines for a window of %d:\n%s", len(lines), height, view)
	}
	for _, l := range lines {
		if w := ansi.StringWidth(l); w > width {
			t.Errorf("line of width %d > %d: %q", w, width, l)
		}
	}
}

// TestModelSizes: at 80x24 and 200x50 the 30-pod restart fits the window,
// the pods table shows the pod being restarted (marked) and the step list
// shows its step; on the wide terminal the step target is not cut.
func TestModelSizes(t *testing.T) {
	const cur = "crate-data-hot-analytics-prod-eu-west-1-19"
	for _, size := range []struct{ w, h int }{{80, 24}, {200, 50}} {
		t.Run(fmt.Sprintf("%dx%d", size.w, size.h), func(t *testing.T) {
			m, _ := newTestModel(Options{NoColor: true, Abort: func() {}})
			m, _ = feed(t, m, append([]tea.Msg{tea.WindowSizeMsg{Width: size.w, Height: size.h}}, bigRestart()...)...)
			view := m.View()
			checkFits(t, view, size.w, size.h)
			var marked []string
			for _, l := range strings.Split(view, "\n") {
				if strings.HasPrefix(l, currentMark) {
					marked = append(marked, l)
				}
			}
			if len(marked) != 1 || !strings.Contains(marked[0], "crate-data-hot-analytics-prod-eu-w") {
				t.Errorf("marked pod rows %q, want the one of pod 20:\n%s", marked, view)
			}
			assertContains(t, view, "20. pod/crate-data-hot-analytics", "waiting: new pod Ready (UID changed)", "pods: 28/30 ready")
			if size.w >= 200 {
				assertContains(t, view, "20. pod/"+cur+"  delete the pod", cur+"  hot")
			}
			assertGolden(t, fmt.Sprintf("view-restart-%dx%d.golden", size.w, size.h), []byte(view))
		})
	}
}

// TestModelResize: a resize re-lays the view out for the new size, and
// going back gives the same view as before.
func TestModelResize(t *testing.T) {
	m, _ := newTestModel(Options{NoColor: true, Abort: func() {}})
	m, _ = feed(t, m, append([]tea.Msg{tea.WindowSizeMsg{Width: 80, Height: 24}}, bigRestart()...)...)
	small := m.View()
	m, _ = feed(t, m, tea.WindowSizeMsg{Width: 200, Height: 50})
	wide := m.View()
	checkFits(t, wide, 200, 50)
	if strings.Count(wide, "\n") <= strings.Count(small, "\n") {
		t.Errorf("the taller window shows no more lines:\n%s", wide)
	}
	m, _ = feed(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	if got := m.View(); got != small {
		t.Errorf("after resizing back:\n%s\nwant:\n%s", got, small)
	}
	m, _ = feed(t, m, tea.WindowSizeMsg{Width: 60, Height: 16})
	checkFits(t, m.View(), 60, 16)
	assertContains(t, m.View(), currentMark)
}

// TestModelHealthAndProgressAgree: the detail shows the latest reading
// only, so a wait (cluster yellow) and a progress bar (green 2/3) are never
// on screen together.
func TestModelHealthAndProgressAgree(t *testing.T) {
	ref := fixtureRef(2)
	green := func(n int64) tea.Msg {
		return EventMsg{Type: ops.EventStepProgress, Step: ref, Progress: &ops.Progress{Done: n, Total: 3, Unit: "checks"}, Message: fmt.Sprintf("green %d/3", n)}
	}
	yellow := EventMsg{Type: ops.EventStepWaiting, Step: ref, Reason: "cluster yellow (2 shards unassigned); waiting for green"}
	m, _ := newTestModel(Options{NoColor: true, Abort: func() {}})
	m, _ = feed(t, m, tea.WindowSizeMsg{Width: 100, Height: 30}, EventMsg{Type: ops.EventPlan, Plan: fixturePlan()},
		EventMsg{Type: ops.EventStepStarted, Step: ref}, green(1), green(2))
	assertContains(t, m.View(), "green 2/3", "2/3 checks")
	m, _ = feed(t, m, yellow)
	assertContains(t, m.View(), "waiting: cluster yellow")
	assertNotContains(t, m.View(), "green 2/3", "2/3 checks", "█")
	m, _ = feed(t, m, green(1))
	assertContains(t, m.View(), "green 1/3", "1/3 checks")
	assertNotContains(t, m.View(), "yellow")
}
