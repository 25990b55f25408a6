package lock

import (
	"context"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// AnnotationHistory is a JSON array of HistoryRecord, oldest first, bounded to MaxHistory:
// the cluster's last operations, kept with the lock because Events expire after an hour.
const AnnotationHistory = "dbops.io/history"

// MaxHistory bounds the operations kept in AnnotationHistory (the Lease's annotations share
// 256 KiB).
const MaxHistory = 20

// maxHistoryError bounds a record's error text.
const maxHistoryError = 300

// HistoryRecord is one run of an operation: who ran what, when, and how it ended. A resumed
// operation has a record for each run.
type HistoryRecord struct {
	// Run identifies the process that ran it (its lock session), so that writing the same
	// run's end twice keeps one record.
	Run       string    `json:"run"`
	LockID    string    `json:"lockID"`
	Operation string    `json:"operation"`
	Args      string    `json:"args,omitempty"`
	Command   string    `json:"command,omitempty"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended"`
	// Outcome is the journal state the run ended in: succeeded, failed, interrupted,
	// timeout, paused.
	Outcome   string `json:"outcome"`
	StepsDone int    `json:"stepsDone"`
	Steps     int    `json:"steps"`
	Error     string `json:"error,omitempty"`
}

// recordHistory adds (or updates) this run's record on l when j is the run's last journal
// (any state but running), keyed by the session.
func (h *heldLock) recordHistory(l *coordinationv1.Lease, j *ops.Journal) error {
	if j == nil || j.State == ops.JournalRunning || h.m.Session == "" {
		return nil
	}
	var list []HistoryRecord
	if err := decodeAnnotation(l, AnnotationHistory, &list); err != nil {
		// A damaged history must not keep a run from recording its journal: start it anew.
		list = nil
	}
	started := j.RunStarted
	if started.IsZero() {
		started = j.Started
	}
	rec := HistoryRecord{Run: h.m.Session, LockID: h.m.ID, Operation: j.Operation, Args: j.Args, Started: started,
		Ended: j.Updated, Outcome: j.State, StepsDone: len(j.Done), Steps: j.Steps, Error: truncateText(j.Error, maxHistoryError)}
	if j.Request != nil {
		rec.Command = j.Request.CommandLine()
	}
	replaced := false
	for i := range list {
		if list[i].Run == rec.Run {
			list[i], replaced = rec, true
		}
	}
	if !replaced {
		list = append(list, rec)
	}
	if len(list) > MaxHistory {
		list = list[len(list)-MaxHistory:]
	}
	return encodeAnnotation(l, AnnotationHistory, list, false)
}

// History returns the cluster's recorded operations, oldest first, and the journal of an
// operation that has not ended (nil when none: a run killed without a last write shows only
// there). A missing Lease has no history.
func (m *Manager) History(ctx context.Context) ([]HistoryRecord, *ops.Journal, error) {
	if err := m.validate(); err != nil {
		return nil, nil, err
	}
	l, err := m.get(ctx)
	if apierrors.IsNotFound(err) {
		return []HistoryRecord{}, nil, nil
	}
	if err != nil {
		return nil, nil, m.wrap("reading", err)
	}
	list := []HistoryRecord{}
	if err := decodeAnnotation(l, AnnotationHistory, &list); err != nil {
		return nil, nil, err
	}
	j, err := decodeJournal(l)
	if err != nil {
		return nil, nil, err
	}
	if j != nil && j.State != ops.JournalRunning {
		j = nil
	}
	return list, j, nil
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
