package cratedbsim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	listersappsv1 "k8s.io/client-go/listers/apps/v1"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// kubeWatch lists what the informers cache.
type kubeWatch struct {
	sts  listersappsv1.StatefulSetLister
	pods listerscorev1.PodLister
	pvcs listerscorev1.PersistentVolumeClaimLister
	svcs listerscorev1.ServiceLister
}

// followKube starts informers on the namespace and re-derives the nodes on every change.
func (s *Sim) followKube(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(s.cfg.Client, 0, informers.WithNamespace(s.cfg.Namespace))
	stsInf := factory.Apps().V1().StatefulSets()
	podInf := factory.Core().V1().Pods()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	svcInf := factory.Core().V1().Services()
	kick := make(chan struct{}, 1)
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { trySend(kick) },
		UpdateFunc: func(any, any) { trySend(kick) },
		DeleteFunc: func(any) { trySend(kick) },
	}
	for _, inf := range []cache.SharedIndexInformer{stsInf.Informer(), podInf.Informer(), pvcInf.Informer(), svcInf.Informer()} {
		if _, err := inf.AddEventHandler(notify); err != nil {
			return fmt.Errorf("cratedbsim: watch: %w", err)
		}
	}
	w := &kubeWatch{sts: stsInf.Lister(), pods: podInf.Lister(), pvcs: pvcInf.Lister(), svcs: svcInf.Lister()}
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			return fmt.Errorf("cratedbsim: cache of %v did not sync", typ)
		}
	}
	if err := s.resync(w); err != nil {
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer factory.Shutdown()
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
				if err := s.resync(w); err != nil {
					s.logf("cratedbsim: %v", err)
				}
			}
		}
	}()
	return nil
}

