// Package fdbop is a stand-in for the FoundationDB operator (FoundationDB/fdb-kubernetes-operator)
// for the test bed: the real operator needs the FDB client library, which cannot run here. It
// follows the operator's technical design (docs/manual/technical_design.md) for what the
// foundationdb engine needs, each behaviour from the operator file named beside it:
//   - one process group per process in spec.processCounts, with a random ID number
//     (controllers/add_process_groups.go, GetNextRandomProcessGroupIDWithExclusions), written to
//     status.processGroups;
//   - one pod per process group, named $cluster-$class-$n, labelled with the match labels and
//     the process class and process group ID labels (spec.labels may override them), owned by
//     the cluster, with a preferred anti-affinity on the fault domain key
//     (internal/pod_models.go GetPod, GetPodMetadata, GetPodSpec; api/v1beta2
//     GetProcessGroupID, GetMatchLabels);
//   - a deleted pod is created again under the same name (controllers/add_pods.go);
//   - the zoneid of a process is its fault domain: the node name by default, or a node label
//     through $NODE_LABEL_... (docs/manual/fault_domains.md);
//   - coordinators 2R-1 on distinct zones where there are enough, changed when one of them no
//     longer exists (controllers/change_coordinators.go);
//   - status.processGroups (addresses, faultDomain, conditions MissingPod, PodPending,
//     PodFailing, MissingProcesses, each stamped when first seen and kept while it holds),
//     health from the machine-readable status, connectionString, generations.reconciled set to
//     metadata.generation only when nothing is left to do, and the generations fields naming
//     what is left (needsGrow, needsShrink, hasUnhealthyProcess, missingDatabaseStatus,
//     needsConfigurationChange, needsCoordinatorChange) as api/v1beta2
//     foundationdbcluster_types.go CheckReconciliation sets them (controllers/update_status.go,
//     controllers/cluster_controller.go);
//   - spec.skip: the cluster is left alone entirely (controllers/cluster_controller.go).
//
// The FDB cluster behind the pods is an fdbsim.Cluster on an fdbsim.Host: the stand-in creates
// it once every first pod runs (the real operator then runs `configure new`), stops a process
// whose pod is gone and starts it at its new pod's address. Everything it asks of the database
// goes through fdbcli commands on the model, as the operator's admin client
// (fdbclient/admin_client.go) runs fdbcli; those are logged with the client "operator".
package fdbop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// GVR is the FoundationDBCluster resource.
var GVR = schema.GroupVersionResource{Group: "apps.foundationdb.org", Version: "v1beta2", Resource: "foundationdbclusters"}

// MainContainer is the container fdbcli runs in (api/v1beta2 foundationdb_constants.go).
const MainContainer = "foundationdb"

// maxProcessGroupIDNum is api/v1beta2 MaxProcessGroupIDNum.
const maxProcessGroupIDNum = 99999

// Options configure the stand-in.
type Options struct {
	// Namespace to watch.
	Namespace string
	// Model is the configuration of each cluster model it creates (delays, knobs).
	Model fdbsim.Config
	// Resync is how often every cluster is reconciled again without an event (the real
	// operator requeues); default 500 ms.
	Resync time.Duration
	// Seed seeds the process group ID numbers (0: random).
	Seed uint64
	// Pacing is the operator's waits after a recovery (pacing.go); nil: the operator's
	// defaults (DefaultPacing).
	Pacing *Pacing
}

// Operator is the stand-in controller.
type Operator struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
	host *fdbsim.Host
	opts Options
	rnd  *rand.Rand

	mu    sync.Mutex
	state map[string]*clusterState
	zones map[types.UID]string // pod UID -> zone, read once per incarnation
	queue chan string
}

// clusterState is what the stand-in remembers of one cluster between reconciles.
type clusterState struct {
	// bound is the pod incarnation each process of the model runs in.
	bound map[string]types.UID
}

// New makes the stand-in; Run starts it.
func New(kube kubernetes.Interface, dyn dynamic.Interface, host *fdbsim.Host, opts Options) *Operator {
	if opts.Resync == 0 {
		opts.Resync = 500 * time.Millisecond
	}
	if opts.Pacing == nil {
		opts.Pacing = ptr(DefaultPacing())
	}
	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &Operator{kube: kube, dyn: dyn, host: host, opts: opts, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		state: map[string]*clusterState{}, zones: map[types.UID]string{}, queue: make(chan string, 256)}
}

