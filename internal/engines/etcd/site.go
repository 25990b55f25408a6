package etcd

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Annotations on the StatefulSet that configure the engine.
const (
	// AnnotationPeerURLTemplate overrides the peer URL of each pod: a Go
	// template over PeerURLData, e.g.
	// "http://{{.Pod}}.{{.Service}}.{{.Namespace}}.svc:2380" or
	// "http://127.0.3.{{add .Ordinal 1}}:2380".
	AnnotationPeerURLTemplate = "dbops.io/etcd-peer-url-template"
	// AnnotationConfigMap names the cluster-state ConfigMap (default
	// "<statefulset>-cluster-state").
	AnnotationConfigMap = "dbops.io/etcd-cluster-state-configmap"
)

// Keys of the cluster-state ConfigMap. Pods read them as environment
// variables (envFrom), so a pod (re)created after a membership change
// joins with the right settings.
const (
	KeyInitialCluster      = "ETCD_INITIAL_CLUSTER"
	KeyInitialClusterState = "ETCD_INITIAL_CLUSTER_STATE"
	ConfigMapSuffix        = "-cluster-state"
)

// PeerURLData is what a peer URL template can use.
type PeerURLData struct {
	Pod         string
	Ordinal     int
	StatefulSet string
	Service     string
	Namespace   string
}

var templateFuncs = template.FuncMap{"add": func(a, b int) int { return a + b }}

// ParsePeerURLTemplate parses a peer URL template.
func ParsePeerURLTemplate(text string) (*template.Template, error) {
	t, err := template.New("peer-url").Option("missingkey=error").Funcs(templateFuncs).Parse(text)
	if err != nil {
		return nil, ops.Usagef("invalid etcd peer URL template %q: %v", text, err)
	}
	return t, nil
}

// site is what the procedures need to know about one etcd cluster,
// resolved once at plan time.
type site struct {
	ns        string
	sts       string
	selector  string // the StatefulSet's pod selector
	group     string
	service   string
	configMap string
	// state is where new members learn the initial cluster (layout.go).
	state stateSource
	// claims are the StatefulSet's volumeClaimTemplates names.
	claims []string
	// tmplText is the peer URL template and where it came from.
	tmplText   string
	tmplSource string
	tmpl       *template.Template
	ctl        *ctl
	// auth is where the root credentials come from (nil: none known);
	// authEnabled is what etcd answered.
	auth        *authSource
	authEnabled bool
	// container and volumes are the etcd container and the pod volumes of
	// the template (the Secrets behind TLS files, for the etcd API path).
	container *corev1.Container
	volumes   []corev1.Volume
}

func (s *site) podName(ordinal int) string { return fmt.Sprintf("%s-%d", s.sts, ordinal) }

// ordinalOf returns the ordinal of a pod of this StatefulSet, or -1.
func (s *site) ordinalOf(pod string) int { return kube.PodOrdinal(s.sts, pod) }

// peerURL renders the peer URL of the pod with the given ordinal.
func (s *site) peerURL(ordinal int) (string, error) {
	var b bytes.Buffer
	err := s.tmpl.Execute(&b, PeerURLData{Pod: s.podName(ordinal), Ordinal: ordinal, StatefulSet: s.sts, Service: s.service, Namespace: s.ns})
	if err != nil {
		return "", fmt.Errorf("rendering peer URL template %q for %s: %w", s.tmplText, s.podName(ordinal), err)
	}
	return b.String(), nil
}

// initialCluster is the ETCD_INITIAL_CLUSTER value for pods 0..n-1.
func (s *site) initialCluster(n int) (string, error) {
	parts := make([]string, 0, n)
	for i := range n {
		u, err := s.peerURL(i)
		if err != nil {
			return "", err
		}
		parts = append(parts, s.podName(i)+"="+u)
	}
	return strings.Join(parts, ","), nil
}

// pvcNames are the claims of a pod, named as the StatefulSet controller names them.
func (s *site) pvcNames(pod string) []string {
	out := make([]string, 0, len(s.claims))
	for _, c := range s.claims {
		out = append(out, c+"-"+pod)
	}
	return out
}

