package cratedb

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Node names are read, never computed (docs/procedures.md, CrateDB): deployments
// name nodes by their -Cnode.name argument, and the CrateDB operator, the
// official Kubernetes guide and others all differ. Each pod is matched to
// its row of sys.nodes by the node name its argument gives, its hostname
// and its IP (the host of rest_url); any disagreement is a refusal.

// sqlNodes lists every node with what identifies it. rest_url is
// "host:port" of the node's HTTP publish address.
const sqlNodes = `SELECT id, name, hostname, rest_url, version['number'] FROM sys.nodes`

const argNodeName = "-Cnode.name="

// nodeRow is one row of sys.nodes.
type nodeRow struct {
	ID, Name, Hostname, RestHost, Version string
}

// readNodes reads sys.nodes.
func (e *Engine) readNodes(ctx context.Context, c *ops.Cluster, avoid []string) ([]nodeRow, error) {
	rows, err := e.session(c).query(ctx, avoid, sqlNodes)
	if err != nil {
		return nil, sqlErr(sqlNodes, err)
	}
	out := make([]nodeRow, 0, len(rows))
	for _, r := range rows {
		get := func(i int) string {
			if i < len(r) {
				return toString(r[i])
			}
			return ""
		}
		out = append(out, nodeRow{ID: get(0), Name: get(1), Hostname: get(2), RestHost: restHost(get(3)), Version: get(4)})
	}
	return out, nil
}

// restHost is the host of a rest_url ("10.0.0.5:4200", with or without a
// scheme); "" when there is none.
func restHost(u string) string {
	u = strings.TrimSpace(u)
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	u, _, _ = strings.Cut(u, "/")
	if h, _, err := net.SplitHostPort(u); err == nil {
		return h
	}
	return strings.Trim(u, "[]")
}

// podFacts is what a live pod says about its CrateDB node.
type podFacts struct {
	Pod string
	// ArgName is the -Cnode.name argument with $(VAR) and ${VAR}
	// references expanded from the container's environment; "" when the
	// pod has none or it cannot be resolved statically (ArgRaw then
	// holds it as written).
	ArgName, ArgRaw string
	Hostname        string
	IPs             []string
	Ready           bool
	UID             string
}

func (f podFacts) describe() string {
	var parts []string
	switch {
	case f.ArgName != "":
		parts = append(parts, "node name "+f.ArgName)
	case f.ArgRaw != "":
		parts = append(parts, "node name "+f.ArgRaw+" (not resolvable here)")
	}
	parts = append(parts, "hostname "+f.Hostname)
	if len(f.IPs) > 0 {
		parts = append(parts, "IP "+strings.Join(f.IPs, ","))
	}
	return strings.Join(parts, ", ")
}

// factsOf reads a pod's identity facts.
func factsOf(p *corev1.Pod) podFacts {
	f := podFacts{Pod: p.Name, Ready: ops.PodReady(p), UID: string(p.UID)}
	f.Hostname = p.Spec.Hostname
	if f.Hostname == "" {
		f.Hostname = p.Name
	}
	for _, ip := range p.Status.PodIPs {
		if ip.IP != "" && !slices.Contains(f.IPs, ip.IP) {
			f.IPs = append(f.IPs, ip.IP)
		}
	}
	if p.Status.PodIP != "" && !slices.Contains(f.IPs, p.Status.PodIP) {
		f.IPs = append(f.IPs, p.Status.PodIP)
	}
	if p.Spec.HostNetwork {
		// The host's name and address are shared by every pod on it.
		f.Hostname, f.IPs = "", nil
	}
	c := crateContainerOf(&p.Spec)
	if c == nil {
		return f
	}
	raw, ok := findArg(c, argNodeName)
	if !ok {
		return f
	}
	f.ArgRaw = raw
	if v, ok := expandEnv(raw, containerEnv(p, c, f.Hostname)); ok && v != "" {
		f.ArgName = v
	}
	return f
}

