package foundationdb

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// SetSkip sets (skip) or clears spec.skip of the FoundationDBCluster named like u, which makes
// the operator leave the cluster alone (controllers/cluster_controller.go: "Skipping cluster
// with skip value true"; docs/manual/operations.md). The merge patch carries the
// resourceVersion read just before, re-read on a conflict. changed is false when spec.skip
// already says so (nothing written). Clearing removes the field, as it was before it was set.
// Setting records pause (who, until when) in AnnotationPause in the same write; clearing
// removes it.
func SetSkip(ctx context.Context, dyn dynamic.Interface, namespace, name string, skip bool, pause Pause) (changed bool, err error) {
	res := dyn.Resource(ClusterGVR).Namespace(namespace)
	for attempt := 0; ; attempt++ {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("reading FoundationDBCluster %s/%s: %w", namespace, name, err)
		}
		if cur, _, _ := unstructured.NestedBool(u.Object, "spec", "skip"); cur == skip {
			return false, nil
		}
		var value, note any
		if skip {
			value = true
			if pause.By != "" {
				b, err := json.Marshal(pauseNote{By: pause.By, Until: pause.Until.UTC().Format(time.RFC3339)})
				if err != nil {
					return false, err
				}
				note = string(b)
			}
		}
		err = patchCR(ctx, dyn, u, map[string]any{"skip": value}, map[string]any{AnnotationPause: note})
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsConflict(err) && attempt < maxPatchConflicts:
		case apierrors.IsConflict(err):
			return false, ops.Preconditionf("FoundationDBCluster %s/%s keeps changing (%d resourceVersion conflicts); refusing to overwrite it", namespace, name, attempt+1)
		default:
			return false, fmt.Errorf("patching spec.skip of FoundationDBCluster %s/%s: %w", namespace, name, err)
		}
	}
}

// AnnotationPause on a FoundationDBCluster records who paused its operator with this tool
// (`lock acquire --pause-operator`) and until when their lock was taken, so that a pause
// outliving its lock is reported as such.
const AnnotationPause = "dbops.io/operator-paused"

type pauseNote struct {
	By    string `json:"by"`
	Until string `json:"until"`
}

// Pause is a FoundationDBCluster's operator pause: spec.skip and, when this tool set it, by
// whom and until when.
type Pause struct {
	Paused bool
	By     string
	Until  time.Time
}

// ReadPause reads spec.skip and AnnotationPause.
func ReadPause(u *unstructured.Unstructured) Pause {
	p := Pause{Paused: ReadCR(u).Skip}
	var n pauseNote
	if v := u.GetAnnotations()[AnnotationPause]; p.Paused && v != "" && json.Unmarshal([]byte(v), &n) == nil {
		p.By = n.By
		p.Until, _ = time.Parse(time.RFC3339, n.Until)
	}
	return p
}

// Describe says what the pause is at now ("" when the operator is not paused).
func (p Pause) Describe(now time.Time) string {
	switch {
	case !p.Paused:
		return ""
	case p.By == "":
		return "the operator is paused (spec.skip true, not set by this tool)"
	case now.After(p.Until):
		return fmt.Sprintf("the operator is paused (spec.skip true, set by lock acquire --pause-operator as %s; that lock expired at %s, the pause did not)",
			p.By, p.Until.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("the operator is paused (spec.skip true, set by lock acquire --pause-operator as %s, lock until %s)",
		p.By, p.Until.UTC().Format(time.RFC3339))
}

// ResumeCommand is the exact command that ends the pause: the lock release as its owner
// (which clears spec.skip it recorded), or a patch when someone else set it.
func (p Pause) ResumeCommand(namespace, name string) string {
	if p.By != "" {
		return fmt.Sprintf("kubectl dbops lock release %s -n %s --id %s", name, namespace, shellQuote(p.By))
	}
	return fmt.Sprintf(`kubectl patch foundationdbcluster %s -n %s --type merge -p '{"spec":{"skip":null}}'`, name, namespace)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@._-:/", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