// matchPods sets Member.Pod/Ordinal: by name for started members, else by
// peer URL against the pods the StatefulSet could have.
func (s *site) matchPods(st *Status, upTo int) {
	urls := map[string]int{}
	for i := range upTo {
		if u, err := s.peerURL(i); err == nil {
			urls[u] = i
		}
	}
	for i := range st.Members {
		m := &st.Members[i]
		m.Ordinal = -1
		if o := s.ordinalOf(m.Name); o >= 0 {
			m.Pod, m.Ordinal = m.Name, o
			continue
		}
		for _, u := range m.PeerURLs {
			if o, ok := urls[u]; ok {
				m.Pod, m.Ordinal = s.podName(o), o
				break
			}
		}
	}
}

// newSite resolves the cluster's StatefulSet, connection flags and peer
// URL template. members, when known, let the template be derived from
// existing peer URLs.
func (e *Engine) newSite(c *ops.Cluster) (*site, error) {
	if len(c.Groups) != 1 || ops.StatefulSetOf(c.Groups[0]) == nil {
		return nil, ops.Usagef("etcd cluster %s/%s must be exactly one StatefulSet, found %d node groups", c.Namespace, c.Name, len(c.Groups))
	}
	g := c.Groups[0]
	sts := ops.StatefulSetOf(g)
	s := &site{ns: c.Namespace, sts: sts.Name, group: g.Name, service: sts.Spec.ServiceName}
	if sts.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("StatefulSet %s/%s has an invalid selector: %w", c.Namespace, sts.Name, err)
		}
		s.selector = sel.String()
	}
	if s.service == "" {
		s.service = sts.Name + "-headless"
	}
	for _, t := range sts.Spec.VolumeClaimTemplates {
		s.claims = append(s.claims, t.Name)
	}
	container := etcdContainer(sts, e.Options.Container)
	override, from := e.Options.ConfigMap, "option"
	if override == "" {
		override, from = sts.Annotations[AnnotationConfigMap], "annotation "+AnnotationConfigMap
	}
	s.state = detectStateSource(sts, container, override, from)
	s.configMap = s.state.ConfigMap
	ctl, err := e.newCtl(c.Namespace, sts.Name, container)
	if err != nil {
		return nil, err
	}
	s.ctl = ctl
	s.auth = detectAuth(e.Options, container, sts.Spec.Template.Spec.Volumes)
	s.container, s.volumes = container, sts.Spec.Template.Spec.Volumes
	return s, nil
}

// etcdContainer picks the container running etcd: the named one, else one
// named "etcd", else one whose image mentions etcd, else the first.
func etcdContainer(sts *appsv1.StatefulSet, want string) *corev1.Container {
	cs := sts.Spec.Template.Spec.Containers
	if len(cs) == 0 {
		return &corev1.Container{}
	}
	if want != "" {
		for i := range cs {
			if cs[i].Name == want {
				return &cs[i]
			}
		}
		return &corev1.Container{Name: want}
	}
	for i := range cs {
		if cs[i].Name == "etcd" {
			return &cs[i]
		}
	}
	for i := range cs {
		if strings.Contains(cs[i].Image, "etcd") {
			return &cs[i]
		}
	}
	return &cs[0]
}

// settings reads an etcd setting from the container: ETCD_<NAME> env or
// --<name> flag. Values using $(VAR) references are returned as written.
func settings(c *corev1.Container, name string) (string, bool) {
	env := "ETCD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	for _, e := range c.Env {
		if e.Name == env && e.ValueFrom == nil {
			return e.Value, true
		}
	}
	return argValue(c, name)
}

func hasEnv(c *corev1.Container, name string) bool {
	return slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
}

func envValue(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom == nil {
			return e.Value
		}
	}
	return ""
}

