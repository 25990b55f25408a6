package lock

import (
	"encoding/json"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// DenyEntry is one ID on the deny list: a denied ID never acquires the
// lock, and a lock it holds may be taken over by anyone else.
type DenyEntry struct {
	ID     string    `json:"id"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// Deny history actions.
const (
	ActionDeny  = "deny"
	ActionAllow = "allow"
)

// DenyRecord is one deny or allow action, kept so that status can show who
// changed the deny list, when and why.
type DenyRecord struct {
	Action string    `json:"action"`
	ID     string    `json:"id"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

func findDeny(list []DenyEntry, id string) *DenyEntry {
	for i := range list {
		if list[i].ID == id {
			return &list[i]
		}
	}
	return nil
}

// decodeDenyList fails on a damaged annotation rather than ignoring it:
// treating it as empty would let denied IDs act.
func decodeDenyList(l *coordinationv1.Lease) ([]DenyEntry, error) {
	var list []DenyEntry
	if err := decodeAnnotation(l, AnnotationDenyList, &list); err != nil {
		return nil, err
	}
	return list, nil
}

func decodeDenyHistory(l *coordinationv1.Lease) ([]DenyRecord, error) {
	var list []DenyRecord
	if err := decodeAnnotation(l, AnnotationDenyHistory, &list); err != nil {
		return nil, err
	}
	return list, nil
}

func decodeJournal(l *coordinationv1.Lease) (*ops.Journal, error) {
	var j *ops.Journal
	if err := decodeAnnotation(l, AnnotationJournal, &j); err != nil {
		return nil, err
	}
	return j, nil
}

func decodeAnnotation(l *coordinationv1.Lease, key string, into any) error {
	raw, ok := l.Annotations[key]
	if !ok || raw == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(raw), into); err != nil {
		return fmt.Errorf("annotation %s on lease %s/%s is not valid (fix or remove it with kubectl annotate): %w",
			key, l.Namespace, l.Name, err)
	}
	return nil
}

// encodeAnnotation stores v as JSON, removing the annotation when empty is
// true so a cleared list leaves no clutter.
func encodeAnnotation(l *coordinationv1.Lease, key string, v any, empty bool) error {
	if empty {
		setAnnotation(l, key, "")
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding annotation %s: %w", key, err)
	}
	setAnnotation(l, key, string(raw))
	return nil
}
