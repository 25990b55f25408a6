package foundationdb

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// OperatorDenyEntry is one entry of the FoundationDB operator's deny list,
// spec.lockOptions.denyList (api/v1beta2 foundationdbcluster_types.go LockDenyListEntry): an
// operator instance (its processGroupIDPrefix) that may not take the operator's FDB lock, or,
// with Allow, one allowed again. The operator acts only on entries present: removing an entry
// changes nothing (docs/manual/technical_design.md, "Locking Operations"), so entries are
// only ever added or flipped.
type OperatorDenyEntry struct {
	ID    string `json:"id"`
	Allow bool   `json:"allow,omitempty"`
}

// OperatorDenyList is spec.lockOptions.denyList.
func OperatorDenyList(u *unstructured.Unstructured) []OperatorDenyEntry {
	list, _, _ := unstructured.NestedSlice(u.Object, "spec", "lockOptions", "denyList")
	var out []OperatorDenyEntry
	for _, e := range list {
		m, _ := e.(map[string]any)
		id, _ := m["id"].(string)
		allow, _ := m["allow"].(bool)
		out = append(out, OperatorDenyEntry{ID: id, Allow: allow})
	}
	return out
}

// withEntry is the list with id denied ({id}) or allowed ({id, allow: true}), in place when the
// ID is listed, appended otherwise; changed is false when it already says so.
func withEntry(list []any, id string, allow bool) (out []any, changed bool) {
	out = make([]any, 0, len(list)+1)
	found := false
	for _, e := range list {
		m, _ := e.(map[string]any)
		if got, _ := m["id"].(string); got == id && !found {
			found = true
			cur, _ := m["allow"].(bool)
			if cur == allow {
				out = append(out, e)
				continue
			}
			changed = true
			n := map[string]any{}
			for k, v := range m {
				n[k] = v
			}
			delete(n, "allow")
			if allow {
				n["allow"] = true
			}
			out = append(out, n)
			continue
		}
		out = append(out, e)
	}
	if !found {
		changed = true
		n := map[string]any{"id": id}
		if allow {
			n["allow"] = true
		}
		out = append(out, n)
	}
	return out, changed
}

// SetOperatorDeny denies (allow false) or allows an operator instance in the deny list of the
// FoundationDBCluster u (as read). The merge patch carries u's resourceVersion; after a
// conflict the resource is read again and the list computed again, so nobody else's entry is
// lost. changed is false when the entry already said so (nothing written).
func SetOperatorDeny(ctx context.Context, dyn dynamic.Interface, u *unstructured.Unstructured, id string, allow bool) (changed bool, err error) {
	res := dyn.Resource(ClusterGVR).Namespace(u.GetNamespace())
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if u, err = res.Get(ctx, u.GetName(), metav1.GetOptions{}); err != nil {
				return false, fmt.Errorf("reading FoundationDBCluster %s/%s: %w", u.GetNamespace(), u.GetName(), err)
			}
		}
		list, _, _ := unstructured.NestedSlice(u.Object, "spec", "lockOptions", "denyList")
		next, changed := withEntry(list, id, allow)
		if !changed {
			return false, nil
		}
		err = patchCR(ctx, dyn, u, map[string]any{"lockOptions": map[string]any{"denyList": next}}, nil)
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsConflict(err) && attempt < maxPatchConflicts:
		case apierrors.IsConflict(err):
			return false, ops.Preconditionf("FoundationDBCluster %s/%s keeps changing (%d resourceVersion conflicts); refusing to overwrite it", u.GetNamespace(), u.GetName(), attempt+1)
		default:
			return false, fmt.Errorf("patching spec.lockOptions.denyList of FoundationDBCluster %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
	}
}
