package etcd

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// fakeGateway answers as etcd v3.6's gRPC gateway does (shapes recorded
// from etcd v3.6.8 with curl): POST only, proto field names, uint64 as
// decimal strings, errors as {"code","message"} with HTTP 400/403/404, a
// token from /v3/auth/authenticate required in the Authorization header.
type fakeGateway struct {
	mu       sync.Mutex
	password string
	members  []map[string]any
	leader   uint64
	nextID   uint64
	bodies   []string // every request body but authenticate's
	auths    int
	tokens   map[string]string // token -> user
	inSync   bool
	paths    []string
}

func newFakeGateway() *fakeGateway {
	g := &fakeGateway{password: "s3cret", leader: 8420958219759036679, nextID: 17832985314456752652, tokens: map[string]string{}}
	for i, id := range []uint64{8420958219759036679, 9000000000000000001, 9000000000000000002} {
		g.members = append(g.members, map[string]any{"ID": strconv.FormatUint(id, 10), "name": fmt.Sprintf("etcd-%d", i),
			"peerURLs":   []string{fmt.Sprintf("http://etcd-%d.etcd-headless.ns.svc.cluster.local:2380", i)},
			"clientURLs": []string{fmt.Sprintf("http://etcd-%d.etcd-headless.ns.svc.cluster.local:2379", i)}})
	}
	return g
}

func (g *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.serve(w, r, 8420958219759036679)
}

// as is the gateway of member self (its ID in the answers' headers).
func (g *fakeGateway) as(self uint64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, self) })
}

