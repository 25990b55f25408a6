package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Forwarder opens a local address that reaches a port of a pod. Production
// uses KubeForwarder (a client-go port-forward); tests point it at a fake
// gateway.
type Forwarder interface {
	Forward(ctx context.Context, namespace, pod string, port int) (addr string, stop func(), err error)
}

// KubeForwarder forwards through the API server's portforward subresource.
type KubeForwarder struct{ Config *rest.Config }

// Forward implements Forwarder.
func (k KubeForwarder) Forward(ctx context.Context, namespace, pod string, port int) (string, func(), error) {
	f, err := kube.PortForward(ctx, k.Config, namespace, pod, port)
	if err != nil {
		return "", nil, err
	}
	return f.LocalAddr(), func() { _ = f.Close() }, nil
}

// apiCtl serves the etcdctl subcommands the procedures use (member
// list/add/promote/remove, endpoint status/health, move-leader, auth
// status, user list) from etcd's v3 gateway over a port-forward to the
// member's client port, and answers in etcdctl's -w json shapes and error
// texts, so the steps do not care which of the two serves them. It is used
// when etcdctl cannot take the password on stdin (an image without stty,
// such as the official distroless etcd image); the password goes only into
// the body of /v3/auth/authenticate over the forward.
type apiCtl struct {
	ns   string
	conn *clientConn
	fwd  Forwarder
	// tls is the client TLS of an https listener (nil: plain http);
	// serverName per pod comes from its advertised client URL.
	tls  *tls.Config
	port int
	// certFile is the client certificate's path in the pod, for messages.
	certFile string
	// creds returns the user and password (ctl.credentials).
	creds func() (string, []byte, string)
}

// newAPICtl prepares the gateway path for a cluster: which listener a
// port-forward reaches and, for https, the CA and client certificate read
// from the Secret volumes that back the member's --trusted-ca-file,
// --cert-file and --key-file (or the options' paths).
func newAPICtl(ctx context.Context, client kubernetes.Interface, fwd Forwarder, ns, sts string, cn *corev1.Container, volumes []corev1.Volume,
	conn *clientConn, files tlsFiles, pod string, creds func() (string, []byte, string)) (*apiCtl, error) {
	a := &apiCtl{ns: ns, conn: conn, fwd: fwd, creds: creds}
	scheme, port, err := forwardTarget(conn, pod)
	if err != nil {
		return nil, err
	}
	a.port = port
	if scheme != "https" {
		return a, nil
	}
	if files.ca == "" {
		return nil, ops.Preconditionf("etcd %s/%s serves clients over https but its CA file is not known (--trusted-ca-file or --etcd-cacert): the etcd API over a port-forward cannot verify the member", ns, sts)
	}
	read := func(path, what string) ([]byte, error) {
		secret, key, ok := secretFile(cn, volumes, path)
		if !ok {
			return nil, ops.Preconditionf("etcd %s/%s: the %s %s is not a file of a Secret volume of the pod, so it cannot be read for the etcd API over a port-forward (etcdctl in the image cannot take the password: it has no stty)", ns, sts, what, path)
		}
		sec, err := client.CoreV1().Secrets(ns).Get(ctx, secret, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading Secret %s/%s for the etcd %s: %w", ns, secret, what, err)
		}
		data, ok := sec.Data[key]
		if !ok {
			return nil, ops.Preconditionf("etcd %s/%s: Secret %s has no key %q for the %s %s", ns, sts, secret, key, what, path)
		}
		return data, nil
	}
	caPEM, err := read(files.ca, "CA file")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, ops.Preconditionf("etcd %s/%s: the CA file %s holds no PEM certificate", ns, sts, files.ca)
	}
	conf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if files.cert != "" {
		certPEM, err := read(files.cert, "client certificate")
		if err != nil {
			return nil, err
		}
		keyPEM, err := read(files.key, "client key")
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, ops.Preconditionf("etcd %s/%s: client certificate %s and key %s do not form a key pair: %v", ns, sts, files.cert, files.key, err)
		}
		conf.Certificates = []tls.Certificate{pair}
		a.certFile = files.cert
	}
	a.tls = conf
	return a, nil
}

// errTextGatewayCN is etcd's HTTP 400 to a gateway request whose client
// certificate has a Common Name, when client-cert-auth and auth are on.
const errTextGatewayCN = "CommonName of client sending a request against gateway"

// tlsFiles are the client TLS file paths inside the pod.
type tlsFiles struct{ ca, cert, key string }