func trySend(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// groupOf maps a StatefulSet to its node group, ok false if its pods are not nodes of the
// cluster. A CrateDB node joins the cluster its own settings name and find: cluster.name
// (CrateDB's default "crate"; ClusterName.CLUSTER_NAME_SETTING in crate/crate; nodes with
// another name never join), and discovery settings that reach the other nodes (discovers).
// Labels and names of the StatefulSet mean nothing to CrateDB. Master-eligible groups
// (node.master, default true) come first, then by name.
func (s *Sim) groupOf(sts *appsv1.StatefulSet, env discoveryEnv) (g Group, order int, ok bool) {
	if len(s.cfg.Groups) > 0 {
		for _, g := range s.cfg.Groups {
			if g.StatefulSet == sts.Name {
				return g, 0, true
			}
		}
		return Group{}, 0, false
	}
	tmpl := &corev1.Pod{ObjectMeta: sts.Spec.Template.ObjectMeta, Spec: sts.Spec.Template.Spec}
	tmpl.Namespace = sts.Namespace
	settings := podSettings(tmpl, crateContainer(&tmpl.Spec))
	name := settings["cluster.name"]
	if name == "" {
		name = "crate"
	}
	if name != s.cfg.Cluster {
		return Group{}, 0, false
	}
	if why := discovers(settings, sts.Namespace, tmpl.Labels, env); why != "" {
		s.logDiscovery(sts.Name, why)
		return Group{}, 0, false
	}
	s.logDiscovery(sts.Name, "")
	if settings.bool("node.master", true) {
		return Group{StatefulSet: sts.Name}, 0, true
	}
	return Group{StatefulSet: sts.Name}, 1, true
}

// logDiscovery logs why a group's nodes find no cluster, once per change of the reason.
func (s *Sim) logDiscovery(sts, why string) {
	s.mu.Lock()
	prev := s.discoveryWhy[sts]
	if why == "" {
		delete(s.discoveryWhy, sts)
	} else {
		s.discoveryWhy[sts] = why
	}
	s.mu.Unlock()
	if why != "" && why != prev {
		s.logf("cratedbsim: statefulset %s: its nodes find no other node of cluster %s: %s", sts, s.cfg.Cluster, why)
	}
}

// discovers tells why nodes with these settings would not find the other nodes, "" when they
// do. CrateDB finds peers through discovery.seed_hosts or a seed provider; with neither it
// looks only on its own host (the default seed_hosts are local addresses), which in a pod
// finds nobody. The srv provider (discovery.seed_providers=srv) resolves discovery.srv.query,
// "_<port>._tcp.<service>.<namespace>.svc.<zone>" (Kubernetes DNS: SRV records of a named port
// of a headless Service list its selected pods), so the Service must exist, be headless, have
// that port and select these pods. discovery.seed_hosts must name at least one host that
// resolves to a node of the cluster (seedReaches).
func discovers(settings nodeSettings, namespace string, podLabels map[string]string, env discoveryEnv) string {
	svcs := env.svcs
	if hosts := settings["discovery.seed_hosts"]; hosts != "" {
		var whys []string
		for _, h := range strings.Split(hosts, ",") {
			why := seedReaches(strings.TrimSpace(h), namespace, env)
			if why == "" {
				return ""
			}
			whys = append(whys, why)
		}
		return "no host of discovery.seed_hosts resolves to a node of the cluster: " + strings.Join(whys, "; ")
	}
	provider := settings["discovery.seed_providers"]
	if provider == "" {
		return "neither discovery.seed_hosts nor discovery.seed_providers is set, so a node looks for others on its own host only"
	}
	if provider != "srv" {
		return fmt.Sprintf("discovery.seed_providers=%s is not modelled (only srv)", provider)
	}
	query := settings["discovery.srv.query"]
	port, rest, ok := strings.Cut(strings.TrimPrefix(query, "_"), "._tcp.")
	if !strings.HasPrefix(query, "_") || !ok || port == "" || rest == "" {
		return fmt.Sprintf("discovery.srv.query %q is not _<port>._tcp.<service>[.<namespace>.svc...]", query)
	}
	parts := strings.Split(strings.TrimSuffix(rest, "."), ".")
	svcName, svcNS := parts[0], namespace
	if len(parts) > 1 {
		svcNS = parts[1]
		if len(parts) > 2 && parts[2] != "svc" {
			return fmt.Sprintf("discovery.srv.query %q names no Service", query)
		}
	}
	if svcNS != namespace || svcs == nil {
		return fmt.Sprintf("discovery.srv.query %q: Service %s/%s is not in the cluster's namespace", query, svcNS, svcName)
	}
	svc, err := svcs.Services(namespace).Get(svcName)
	if err != nil {
		return fmt.Sprintf("discovery.srv.query %q: Service %s/%s: %v", query, svcNS, svcName, err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return fmt.Sprintf("discovery.srv.query %q: Service %s is not headless, its SRV records name no pods", query, svcName)
	}
	named := false
	for _, p := range svc.Spec.Ports {
		named = named || (p.Name == port && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP))
	}
	if !named {
		return fmt.Sprintf("discovery.srv.query %q: Service %s has no TCP port named %s", query, svcName, port)
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(podLabels)) {
		return fmt.Sprintf("discovery.srv.query %q: Service %s does not select these pods", query, svcName)
	}
	return ""
}

// discoveryEnv is what DNS in the namespace resolves against: its Services, the StatefulSets
// whose nodes name the simulated cluster (their pods are the cluster's nodes) and the pods'
// IPs by pod name.
type discoveryEnv struct {
	svcs   listerscorev1.ServiceLister
	sets   []*appsv1.StatefulSet
	podIPs map[string]string
}

// seedReaches tells why one discovery.seed_hosts entry ("host[:port]") resolves to no node of
// the cluster, "" when it does. As Kubernetes DNS resolves names in the namespace
// (kubernetes/dns docs/specification.md): "<service>[.<namespace>[.svc[.<zone>]]]" is a
// Service, which reaches the cluster when it selects the pods of one of its StatefulSets
// (headless: their IPs; otherwise a virtual IP that forwards to them);
// "<pod>.<subdomain>[.<namespace>[.svc[.<zone>]]]" is a pod whose hostname and subdomain are
// set, as a StatefulSet sets them (pod name and spec.serviceName), with a headless Service of
// that name selecting it; an IP is the pod that has it. A name that resolves nowhere, or to
// pods that are not nodes of the cluster, reaches nobody.
func seedReaches(host, namespace string, env discoveryEnv) string {
	if h, port, ok := strings.Cut(host, ":"); ok {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("%q: bad port", host)
		}
		host = h
	}
	if host == "" {
		return "an empty host"
	}
	if net.ParseIP(host) != nil {
		for _, sts := range env.sets {
			for pod, ip := range env.podIPs {
				if _, ok := ordinalOf(pod, sts.Name); ok && ip == host {
					return ""
				}
			}
		}
		return fmt.Sprintf("%s is the IP of no node", host)
	}
	parts := strings.Split(strings.TrimSuffix(host, "."), ".")
	inNamespace := func(rest []string) bool {
		return len(rest) == 0 || (rest[0] == namespace && (len(rest) == 1 || rest[1] == "svc"))
	}
	service := func(name string) *corev1.Service {
		if env.svcs == nil {
			return nil
		}
		svc, err := env.svcs.Services(namespace).Get(name)
		if err != nil {
			return nil
		}
		return svc
	}
	selects := func(svc *corev1.Service, sts *appsv1.StatefulSet) bool {
		return len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(sts.Spec.Template.Labels))
	}
	// A Service.
	if inNamespace(parts[1:]) {
		if svc := service(parts[0]); svc != nil {
			for _, sts := range env.sets {
				if selects(svc, sts) {
					return ""
				}
			}
			return fmt.Sprintf("%s: Service %s selects no node of the cluster", host, parts[0])
		}
	}
	// A pod of a StatefulSet, by hostname and subdomain.
	if len(parts) >= 2 && inNamespace(parts[2:]) {
		pod, sub := parts[0], parts[1]
		svc := service(sub)
		for _, sts := range env.sets {
			ord, ok := ordinalOf(pod, sts.Name)
			if !ok {
				continue
			}
			replicas := 1
			if sts.Spec.Replicas != nil {
				replicas = int(*sts.Spec.Replicas)
			}
			switch {
			case ord >= replicas:
				return fmt.Sprintf("%s: StatefulSet %s has no pod %s", host, sts.Name, pod)
			case sts.Spec.ServiceName != sub:
				return fmt.Sprintf("%s: the pods of StatefulSet %s have subdomain %q, not %q", host, sts.Name, sts.Spec.ServiceName, sub)
			case svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone:
				return fmt.Sprintf("%s: no headless Service %s gives its pods DNS names", host, sub)
			case !selects(svc, sts):
				return fmt.Sprintf("%s: Service %s does not select pod %s", host, sub, pod)
			}
			return ""
		}
	}
	return fmt.Sprintf("%s resolves to no node of the cluster", host)
}