// newCtl derives etcdctl's connection from the member's own flags and the
// options: the client URL the member listens on (clientConn), the client
// TLS files (--trusted-ca-file, --cert-file, --key-file: never the
// --peer-* files, which authenticate members to each other), and refuses
// a member that requires client certificates (--client-cert-auth) when no
// client certificate is known. Only file paths are used: the files stay in
// the pod.
func (e *Engine) newCtl(ns, sts string, c *corev1.Container) (*ctl, error) {
	o := e.Options
	x := &ctl{exec: e.Exec, namespace: ns, container: c.Name, conn: newClientConn(ns, c, o.Endpoint)}
	x.spec = x.conn
	if hasEnv(c, "ETCDCTL_ENDPOINTS") && o.Endpoint == "" {
		// The pod tells etcdctl where to go itself.
		x.conn = nil
		// The etcd API path (apictl.go) forwards to that address when it is
		// a literal loopback URL, else to the member's own listeners.
		first, _, _ := strings.Cut(envValue(c, "ETCDCTL_ENDPOINTS"), ",")
		x.spec = newClientConn(ns, c, strings.TrimSpace(first))
	}
	cacert, cert, key := o.CACert, o.Cert, o.Key
	if cacert == "" && !hasEnv(c, "ETCDCTL_CACERT") {
		cacert, _ = settings(c, "trusted-ca-file")
	}
	podCert := hasEnv(c, "ETCDCTL_CERT") && hasEnv(c, "ETCDCTL_KEY")
	if cert == "" && key == "" && !podCert {
		cert, _ = settings(c, "cert-file")
		key, _ = settings(c, "key-file")
	}
	if (cert == "") != (key == "") {
		return nil, ops.Usagef("etcd client certificate and key go together: got only %s (set both --etcd-cert and --etcd-key)", map[bool]string{true: "a key", false: "a certificate"}[cert == ""])
	}
	if clientCertAuth(c) && cert == "" && !podCert {
		return nil, ops.Preconditionf("etcd %s/%s requires client certificates (--client-cert-auth) and none is known: pass --etcd-cert and --etcd-key (file paths inside the etcd container, e.g. from the Secret it mounts)", ns, sts)
	}
	x.files = tlsFiles{ca: cacert, cert: cert, key: key}
	if cacert == "" {
		x.files.ca = envValue(c, "ETCDCTL_CACERT")
	}
	if podCert && cert == "" {
		x.files.cert, x.files.key = envValue(c, "ETCDCTL_CERT"), envValue(c, "ETCDCTL_KEY")
	}
	if cacert != "" {
		x.flags = append(x.flags, "--cacert="+cacert)
	}
	if cert != "" {
		x.flags = append(x.flags, "--cert="+cert, "--key="+key)
	}
	x.flags = append(x.flags, "--dial-timeout=2s", "--command-timeout=5s")
	return x, nil
}

// clientCertAuth reports whether the member requires client certificates.
func clientCertAuth(c *corev1.Container) bool {
	// A bare boolean flag (its next argument is not its value).
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		if slices.Contains(strings.Fields(a), "--client-cert-auth") {
			return true
		}
	}
	v, _ := settings(c, "client-cert-auth")
	return v == "true" || v == "1"
}

// envRef matches $(VAR) references in Kubernetes env values.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// resolveTemplate picks the peer URL template: option, annotation, derived
// from existing members (pod name substituted), derived from the pod
// spec's advertised peer URL, else the headless-service default.
func (e *Engine) resolveTemplate(s *site, sts *appsv1.StatefulSet, members []Member) error {
	text, source := e.Options.PeerURLTemplate, "option"
	if text == "" {
		text, source = sts.Annotations[AnnotationPeerURLTemplate], "annotation "+AnnotationPeerURLTemplate
	}
	if text == "" {
		text, source = deriveFromMembers(s, members), "existing members"
	}
	if text == "" {
		text, source = deriveFromSpec(etcdContainer(sts, e.Options.Container)), "pod spec"
	}
	if text == "" {
		text, source = "http://{{.Pod}}.{{.Service}}.{{.Namespace}}.svc.cluster.local:2380", "default"
	}
	t, err := ParsePeerURLTemplate(text)
	if err != nil {
		return err
	}
	s.tmplText, s.tmplSource, s.tmpl = text, source, t
	return nil
}