// Run reconciles until ctx ends: on every change of a FoundationDBCluster or of a pod in the
// namespace, and every Resync.
func (o *Operator) Run(ctx context.Context) error {
	go o.watchLoop(ctx, func(ctx context.Context) (watch.Interface, error) {
		return o.dyn.Resource(GVR).Namespace(o.opts.Namespace).Watch(ctx, metav1.ListOptions{})
	}, func(ev watch.Event) string {
		if u, ok := ev.Object.(*unstructured.Unstructured); ok {
			return u.GetName()
		}
		return ""
	})
	go o.watchLoop(ctx, func(ctx context.Context) (watch.Interface, error) {
		return o.kube.CoreV1().Pods(o.opts.Namespace).Watch(ctx, metav1.ListOptions{})
	}, func(ev watch.Event) string {
		if p, ok := ev.Object.(*corev1.Pod); ok {
			for _, ref := range p.OwnerReferences {
				if ref.Kind == "FoundationDBCluster" {
					return ref.Name
				}
			}
		}
		return ""
	})
	tick := time.NewTicker(o.opts.Resync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case name := <-o.queue:
			// Drain duplicates queued meanwhile.
			names := map[string]bool{name: true}
			for more := true; more; {
				select {
				case n := <-o.queue:
					names[n] = true
				default:
					more = false
				}
			}
			for n := range names {
				_ = o.Reconcile(ctx, n) // errors are retried on the next event or resync
			}
		case <-tick.C:
			list, err := o.dyn.Resource(GVR).Namespace(o.opts.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, u := range list.Items {
				_ = o.Reconcile(ctx, u.GetName())
			}
		}
	}
}

func (o *Operator) watchLoop(ctx context.Context, start func(context.Context) (watch.Interface, error), key func(watch.Event) string) {
	for ctx.Err() == nil {
		w, err := start(ctx)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				continue
			}
		}
		for ev := range w.ResultChan() {
			if k := key(ev); k != "" {
				select {
				case o.queue <- k:
				default: // the resync will get to it
				}
			}
		}
		w.Stop()
	}
}

// Key is the host key of a cluster.
func Key(namespace, name string) string { return namespace + "/" + name }