// findArg returns the value of the first argument starting with prefix
// in the container's command or args, also inside a shell command line.
func findArg(c *corev1.Container, prefix string) (string, bool) {
	for _, list := range [][]string{c.Command, c.Args} {
		for _, a := range list {
			for _, w := range shellWords(a) {
				if v, ok := strings.CutPrefix(w, prefix); ok {
					return v, true
				}
			}
		}
	}
	return "", false
}

// shellWords splits a command line on blanks outside quotes and $(...)
// and drops the quotes; a plain argument is one word.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	var quote byte
	depth := 0
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
				continue
			}
		case ch == '\'' || ch == '"':
			quote = ch
			continue
		case ch == '$' && i+1 < len(s) && s[i+1] == '(':
			depth++
		case ch == ')' && depth > 0:
			depth--
		case (ch == ' ' || ch == '\t' || ch == '\n') && depth == 0:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
			continue
		}
		cur.WriteByte(ch)
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// containerEnv resolves the container's environment the way the kubelet
// does for the values a pod spec can give statically: literal values
// (themselves expanded) and the downward API fields. HOSTNAME is set in
// every container. Values from ConfigMaps and Secrets are left out (not
// read here), so a name built from them stays unresolved.
func containerEnv(p *corev1.Pod, c *corev1.Container, hostname string) map[string]string {
	env := map[string]string{}
	if hostname != "" {
		env["HOSTNAME"] = hostname
	}
	for _, v := range c.Env {
		switch {
		case v.ValueFrom == nil:
			if val, ok := expandEnv(v.Value, env); ok {
				env[v.Name] = val
			} else {
				delete(env, v.Name)
			}
		case v.ValueFrom.FieldRef != nil:
			if val, ok := fieldValue(p, v.ValueFrom.FieldRef.FieldPath); ok {
				env[v.Name] = val
			} else {
				delete(env, v.Name)
			}
		default:
			delete(env, v.Name)
		}
	}
	return env
}

func fieldValue(p *corev1.Pod, path string) (string, bool) {
	switch path {
	case "metadata.name":
		return p.Name, true
	case "metadata.namespace":
		return p.Namespace, true
	case "metadata.uid":
		return string(p.UID), true
	case "spec.nodeName":
		return p.Spec.NodeName, p.Spec.NodeName != ""
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, true
	case "status.podIP":
		return p.Status.PodIP, p.Status.PodIP != ""
	case "status.hostIP":
		return p.Status.HostIP, p.Status.HostIP != ""
	}
	for _, m := range []struct {
		prefix string
		values map[string]string
	}{{"metadata.labels['", p.Labels}, {"metadata.annotations['", p.Annotations}} {
		if k, ok := strings.CutPrefix(path, m.prefix); ok {
			k = strings.TrimSuffix(k, "']")
			v, ok := m.values[k]
			return v, ok
		}
	}
	return "", false
}

// expandEnv expands $(VAR) (Kubernetes, in command and args; $$ escapes)
// and ${VAR} (CrateDB's setting placeholders, and the shell's) from env.
// ok is false when anything else that the process would expand at run
// time is left: an unknown variable, $VAR or a command substitution.
func expandEnv(s string, env map[string]string) (string, bool) {
	var out strings.Builder
	ok := true
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			out.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			out.WriteByte('$')
			continue
		}
		switch s[i+1] {
		case '$':
			out.WriteByte('$')
			i++
			continue
		case '(', '{':
			closer := byte(')')
			if s[i+1] == '{' {
				closer = '}'
			}
			end := strings.IndexByte(s[i+2:], closer)
			if end < 0 {
				ok = false
				out.WriteString(s[i:])
				return out.String(), false
			}
			name := s[i+2 : i+2+end]
			if v, found := env[name]; found && isEnvName(name) {
				out.WriteString(v)
			} else {
				ok = false
				out.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			// $VAR: only a shell would expand it.
			ok = false
			out.WriteByte('$')
		}
	}
	return out.String(), ok
}