// forwardTarget picks the client listener a port-forward reaches: the
// kubelet dials localhost inside the pod's network namespace, so only a
// loopback or wildcard listener will do.
func forwardTarget(cc *clientConn, pod string) (scheme string, port int, err error) {
	if cc == nil {
		return "", 0, fmt.Errorf("etcd in pod %s: its client listeners are not known", pod)
	}
	if cc.endpoint != "" {
		if u, err := url.Parse(cc.endpoint); err == nil && u.Port() != "" {
			ip := net.ParseIP(u.Hostname())
			if u.Hostname() == "localhost" || ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
				p, _ := strconv.Atoi(u.Port())
				return u.Scheme, p, nil
			}
		}
	}
	ls := cc.listeners(pod)
	for _, kind := range []string{"loopback", "wildcard"} {
		for _, l := range ls {
			if l.kind == kind && (l.scheme == "http" || l.scheme == "https") {
				p, err := strconv.Atoi(l.port)
				if err != nil {
					continue
				}
				return l.scheme, p, nil
			}
		}
	}
	return "", 0, ops.Preconditionf("etcd in pod %s listens for clients only on %s, which a port-forward cannot reach (the kubelet dials localhost in the pod's network namespace), and etcdctl in the image cannot take the password (no stty): add a loopback listener (e.g. --listen-client-urls=...,http://127.0.0.1:2379) or authenticate with a client certificate whose CN is root",
		pod, strings.Join(cc.listen, ","))
}

// serverName is the host the member's certificate must name: the host of
// its advertised client URL.
func (a *apiCtl) serverName(pod string) string {
	if a.conn == nil {
		return ""
	}
	for _, adv := range a.conn.advertise {
		if v, ok := a.conn.expand(adv, pod); ok {
			if u, err := url.Parse(v); err == nil && u.Hostname() != "" {
				return u.Hostname()
			}
		}
	}
	return ""
}

// open forwards to pod's client port and authenticates when withCreds.
func (a *apiCtl) open(ctx context.Context, pod string, withCreds bool) (*apiClient, func(), error) {
	addr, stop, err := a.fwd.Forward(ctx, a.ns, pod, a.port)
	if err != nil {
		return nil, nil, err
	}
	var conf *tls.Config
	if a.tls != nil {
		conf = a.tls.Clone()
		conf.ServerName = a.serverName(pod)
		if conf.ServerName == "" {
			stop()
			return nil, nil, ops.Preconditionf("etcd in pod %s: no advertised client URL names the host its certificate must name", pod)
		}
	}
	c := newAPIClient(addr, conf)
	done := func() { c.close(); stop() }
	if user, pw, _ := a.creds(); withCreds && len(pw) > 0 {
		if err := c.authenticate(ctx, user, pw); err != nil {
			done()
			return nil, nil, err
		}
	}
	return c, done, nil
}

// podOf finds the pod whose member advertises client URL u: by the pods'
// advertised URLs as their spec expands, else by pod IP, else by a DNS
// name that starts with the pod's name.
func (a *apiCtl) podOf(u string) (string, bool) {
	u = strings.TrimRight(u, "/")
	if a.conn == nil {
		return "", false
	}
	a.conn.mu.Lock()
	ips := make(map[string]string, len(a.conn.ips))
	for k, v := range a.conn.ips {
		ips[k] = v
	}
	a.conn.mu.Unlock()
	for pod := range ips {
		for _, adv := range a.conn.advertise {
			if v, ok := a.conn.expand(adv, pod); ok && strings.TrimRight(v, "/") == u {
				return pod, true
			}
		}
	}
	pu, err := url.Parse(u)
	if err != nil {
		return "", false
	}
	for pod, ip := range ips {
		if ip != "" && pu.Hostname() == ip || strings.HasPrefix(pu.Hostname(), pod+".") {
			return pod, true
		}
	}
	return "", false
}

