package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Defaults of the auth Secret named by Options.AuthSecret: the keys of a
// kubernetes.io/basic-auth Secret.
const (
	DefaultAuthPasswordKey = "password"
	DefaultAuthUserKey     = "username"
	// bitnamiPasswordEnv is the Bitnami chart's root password variable,
	// filled from its Secret (<release>-etcd, key etcd-root-password).
	bitnamiPasswordEnv = "ETCD_ROOT_PASSWORD"
)

// clientConn is where etcdctl, run in a member's pod, reaches that member:
// read from the member's own --listen-client-urls and
// --advertise-client-urls (or their ETCD_* variables), never assumed.
type clientConn struct {
	// endpoint, when set (Options.Endpoint), is used as written.
	endpoint  string
	listen    []string
	advertise []string
	env       []corev1.EnvVar
	namespace string

	mu  sync.Mutex
	ips map[string]string // pod name -> pod IP, from the last pod list
}

func newClientConn(ns string, c *corev1.Container, endpoint string) *clientConn {
	cc := &clientConn{endpoint: endpoint, env: c.Env, namespace: ns, ips: map[string]string{}}
	if v, ok := settings(c, "listen-client-urls"); ok {
		cc.listen = splitURLs(v)
	}
	if v, ok := settings(c, "advertise-client-urls"); ok {
		cc.advertise = splitURLs(v)
	}
	return cc
}

func splitURLs(v string) []string {
	var out []string
	for _, u := range strings.Split(v, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// tls reports whether the member serves clients over TLS.
func (cc *clientConn) tls() bool {
	for _, u := range append(append([]string{}, cc.listen...), cc.advertise...) {
		if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "unixs://") {
			return true
		}
	}
	return strings.HasPrefix(cc.endpoint, "https://")
}

// setPods records the pod IPs of the last pod list ($(POD_IP) expansion).
func (cc *clientConn) setPods(pods map[string]*corev1.Pod) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for name, p := range pods {
		cc.ips[name] = p.Status.PodIP
	}
}

func (cc *clientConn) podIP(pod string) string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.ips[pod]
}

// expand resolves $(VAR) references the way the kubelet does for this
// pod: literal variables, and the downward API fields a pod's own address
// is built from. ok is false when a reference cannot be resolved.
func (cc *clientConn) expand(s, pod string) (string, bool) {
	ok := true
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		for _, e := range cc.env {
			if e.Name != name {
				continue
			}
			switch {
			case e.ValueFrom == nil:
				return e.Value
			case e.ValueFrom.FieldRef == nil:
			case e.ValueFrom.FieldRef.FieldPath == "metadata.name":
				return pod
			case e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
				return cc.namespace
			case e.ValueFrom.FieldRef.FieldPath == "status.podIP":
				if ip := cc.podIP(pod); ip != "" {
					return ip
				}
			}
		}
		ok = false
		return ref
	})
	return out, ok
}

// isPodIPRef reports whether host is a $(VAR) of the pod's status.podIP.
func (cc *clientConn) isPodIPRef(host string) bool {
	m := envRef.FindStringSubmatch(host)
	if m == nil || m[0] != host {
		return false
	}
	return slices.ContainsFunc(cc.env, func(e corev1.EnvVar) bool {
		return e.Name == m[1] && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP"
	})
}

// listener is one --listen-client-urls entry.
type listener struct {
	scheme, host, port string
	kind               string // loopback, wildcard, podip, other
}

func (cc *clientConn) listeners(pod string) []listener {
	urls := cc.listen
	if len(urls) == 0 {
		// etcd's default --listen-client-urls.
		urls = []string{"http://localhost:2379"}
	}
	var out []listener
	for _, raw := range urls {
		scheme, rest, ok := strings.Cut(raw, "://")
		if !ok {
			continue
		}
		hostport := strings.TrimRight(rest, "/")
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			host, port = hostport, "2379"
		}
		l := listener{scheme: scheme, host: host, port: port, kind: "other"}
		ip := net.ParseIP(host)
		switch {
		case host == "localhost" || (ip != nil && ip.IsLoopback()):
			l.kind = "loopback"
		case host == "" || (ip != nil && ip.IsUnspecified()):
			l.kind = "wildcard"
		case cc.isPodIPRef(host) || (ip != nil && host == cc.podIP(pod)):
			l.kind = "podip"
		}
		out = append(out, l)
	}
	return out
}