func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r == '-' || r == '.' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// podNode is one pod's CrateDB node, as mapped from the live cluster.
type podNode struct {
	Facts podFacts
	// Row is the pod's node in sys.nodes, nil when it is not there.
	Row *nodeRow
	// Name is the node's name: its row's, else the pod's resolved
	// -Cnode.name ("" when neither is known).
	Name string
	// Problem, when set, says why the pod's node cannot be trusted
	// (ambiguous or contradictory); it is a refusal for any step on it.
	Problem string
}

// nodeMap maps the cluster's pods to nodes.
type nodeMap struct {
	pods map[string]*podNode
	rows []nodeRow
	// red are the tables sys.health reports RED (schema.table), read when a pod has no node:
	// a node whose process is down takes the only copies of 0-replica tables with it.
	red []string
}

// missingWithRed is the refusal for pod, whose node is not in sys.nodes, while tables are
// red: its process is most likely down (the pod can still be Running), and the red tables'
// missing shards are probably on it; nil when no table is red.
func (m *nodeMap) missingWithRed(pod string) error {
	pn := m.pods[pod]
	if pn == nil || pn.Row != nil || len(m.red) == 0 {
		return nil
	}
	return ops.Preconditionf("refusing: the CrateDB node of pod %s is missing from the cluster (not in sys.nodes; nodes: %s), and table(s) %s are RED (shards missing, probably on that node); its process is likely down: bring it back (or restore the tables) before changing pod %s (looked for %s)",
		pod, m.rowNames(), strings.Join(m.red, ", "), pod, pn.Facts.describe())
}

// matchPod finds f's row: by the resolved node name, the hostname and the
// IP. Every fact the pod and a row both have must agree.
func matchPod(f podFacts, rows []nodeRow) (*nodeRow, string) {
	var cands []int
	for i, r := range rows {
		byName := f.ArgName != "" && r.Name == f.ArgName
		byHost := f.Hostname != "" && sameHost(r.Hostname, f.Hostname)
		byIP := r.RestHost != "" && slices.Contains(f.IPs, r.RestHost)
		if byName || byHost || byIP {
			cands = append(cands, i)
		}
	}
	switch len(cands) {
	case 0:
		return nil, ""
	case 1:
	default:
		var names []string
		for _, i := range cands {
			names = append(names, rows[i].Name)
		}
		return nil, fmt.Sprintf("pod %s (%s) matches several CrateDB nodes: %s", f.Pod, f.describe(), strings.Join(names, ", "))
	}
	r := &rows[cands[0]]
	var bad []string
	if f.ArgName != "" && r.Name != f.ArgName {
		bad = append(bad, fmt.Sprintf("its -Cnode.name is %s but the node with its hostname/IP is named %s", f.ArgName, r.Name))
	}
	if f.Hostname != "" && r.Hostname != "" && !sameHost(r.Hostname, f.Hostname) {
		bad = append(bad, fmt.Sprintf("node %s has hostname %s, the pod %s", r.Name, r.Hostname, f.Hostname))
	}
	if len(f.IPs) > 0 && net.ParseIP(r.RestHost) != nil && !slices.Contains(f.IPs, r.RestHost) {
		bad = append(bad, fmt.Sprintf("node %s has address %s, the pod %s", r.Name, r.RestHost, strings.Join(f.IPs, ",")))
	}
	if len(bad) > 0 {
		return nil, fmt.Sprintf("pod %s does not match CrateDB node %s consistently: %s", f.Pod, r.Name, strings.Join(bad, "; "))
	}
	return r, ""
}

// sameHost compares host names by their first label (a node may report
// its FQDN).
func sameHost(a, b string) bool {
	a, _, _ = strings.Cut(a, ".")
	b, _, _ = strings.Cut(b, ".")
	return a != "" && strings.EqualFold(a, b)
}

