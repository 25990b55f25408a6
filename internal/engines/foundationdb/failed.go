package foundationdb

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// The operator's failure judgment (FoundationDB/fdb-kubernetes-operator
// internal/replacements/replace_failed_process_groups.go ReplaceFailedProcessGroups, and
// api/v1beta2/foundationdbcluster_types.go NeedsReplacementWithConditions): a process group not
// marked for removal is failed when the earliest of its failure conditions other than
// NodeTaintReplacing is older than failureDetectionTimeSeconds, or its NodeTaintReplacing is
// older than taintReplacementTimeSeconds. Condition timestamps are the operator's (in-cluster)
// clock, so ages are judged by the API server's clock, not the workstation's.
const (
	// defaultFailureDetection: GetFailureDetectionTimeSeconds without
	// spec.automationOptions.replacements.failureDetectionTimeSeconds.
	defaultFailureDetection = 7200 * time.Second
	// defaultTaintReplacement: GetTaintReplacementTimeSeconds without
	// spec.automationOptions.replacements.taintReplacementTimeSeconds.
	defaultTaintReplacement = 1800 * time.Second
	// taintReplacementsHeld is the operator's "~1 year" taint replacement time when taint
	// replacements are not allowed (no taintReplacementOptions, or too many tainted fault domains).
	taintReplacementsHeld = 8760 * time.Hour
	// defaultMaxTaintedFaultDomains: GetMaxFaultDomainsWithTaintedProcessGroups's default.
	defaultMaxTaintedFaultDomains = "10%"
	condNodeTaintReplacing        = "NodeTaintReplacing"
)

// failureConditions are defaultConditionsThatNeedReplacement (the operator's
// GetConditionsThatNeedReplacement).
var failureConditions = []string{"MissingProcesses", "PodFailing", "MissingPod", "MissingPVC", "MissingService", "PodPending",
	condNodeTaintReplacing, "ProcessIsMarkedAsExcluded", "ProcessHasIOError", "SidecarUnreachable", "ProcessHasHighRunLoopBusy"}

// failureThresholds are the cluster's failure detection and taint replacement times. A field
// that is set counts even when 0 (the operator's ptr.Deref).
func failureThresholds(u *unstructured.Unstructured) (failure, taint time.Duration) {
	failure, taint = defaultFailureDetection, defaultTaintReplacement
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "automationOptions", "replacements", "failureDetectionTimeSeconds"); ok && v != nil {
		failure = time.Duration(int64Of(v)) * time.Second
	}
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "automationOptions", "replacements", "taintReplacementTimeSeconds"); ok && v != nil {
		taint = time.Duration(int64Of(v)) * time.Second
	}
	return failure, taint
}

// taintReplacementsAllowed is nodeTaintReplacementsAllowed: taintReplacementOptions set, and no
// more fault domains holding a NodeTaintReplacing group than
// maxFaultDomainsWithTaintedProcessGroups (an int or a percentage of the fault domains, rounded
// down, at least 1).
func taintReplacementsAllowed(u *unstructured.Unstructured, groups []any) bool {
	opts, _, _ := unstructured.NestedSlice(u.Object, "spec", "automationOptions", "replacements", "taintReplacementOptions")
	if len(opts) == 0 {
		return false
	}
	domains, tainted := map[string]bool{}, map[string]bool{}
	for _, g := range groups {
		m, _ := g.(map[string]any)
		fd, _ := m["faultDomain"].(string)
		if fd == "" {
			continue
		}
		domains[fd] = true
		conds, _, _ := unstructured.NestedSlice(m, "processGroupConditions")
		for _, cv := range conds {
			if cm, _ := cv.(map[string]any); cm["type"] == condNodeTaintReplacing {
				tainted[fd] = true
			}
		}
	}
	limit := intstr.FromString(defaultMaxTaintedFaultDomains)
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "automationOptions", "replacements", "maxFaultDomainsWithTaintedProcessGroups"); ok && v != nil {
		if str, isStr := v.(string); isStr {
			limit = intstr.Parse(str)
		} else {
			limit = intstr.FromInt32(int32(min(int64Of(v), math.MaxInt32)))
		}
	}
	most, err := intstr.GetScaledValueFromIntOrPercent(&limit, len(domains), false)
	if err != nil {
		return false // the operator logs the error and defaults to false
	}
	return max(most, 1) >= len(tainted)
}