// podUp tells whether the pod's CrateDB process runs: the pod is Running and not being
// deleted, and its crate container runs. A real kubelet reports the container running before
// the readiness probe passes, and the probe asks the node itself (podgateway.go), so the node
// must run before the pod is Ready. Without container statuses (kwok may leave them out) the
// Ready condition stands in.
func podUp(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	name := "crate"
	if c := crateContainer(&p.Spec); c != nil {
		name = c.Name
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name {
			return cs.State.Running != nil
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// resync derives every node from the StatefulSets, pods and claims.
func (s *Sim) resync(w *kubeWatch) error {
	all, err := w.sts.StatefulSets(s.cfg.Namespace).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list statefulsets: %w", err)
	}
	type member struct {
		sts   *appsv1.StatefulSet
		g     Group
		order int
	}
	pods, err := w.pods.Pods(s.cfg.Namespace).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	byName := map[string]*corev1.Pod{}
	ips := map[string]string{}
	for _, p := range pods {
		byName[p.Name] = p
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			ips[p.Name] = p.Status.PodIP
		}
	}
	env := discoveryEnv{svcs: w.svcs, podIPs: ips}
	for _, sts := range all {
		tmpl := &corev1.Pod{ObjectMeta: sts.Spec.Template.ObjectMeta, Spec: sts.Spec.Template.Spec}
		tmpl.Namespace = sts.Namespace
		name := podSettings(tmpl, crateContainer(&tmpl.Spec))["cluster.name"]
		if name == "" {
			name = "crate"
		}
		if name == s.cfg.Cluster {
			env.sets = append(env.sets, sts)
		}
	}
	var groups []member
	for _, sts := range all {
		if g, order, ok := s.groupOf(sts, env); ok {
			groups = append(groups, member{sts, g, order})
		}
	}
	sort.Slice(groups, func(i, j int) bool {
		if groups[i].order != groups[j].order {
			return groups[i].order < groups[j].order
		}
		return groups[i].sts.Name < groups[j].sts.Name
	})
	// Without dedicated masters the first data group is master-eligible.
	s.mu.Lock()
	s.podIPs = ips
	s.mu.Unlock()
	var specs []nodeSpec
	for _, gm := range groups {
		replicas := 1
		if gm.sts.Spec.Replicas != nil {
			replicas = int(*gm.sts.Spec.Replicas)
		}
		highest := replicas - 1
		for name := range byName {
			if ord, ok := ordinalOf(name, gm.sts.Name); ok && ord > highest {
				highest = ord
			}
		}
		for ord := 0; ord <= highest; ord++ {
			podName := gm.sts.Name + "-" + strconv.Itoa(ord)
			p := byName[podName]
			if p == nil {
				// The StatefulSet still counts the pod: its node stays a (stopped) member.
				if ord < replicas {
					specs = append(specs, nodeSpec{pod: podName, ordinal: ord, member: true})
				}
				continue
			}
			sp := s.podSpec(p, gm.sts)
			sp.ordinal, sp.member = ord, true
			for _, v := range p.Spec.Volumes {
				if v.PersistentVolumeClaim == nil {
					continue
				}
				sp.hasClaim = true
				pvc, err := w.pvcs.PersistentVolumeClaims(s.cfg.Namespace).Get(v.PersistentVolumeClaim.ClaimName)
				if err == nil && pvc.DeletionTimestamp == nil {
					sp.pvcUID = string(pvc.UID)
				} else if err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("get claim: %w", err)
				}
			}
			specs = append(specs, sp)
		}
	}
	return s.applyNodes(specs)
}