// Reconcile brings one cluster one step closer to its spec and writes its status.
func (o *Operator) Reconcile(ctx context.Context, name string) error {
	ns := o.opts.Namespace
	u, err := o.dyn.Resource(GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get cluster %s: %w", name, err)
	}
	var spec clusterSpec
	var status clusterStatus
	if err := fromUnstructured(u.Object["spec"], &spec); err != nil {
		return fmt.Errorf("cluster %s spec: %w", name, err)
	}
	if err := fromUnstructured(u.Object["status"], &status); err != nil {
		return fmt.Errorf("cluster %s status: %w", name, err)
	}
	// cluster_controller.go: "Skipping cluster with skip value true".
	if spec.Skip {
		return nil
	}
	before := mustJSON(status)
	ls := readLockSpec(u)
	key := Key(ns, name)
	o.mu.Lock()
	st := o.state[key]
	if st == nil {
		st = &clusterState{bound: map[string]types.UID{}}
		o.state[key] = st
	}
	o.mu.Unlock()

	markRemovals(&spec, &status, time.Now())
	o.addProcessGroups(&spec, &status)
	chooseRemovals(&spec, &status, time.Now())
	marked := removing(&status)

	pods := map[string]*corev1.Pod{}
	list, err := o.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector(spec.matchLabels(name))})
	if err != nil {
		return fmt.Errorf("list pods of %s: %w", name, err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		if metav1.IsControlledBy(p, u) {
			pods[p.Name] = p
		}
	}

	model := o.host.Cluster(key)
	allRunning := true
	addresses := map[string]string{}
	dns := map[string]string{} // the pods' DNS names (the operator's headless service) -> IP
	for _, pg := range status.ProcessGroups {
		podName := podName(name, pg)
		pod := pods[podName]
		o.host.BindPod(ns+"/"+podName, key)
		gone := pod == nil || pod.DeletionTimestamp != nil
		if gone && model != nil && st.bound[pg.ProcessGroupID] != "" {
			_ = model.Stop(pg.ProcessGroupID)
			st.bound[pg.ProcessGroupID] = ""
		}
		if pod == nil {
			if marked[pg.ProcessGroupID] {
				// add_pods.go: a group marked for removal gets no new pod.
				continue
			}
			// add_pods.go: a process group without its pod gets it (again), same name; a
			// stateful one its PVC first (add_pvcs.go).
			if err := o.createPVC(ctx, u, &spec, pg); err != nil {
				return err
			}
			if err := o.createPod(ctx, u, &spec, pg); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			allRunning = false
			continue
		}
		if gone || pod.Status.PodIP == "" || !podReady(pod) {
			allRunning = false
			continue
		}
		addr := pod.Status.PodIP + ":4501"
		if spec.MainContainer.EnableTLS {
			addr = pod.Status.PodIP + ":4500:tls"
		}
		addresses[pg.ProcessGroupID] = addr
		dns[spec.dnsName(name, ns, podName)] = pod.Status.PodIP
		pg.Addresses = []string{pod.Status.PodIP}
		zone, err := o.zone(ctx, &spec, pod)
		if err != nil {
			return err
		}
		pg.FaultDomain = zone
		if model != nil && st.bound[pg.ProcessGroupID] != pod.UID {
			if err := startProcess(model, pg, addr); err == nil {
				st.bound[pg.ProcessGroupID] = pod.UID
			}
		}
	}

	if model != nil && spec.useDNS() {
		model.SetDNS(dns)
	}
	if model == nil && allRunning && len(status.ProcessGroups) > 0 {
		model, err = o.createModel(&spec, &status, addresses, dns, name, ns)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
		for _, pg := range status.ProcessGroups {
			st.bound[pg.ProcessGroupID] = pods[podName(name, pg)].UID
		}
		o.host.SetCluster(key, model)
	}

	reported := map[string]bool{}
	var health fdbStatus
	needsCoordinators := false
	if model != nil {
		pc, err := newPace(*o.opts.Pacing, spec.Version, model.StatusJSON())
		if err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
		if len(ls.LockOptions.DenyList) > 0 && ls.shouldUseLocks() && status.Configured {
			// update_lock_configuration.go, then update_status.go's status.locks.
			if list, err := o.updateDenyList(model, ls); err == nil {
				status.Locks.DenyList = list
			}
		}
		if err := o.excludeMarked(ctx, &spec, &status, model, pc, ls, name, ns); err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
		needsCoordinators = o.fixCoordinators(ctx, model, &spec, &status, ls, name, ns, pc, false)
		var mopts maintenanceOptions
		if err := fromUnstructured(u.Object["spec"], &mopts); err == nil {
			storage := map[string]bool{}
			for _, pg := range status.ProcessGroups {
				if pg.ProcessClass == fdbsim.ClassStorage {
					storage[pg.ProcessGroupID] = true
				}
			}
			o.checkMaintenance(ctx, model, &mopts, storage, ls)
		}
		if err := o.reconcileRemovals(ctx, u, &spec, &status, model, pods, pc, ls); err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
		// The removal changed the groups; update_status.go's NeedsNewCoordinators is read
		// again at the end.
		needsCoordinators = needsCoordinators && !o.coordinatorsValid(model, &spec, &status, name, ns)
		if err := json.Unmarshal(model.StatusJSON(), &health); err == nil {
			for _, p := range health.Cluster.Processes {
				reported[p.Locality["instance_id"]] = true
			}
		}
		status.ConnectionString = model.ConnectionString()
		status.Configured = true
		status.RunningVersion = spec.Version
		status.DatabaseConfiguration.RedundancyMode = redundancy(&spec)
		status.DatabaseConfiguration.StorageEngine = "ssd-2"
	}
	// update_status.go: health from the machine-readable status.
	status.Health.Available = health.Client.DatabaseStatus.Available
	status.Health.Healthy = health.Client.DatabaseStatus.Healthy
	status.Health.FullReplication = health.Cluster.FullReplication

	now := o.host.Clock().Now().Unix()
	for _, pg := range status.ProcessGroups {
		pod := pods[podName(name, pg)]
		var want []string
		switch {
		case pg.RemovalTimestamp != nil && pg.ExclusionTimestamp != nil:
			// update_status.go: a group marked for removal and excluded whose pod is gone or
			// terminating is ResourcesTerminating, nothing else (SetExclude keeps only that).
			if pod == nil || pod.DeletionTimestamp != nil || conditionTime(pg, "ResourcesTerminating") > 0 {
				want = append(want, "ResourcesTerminating")
			}
			pg.ProcessGroupConditions = conditions(pg.ProcessGroupConditions, want, now)
			continue
		case pod == nil || pod.DeletionTimestamp != nil:
			want = append(want, "MissingPod")
		case pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "":
			// The API server stores every new pod as Pending (kubernetes
			// pkg/registry/core/pod/strategy.go PrepareForCreate); a fake clientset leaves "".
			want = append(want, "PodPending")
		case podFailing(pod):
			want = append(want, "PodFailing")
		}
		if !reported[pg.ProcessGroupID] {
			want = append(want, "MissingProcesses")
		}
		pg.ProcessGroupConditions = conditions(pg.ProcessGroupConditions, want, now)
	}
	if checkReconciliation(&spec, &status, u.GetGeneration(), needsCoordinators) && ls.shouldUseLocks() {
		// update_status.go: a reconciled cluster releases the operator's lock.
		_ = o.releaseLock(model, ls)
	}
	if bytes.Equal(before, mustJSON(status)) {
		return nil
	}
	obj, err := toUnstructured(status)
	if err != nil {
		return err
	}
	u.Object["status"] = obj
	if _, err := o.dyn.Resource(GVR).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status of %s: %w", name, err)
	}
	return nil
}