// endpointFor picks the client URL etcdctl uses inside pod: the pod's own
// advertised URL when the member serves TLS and listens where it points
// (server certificates name the advertised address), else a loopback or
// wildcard listener through 127.0.0.1, else the pod IP when the member
// listens only there.
func (cc *clientConn) endpointFor(pod string) (string, error) {
	if cc.endpoint != "" {
		return cc.endpoint, nil
	}
	ls := cc.listeners(pod)
	if cc.tls() && len(cc.advertise) > 0 {
		if adv, ok := cc.expand(cc.advertise[0], pod); ok {
			if u, err := url.Parse(adv); err == nil {
				for _, l := range ls {
					if l.port == u.Port() && (l.kind == "wildcard" || l.kind == "podip" || l.host == u.Hostname()) {
						return adv, nil
					}
				}
			}
		}
	}
	for _, kinds := range []string{"loopback", "wildcard"} {
		for _, l := range ls {
			if l.kind != kinds || (l.scheme != "http" && l.scheme != "https") {
				continue
			}
			host := l.host
			if l.kind == "wildcard" {
				host = "127.0.0.1"
			}
			return l.scheme + "://" + net.JoinHostPort(host, l.port), nil
		}
	}
	for _, l := range ls {
		if l.kind != "podip" {
			continue
		}
		ip := cc.podIP(pod)
		if ip == "" {
			return "", fmt.Errorf("etcd in pod %s listens for clients only on its pod IP (%s://%s:%s), and the pod has no IP yet", pod, l.scheme, l.host, l.port)
		}
		return l.scheme + "://" + net.JoinHostPort(ip, l.port), nil
	}
	return "", ops.Preconditionf("etcd in pod %s listens for clients on %s: none of these is reachable from inside the pod (no loopback, wildcard or pod-IP address); pass --etcd-endpoint", pod, strings.Join(cc.listen, ","))
}

// checkAdvertised cross-checks the members' client URLs (member list)
// against what their pods' specs advertise: a mismatch means the spec the
// tool reads is not what the member runs with.
func (cc *clientConn) checkAdvertised(ns string, st *Status) error {
	if len(cc.advertise) == 0 {
		return nil
	}
	for _, m := range st.Members {
		if m.Pod == "" || !m.Started() || len(m.ClientURLs) == 0 {
			continue
		}
		var want []string
		for _, a := range cc.advertise {
			v, ok := cc.expand(a, m.Pod)
			if !ok {
				want = nil
				break
			}
			want = append(want, strings.TrimRight(v, "/"))
		}
		if want == nil {
			continue
		}
		got := make([]string, 0, len(m.ClientURLs))
		for _, u := range m.ClientURLs {
			got = append(got, strings.TrimRight(u, "/"))
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			return ops.Preconditionf("etcd member %s in %s advertises client URLs %s, but its pod's spec says %s: the spec does not describe the running member (restart it, or fix the spec)",
				m.label(), ns, strings.Join(got, ","), strings.Join(want, ","))
		}
	}
	return nil
}

// authSource is where the root credentials come from; the password itself
// is read at plan time and only ever sent on etcdctl's stdin.
type authSource struct {
	secret  string
	passKey string
	userKey string // optional key holding the user name
	user    string // explicit user (option), else the Secret's, else root
	why     string
}

// detectAuth finds the credentials: Options.AuthSecret, else the Bitnami
// chart's ETCD_ROOT_PASSWORD filled from its Secret, or its
// ETCD_ROOT_PASSWORD_FILE naming a file of a mounted Secret
// (auth.rbac.usePasswordFile).
func detectAuth(o Options, c *corev1.Container, volumes []corev1.Volume) *authSource {
	if o.AuthSecret != "" {
		name, key, ok := strings.Cut(o.AuthSecret, "/")
		if !ok || key == "" {
			key = DefaultAuthPasswordKey
		}
		return &authSource{secret: name, passKey: key, userKey: DefaultAuthUserKey, user: o.User, why: "--etcd-auth-secret"}
	}
	if envValue(c, "ALLOW_NONE_AUTHENTICATION") == "yes" {
		return nil
	}
	for _, e := range c.Env {
		if e.Name == bitnamiPasswordEnv && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != "" {
			user := o.User
			if user == "" {
				user = "root"
			}
			return &authSource{secret: e.ValueFrom.SecretKeyRef.Name, passKey: e.ValueFrom.SecretKeyRef.Key, user: user,
				why: "the container's " + bitnamiPasswordEnv}
		}
	}
	if path := envValue(c, bitnamiPasswordEnv+"_FILE"); path != "" {
		if name, key, ok := secretFile(c, volumes, path); ok {
			user := o.User
			if user == "" {
				user = "root"
			}
			return &authSource{secret: name, passKey: key, user: user, why: "the container's " + bitnamiPasswordEnv + "_FILE"}
		}
	}
	return nil
}

