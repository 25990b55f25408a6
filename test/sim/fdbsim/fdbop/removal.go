package fdbop

// Removal of process groups, as the operator does it (a grow followed by a shrink):
//   - update_status.go: a process group named in spec.processGroupsToRemove is marked for
//     removal (removalTimestamp); one in spec.processGroupsToRemoveWithoutExclusion is also
//     marked excluded at once (exclusionSkipped, exclusionTimestamp);
//   - add_process_groups.go: a class counts only the groups not marked for removal, so a
//     replacement group is created for each marked one (Reconcile's addProcessGroups);
//   - add_pods.go: a group marked for removal gets no new pod;
//   - exclude_processes.go: `exclude no_wait locality_instance_id:<id>` only for as many groups
//     as there are valid processes beyond the desired count (getAllowedExclusions: "we will only
//     exclude a process if there is a replacement ready for it"), and none while a group of the
//     class reports no process. Stricter than the operator: its desired-fault-tolerance slack
//     and its five-minute allowance for missing processes are not modelled, so an exclusion
//     waits for every replacement;
//   - remove_process_groups.go: a group is removable once fully excluded (its process excluded
//     and holding no role but coordinator), never while a coordinator ("Block removal of
//     Coordinator"), only with the desired fault tolerance (HasDesiredFaultToleranceFromStatus);
//     its pod and PVC are deleted, and once both are gone (confirmRemoval) its exclusion is
//     included again (includeProcessGroup) and the group leaves status.processGroups;
//   - change_coordinators.go: coordinators on groups marked for removal are replaced (Reconcile's
//     fixCoordinators).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// markRemovals marks the groups the spec names (update_status.go).
func markRemovals(spec *clusterSpec, status *clusterStatus, now time.Time) {
	ts := now.UTC().Format(time.RFC3339)
	for _, pg := range status.ProcessGroups {
		without := slices.Contains(spec.ProcessGroupsToRemoveWithoutExclusion, pg.ProcessGroupID)
		if !without && !slices.Contains(spec.ProcessGroupsToRemove, pg.ProcessGroupID) {
			continue
		}
		if pg.RemovalTimestamp == nil {
			pg.RemovalTimestamp = ptr(ts)
		}
		if without && !pg.ExclusionSkipped {
			pg.ExclusionSkipped = true
			if pg.ExclusionTimestamp == nil {
				pg.ExclusionTimestamp = ptr(ts)
			}
		}
	}
}

// removing is the set of process group IDs marked for removal.
func removing(status *clusterStatus) map[string]bool {
	out := map[string]bool{}
	for _, pg := range status.ProcessGroups {
		if pg.RemovalTimestamp != nil {
			out[pg.ProcessGroupID] = true
		}
	}
	return out
}

// isStateful: the classes with a PVC (api/v1beta2 foundationdb_process_class.go IsStateful).
func isStateful(class string) bool {
	return class == fdbsim.ClassStorage || class == fdbsim.ClassLog || class == "transaction"
}

// pvcName is ProcessGroupStatus.GetPvcName: the pod's name with "-data".
func pvcName(cluster string, pg *processGroupStatus) string { return podName(cluster, pg) + "-data" }

// createPVC creates a stateful group's PVC (internal/pod_models.go GetPvc), owned by the cluster.
// It is not mounted: the simulated fdbserver keeps no files, and an unbound claim would keep the
// pod from being scheduled on the test bed.
func (o *Operator) createPVC(ctx context.Context, owner *unstructured.Unstructured, spec *clusterSpec, pg *processGroupStatus) error {
	if !isStateful(pg.ProcessClass) {
		return nil
	}
	// internal/pod_helper.go GetPvcMetadata -> internal/pod_models.go GetObjectMetadata: the
	// pod labels (GetPodLabels: match labels, class and process group ID labels), then the
	// resource labels.
	labels := map[string]string{}
	for k, v := range spec.matchLabels(owner.GetName()) {
		labels[k] = v
	}
	for _, l := range spec.processClassLabels() {
		labels[l] = pg.ProcessClass
	}
	for _, l := range spec.processGroupIDLabels() {
		labels[l] = pg.ProcessGroupID
	}
	for k, v := range spec.resourceLabels(owner.GetName()) {
		labels[k] = v
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: pvcName(owner.GetName(), pg), Namespace: owner.GetNamespace(), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: GVR.GroupVersion().String(), Kind: "FoundationDBCluster",
				Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Gi")}},
		},
	}
	_, err := o.kube.CoreV1().PersistentVolumeClaims(owner.GetNamespace()).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create PVC %s: %w", pvc.Name, err)
	}
	return nil
}