// checkReconciliation is api/v1beta2 foundationdbcluster_types.go CheckReconciliation for what
// the stand-in models: an unconfigured cluster needs its configuration; otherwise
// status.generations is reset to reconciled alone and each reason left sets its field to the
// generation: needsGrow/needsShrink when a class's count of groups not marked for removal
// differs from its desired count, needsShrink for a group marked for removal (hasPendingRemoval,
// which does not block, once its resources terminate: the stand-in removes them at once),
// hasUnhealthyProcess for a group with a condition, missingDatabaseStatus (DatabaseUnavailable)
// while the database is unavailable. reconciled moves to the generation only when none blocks.
func checkReconciliation(spec *clusterSpec, status *clusterStatus, gen int64, needsCoordinators bool) bool {
	if status.Generations == nil {
		status.Generations = map[string]int64{}
	}
	if !status.Configured {
		status.Generations["needsConfigurationChange"] = gen
		return false
	}
	prev := status.Generations["reconciled"]
	status.Generations = map[string]int64{}
	if prev != 0 {
		status.Generations["reconciled"] = prev
	}
	reconciled := true
	desired := spec.desiredCounts()
	current := map[string]int{}
	for _, pg := range status.ProcessGroups {
		if pg.RemovalTimestamp == nil {
			current[pg.ProcessClass]++
		}
	}
	for _, class := range slices.Sorted(maps.Keys(classUnion(desired, current))) {
		switch d := desired[class] - current[class]; {
		case d > 0:
			status.Generations["needsGrow"] = gen
			reconciled = false
		case d < 0:
			status.Generations["needsShrink"] = gen
			reconciled = false
		}
	}
	for _, pg := range status.ProcessGroups {
		if pg.RemovalTimestamp != nil {
			status.Generations["needsShrink"] = gen
			reconciled = false
			continue
		}
		if len(pg.ProcessGroupConditions) > 0 {
			status.Generations["hasUnhealthyProcess"] = gen
			reconciled = false
		}
	}
	if !status.Health.Available {
		status.Generations["missingDatabaseStatus"] = gen
		reconciled = false
	}
	if needsCoordinators {
		// api/v1beta2 CheckReconciliation: NeedsNewCoordinators keeps the cluster unreconciled.
		status.Generations["needsCoordinatorChange"] = gen
		reconciled = false
	}
	if reconciled {
		status.Generations["reconciled"] = gen
	}
	return reconciled
}