// livePods reads c's pods as they are now, by name (missing ones absent): from the run's pod
// informer inside a step; outside a run (planning) with one LIST per StatefulSet by its
// selector when that costs fewer requests than a GET per pod, else one GET each, all at once
// (ops.GetPods). Treat them as read-only.
func (e *Engine) livePods(ctx context.Context, c *ops.Cluster, names []string) (map[string]*corev1.Pod, error) {
	if ops.RunPods(ctx, nil, e.client, c.Namespace) != nil {
		return ops.GetPods(ctx, nil, e.client, c.Namespace, names)
	}
	var sels []string
	for _, g := range c.Groups {
		if ops.StatefulSetOf(g) == nil || ops.StatefulSetOf(g).Spec.Selector == nil {
			return ops.GetPods(ctx, nil, e.client, c.Namespace, names)
		}
		sel, err := metav1.LabelSelectorAsSelector(ops.StatefulSetOf(g).Spec.Selector)
		if err != nil || sel.Empty() {
			return ops.GetPods(ctx, nil, e.client, c.Namespace, names)
		}
		sels = append(sels, sel.String())
	}
	if len(sels) >= len(names) {
		return ops.GetPods(ctx, nil, e.client, c.Namespace, names)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]*corev1.Pod{}
	for _, sel := range sels {
		l, err := e.client.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("listing pods of %s/%s: %w", c.Namespace, c.Name, err)
		}
		for i := range l.Items {
			if p := &l.Items[i]; want[p.Name] {
				out[p.Name] = p
			}
		}
	}
	return out, nil
}

// mapNodes maps every existing pod of c to its node. Problems are
// recorded per pod; errors are only failures to read.
func (e *Engine) mapNodes(ctx context.Context, c *ops.Cluster, avoid []string) (*nodeMap, error) {
	rows, err := e.readNodes(ctx, c, avoid)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range c.AllPods() {
		names = append(names, p.Name)
	}
	live, err := e.livePods(ctx, c, names)
	if err != nil {
		return nil, err
	}
	return buildNodeMap(names, live, rows), nil
}

// readRed fills m.red when a pod has no node (the planning refusals of scale and replace
// name the red tables then); other users of the mapping (the restart gate) need no extra read.
func (e *Engine) readRed(ctx context.Context, c *ops.Cluster, m *nodeMap) error {
	for _, pn := range m.pods {
		if pn.Row == nil && pn.Problem == "" {
			var err error
			m.red, err = e.redTables(ctx, c, nil)
			return err
		}
	}
	return nil
}

// redTables reads the tables sys.health reports RED (severity 3), as schema.table.
func (e *Engine) redTables(ctx context.Context, c *ops.Cluster, avoid []string) ([]string, error) {
	rows, err := e.session(c).query(ctx, avoid, sqlRedTables)
	if err != nil {
		return nil, fmt.Errorf("reading the red tables of sys.health: %w", err)
	}
	var out []string
	for _, r := range rows {
		if len(r) == 2 {
			out = append(out, fmt.Sprintf("%v.%v", r[0], r[1]))
		}
	}
	return out, nil
}

func buildNodeMap(names []string, live map[string]*corev1.Pod, rows []nodeRow) *nodeMap {
	m := &nodeMap{pods: map[string]*podNode{}, rows: rows}
	claimed := map[string][]string{} // node ID or name -> pods
	for _, n := range names {
		p, ok := live[n]
		if !ok {
			continue
		}
		f := factsOf(p)
		pn := &podNode{Facts: f}
		pn.Row, pn.Problem = matchPod(f, rows)
		switch {
		case pn.Row != nil:
			pn.Name = pn.Row.Name
			key := pn.Row.ID + "/" + pn.Row.Name
			claimed[key] = append(claimed[key], n)
		case pn.Problem == "":
			pn.Name = f.ArgName
		}
		m.pods[n] = pn
	}
	for _, pods := range claimed {
		if len(pods) < 2 {
			continue
		}
		for _, n := range pods {
			pn := m.pods[n]
			pn.Problem = fmt.Sprintf("pods %s all match CrateDB node %s (%s)", strings.Join(pods, ", "), pn.Row.Name, pn.Facts.describe())
			pn.Row, pn.Name = nil, ""
		}
	}
	return m
}