// startProcess starts a group's process at addr: a group the model knows comes back, a new one
// (a replacement, or a class grown) joins.
func startProcess(model *fdbsim.Cluster, pg *processGroupStatus, addr string) error {
	if model.Has(pg.ProcessGroupID) {
		return model.Start(pg.ProcessGroupID, addr)
	}
	return model.AddProcess(fdbsim.ProcessSpec{ID: pg.ProcessGroupID, Address: addr, Class: pg.ProcessClass, Zone: pg.FaultDomain})
}

// removalStatus is the part of status json the removal reads.
type removalStatus struct {
	Client struct {
		DatabaseStatus struct {
			Available bool `json:"available"`
		} `json:"database_status"`
	} `json:"client"`
	Cluster struct {
		FullReplication bool `json:"full_replication"`
		Processes       map[string]struct {
			Address  string            `json:"address"`
			Excluded bool              `json:"excluded"`
			Locality map[string]string `json:"locality"`
			Roles    []struct {
				Role string `json:"role"`
			} `json:"roles"`
		} `json:"processes"`
		Configuration struct {
			ExcludedServers []struct {
				Address  string `json:"address"`
				Locality string `json:"locality"`
			} `json:"excluded_servers"`
		} `json:"configuration"`
		Data struct {
			State struct {
				Healthy bool `json:"healthy"`
			} `json:"state"`
		} `json:"data"`
	} `json:"cluster"`
}

func (o *Operator) fdbcli(ctx context.Context, model *fdbsim.Cluster, cmd string) error {
	var out, errb bytes.Buffer
	if code := model.RunAs(ctx, "operator", []string{"--exec", cmd, "--timeout", "10"}, &out, &errb); code != 0 {
		return fmt.Errorf("fdbcli %q: exit %d: %s", cmd, code, strings.TrimSpace(errb.String()))
	}
	return nil
}

// exclusionString is ProcessGroupStatus.GetExclusionString: the locality of the group.
func exclusionString(pg *processGroupStatus) string {
	return "locality_instance_id:" + pg.ProcessGroupID
}