func classUnion(a, b map[string]int) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// addProcessGroups adds process groups for each class below its count (desiredCounts: the
// operator's defaults for counts left 0 or unset, none for -1), not counting the groups marked
// for removal (add_process_groups.go): a marked group gets its replacement.
func (o *Operator) addProcessGroups(spec *clusterSpec, status *clusterStatus) {
	desired := spec.desiredCounts()
	classes := make([]string, 0, len(desired))
	for c := range desired {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	for _, class := range classes {
		used := map[int]bool{}
		n := 0
		for _, pg := range status.ProcessGroups {
			if pg.ProcessClass != class {
				continue
			}
			if i := strings.LastIndex(pg.ProcessGroupID, "-"); i >= 0 {
				var num int
				if _, err := fmt.Sscanf(pg.ProcessGroupID[i+1:], "%d", &num); err == nil {
					used[num] = true
				}
			}
			if pg.RemovalTimestamp == nil {
				n++
			}
		}
		for ; n < desired[class]; n++ {
			num := 0
			for num == 0 || used[num] {
				num = o.rnd.IntN(maxProcessGroupIDNum) + 1
			}
			used[num] = true
			id := fmt.Sprintf("%s-%d", class, num)
			if spec.ProcessGroupIDPrefix != "" {
				id = spec.ProcessGroupIDPrefix + "-" + id
			}
			status.ProcessGroups = append(status.ProcessGroups, &processGroupStatus{ProcessGroupID: id, ProcessClass: class,
				ProcessGroupConditions: []*processGroupCondition{{Type: "MissingPod", Timestamp: time.Now().Unix()}}})
		}
	}
}

// podName is ProcessGroupStatus.GetPodName: $cluster-$class-$n, with "_" in the class as "-".
func podName(cluster string, pg *processGroupStatus) string {
	id := strings.ReplaceAll(pg.ProcessGroupID, "_", "-")
	class := strings.ReplaceAll(pg.ProcessClass, "_", "-")
	if i := strings.Index(id, class); i >= 0 {
		id = id[i:]
	}
	return cluster + "-" + id
}

func (o *Operator) createPod(ctx context.Context, owner *unstructured.Unstructured, spec *clusterSpec, pg *processGroupStatus) error {
	name := owner.GetName()
	labels := map[string]string{}
	for k, v := range spec.matchLabels(name) {
		labels[k] = v
	}
	for k, v := range spec.resourceLabels(name) {
		labels[k] = v
	}
	for _, l := range spec.processClassLabels() {
		labels[l] = pg.ProcessClass
	}
	for _, l := range spec.processGroupIDLabels() {
		labels[l] = pg.ProcessGroupID
	}
	affinityLabels := map[string]string{}
	for k, v := range spec.matchLabels(name) {
		affinityLabels[k] = v
	}
	affinityLabels[spec.processClassLabels()[0]] = pg.ProcessClass
	fdKey := spec.FaultDomain.Key
	if fdKey == "" {
		fdKey = corev1.LabelHostname
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      podName(name, pg),
			Namespace: owner.GetNamespace(),
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: GVR.GroupVersion().String(), Kind: "FoundationDBCluster",
				Name: name, UID: owner.GetUID(), Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  MainContainer,
				Image: "foundationdb/fdb-kubernetes-monitor:" + spec.Version,
				// internal/pod_models.go configureContainersForUnifiedImages: the client trace
				// environment (fdbsim.OperatorMainContainerEnv) is set in the main container,
				// so fdbcli run there by exec traces into the pod's log volume.
				Env: append([]corev1.EnvVar{
					{Name: "FDB_CLUSTER_FILE", Value: "/var/dynamic-conf/fdb.cluster"},
					{Name: "FDB_INSTANCE_ID", Value: pg.ProcessGroupID},
				}, traceEnv(name)...),
			}},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 1,
					PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: fdKey,
						LabelSelector: &metav1.LabelSelector{MatchLabels: affinityLabels}},
				}},
			}},
		},
	}
	_, err := o.kube.CoreV1().Pods(owner.GetNamespace()).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	return err
}

func traceEnv(cluster string) []corev1.EnvVar {
	env := fdbsim.OperatorMainContainerEnv(cluster)
	out := make([]corev1.EnvVar, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, corev1.EnvVar{Name: k, Value: env[k]})
	}
	return out
}