// unclaimed lists the sys.nodes rows no pod matched.
func (m *nodeMap) unclaimed() []string {
	var out []string
	for _, r := range m.rows {
		found := false
		for _, pn := range m.pods {
			if pn.Row != nil && pn.Row.ID == r.ID && pn.Row.Name == r.Name {
				found = true
				break
			}
		}
		if !found {
			out = append(out, r.Name)
		}
	}
	return out
}

// problem returns the first ambiguity among the cluster's pods, in
// procedure order, as a refusal.
func (m *nodeMap) problem(c *ops.Cluster) error {
	for _, p := range c.AllPods() {
		if pn := m.pods[p.Name]; pn != nil && pn.Problem != "" {
			return ops.Usagef("refusing: %s; fix -Cnode.name or the pod before running this", pn.Problem)
		}
	}
	return nil
}

// present returns the node names of pods that must be in sys.nodes now
// (to be drained or excluded), refusing when one is not.
func (m *nodeMap) present(c *ops.Cluster, pods []string) ([]string, error) {
	if err := m.problem(c); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(pods))
	for _, name := range pods {
		pn := m.pods[name]
		switch {
		case pn == nil:
			return nil, ops.Usagef("refusing: pod %s/%s does not exist, so its CrateDB node cannot be found", c.Namespace, name)
		case pn.Row == nil:
			if err := m.missingWithRed(name); err != nil {
				return nil, err
			}
			return nil, ops.Usagef("refusing: pod %s has no CrateDB node in sys.nodes (looked for %s; nodes: %s)",
				name, pn.Facts.describe(), m.rowNames())
		}
		out = append(out, pn.Row.Name)
	}
	return out, nil
}

func (m *nodeMap) rowNames() string {
	var names []string
	for _, r := range m.rows {
		names = append(names, r.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// label is how plans show a pod's node: its name, or what it will be
// recognised by.
func (m *nodeMap) label(pod string) string {
	pn := m.pods[pod]
	switch {
	case pn == nil:
		return "the node of pod " + pod
	case pn.Name != "":
		return "node " + pn.Name
	default:
		return "the node with hostname " + pn.Facts.Hostname
	}
}

// waitPodNodes polls until each pod (as it is now: a recreated pod is
// read again) maps to a node in sys.nodes, and returns the node names.
// notID, when set for a pod, is a node ID it must not have (a replaced
// pod's node starts with a new data directory, so a new ID).
func (e *Engine) waitPodNodes(ctx context.Context, sc *ops.StepContext, c *ops.Cluster, pods []string, notID map[string]string) ([]string, error) {
	var names []string
	last := ""
	err := e.pollDB(ctx, sc, func() (bool, error) {
		rows, err := e.readNodes(ctx, c, nil)
		if err != nil {
			return false, err
		}
		live, err := e.livePods(ctx, c, pods)
		if err != nil {
			return false, err
		}
		m := buildNodeMap(pods, live, rows)
		names = names[:0]
		var waiting []string
		for _, p := range pods {
			pn := m.pods[p]
			switch {
			case pn == nil || !pn.Facts.Ready:
				waiting = append(waiting, p+" (pod not Ready)")
			case pn.Problem != "":
				// A node just (re)joining may briefly look odd; the
				// timeout bounds this, and the message says why.
				waiting = append(waiting, pn.Problem)
			case pn.Row == nil:
				waiting = append(waiting, p+" ("+pn.Facts.describe()+" not in sys.nodes)")
			case notID[p] != "" && pn.Row.ID == notID[p]:
				waiting = append(waiting, p+" (node "+pn.Row.Name+" still has its old ID)")
			default:
				names = append(names, pn.Row.Name)
			}
		}
		sc.Progress(int64(len(names)), int64(len(pods)), "nodes", "nodes joined (sys.nodes)")
		if msg := strings.Join(waiting, "; "); msg != "" && msg != last {
			last = msg
			sc.Waiting("waiting for " + msg)
		}
		return len(waiting) == 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the nodes of %s in sys.nodes: %w", strings.Join(pods, ", "), err)
	}
	return names, nil
}
