package foundationdb

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/discovery"
)

// defaultFailureDetection is the operator's default failure detection time
// (api/v1beta2 foundationdbcluster_types.go: automationOptions.replacements
// failureDetectionTimeSeconds, 7200 s; docs/manual/replacements_and_deletions.md).
const defaultFailureDetection = 7200 * time.Second

// failureConditions are the process group conditions the operator replaces a group for
// (replace_failed_process_groups.go, via the group's failure conditions).
var failureConditions = []string{"MissingProcesses", "MissingPod", "PodFailing", "MissingPVC", "PodPending", "ProcessIsMarkedAsExcluded", "NodeTaintReplacing"}

// NotMembers reports, for `replace --failed`, the pods whose process group has held a failure
// condition for longer than the cluster's failure detection time, as the operator judges them.
// Groups marked for removal are being replaced already.
func (e *Engine) NotMembers(ctx context.Context, c *ops.Cluster) (map[string]string, error) {
	if c.Layout == discovery.LayoutFoundationDBStatefulSet {
		return e.stsNotMembers(ctx, c)
	}
	u := Resource(c)
	if u == nil {
		return nil, nil
	}
	threshold := defaultFailureDetection
	if s, ok, _ := unstructured.NestedInt64(u.Object, "spec", "automationOptions", "replacements", "failureDetectionTimeSeconds"); ok && s > 0 {
		threshold = time.Duration(s) * time.Second
	}
	since := map[string]map[string]int64{}
	groups, _, _ := unstructured.NestedSlice(u.Object, "status", "processGroups")
	for _, g := range groups {
		m, _ := g.(map[string]any)
		id, _ := m["processGroupID"].(string)
		if _, marked := m["removalTimestamp"]; marked || id == "" {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(m, "processGroupConditions")
		for _, cv := range conds {
			cm, _ := cv.(map[string]any)
			typ, _ := cm["type"].(string)
			if !slices.Contains(failureConditions, typ) {
				continue
			}
			if since[id] == nil {
				since[id] = map[string]int64{}
			}
			since[id][typ] = int64Of(cm["timestamp"])
		}
	}
	out := map[string]string{}
	now := time.Now()
	for _, p := range c.AllPods() {
		for _, typ := range failureConditions {
			ts, ok := since[p.Member][typ]
			if !ok || ts == 0 {
				continue
			}
			if age := now.Sub(time.Unix(ts, 0)); age >= threshold {
				out[p.Name] = fmt.Sprintf("process group %s: %s for %s (failure detection time %s)", p.Member, typ, age.Round(time.Second), threshold)
				break
			}
		}
	}
	return out, nil
}

// exclusionProgress is what kubectl-fdb's `get exclusion-status` shows: for each excluded
// process still holding data or roles, its stored bytes (storage roles' stored_bytes) and
// roles; "" when no excluded process holds anything.
func exclusionProgress(st *Status) string {
	var out []string
	for _, pr := range st.Cluster.Processes {
		if !pr.Excluded {
			continue
		}
		var bytes int64
		var roles []string
		for _, r := range pr.Roles {
			bytes += r.StoredBytes
			if r.Role != "coordinator" {
				roles = append(roles, r.Role)
			}
		}
		if len(roles) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s: %d bytes stored, roles %s", dash(pr.InstanceID()), pr.Address, bytes, strings.Join(roles, ",")))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// stsNotMembers reports, for `replace --failed` on the foundationdb-statefulset layout (no
// operator, no process group conditions), the pods whose process does not report in status
// json (by locality_instance_id, the pod's name), as CrateDB's and etcd's engines report a pod
// that is not a member. A status json that cannot be read reports nothing: the pod conditions
// still apply.
func (e *Engine) stsNotMembers(ctx context.Context, c *ops.Cluster) (map[string]string, error) {
	st, _, err := e.StatusFrom(ctx, e.cli(), c, nil)
	if err != nil {
		return nil, nil //nolint:nilerr // no status json: judge by the pods alone
	}
	out := map[string]string{}
	for _, p := range c.AllPods() {
		if len(st.ByInstance(p.Name)) == 0 {
			out[p.Name] = "its fdbserver (locality_instance_id " + p.Name + ") does not report in status json"
		}
	}
	return out, nil
}