// run serves one etcdctl command line (args after the global flags).
func (a *apiCtl) run(ctx context.Context, pod string, withCreds bool, endpoints []string, op string, args []string) ([]byte, error) {
	fail := func(err error) error {
		if err == nil {
			return nil
		}
		var coded *ops.CodedError
		if errors.As(err, &coded) {
			return err
		}
		ce := &CtlError{Pod: pod, Op: op, Via: "etcd API", Err: err}
		var ae *APIError
		if errors.As(err, &ae) && strings.Contains(ae.Message, errTextGatewayCN) {
			return ops.Preconditionf("etcd in pod %s refuses the client certificate %s on its gateway (with --client-cert-auth and auth enabled etcd rejects certificates that carry a Common Name there): name one without a Common Name with --etcd-cert/--etcd-key (files of a Secret the pod mounts), or authenticate with a client certificate whose CN is root instead of a password",
				pod, a.certFile)
		}
		if errors.As(err, &ae) {
			ce.Code, ce.Msg = 1, ae.Message
		} else {
			ce.Msg = err.Error()
		}
		return ce
	}
	words := positional(args)
	if len(words) >= 2 && words[0] == "endpoint" {
		return a.endpoints(ctx, pod, withCreds, endpoints, op, words[1], fail)
	}
	c, done, err := a.open(ctx, pod, withCreds)
	if err != nil {
		return nil, fail(err)
	}
	defer done()
	key := strings.Join(words[:min(2, len(words))], " ")
	switch {
	case key == "member list":
		ms, h, err := c.memberList(ctx)
		if err != nil {
			return nil, fail(err)
		}
		return marshal(jsonMemberList{Header: h.json(), Members: jsonMembers(ms)})
	case key == "member add":
		var peers []string
		for _, x := range args {
			if v, ok := strings.CutPrefix(x, "--peer-urls="); ok {
				peers = splitURLs(v)
			}
		}
		m, ms, h, err := c.memberAdd(ctx, peers, slices.Contains(args, "--learner"))
		if err != nil {
			return nil, fail(err)
		}
		return marshal(jsonMemberAdd{Header: h.json(), Member: m.json(), Members: jsonMembers(ms)})
	case key == "member promote" || key == "member remove":
		if len(words) < 3 {
			return nil, fmt.Errorf("etcd API %s: no member ID", op)
		}
		id, err := ParseHexID(words[2])
		if err != nil {
			return nil, err
		}
		if words[1] == "promote" {
			err = c.memberPromote(ctx, id)
		} else {
			err = c.memberRemove(ctx, id)
		}
		return nil, fail(err)
	case len(words) >= 2 && words[0] == "move-leader":
		id, err := ParseHexID(words[1])
		if err != nil {
			return nil, err
		}
		return nil, fail(c.moveLeader(ctx, id))
	case key == "auth status":
		on, err := c.authStatus(ctx)
		if err != nil {
			return nil, fail(err)
		}
		return marshal(map[string]any{"enabled": on})
	case key == "user list":
		users, err := c.userList(ctx)
		if err != nil {
			return nil, fail(err)
		}
		return marshal(map[string]any{"users": users})
	}
	return nil, fmt.Errorf("etcd API: etcdctl %q has no counterpart here", key)
}

// endpoints answers endpoint status/health for the given client URLs (or,
// with --cluster, every member's), each through its own pod; like etcdctl
// it prints what it got and fails when an endpoint did not answer.
func (a *apiCtl) endpoints(ctx context.Context, pod string, withCreds bool, endpoints []string, op, which string, fail func(error) error) ([]byte, error) {
	eps := endpoints
	if len(eps) == 0 {
		// --cluster: every member's client URLs.
		c, done, err := a.open(ctx, pod, withCreds)
		if err != nil {
			return nil, fail(err)
		}
		ms, _, err := c.memberList(ctx)
		done()
		if err != nil {
			return nil, fail(err)
		}
		for _, m := range ms {
			eps = append(eps, m.ClientURLs...)
		}
	}
	var statuses []jsonEndpointStatus
	var health []jsonEndpointHealth
	var firstErr error
	for _, ep := range eps {
		target, ok := a.podOf(ep)
		var err error
		var st apiStatus
		if !ok {
			err = fmt.Errorf("no pod of this StatefulSet advertises %s", ep)
		} else {
			var c *apiClient
			var done func()
			c, done, err = a.open(ctx, target, withCreds)
			if err == nil {
				if which == "status" {
					st, err = c.status(ctx)
				} else {
					err = c.health(ctx)
				}
				done()
			}
		}
		if which == "health" {
			h := jsonEndpointHealth{Endpoint: ep, Health: err == nil}
			if err != nil {
				h.Error = err.Error()
			}
			health = append(health, h)
		} else if err == nil {
			var js jsonEndpointStatus
			js.Endpoint = ep
			js.Status.Header = st.Header.json()
			js.Status.Version, js.Status.DBSize = st.Version, int64(st.DBSize)
			js.Status.Leader, js.Status.RaftIndex, js.Status.RaftTerm = uint64(st.Leader), uint64(st.RaftIndex), uint64(st.RaftTerm)
			js.Status.RaftAppliedIndex, js.Status.IsLearner, js.Status.Errors = uint64(st.RaftAppliedIndex), st.IsLearner, st.Errors
			statuses = append(statuses, js)
		}
		if err != nil && firstErr == nil {
			firstErr = err
			if ctx.Err() != nil {
				break
			}
		}
	}
	var out []byte
	var err error
	if which == "health" {
		out, err = marshal(health)
	} else {
		out, err = marshal(statuses)
	}
	if err != nil {
		return nil, err
	}
	return out, fail(firstErr)
}

func (h apiHeader) json() jsonHeader {
	return jsonHeader{ClusterID: uint64(h.ClusterID), MemberID: uint64(h.MemberID), Revision: int64(h.Revision), RaftTerm: uint64(h.RaftTerm)}
}

func jsonMembers(ms []apiMember) []jsonMember {
	out := make([]jsonMember, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.json())
	}
	return out
}

func marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding etcd API answer: %w", err)
	}
	return b, nil
}

// positional returns the words of args that are not flags (nor the value
// of -w).
func positional(args []string) []string {
	var out []string
	for i, a := range args {
		if !strings.HasPrefix(a, "-") && (i == 0 || args[i-1] != "-w") {
			out = append(out, a)
		}
	}
	return out
}