// reconcileRemovals runs one round of exclude, remove and include for the groups marked for
// removal, paced as the operator paces them (pacing.go). pods are the cluster's pods by name.
func (o *Operator) reconcileRemovals(ctx context.Context, owner *unstructured.Unstructured, spec *clusterSpec, status *clusterStatus,
	model *fdbsim.Cluster, pods map[string]*corev1.Pod, pc *pace, ls *lockSpec) error {
	marked := removing(status)
	if len(marked) == 0 || model == nil {
		return nil
	}
	var st removalStatus
	if err := json.Unmarshal(model.StatusJSON(), &st); err != nil {
		return fmt.Errorf("status json: %w", err)
	}
	name, ns := owner.GetName(), owner.GetNamespace()
	now := o.host.Clock().Now()
	excluded := map[string]bool{}
	for _, e := range st.Cluster.Configuration.ExcludedServers {
		excluded[e.Locality] = true
		excluded[e.Address] = true
	}
	inStatus := map[string]bool{}
	for _, p := range st.Cluster.Processes {
		inStatus[p.Locality["instance_id"]] = true
	}

	// internal/removals GetRemainingMap: the exclusions to confirm (groups not yet known
	// excluded, or known excluded but missing from status json) are checked only when an
	// exclusion would be allowed now; otherwise nothing is removed this round.
	for _, pg := range status.ProcessGroups {
		if marked[pg.ProcessGroupID] && (pg.ExclusionTimestamp == nil || !inStatus[pg.ProcessGroupID]) {
			if pc.canExclude() != nil {
				return nil
			}
			break
		}
	}

	// remove_process_groups.go getProcessGroupsToRemove: fully excluded = excluded and no role
	// but coordinator.
	ts := now.UTC().Format(time.RFC3339)
	for _, pg := range status.ProcessGroups {
		if !marked[pg.ProcessGroupID] || pg.ExclusionTimestamp != nil || !excluded[exclusionString(pg)] {
			continue
		}
		done := true
		for _, p := range st.Cluster.Processes {
			if p.Locality["instance_id"] != pg.ProcessGroupID {
				continue
			}
			if !p.Excluded {
				done = false
			}
			for _, r := range p.Roles {
				if r.Role != "coordinator" {
					done = false
				}
			}
		}
		if done {
			pg.ExclusionTimestamp = ptr(ts)
		}
	}

	coords := map[string]bool{}
	for _, a := range model.Coordinators() {
		coords[strings.TrimSuffix(a, ":tls")] = true
	}
	var toRemove []*processGroupStatus
	for _, pg := range status.ProcessGroups {
		if !marked[pg.ProcessGroupID] || pg.ExclusionTimestamp == nil {
			continue
		}
		isCoord := false
		for _, p := range st.Cluster.Processes {
			if p.Locality["instance_id"] == pg.ProcessGroupID && coords[strings.TrimSuffix(p.Address, ":tls")] {
				isCoord = true // "Block removal of Coordinator"
			}
		}
		if !isCoord {
			toRemove = append(toRemove, pg)
		}
	}
	if len(toRemove) == 0 {
		return nil
	}
	// HasDesiredFaultToleranceFromStatus.
	if !st.Client.DatabaseStatus.Available || !st.Cluster.FullReplication || !st.Cluster.Data.State.Healthy {
		return nil
	}
	var ao automationOptions
	if err := fromUnstructured(owner.Object["spec"], &ao); err != nil {
		return fmt.Errorf("spec.automationOptions: %w", err)
	}
	// internal/removals GetZonedRemovals: groups whose resources are terminating form their
	// own zone, the latest of their ResourcesTerminating times is the last deletion.
	zoned := map[string][]*processGroupStatus{}
	var zones []string
	var terminating []*processGroupStatus
	var lastDeletion int64
	for _, pg := range toRemove {
		if t := conditionTime(pg, "ResourcesTerminating"); t > 0 {
			lastDeletion = max(lastDeletion, t)
			terminating = append(terminating, pg)
			continue
		}
		zone := pg.FaultDomain
		if zone == "" {
			zone = "foundationdb.org/unknown"
		}
		if zoned[zone] == nil {
			zones = append(zones, zone)
		}
		zoned[zone] = append(zoned[zone], pg)
	}
	mode := ao.removalMode()
	if mode != removalAll {
		if _, ok := removalAllowed(lastDeletion, now.Unix(), ao.waitBetweenRemovals()); !ok {
			return nil // "not allowed to remove process groups, waiting"
		}
	}
	// GetProcessGroupsToRemove.
	var picked []*processGroupStatus
	switch mode {
	case removalAll:
		for _, z := range zones {
			picked = append(picked, zoned[z]...)
		}
	case removalProcessGroup:
		if len(zones) > 0 {
			picked = zoned[zones[0]][:1]
		}
	case removalNone:
	default: // Zone: the zone with the most groups to remove
		best := ""
		for _, z := range zones {
			if best == "" || len(zoned[z]) > len(zoned[best]) {
				best = z
			}
		}
		picked = zoned[best]
	}

	// removeProcessGroups: delete the picked groups' resources and those still terminating;
	// confirmRemoval: a group is removed once its pod and PVC are gone.
	removed := map[string]bool{}
	for _, pg := range append(picked, terminating...) {
		pod := pods[podName(name, pg)]
		if pod != nil && pod.DeletionTimestamp == nil {
			if err := o.kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete pod %s: %w", pod.Name, err)
			}
		}
		pvcGone := true
		if isStateful(pg.ProcessClass) {
			pvc, err := o.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvcName(name, pg), metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("get PVC of %s: %w", pg.ProcessGroupID, err)
			default:
				pvcGone = false
				if pvc.DeletionTimestamp == nil {
					if err := o.kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
						return fmt.Errorf("delete PVC %s: %w", pvc.Name, err)
					}
				}
			}
		}
		if pod == nil && pvcGone {
			removed[pg.ProcessGroupID] = true
		} else if conditionTime(pg, "ResourcesTerminating") == 0 {
			// update_status.go at the end of this reconcile: the pod is terminating or gone.
			pg.ProcessGroupConditions = append(pg.ProcessGroupConditions, &processGroupCondition{Type: "ResourcesTerminating", Timestamp: now.Unix()})
		}
	}
	if len(removed) == 0 {
		return nil
	}
	// includeProcessGroup: the removed groups leave status once their exclusions are included,
	// an inclusion only as the pacing allows (CanSafelyIncludeProcesses) and under the lock.
	var include []string
	for _, pg := range status.ProcessGroups {
		if !removed[pg.ProcessGroupID] {
			continue
		}
		if excluded[exclusionString(pg)] {
			include = append(include, exclusionString(pg))
		}
		for _, a := range pg.Addresses {
			if excluded[a] {
				include = append(include, a)
			}
		}
	}
	if len(include) > 0 {
		if pc.canInclude() != nil {
			return nil
		}
		if o.takeLock(model, ls, "include removed process groups") != nil {
			return nil
		}
		if err := o.fdbcli(ctx, model, "include "+strings.Join(include, " ")); err != nil {
			return err
		}
		// "Reset the SecondsSinceLastRecovered since the operator just included some
		// processes, which will cause a recovery."
		pc.recovered()
	}
	keep := make([]*processGroupStatus, 0, len(status.ProcessGroups))
	for _, pg := range status.ProcessGroups {
		if removed[pg.ProcessGroupID] && model.Has(pg.ProcessGroupID) && model.RemoveProcess(pg.ProcessGroupID) != nil {
			removed[pg.ProcessGroupID] = false
		}
		if !removed[pg.ProcessGroupID] {
			keep = append(keep, pg)
			continue
		}
		o.mu.Lock()
		if s := o.state[Key(ns, name)]; s != nil {
			delete(s.bound, pg.ProcessGroupID)
		}
		o.mu.Unlock()
	}
	status.ProcessGroups = keep
	return nil
}