// zone is the process's zoneid: spec.faultDomain.value, the node name (valueFrom spec.nodeName,
// the default), or a node label named by $NODE_LABEL_<KEY> (fault_domains.md).
func (o *Operator) zone(ctx context.Context, spec *clusterSpec, pod *corev1.Pod) (string, error) {
	// foundationdb.org/none (the operator's sample): every pod is its own fault domain, zoneid
	// the pod name (internal/pod_client.go GetSubstitutions, NoneFaultDomainKey).
	if spec.FaultDomain.Key == "foundationdb.org/none" {
		return pod.Name, nil
	}
	if spec.FaultDomain.Value != "" {
		return spec.FaultDomain.Value, nil
	}
	from := spec.FaultDomain.ValueFrom
	if from == "" || from == "spec.nodeName" {
		return pod.Spec.NodeName, nil
	}
	o.mu.Lock()
	z, ok := o.zones[pod.UID]
	o.mu.Unlock()
	if ok {
		return z, nil
	}
	env, ok := strings.CutPrefix(from, "$NODE_LABEL_")
	if !ok {
		return "", fmt.Errorf("faultDomain.valueFrom %q is not supported by the stand-in", from)
	}
	node, err := o.kube.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("node of pod %s: %w", pod.Name, err)
	}
	for k, v := range node.Labels {
		if strings.ToUpper(strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(k)) == env {
			z = v
		}
	}
	if z == "" {
		return "", fmt.Errorf("node %s has no label for %s", node.Name, from)
	}
	o.mu.Lock()
	o.zones[pod.UID] = z
	o.mu.Unlock()
	return z, nil
}

func redundancy(spec *clusterSpec) string {
	if m := spec.DatabaseConfiguration.RedundancyMode; m != "" {
		return m
	}
	return "double"
}

// coordinatorCount is 2R-1 for R replicas (the operator's DesiredCoordinatorCount).
func coordinatorCount(mode string) int {
	switch mode {
	case "single":
		return 1
	case "triple":
		return 5
	}
	return 3
}

func (o *Operator) createModel(spec *clusterSpec, status *clusterStatus, addresses, dns map[string]string, name, ns string) (*fdbsim.Cluster, error) {
	var specs, entries []fdbsim.ProcessSpec
	for _, pg := range status.ProcessGroups {
		p := fdbsim.ProcessSpec{ID: pg.ProcessGroupID, Address: addresses[pg.ProcessGroupID], Class: pg.ProcessClass, Zone: pg.FaultDomain}
		specs = append(specs, p)
		p.Address = spec.coordinatorEntry(name, ns, pg, p.Address)
		entries = append(entries, p)
	}
	cfg := o.opts.Model
	cfg.RedundancyMode = redundancy(spec)
	if spec.useDNS() {
		cfg.DNS = dns
	}
	coords := chooseCoordinators(entries, nil, coordinatorCount(cfg.RedundancyMode))
	return fdbsim.New(o.host.Clock(), cfg, specs, coords)
}

// chooseCoordinators keeps the given coordinators and adds processes until n, storage and log
// processes first, spreading over zones (a zone is reused only once every zone has one; the
// real operator requires distinct zones, locality.ChooseDistributedProcesses).
func chooseCoordinators(procs []fdbsim.ProcessSpec, keep []string, n int) []string {
	out := slices.Clone(keep)
	perZone := map[string]int{}
	byAddr := map[string]fdbsim.ProcessSpec{}
	for _, p := range procs {
		byAddr[p.Address] = p
	}
	for _, a := range out {
		perZone[byAddr[a].Zone]++
	}
	cands := slices.Clone(procs)
	rank := map[string]int{fdbsim.ClassStorage: 0, fdbsim.ClassLog: 1}
	sort.SliceStable(cands, func(i, j int) bool {
		ri, ok := rank[cands[i].Class]
		if !ok {
			ri = 2
		}
		rj, ok := rank[cands[j].Class]
		if !ok {
			rj = 2
		}
		return ri < rj
	})
	for limit := 1; len(out) < n && limit <= n; limit++ {
		for _, p := range cands {
			if len(out) >= n {
				break
			}
			if (p.Class != fdbsim.ClassStorage && p.Class != fdbsim.ClassLog) || slices.Contains(out, p.Address) || perZone[p.Zone] >= limit {
				continue
			}
			out = append(out, p.Address)
			perZone[p.Zone]++
		}
	}
	return out
}