// deriveFromMembers turns a started member's peer URL into a template by
// replacing its pod name; all such members must agree.
func deriveFromMembers(s *site, members []Member) string {
	found := ""
	for _, m := range members {
		if s.ordinalOf(m.Name) < 0 || len(m.PeerURLs) == 0 || !strings.Contains(m.PeerURLs[0], m.Name) {
			continue
		}
		t := strings.ReplaceAll(m.PeerURLs[0], m.Name, "{{.Pod}}")
		if found != "" && t != found {
			return ""
		}
		found = t
	}
	return found
}

// deriveFromSpec reads the advertised peer URL from the container, turning
// $(VAR) references to the pod name into {{.Pod}} (Bitnami:
// http://$(MY_POD_NAME).<release>-etcd-headless.<ns>.svc.cluster.local:2380).
func deriveFromSpec(c *corev1.Container) string {
	v, ok := settings(c, "initial-advertise-peer-urls")
	if !ok || v == "" {
		return ""
	}
	v = strings.Split(v, ",")[0]
	unknown := false
	out := envRef.ReplaceAllStringFunc(v, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
				return "{{.Pod}}"
			}
		}
		unknown = true
		return ref
	})
	if unknown || !strings.Contains(out, "{{.Pod}}") {
		return ""
	}
	return out
}

// livePods lists the StatefulSet's pods that exist, sorted by ordinal,
// Ready ones first (they are the best to run etcdctl in). Inside a run (sc, or
// the informer ctx carries) they come from the run's pod informer, so the
// gates' polls of etcd send no pod request; at plan time and for status, from
// one list.
func (e *Engine) livePods(ctx context.Context, sc *ops.StepContext, s *site) ([]string, map[string]*corev1.Pod, error) {
	all, err := ops.ListPods(ctx, sc, e.Client, s.ns, s.selector)
	if err != nil {
		return nil, nil, fmt.Errorf("pods of %s/%s: %w", s.ns, s.sts, err)
	}
	byName := map[string]*corev1.Pod{}
	for name, p := range all {
		if s.ordinalOf(name) >= 0 {
			byName[name] = p
		}
	}
	if s.ctl.conn != nil {
		s.ctl.conn.setPods(byName)
	}
	if s.ctl.spec != nil && s.ctl.spec != s.ctl.conn {
		s.ctl.spec.setPods(byName)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		ra, rb := ops.PodReady(byName[a]), ops.PodReady(byName[b])
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return s.ordinalOf(a) - s.ordinalOf(b)
	})
	return names, byName, nil
}

// status reads the live cluster state (members matched to pods); sc is the
// step asking (nil outside a run).
func (e *Engine) status(ctx context.Context, sc *ops.StepContext, s *site, exclude string) (*Status, error) {
	pods, _, err := e.livePods(ctx, sc, s)
	if err != nil {
		return nil, err
	}
	st, err := s.ctl.fetchStatus(ctx, pods, exclude)
	if err != nil {
		return nil, err
	}
	s.matchPods(st, maxOrdinalGuess(pods, st, s))
	return st, nil
}

// maxOrdinalGuess bounds the ordinals peer URLs are matched against.
func maxOrdinalGuess(pods []string, st *Status, s *site) int {
	n := len(st.Members) + len(pods) + 1
	for _, p := range pods {
		n = max(n, s.ordinalOf(p)+1)
	}
	return n
}

// declareNeeds adds what the connection chosen while planning needs to every step of p:
// the etcd API path (apictl.go) opens port-forwards to the members, which the RBAC
// preflight must check before the lock is taken.
func (s *site) declareNeeds(p *ops.Plan) *ops.Plan {
	if s.ctl == nil || s.ctl.api == nil {
		return p
	}
	for _, step := range p.Steps {
		step.Needs = append(step.Needs, ops.Need("", "pods", "portforward", "create")...)
	}
	return p
}