func (g *fakeGateway) serve(w http.ResponseWriter, r *http.Request, self uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.paths = append(g.paths, r.URL.Path)
	body, _ := io.ReadAll(r.Body)
	fail := func(status, code int, msg string) {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"code":%d, "message":%q}`, code, msg)
	}
	if r.Method != http.MethodPost {
		fail(501, 12, "Method Not Allowed")
		return
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		fail(400, 3, "proto: syntax error")
		return
	}
	header := fmt.Sprintf(`{"cluster_id":"16472694409994156428", "member_id":"%d", "revision":"1", "raft_term":"2"}`, self)
	if r.URL.Path == "/v3/auth/authenticate" {
		g.auths++
		if req["name"] != "root" || req["password"] != g.password {
			fail(400, 3, "etcdserver: authentication failed, invalid user ID or password")
			return
		}
		tok := fmt.Sprintf("tok%d.%d", len(g.tokens), g.auths)
		g.tokens[tok] = "root"
		fmt.Fprintf(w, `{"header":%s, "token":%q}`, header, tok)
		return
	}
	g.bodies = append(g.bodies, string(body))
	tok := r.Header.Get("Authorization")
	if tok == "" {
		if r.URL.Path == "/v3/cluster/member/list" {
			// etcd answers member list without a user.
		} else {
			fail(400, 3, "etcdserver: user name is empty")
			return
		}
	} else if _, ok := g.tokens[tok]; !ok {
		fail(401, 16, "etcdserver: invalid auth token")
		return
	}
	members := func() string { b, _ := json.Marshal(g.members); return string(b) }
	idx := func(id any) int {
		for i, m := range g.members {
			if m["ID"] == id {
				return i
			}
		}
		return -1
	}
	switch r.URL.Path {
	case "/v3/cluster/member/list":
		fmt.Fprintf(w, `{"header":%s, "members":%s}`, header, members())
	case "/v3/cluster/member/add":
		id := strconv.FormatUint(g.nextID, 10)
		g.nextID++
		m := map[string]any{"ID": id, "peerURLs": req["peerURLs"], "isLearner": req["isLearner"]}
		g.members = append(g.members, m)
		b, _ := json.Marshal(m)
		fmt.Fprintf(w, `{"header":%s, "member":%s, "members":%s}`, header, b, members())
	case "/v3/cluster/member/promote":
		i := idx(req["ID"])
		switch {
		case i < 0:
			fail(404, 5, "etcdserver: member not found")
		case !g.inSync:
			fail(400, 9, "etcdserver: can only promote a learner member which is in sync with leader")
		default:
			delete(g.members[i], "isLearner")
			fmt.Fprintf(w, `{"header":%s, "members":%s}`, header, members())
		}
	case "/v3/cluster/member/remove":
		i := idx(req["ID"])
		if i < 0 {
			fail(404, 5, "etcdserver: member not found")
			return
		}
		g.members = append(g.members[:i], g.members[i+1:]...)
		fmt.Fprintf(w, `{"header":%s, "members":%s}`, header, members())
	case "/v3/maintenance/status":
		fmt.Fprintf(w, `{"header":%s, "version":"3.6.8", "dbSize":"20480", "leader":"%d", "raftIndex":"11", "raftTerm":"2", "raftAppliedIndex":"11", "dbSizeInUse":"16384", "storageVersion":"3.6.0", "dbSizeQuota":"2147483648", "downgradeInfo":{}}`, header, g.leader)
	case "/v3/maintenance/transfer-leadership":
		if idx(req["targetID"]) < 0 {
			fail(400, 9, "etcdserver: bad leader transferee")
			return
		}
		fmt.Fprintf(w, `{"header":%s}`, header)
	case "/v3/kv/range", "/v3/maintenance/alarm":
		fmt.Fprintf(w, `{"header":%s}`, header)
	case "/v3/auth/status":
		fmt.Fprintf(w, `{"header":%s, "enabled":true, "authRevision":"4"}`, header)
	case "/v3/auth/user/list":
		fmt.Fprintf(w, `{"header":%s, "users":["root"]}`, header)
	default:
		w.WriteHeader(404)
		fmt.Fprint(w, "Not Found")
	}
}

// fakeForwarder "forwards" every pod to one test server and records pods.
type fakeForwarder struct {
	mu   sync.Mutex
	addr string
	// byPod, when set, is each pod's own server.
	byPod map[string]string
	pods  []string
	port  int
}

func (f *fakeForwarder) Forward(_ context.Context, _ string, pod string, port int) (string, func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods, f.port = append(f.pods, pod), port
	if a, ok := f.byPod[pod]; ok {
		return a, func() {}, nil
	}
	return f.addr, func() {}, nil
}

func testAPICtl(t *testing.T, g *fakeGateway, listen string) (*apiCtl, *fakeForwarder) {
	t.Helper()
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	fwd := &fakeForwarder{addr: strings.TrimPrefix(srv.URL, "http://")}
	c := &corev1.Container{Name: "etcd", Args: []string{"--listen-client-urls=" + listen,
		"--advertise-client-urls=http://$(MY_POD_NAME).etcd-headless.ns.svc.cluster.local:2379"},
		Env: []corev1.EnvVar{{Name: "MY_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}
	cc := newClientConn("ns", c, "")
	pods := map[string]*corev1.Pod{}
	for i := range 3 {
		pods[fmt.Sprintf("etcd-%d", i)] = &corev1.Pod{Status: corev1.PodStatus{PodIP: fmt.Sprintf("10.0.0.%d", i+1)}}
	}
	cc.setPods(pods)
	a, err := newAPICtl(context.Background(), fake.NewClientset(), fwd, "ns", "etcd", c, nil, cc, tlsFiles{}, "etcd-0",
		func() (string, []byte, string) { return "root", []byte(g.password), "Secret s key password" })
	if err != nil {
		t.Fatal(err)
	}
	return a, fwd
}

func TestAPICtlCommands(t *testing.T) {
	g := newFakeGateway()
	a, fwd := testAPICtl(t, g, "http://0.0.0.0:2379")
	ctx := context.Background()
	if fwd.port != 0 || a.port != 2379 {
		t.Fatalf("port %d", a.port)
	}

	out, err := a.run(ctx, "etcd-0", true, nil, "member list", []string{"member", "list", "-w", "json"})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := ParseMemberList(out)
	if err != nil || len(ms) != 3 || ms[0].ID != HexID(8420958219759036679) || ms[1].Name != "etcd-1" || ms[2].ClientURLs[0] != "http://etcd-2.etcd-headless.ns.svc.cluster.local:2379" {
		t.Fatalf("member list: %v %+v", err, ms)
	}

	out, err = a.run(ctx, "etcd-0", true, nil, "member add", []string{"member", "add", "etcd-3", "--peer-urls=http://etcd-3.x:2380", "--learner", "-w", "json"})
	if err != nil {
		t.Fatal(err)
	}
	added, err := ParseMemberAdd(out)
	if err != nil || added.ID != HexID(17832985314456752652) || !added.Learner || added.PeerURLs[0] != "http://etcd-3.x:2380" {
		t.Fatalf("member add: %v %+v", err, added)
	}

	_, err = a.run(ctx, "etcd-0", true, nil, "member promote", []string{"member", "promote", added.ID})
	if !isCtlError(err, errTextNotInSync) {
		t.Fatalf("promote of a learner not in sync: %v", err)
	}
	g.inSync = true
	if _, err := a.run(ctx, "etcd-0", true, nil, "member promote", []string{"member", "promote", added.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.run(ctx, "etcd-0", true, nil, "member remove", []string{"member", "remove", added.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = a.run(ctx, "etcd-0", true, nil, "member remove", []string{"member", "remove", added.ID})
	if !isCtlError(err, errTextMemberNotFound) || !strings.Contains(err.Error(), "etcd API member remove in pod etcd-0") {
		t.Fatalf("second remove: %v", err)
	}

	eps := []string{"http://etcd-1.etcd-headless.ns.svc.cluster.local:2379", "http://etcd-2.etcd-headless.ns.svc.cluster.local:2379"}
	fwd.pods = nil
	out, err = a.run(ctx, "etcd-0", true, eps, "endpoint status", []string{"endpoint", "status", "-w", "json"})
	if err != nil {
		t.Fatal(err)
	}
	sts, err := ParseEndpointStatus(out)
	if err != nil || len(sts) != 2 || sts[0].Leader != HexID(8420958219759036679) || sts[0].RaftIndex != 11 || sts[1].Endpoint != eps[1] || sts[0].Version != "3.6.8" {
		t.Fatalf("endpoint status: %v %+v", err, sts)
	}
	if strings.Join(fwd.pods, ",") != "etcd-1,etcd-2" {
		t.Errorf("endpoint status forwarded to %v, want each endpoint's own pod", fwd.pods)
	}
	out, err = a.run(ctx, "etcd-0", true, nil, "endpoint health", []string{"endpoint", "health", "--cluster", "-w", "json"})
	if err != nil {
		t.Fatal(err)
	}
	hs, err := ParseEndpointHealth(out)
	if err != nil || len(hs) != 3 || !hs[0].Healthy || !hs[2].Healthy {
		t.Fatalf("endpoint health: %v %+v", err, hs)
	}
	// An endpoint no pod advertises: etcdctl prints the others and fails.
	out, err = a.run(ctx, "etcd-0", true, append(eps, "http://elsewhere:2379"), "endpoint health", []string{"endpoint", "health", "-w", "json"})
	hs, perr := ParseEndpointHealth(out)
	if err == nil || perr != nil || len(hs) != 3 || hs[2].Healthy || !hs[0].Healthy {
		t.Fatalf("endpoint health with an unknown endpoint: %v %v %+v", err, perr, hs)
	}

	if _, err := a.run(ctx, "etcd-0", true, nil, "move-leader", []string{"move-leader", HexID(9000000000000000001)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.run(ctx, "etcd-0", true, nil, "move-leader", []string{"move-leader", "abc"}); err == nil || !strings.Contains(err.Error(), "bad leader transferee") {
		t.Fatalf("move-leader to a stranger: %v", err)
	}
	out, err = a.run(ctx, "etcd-0", true, nil, "user list", []string{"user", "list", "-w", "json"})
	if err != nil || !strings.Contains(string(out), `"root"`) {
		t.Fatalf("user list: %v %s", err, out)
	}
	// Without credentials etcd answers "user name is empty", as to etcdctl.
	_, err = a.run(ctx, "etcd-0", false, nil, "auth status", []string{"auth", "status", "-w", "json"})
	if !isCtlError(err, errTextNoUser) {
		t.Fatalf("auth status without credentials: %v", err)
	}

	// The password travels only in /v3/auth/authenticate's body.
	for _, b := range g.bodies {
		if strings.Contains(b, g.password) {
			t.Errorf("request body %s holds the password", b)
		}
	}
	if g.auths == 0 {
		t.Error("never authenticated")
	}
}

func TestAPICtlWrongPassword(t *testing.T) {
	g := newFakeGateway()
	a, _ := testAPICtl(t, g, "http://127.0.0.1:2379")
	a.creds = func() (string, []byte, string) { return "root", []byte("nope"), "s" }
	_, err := a.run(context.Background(), "etcd-0", true, nil, "user list", []string{"user", "list", "-w", "json"})
	if !isCtlError(err, errTextAuthFailed) || strings.Contains(err.Error(), "nope") {
		t.Fatalf("wrong password: %v", err)
	}
}

func TestForwardTarget(t *testing.T) {
	for _, tc := range []struct {
		listen, endpoint string
		scheme           string
		port             int
		refuse           string
	}{
		{listen: "http://0.0.0.0:2379", scheme: "http", port: 2379},
		{listen: "https://$(POD_IP):2379,https://127.0.0.1:22379", scheme: "https", port: 22379},
		{listen: "http://[::]:4001", scheme: "http", port: 4001},
		{listen: "https://$(POD_IP):2379", refuse: "port-forward cannot reach"},
		{listen: "https://$(POD_IP):2379", endpoint: "https://127.0.0.1:2379", scheme: "https", port: 2379},
	} {
		c := &corev1.Container{Args: []string{"--listen-client-urls=" + tc.listen}, Env: []corev1.EnvVar{{Name: "POD_IP",
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}}
		scheme, port, err := forwardTarget(newClientConn("ns", c, tc.endpoint), "etcd-0")
		if tc.refuse != "" {
			if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tc.refuse) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: want a one-line refusal with %q, got %v", tc.listen, tc.refuse, err)
			}
			continue
		}
		if err != nil || scheme != tc.scheme || port != tc.port {
			t.Errorf("%s: got %s %d %v, want %s %d", tc.listen, scheme, port, err, tc.scheme, tc.port)
		}
	}
}

// TestAPICtlTLS: over https the member's certificate is verified with the
// CA read from the Secret volume behind --trusted-ca-file and the host of
// the pod's advertised client URL; files not backed by a Secret refuse.
func TestAPICtlTLS(t *testing.T) {
	g := newFakeGateway()
	srv := httptest.NewTLSServer(g)
	t.Cleanup(srv.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	client := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "etcd-tls", Namespace: "ns"}, Data: map[string][]byte{"ca.crt": caPEM, "junk.crt": []byte("not a certificate")}})
	volumes := []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-tls"}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/etcd"}}}}
	mk := func(advertiseHost string) *corev1.Container {
		return &corev1.Container{Name: "etcd", Args: []string{"--listen-client-urls=https://0.0.0.0:2379", "--advertise-client-urls=https://" + advertiseHost + ":2379"},
			VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/tls"}, {Name: "host", MountPath: "/etc/etcd"}}}
	}
	creds := func() (string, []byte, string) { return "root", []byte(g.password), "s" }
	fwd := &fakeForwarder{addr: strings.TrimPrefix(srv.URL, "https://")}
	for _, tc := range []struct {
		name, host, ca, want string
		refused              bool // exit 5
	}{
		// httptest's certificate names example.com.
		{name: "verified", host: "example.com", ca: "/tls/ca.crt"},
		{name: "wrong server name", host: "etcd-0.other", ca: "/tls/ca.crt", want: "certificate is valid for"},
		{name: "CA on a hostPath", host: "example.com", ca: "/etc/etcd/ca.crt", want: "not a file of a Secret volume", refused: true},
		// The refusals of newAPICtl and open (hack/mutate/mutants.txt, "etcd, part 2").
		{name: "CA not known", host: "example.com", want: "its CA file is not known", refused: true},
		{name: "CA key missing from the Secret", host: "example.com", ca: "/tls/other.crt", want: `Secret etcd-tls has no key "other.crt"`, refused: true},
		{name: "CA file not PEM", host: "example.com", ca: "/tls/junk.crt", want: "the CA file /tls/junk.crt holds no PEM certificate", refused: true},
		{name: "no advertised host", host: "", ca: "/tls/ca.crt", want: "no advertised client URL names the host", refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mk(tc.host)
			a, err := newAPICtl(context.Background(), client, fwd, "ns", "etcd", c, volumes, newClientConn("ns", c, ""), tlsFiles{ca: tc.ca}, "etcd-0", creds)
			if err == nil {
				_, err = a.run(context.Background(), "etcd-0", true, nil, "user list", []string{"user", "list", "-w", "json"})
			}
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("want one line with %q, got %v", tc.want, err)
			}
			if tc.refused && ops.ExitCode(err) != ops.ExitPrecondition {
				t.Fatalf("exit %d, want %d: %v", ops.ExitCode(err), ops.ExitPrecondition, err)
			}
		})
	}
}

// TestAPICtlGatewayRefusesCommonName: etcd answers a gateway request whose client certificate
// carries a Common Name (client-cert-auth and auth on) with a plain-text HTTP 400; that is a
// one-line refusal saying what to use instead, not a quorum verdict.
func TestAPICtlGatewayRefusesCommonName(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What embed/serve.go writes (http.Error: text/plain, HTTP 400).
		http.Error(w, "CommonName of client sending a request against gateway will be ignored and not used as expected", http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	c := &corev1.Container{Args: []string{"--listen-client-urls=http://0.0.0.0:2379"}}
	a, err := newAPICtl(context.Background(), fake.NewClientset(), &fakeForwarder{addr: strings.TrimPrefix(srv.URL, "http://")}, "ns", "etcd", c, nil,
		newClientConn("ns", c, ""), tlsFiles{}, "etcd-0", func() (string, []byte, string) { return "root", []byte("pw"), "s" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.run(context.Background(), "etcd-0", true, nil, "user list", []string{"user", "list", "-w", "json"})
	if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), "Common Name") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want a one-line refusal about the Common Name, got %v", err)
	}
}

// TestEngineSwitchesToAPIWithoutStty: when etcdctl's password prompt fails for want of stty,
// the engine serves status and plans from etcd's gateway over the forwarder, with the password
// only in /v3/auth/authenticate; without a forwarder it refuses (TestAuthRefusals).
func TestEngineSwitchesToAPIWithoutStty(t *testing.T) {
	f := newFakeEtcd(3, 0)
	f.rootPassword = "s3cret"
	f.noStty = true
	fx := newFixture(t, 3, f, nil)
	fx.eng.Options = Options{AuthSecret: "s"}
	addSecret(t, fx, "s", map[string]string{"password": "s3cret"})
	g := newFakeGateway()
	fwd := &fakeForwarder{byPod: map[string]string{}}
	for i, id := range []uint64{8420958219759036679, 9000000000000000001, 9000000000000000002} {
		srv := httptest.NewServer(g.as(id))
		t.Cleanup(srv.Close)
		fwd.byPod[fmt.Sprintf("etcd-%d", i)] = strings.TrimPrefix(srv.URL, "http://")
	}
	fx.eng.Forward = fwd
	st, err := fx.eng.Status(context.Background(), fx.c)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Members) != 3 || st.HealthyVoters != 3 || st.LeaderID != HexID(8420958219759036679) || st.ByPod("etcd-2") == nil {
		t.Fatalf("status over the API: %+v", st)
	}
	if fwd.port != 2379 || len(fwd.pods) == 0 {
		t.Fatalf("forwards: port %d pods %v", fwd.port, fwd.pods)
	}
	four := int32(4)
	plan, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &four})
	if err != nil {
		t.Fatal(err)
	}
	if text := string(planText(t, plan)); !strings.Contains(text, "etcd API (http over a port-forward to the pod's client port 2379, user root") || strings.Contains(text, "s3cret") {
		t.Fatalf("plan does not name the API path, or shows the password:\n%s", text)
	}
	// The RBAC preflight checks the port-forwards before the lock is taken.
	pf := ops.Permission{Resource: "pods", Subresource: "portforward", Verb: "create"}
	if needs := plan.Needs(nil); len(plan.Steps) == 0 || !slices.ContainsFunc(needs, func(n ops.NeedFor) bool { return n.Permission == pf }) {
		t.Errorf("the plan over the API does not declare %+v: %+v", pf, needs)
	}
	withStdin := 0
	for _, x := range f.execs {
		if x.stdin != "" {
			withStdin++
		}
	}
	if withStdin > 2 {
		t.Errorf("%d etcdctl execs got the password after etcdctl could not take it", withStdin)
	}
	for _, b := range g.bodies {
		if strings.Contains(b, "s3cret") {
			t.Errorf("request body %s holds the password", b)
		}
	}
}