// coordinatorChange is what change_coordinators.go would do now: the coordinators, the set to
// change them to (nil when they are valid), and how many of them no running process holds
// (missing; the others to replace are undesired: on a group marked for removal).
func coordinatorChange(model *fdbsim.Cluster, spec *clusterSpec, status *clusterStatus, name, ns string) (cur, next []string, missing int) {
	procs := model.Processes()
	var specs []fdbsim.ProcessSpec
	live, up := map[string]bool{}, map[string]bool{}
	marked := removing(status)
	groups := map[string]*processGroupStatus{}
	for _, pg := range status.ProcessGroups {
		groups[pg.ProcessGroupID] = pg
	}
	for _, p := range procs {
		// change_coordinators.go: a coordinator on a group marked for removal is replaced, and
		// none is chosen there. Coordinators are compared as the cluster file names them: with
		// DNS a pod back at a new IP keeps its name and stays a coordinator.
		pg := groups[p.ID]
		if !p.Up || pg == nil {
			continue
		}
		entry := spec.coordinatorEntry(name, ns, pg, p.Address)
		up[entry] = true
		if !marked[p.ID] {
			specs = append(specs, fdbsim.ProcessSpec{ID: p.ID, Address: entry, Class: p.Class, Zone: p.Zone})
			live[entry] = true
		}
	}
	cur = model.Coordinators()
	var keep []string
	for _, a := range cur {
		if live[a] {
			keep = append(keep, a)
		}
		if !up[a] {
			missing++
		}
	}
	if len(keep) == len(cur) {
		return cur, nil, 0
	}
	return cur, chooseCoordinators(specs, keep, len(cur)), missing
}

// coordinatorsValid: no coordinator change is pending (update_status.go NeedsNewCoordinators).
func (o *Operator) coordinatorsValid(model *fdbsim.Cluster, spec *clusterSpec, status *clusterStatus, name, ns string) bool {
	_, next, _ := coordinatorChange(model, spec, status, name, ns)
	return next == nil
}

// fixCoordinators replaces coordinators that no running process holds (a pod came back with a
// new IP) or that run on a group marked for removal, by running `coordinators`
// (change_coordinators.go), once the pacing allows it (CanSafelyChangeCoordinators); now skips
// that check (exclude_processes.go changes the coordinators right after excluding one). It
// reports whether a change is still pending.
func (o *Operator) fixCoordinators(ctx context.Context, model *fdbsim.Cluster, spec *clusterSpec, status *clusterStatus, ls *lockSpec, name, ns string, pc *pace, now bool) bool {
	cur, next, missing := coordinatorChange(model, spec, status, name, ns)
	if next == nil {
		return false
	}
	kept := 0
	for _, a := range next {
		if slices.Contains(cur, a) {
			kept++
		}
	}
	if kept <= len(cur)/2 || len(next) < len(cur) {
		// No quorum to change them with, or not enough running processes for a full set yet:
		// wait for them rather than shrink the coordinators.
		return true
	}
	if !now && pc.canChangeCoordinators(missing) != nil {
		return true // "Deferring coordinator change due to safety check"
	}
	if o.takeLock(model, ls, "changing coordinators") != nil {
		return true // change_coordinators.go: "changing coordinators" waits for the lock
	}
	var out, errb bytes.Buffer
	args := []string{"--exec", "coordinators " + strings.Join(next, " "), "--timeout", "10"}
	if model.RunAs(ctx, "operator", args, &out, &errb) != 0 {
		return true
	}
	// change_coordinators.go: "Reset the SecondsSinceLastRecovered since the operator just
	// changed the coordinators, which will cause a recovery."
	pc.recovered()
	return false
}

// fdbStatus is the part of status json the stand-in reads.
type fdbStatus struct {
	Client struct {
		DatabaseStatus struct {
			Available bool `json:"available"`
			Healthy   bool `json:"healthy"`
		} `json:"database_status"`
	} `json:"client"`
	Cluster struct {
		FullReplication bool `json:"full_replication"`
		Processes       map[string]struct {
			Locality map[string]string `json:"locality"`
		} `json:"processes"`
	} `json:"cluster"`
}

// conditions keeps the timestamp of a condition that persists.
func conditions(old []*processGroupCondition, want []string, now int64) []*processGroupCondition {
	var out []*processGroupCondition
	for _, w := range want {
		ts := now
		for _, c := range old {
			if c.Type == w {
				ts = c.Timestamp
			}
		}
		out = append(out, &processGroupCondition{Type: w, Timestamp: ts})
	}
	return out
}

// podFailing is validateProcessGroup's PodFailing (controllers/update_status.go): a pod not
// Pending is failing when it failed or any of its containers is not ready, judged by the
// container statuses, not the pod's Ready condition.
func podFailing(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, c := range p.Status.ContainerStatuses {
		if !c.Ready {
			return true
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func selector(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func fromUnstructured(in any, out any) error {
	if in == nil {
		return nil
	}
	m, ok := in.(map[string]any)
	if !ok {
		return fmt.Errorf("not an object")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func toUnstructured(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return runtime.DeepCopyJSON(m), nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func ptr[T any](v T) *T { return &v }