// podSpec derives the node a pod runs from its CrateDB container: the command line (the
// pod's own, else the StatefulSet template's), with Kubernetes' variable expansion, gives the
// node name, roles, gateway, TLS and auth settings; the image tag gives the version.
func (s *Sim) podSpec(p *corev1.Pod, sts *appsv1.StatefulSet) nodeSpec {
	c := crateContainer(&p.Spec)
	if c == nil || (len(c.Command) == 0 && len(c.Args) == 0) {
		c = crateContainer(&sts.Spec.Template.Spec)
	}
	settings, refusal := podSettingsChecked(p, c)
	image := ""
	if c != nil {
		image = c.Image
	}
	sp := nodeSpec{pod: p.Name, up: podUp(p), podUID: string(p.UID), settings: settings,
		version: s.nodeVersion(image), ip: p.Status.PodIP}
	if sp.ip == "" {
		sp.ip = "127.0.0.1"
	}
	sp.name = settings["node.name"]
	if sp.name == "" {
		sp.name = randomNodeName(sp.podUID)
	}
	// CrateDB's defaults: every node is master-eligible and holds data.
	sp.master = settings.bool("node.master", true)
	sp.data = settings.bool("node.data", true)
	if sp.up && refusal != nil {
		// CrateDB exits before it starts: the pod's container keeps restarting.
		s.logf("cratedbsim: pod %s: node does not start: %v", p.Name, refusal)
		sp.up = false
	}
	if sp.up {
		if err := s.startable(sp); err != nil {
			s.logf("cratedbsim: pod %s: node does not start: %v", p.Name, err)
			sp.up = false
		}
	}
	return sp
}

// startable reports why a node would refuse to start: a setting its version does not know,
// or TLS asked for without a certificate.
func (s *Sim) startable(sp nodeSpec) error {
	for k := range sp.settings {
		if !knownNodeSetting(k, sp.version) {
			return fmt.Errorf("unknown setting [%s] (CrateDB %s)", k, sp.version)
		}
	}
	if (sp.settings.bool("ssl.http.enabled", false) || sp.settings.bool("ssl.psql.enabled", false)) && s.cfg.TLS == nil {
		return errors.New("ssl enabled but no keystore (the simulator has no TLS certificate)")
	}
	return nil
}

// ordinalOf parses "<sts>-<n>".
func ordinalOf(pod, sts string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, sts+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}