// secretFile finds the Secret and key behind a file path of the container:
// the Secret volume mounted at the path's directory (or at the file itself
// with subPath), honouring the volume's items.
func secretFile(c *corev1.Container, volumes []corev1.Volume, path string) (secret, key string, ok bool) {
	for _, m := range c.VolumeMounts {
		rel := ""
		switch {
		case m.SubPath != "" && m.MountPath == path:
			rel = m.SubPath
		case m.SubPath == "" && strings.HasPrefix(path, strings.TrimRight(m.MountPath, "/")+"/"):
			rel = strings.TrimPrefix(path, strings.TrimRight(m.MountPath, "/")+"/")
		default:
			continue
		}
		for _, v := range volumes {
			if v.Name != m.Name {
				continue
			}
			type source struct {
				name  string
				items []corev1.KeyToPath
			}
			var sources []source
			switch {
			case v.Secret != nil:
				sources = append(sources, source{v.Secret.SecretName, v.Secret.Items})
			case v.Projected != nil:
				for _, p := range v.Projected.Sources {
					if p.Secret != nil {
						sources = append(sources, source{p.Secret.Name, p.Secret.Items})
					}
				}
			}
			for _, src := range sources {
				if len(src.items) == 0 && len(sources) == 1 && !strings.Contains(rel, "/") {
					return src.name, rel, true
				}
				for _, it := range src.items {
					if it.Path == rel {
						return src.name, it.Key, true
					}
				}
			}
		}
	}
	return "", "", false
}

// load reads the Secret and returns the user and the password.
func (a *authSource) load(ctx context.Context, client kubernetes.Interface, ns string) (string, []byte, error) {
	sec, err := client.CoreV1().Secrets(ns).Get(ctx, a.secret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil, ops.Usagef("etcd credentials (%s): Secret %s/%s not found", a.why, ns, a.secret)
	case err != nil:
		return "", nil, fmt.Errorf("reading etcd credentials Secret %s/%s: %w", ns, a.secret, err)
	}
	pw, ok := sec.Data[a.passKey]
	if !ok || len(pw) == 0 {
		return "", nil, ops.Usagef("etcd credentials (%s): Secret %s/%s has no key %q (or it is empty)", a.why, ns, a.secret, a.passKey)
	}
	// etcdctl reads the password as one line and trims spaces around it
	// (bgentry/speakeasy, which etcdctl's --user prompt uses).
	if strings.ContainsAny(string(pw), "\r\n") || strings.TrimSpace(string(pw)) != string(pw) {
		return "", nil, ops.Usagef("etcd credentials: the password in Secret %s/%s key %q has a line break or leading/trailing spaces, which etcdctl cannot read from stdin", ns, a.secret, a.passKey)
	}
	user := a.user
	if user == "" && a.userKey != "" {
		user = strings.TrimSpace(string(sec.Data[a.userKey]))
	}
	if user == "" {
		user = "root"
	}
	if strings.Contains(user, ":") {
		return "", nil, ops.Usagef("etcd user %q contains ':'; etcdctl --user cannot name it", user)
	}
	return user, pw, nil
}

func (a *authSource) String() string {
	return fmt.Sprintf("Secret %s key %s (%s)", a.secret, a.passKey, a.why)
}

// etcdctl answers for the auth checks.
const (
	errTextNoUser         = "user name is empty"
	errTextUserNotFound   = "user name not found"
	errTextAuthFailed     = "authentication failed"
	errTextPermission     = "permission denied"
	errTextAuthNotEnabled = "authentication is not enabled"
	errTextNoStty         = "stty"
	// errTextNoEcho is bgentry/speakeasy's answer when it cannot run
	// /bin/stty to turn the terminal echo off.
	errTextNoEcho = "failed turning off console echo"
)

// noStty reports whether etcdctl failed because its password prompt could
// not run stty (the image has none).
func noStty(err error) bool {
	return isCtlError(err, errTextNoStty) || isCtlError(err, errTextNoEcho)
}