// crashLooping are the process groups spec.buggify.crashLoopContainers makes crash on purpose
// (GetCrashLoopContainerProcessGroups); the operator never replaces them, and with a "*" target
// replaces none.
func crashLooping(u *unstructured.Unstructured) (ids map[string]bool, all bool) {
	ids = map[string]bool{}
	targets, _, _ := unstructured.NestedSlice(u.Object, "spec", "buggify", "crashLoopContainers")
	for _, t := range targets {
		tm, _ := t.(map[string]any)
		list, _ := tm["targets"].([]any)
		for _, id := range list {
			s, _ := id.(string)
			if s == "*" {
				return ids, true
			}
			ids[s] = true
		}
	}
	return ids, false
}

// NotMembers reports, for `replace --failed`, the pods whose process group the operator judges
// failed (above). Groups marked for removal are being replaced already.
func (e *Engine) NotMembers(ctx context.Context, c *ops.Cluster) (map[string]string, error) {
	if layoutOf(c) == layoutStatefulSet {
		return e.stsNotMembers(ctx, c)
	}
	u := Resource(c)
	if u == nil {
		return nil, nil
	}
	failure, taint := failureThresholds(u)
	groups, _, _ := unstructured.NestedSlice(u.Object, "status", "processGroups")
	if !taintReplacementsAllowed(u, groups) {
		taint = taintReplacementsHeld
	}
	ignore, none := crashLooping(u)
	if none {
		return map[string]string{}, nil
	}
	zone := e.maintenanceZone(ctx, c)
	now := e.deps.Now()
	failed := map[string]string{}
	for _, g := range groups {
		m, _ := g.(map[string]any)
		id, _ := m["processGroupID"].(string)
		if _, marked := m["removalTimestamp"]; marked || id == "" || ignore[id] || underMaintenance(m, zone) {
			continue
		}
		var cond string
		var earliest, taintSince int64 = math.MaxInt64, math.MaxInt64
		conds, _, _ := unstructured.NestedSlice(m, "processGroupConditions")
		for _, cv := range conds {
			cm, _ := cv.(map[string]any)
			typ, _ := cm["type"].(string)
			ts := int64Of(cm["timestamp"])
			switch {
			case !slices.Contains(failureConditions, typ):
			case typ == condNodeTaintReplacing:
				taintSince = min(taintSince, ts)
			case ts < earliest:
				earliest, cond = ts, typ
			}
		}
		// Strictly older than the threshold, in whole seconds, as the operator compares.
		switch {
		case earliest < now.Add(-failure).Unix():
			failed[id] = fmt.Sprintf("process group %s: %s for %s (failure detection time %s)", id, cond, now.Sub(time.Unix(earliest, 0)).Round(time.Second), failure)
		case taintSince < now.Add(-taint).Unix():
			failed[id] = fmt.Sprintf("process group %s: %s for %s (taint replacement time %s)", id, condNodeTaintReplacing, now.Sub(time.Unix(taintSince, 0)).Round(time.Second), taint)
		}
	}
	out := map[string]string{}
	for _, p := range c.AllPods() {
		if why, ok := failed[p.Member]; ok {
			out[p.Name] = why
		}
	}
	return out, nil
}

// underMaintenance is the operator's ProcessGroupStatus.IsUnderMaintenance
// (api/v1beta2/foundationdbcluster_types.go), which ReplaceFailedProcessGroups skips: a storage
// process group whose fault domain is the active maintenance zone. Its processes are down on
// purpose (someone's restart of that zone), and the operator stops updating its conditions
// meanwhile, so stale conditions must not make it a replacement candidate.
func underMaintenance(group map[string]any, zone string) bool {
	class, _ := group["processClass"].(string)
	fd, _ := group["faultDomain"].(string)
	return class == "storage" && zone != "" && fd == zone
}

// maintenanceZone is status json's cluster.maintenance_zone, "" when none is set or status json
// cannot be read: the operator then judges with a dummy status that names no zone
// (getStatusFromClusterOrDummyStatus), and so does replace --failed; the replacement itself
// reads status json again before it excludes anything.
func (e *Engine) maintenanceZone(ctx context.Context, c *ops.Cluster) string {
	st, _, err := e.StatusFrom(ctx, e.cli(), c, nil)
	if err != nil || st == nil {
		return ""
	}
	return st.Cluster.MaintenanceZone
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
		out = append(out, fmt.Sprintf("%s %s: %s stored, roles %s", dash(pr.InstanceID()), pr.Address, ops.FormatBytes(bytes), strings.Join(roles, ",")))
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