// excludeMarked is exclude_processes.go, which the operator runs before changeCoordinators and
// removeProcessGroups (cluster_controller.go subReconcilers): per class, only with replacements
// ready, only as the pacing allows (CanSafelyExcludeProcessesWithRecoveryState), under the lock;
// a coordinator excluded has the coordinators changed at once.
func (o *Operator) excludeMarked(ctx context.Context, spec *clusterSpec, status *clusterStatus, model *fdbsim.Cluster,
	pc *pace, ls *lockSpec, name, ns string) error {
	marked := removing(status)
	if len(marked) == 0 {
		return nil
	}
	var rs removalStatus
	if err := json.Unmarshal(model.StatusJSON(), &rs); err != nil {
		return fmt.Errorf("status json: %w", err)
	}
	st := &rs
	reported := map[string]bool{}
	for _, p := range st.Cluster.Processes {
		reported[p.Locality["instance_id"]] = true
	}
	desired := spec.desiredCounts()
	perClass := map[string][]*processGroupStatus{}
	for _, pg := range status.ProcessGroups {
		if marked[pg.ProcessGroupID] && pg.ExclusionTimestamp == nil {
			perClass[pg.ProcessClass] = append(perClass[pg.ProcessClass], pg)
		}
	}
	excluded := map[string]bool{}
	for _, e := range st.Cluster.Configuration.ExcludedServers {
		excluded[e.Locality] = true
		excluded[e.Address] = true
	}
	var todo []*processGroupStatus
	for _, groups := range perClass {
		for _, pg := range groups {
			if !excluded[exclusionString(pg)] {
				todo = append(todo, pg)
			}
		}
	}
	if len(todo) == 0 {
		return nil
	}
	if pc.canExclude() != nil {
		return nil // "delay: 10 * time.Second"
	}
	coordGroups := map[string]bool{}
	coords := map[string]bool{}
	for _, a := range model.Coordinators() {
		coords[strings.TrimSuffix(a, ":tls")] = true
	}
	for _, p := range st.Cluster.Processes {
		if coords[strings.TrimSuffix(p.Address, ":tls")] {
			coordGroups[p.Locality["instance_id"]] = true
		}
	}
	classes := make([]string, 0, len(perClass))
	for c := range perClass {
		classes = append(classes, c)
	}
	slices.Sort(classes)
	var keys []string
	coordinatorExcluded := false
	for _, class := range classes {
		groups := perClass[class]
		valid, ongoing, missing := 0, 0, false
		for _, pg := range status.ProcessGroups {
			if pg.ProcessClass != class {
				continue
			}
			if marked[pg.ProcessGroupID] && (pg.ExclusionTimestamp != nil || excluded[exclusionString(pg)]) {
				ongoing++
				continue
			}
			if !reported[pg.ProcessGroupID] {
				missing = true
				continue
			}
			valid++
		}
		allowed := valid - desired[class] - ongoing
		if missing || allowed <= 0 {
			continue
		}
		n := 0
		for _, pg := range groups {
			if n < allowed && !excluded[exclusionString(pg)] {
				keys = append(keys, exclusionString(pg))
				coordinatorExcluded = coordinatorExcluded || coordGroups[pg.ProcessGroupID]
				n++
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if o.takeLock(model, ls, "exclude processes") != nil {
		return nil // exclude_processes.go: the exclusion waits for the lock
	}
	err := o.fdbcli(ctx, model, "exclude no_wait "+strings.Join(keys, " "))
	// "Reset the SecondsSinceLastRecovered since the operator just excluded some processes,
	// which will cause a recovery."
	pc.recovered()
	if err != nil {
		return err
	}
	if coordinatorExcluded {
		o.fixCoordinators(ctx, model, spec, status, ls, name, ns, pc, true)
	}
	return nil
}

// conditionTime is GetConditionTime: the condition's timestamp, 0 when absent.
func conditionTime(pg *processGroupStatus, kind string) int64 {
	for _, c := range pg.ProcessGroupConditions {
		if c.Type == kind {
			return c.Timestamp
		}
	}
	return 0
}

// chooseRemovals marks the excess process groups of a class whose count went down
// (controllers/choose_removals.go): the groups kept are spread over fault domains
// (locality.ChooseDistributedProcesses), so the ones marked come from the most crowded zones
// first, then the newest (highest ID number) within a zone.
func chooseRemovals(spec *clusterSpec, status *clusterStatus, now time.Time) {
	ts := now.UTC().Format(time.RFC3339)
	desired := spec.desiredCounts()
	byClass := map[string][]*processGroupStatus{}
	for _, pg := range status.ProcessGroups {
		if pg.RemovalTimestamp == nil {
			byClass[pg.ProcessClass] = append(byClass[pg.ProcessClass], pg)
		}
	}
	for class, groups := range byClass {
		// choose_removals.go: desiredCounts[class], 0 for a class the operator runs none of.
		want := desired[class]
		if len(groups) <= want {
			continue
		}
		for excess := len(groups) - want; excess > 0; excess-- {
			perZone := map[string]int{}
			for _, pg := range groups {
				perZone[pg.FaultDomain]++
			}
			best := -1
			for i, pg := range groups {
				if best < 0 || perZone[pg.FaultDomain] > perZone[groups[best].FaultDomain] ||
					(perZone[pg.FaultDomain] == perZone[groups[best].FaultDomain] && idNumber(pg.ProcessGroupID) > idNumber(groups[best].ProcessGroupID)) {
					best = i
				}
			}
			groups[best].RemovalTimestamp = ptr(ts)
			groups = slices.Delete(groups, best, best+1)
		}
	}
}

func idNumber(id string) int {
	n := 0
	if i := strings.LastIndex(id, "-"); i >= 0 {
		_, _ = fmt.Sscanf(id[i+1:], "%d", &n)
	}
	return n
}