// checkAuth finds out, before any write, whether etcd has authentication
// enabled and whether the configured credentials act as root: auth status
// answers without credentials only when auth is off (or a client
// certificate's CN authenticates), user list only for root. mutating
// refuses credentials that are not root's; a read-only status accepts any
// user etcd authenticates.
func (e *Engine) checkAuth(ctx context.Context, s *site, pods []string, mutating bool) error {
	x := s.ctl
	// Ask the first pod whose etcdctl gets an answer from its member.
	var out []byte
	var err error
	via := ""
	for _, p := range pods {
		via = p
		out, err = x.runAs(ctx, p, false, "auth status", "auth", "status", "-w", "json")
		var ce *CtlError
		if err == nil || !errors.As(err, &ce) || ce.Msg != "" && !strings.Contains(ce.Msg, "deadline exceeded") && !strings.Contains(ce.Msg, "connection refused") {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if via == "" {
		return nil // no pod: fetchStatus reports it
	}
	enabled := false
	switch {
	case err == nil:
		var as struct {
			Enabled bool `json:"enabled"`
		}
		if derr := decode(out, &as, "auth status"); derr != nil {
			return derr
		}
		enabled = as.Enabled
	case isCtlError(err, errTextNoUser), isCtlError(err, errTextUserNotFound), isCtlError(err, errTextPermission):
		// Only an auth-enabled etcd checks the caller: no user, or the CN of
		// the member's own client certificate naming no user or not root.
		enabled = true
	case isCtlError(err, "unknown command"):
		// etcdctl before v3.5 has no auth status: go by the configuration.
		enabled = s.auth != nil
	default:
		// No member answered: fetchStatus reports the cluster as it is.
		var ce *CtlError
		if errors.As(err, &ce) {
			return nil
		}
		return err
	}
	s.authEnabled = enabled
	if !enabled {
		return nil
	}
	if s.auth == nil {
		if err == nil {
			// Authenticated by the client certificate's CN.
			return e.checkRoot(ctx, s, via, mutating, "the client certificate's user")
		}
		// Without credentials etcd answers member list only (endpoint status
		// and health need a user too), so even a status stops here.
		return ops.Preconditionf("etcd %s/%s has authentication enabled: pass --etcd-auth-secret NAME[/KEY] naming a Secret with the root password (key %q, user in key %q, default root)",
			s.ns, s.sts, DefaultAuthPasswordKey, DefaultAuthUserKey)
	}
	user, pw, lerr := s.auth.load(ctx, e.Client, s.ns)
	if lerr != nil {
		return lerr
	}
	x.setCredentials(user, pw, s.auth.String())
	return e.checkRoot(ctx, s, via, mutating, "user "+user+" ("+s.auth.String()+")")
}

func (e *Engine) checkRoot(ctx context.Context, s *site, via string, mutating bool, who string) error {
	_, err := s.ctl.run(ctx, via, "user list", "user", "list", "-w", "json")
	switch {
	case err == nil:
		return nil
	case noStty(err) && s.ctl.api == nil:
		// etcdctl's --user prompt runs stty before reading stdin; images
		// without it (the official distroless etcd image) cannot take a
		// password without putting it into the command line. etcd's own
		// API over a port-forward can (apictl.go).
		if e.Forward == nil {
			return ops.Preconditionf("etcd %s/%s: etcdctl in pod %s cannot read the password from stdin (its --user prompt needs an stty program, which the image lacks); use client-certificate authentication (a certificate whose CN is root, via --etcd-cert/--etcd-key) instead", s.ns, s.sts, via)
		}
		api, aerr := newAPICtl(ctx, e.Client, e.Forward, s.ns, s.sts, s.container, s.volumes, s.ctl.spec, s.ctl.files, via, s.ctl.credentials)
		if aerr != nil {
			return aerr
		}
		s.ctl.api = api
		return e.checkRoot(ctx, s, via, mutating, who)
	case isCtlError(err, errTextAuthFailed):
		return ops.Preconditionf("etcd %s/%s rejects the credentials of %s: authentication failed", s.ns, s.sts, who)
	case isCtlError(err, errTextPermission) && mutating:
		return ops.Preconditionf("etcd %s/%s: %s is not root (user list: permission denied); membership changes need the root role", s.ns, s.sts, who)
	case isCtlError(err, errTextPermission):
		return nil
	}
	return err
}
