package etcd

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

var (
	envPodName = corev1.EnvVar{Name: "MY_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}
	envPodIP   = corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}
	envPodNS   = corev1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}
)

func TestEndpointFromMemberFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		env    []corev1.EnvVar
		option string
		podIP  string
		want   string
		err    string
	}{
		{name: "etcd defaults", want: "http://localhost:2379"},
		{name: "wildcard http on another port", args: []string{"--listen-client-urls=http://0.0.0.0:12379"}, want: "http://127.0.0.1:12379"},
		{name: "kubeadm: loopback and node IP, TLS, advertised IP", args: []string{
			"--listen-client-urls=https://127.0.0.1:2379,https://10.0.0.5:2379", "--advertise-client-urls=https://10.0.0.5:2379"},
			want: "https://10.0.0.5:2379"},
		{name: "TLS on the pod IP only, advertised DNS name", env: []corev1.EnvVar{envPodName, envPodIP, envPodNS}, args: []string{
			"--listen-client-urls=https://$(POD_IP):2379", "--advertise-client-urls=https://$(MY_POD_NAME).etcd-headless.$(POD_NAMESPACE).svc:2379"},
			podIP: "10.1.2.3", want: "https://etcd-1.etcd-headless.db.svc:2379"},
		{name: "Bitnami env: wildcard TLS", env: []corev1.EnvVar{envPodName,
			{Name: "ETCD_LISTEN_CLIENT_URLS", Value: "https://0.0.0.0:2379"},
			{Name: "ETCD_ADVERTISE_CLIENT_URLS", Value: "https://$(MY_POD_NAME).foo-etcd-headless.db.svc.cluster.local:2379"}},
			want: "https://etcd-1.foo-etcd-headless.db.svc.cluster.local:2379"},
		{name: "plain http on the pod IP only", env: []corev1.EnvVar{envPodIP}, args: []string{"--listen-client-urls=http://$(POD_IP):2379"},
			podIP: "10.1.2.3", want: "http://10.1.2.3:2379"},
		{name: "pod IP only, pod has no IP yet", env: []corev1.EnvVar{envPodIP}, args: []string{"--listen-client-urls=http://$(POD_IP):2379"},
			err: "has no IP yet"},
		{name: "unreachable listener", args: []string{"--listen-client-urls=http://10.9.9.9:2379"}, err: "none of these is reachable"},
		{name: "option wins", args: []string{"--listen-client-urls=http://10.9.9.9:2379"}, option: "https://x:1", want: "https://x:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &corev1.Container{Args: tc.args, Env: tc.env}
			cc := newClientConn("db", c, tc.option)
			cc.setPods(map[string]*corev1.Pod{"etcd-1": {Status: corev1.PodStatus{PodIP: tc.podIP}}})
			got, err := cc.endpointFor("etcd-1")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestClientTLSFilesNotPeerFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		opts Options
		want []string
		deny []string
		err  string
	}{
		{name: "client files, peer files ignored", args: []string{
			"--peer-trusted-ca-file=/p/ca.crt", "--peer-cert-file=/p/peer.crt", "--peer-key-file=/p/peer.key",
			"--trusted-ca-file=/c/ca.crt", "--cert-file=/c/server.crt", "--key-file=/c/server.key", "--client-cert-auth"},
			want: []string{"--cacert=/c/ca.crt", "--cert=/c/server.crt", "--key=/c/server.key"}, deny: []string{"/p/"}},
		{name: "client-cert-auth with only peer certificates", args: []string{
			"--client-cert-auth=true", "--trusted-ca-file=/c/ca.crt", "--peer-cert-file=/p/peer.crt", "--peer-key-file=/p/peer.key"},
			err: "requires client certificates"},
		{name: "client-cert-auth, options name the client certificate", args: []string{
			"--client-cert-auth", "--trusted-ca-file=/c/ca.crt"}, opts: Options{Cert: "/c/client.crt", Key: "/c/client.key"},
			want: []string{"--cacert=/c/ca.crt", "--cert=/c/client.crt", "--key=/c/client.key"}},
		{name: "certificate without key", args: []string{"--trusted-ca-file=/c/ca.crt"}, opts: Options{Cert: "/c/client.crt"}, err: "go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{Options: tc.opts}
			x, err := e.newCtl("db", "etcd", &corev1.Container{Name: "etcd", Args: tc.args})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("got %v, want one line with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			argv, _, err := x.argv("etcd-0", true, []string{"member", "list"})
			if err != nil {
				t.Fatal(err)
			}
			line := strings.Join(argv, " ")
			for _, w := range tc.want {
				if !slices.Contains(argv, w) {
					t.Errorf("argv %q lacks %q", line, w)
				}
			}
			for _, d := range tc.deny {
				if strings.Contains(line, d) {
					t.Errorf("argv %q uses %q", line, d)
				}
			}
		})
	}
}

// A client-cert-auth member without a known client certificate is refused
// before anything is written or executed.
func TestClientCertAuthRefusedBeforeAnyWrite(t *testing.T) {
	f := newFakeEtcd(3, 0)
	fx := newFixture(t, 3, f, func(c *corev1.Container, _ map[string]string) {
		c.Args = []string{"--client-cert-auth", "--trusted-ca-file=/c/ca.crt", "--peer-cert-file=/p/a", "--peer-key-file=/p/b"}
	})
	five := int32(5)
	_, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &five})
	if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), "--etcd-cert") {
		t.Fatalf("got %v", err)
	}
	if len(f.execs) != 0 || len(fakecluster.Writes(fx.client)) != 0 {
		t.Errorf("refusal ran %d execs, wrote %v", len(f.execs), fakecluster.Writes(fx.client))
	}
}

func addSecret(t *testing.T, fx *fixture, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	if _, err := fx.client.CoreV1().Secrets(testNS).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fx.client.ClearActions()
}

// With auth enabled, the root password comes from the Secret and reaches
// etcdctl only on stdin: never in an argument, never through a shell.
func TestAuthPasswordOnStdinOnly(t *testing.T) {
	const pw = "pw-Zq9-secret"
	bitnami := func(c *corev1.Container, _ map[string]string) {
		c.Env = append(c.Env, corev1.EnvVar{Name: "ETCD_ROOT_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "foo-etcd"}, Key: "etcd-root-password"}}})
	}
	bitnamiFile := func(c *corev1.Container, _ map[string]string) {
		c.Env = append(c.Env, corev1.EnvVar{Name: "ETCD_ROOT_PASSWORD_FILE", Value: "/opt/bitnami/etcd/secrets/etcd-root-password"})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "etcd-secrets", MountPath: "/opt/bitnami/etcd/secrets"})
	}
	for _, tc := range []struct {
		name    string
		mutate  func(*corev1.Container, map[string]string)
		volumes []corev1.Volume
		opts    Options
		secret  string
		data    map[string]string
	}{
		{name: "--etcd-auth-secret, basic-auth keys", opts: Options{AuthSecret: "etcd-root"}, secret: "etcd-root",
			data: map[string]string{"username": "root", "password": pw}},
		{name: "--etcd-auth-secret with a key", opts: Options{AuthSecret: "creds/rootpw"}, secret: "creds", data: map[string]string{"rootpw": pw}},
		{name: "Bitnami chart Secret", mutate: bitnami, secret: "foo-etcd", data: map[string]string{"etcd-root-password": pw}},
		{name: "Bitnami chart password file", mutate: bitnamiFile, secret: "foo-etcd", data: map[string]string{"etcd-root-password": pw},
			volumes: []corev1.Volume{{Name: "etcd-secrets", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "foo-etcd"}}}}},
		{name: "password file of a projected Secret item", mutate: bitnamiFile, secret: "creds", data: map[string]string{"root": pw},
			volumes: []corev1.Volume{{Name: "etcd-secrets", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"},
					Items: []corev1.KeyToPath{{Key: "root", Path: "etcd-root-password"}}}}}}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEtcd(3, 0)
			f.rootPassword = pw
			// A learner left by an interrupted scale-up: removing it is a
			// membership change that needs root.
			f.members = append(f.members, &fakeMember{id: 0x99, peer: "http://127.0.3.4:2380", learner: true})
			fx := newFixture(t, 3, f, tc.mutate)
			ops.StatefulSetOf(fx.c.Groups[0]).Spec.Template.Spec.Volumes = tc.volumes
			fx.eng.Options = tc.opts
			addSecret(t, fx, tc.secret, tc.data)
			three := int32(3)
			p, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &three})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(planText(t, p)), pw) {
				t.Error("the plan shows the password")
			}
			if err := (&ops.Executor{LockID: "test"}).Run(testCtx(t), p); err != nil {
				t.Fatal(err)
			}
			if len(f.members) != 3 {
				t.Fatalf("members after scale: %d", len(f.members))
			}
			sent := 0
			for _, x := range f.execs {
				if x.argv[0] != "etcdctl" || strings.Contains(strings.Join(x.argv, " "), pw) {
					t.Errorf("exec %q: not etcdctl, or the password is an argument", x.argv)
				}
				if x.stdin != "" {
					sent++
					if x.stdin != pw+"\n" || !slices.Contains(x.argv, "--user=root") {
						t.Errorf("exec %q with stdin %q", x.argv, x.stdin)
					}
				}
			}
			if sent == 0 {
				t.Error("the password was never sent")
			}
		})
	}
}

func TestAuthRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		data map[string]string
		code int
		want string
		// noStty: etcdctl cannot prompt for the password.
		noStty bool
	}{
		{name: "auth enabled, no credentials", code: ops.ExitPrecondition, want: "--etcd-auth-secret"},
		{name: "wrong password", opts: Options{AuthSecret: "s"}, data: map[string]string{"password": "nope"}, code: ops.ExitPrecondition, want: "rejects the credentials of user root (Secret s key password (--etcd-auth-secret)): authentication failed"},
		{name: "Secret missing", opts: Options{AuthSecret: "gone"}, code: ops.ExitUsage, want: "not found"},
		{name: "key missing", opts: Options{AuthSecret: "s/other"}, data: map[string]string{"password": "pw"}, code: ops.ExitUsage, want: `no key "other"`},
		{name: "password with a newline", opts: Options{AuthSecret: "s"}, data: map[string]string{"password": "pw\nx"}, code: ops.ExitUsage, want: "line break"},
		{name: "user not root", opts: Options{AuthSecret: "s"}, data: map[string]string{"username": "bob", "password": "bobpw"}, code: ops.ExitPrecondition, want: "user bob (Secret s key password (--etcd-auth-secret)) is not root (user list: permission denied)"},
		{name: "image without stty", opts: Options{AuthSecret: "s"}, data: map[string]string{"password": "pw"}, noStty: true, code: ops.ExitPrecondition, want: "a certificate whose CN is root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEtcd(3, 0)
			f.rootPassword = "pw"
			f.users = map[string]string{"bob": "bobpw"}
			f.noStty = tc.noStty
			fx := newFixture(t, 3, f, nil)
			fx.eng.Options = tc.opts
			if tc.data != nil {
				addSecret(t, fx, "s", tc.data)
			}
			two := int32(2)
			_, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &two})
			if ops.ExitCode(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v (exit %d), want exit %d, one line with %q", err, ops.ExitCode(err), tc.code, tc.want)
			}
			if strings.Contains(err.Error(), "nope") {
				t.Error("the refusal shows the password")
			}
			if w := fakecluster.Writes(fx.client); len(w) != 0 {
				t.Errorf("refusal wrote %v", w)
			}
			if m := f.mutations(); len(m) != 0 {
				t.Errorf("refusal changed membership: %v", m)
			}
		})
	}
	// status without credentials says what is missing instead of a quorum verdict.
	f := newFakeEtcd(3, 0)
	f.rootPassword = "pw"
	fx := newFixture(t, 3, f, nil)
	if h, err := fx.eng.Health(context.Background(), fx.c); err == nil || !strings.Contains(err.Error(), "--etcd-auth-secret") {
		t.Fatalf("health without credentials: %v, %v", h, err)
	}
	fx.eng.Options.AuthSecret = "s"
	addSecret(t, fx, "s", map[string]string{"password": "pw"})
	if h, err := fx.eng.Health(context.Background(), fx.c); err != nil || h.Status != "healthy" {
		t.Fatalf("health with credentials: %v, %v", h, err)
	}
}

// A member whose live client URLs differ from what its pod's spec
// advertises is refused before any write.
func TestAdvertisedClientURLMismatchRefused(t *testing.T) {
	f := newFakeEtcd(3, 0)
	fx := newFixture(t, 3, f, func(c *corev1.Container, _ map[string]string) {
		c.Env = append(c.Env, envPodName)
		c.Args = []string{"--listen-client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://$(MY_POD_NAME).etcd-headless:2379"}
	})
	two := int32(2)
	_, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &two})
	if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), "advertises client URLs http://127.0.3.1:2379") {
		t.Fatalf("got %v", err)
	}
	if m := f.mutations(); len(m) != 0 || len(fakecluster.Writes(fx.client)) != 0 {
		t.Errorf("refusal changed something: %v", m)
	}
	// Matching URLs pass.
	for _, m := range f.members {
		m.client = "http://" + m.name + ".etcd-headless:2379"
	}
	if _, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &two}); err != nil {
		t.Fatal(err)
	}
}

// With auth on, a started learner's status cannot be read (etcd refuses
// Authenticate on learners and etcdctl --cluster fails as a whole): the
// voters are asked by their client URLs, the learner is marked, and
// promotion relies on etcd's own in-sync check.
func TestAuthLearnerStatusHidden(t *testing.T) {
	f := newFakeEtcd(3, 0)
	f.rootPassword = "pw"
	f.members = append(f.members, &fakeMember{id: 0x99, name: "etcd-3", peer: "http://127.0.3.4:2380", client: "http://127.0.3.4:2379",
		learner: true, healthy: true, index: 100})
	fx := newFixture(t, 4, f, nil)
	fx.eng.Options.AuthSecret = "s"
	addSecret(t, fx, "s", map[string]string{"password": "pw"})
	_, st, err := fx.eng.prepare(context.Background(), fx.c)
	if err != nil {
		t.Fatal(err)
	}
	if !st.HasQuorum || st.HealthyVoters != 3 {
		t.Fatalf("status: %s", st.Summary())
	}
	m := st.ByPod("etcd-3")
	if m == nil || !m.StatusHidden || !m.Learner {
		t.Fatalf("learner: %+v", m)
	}
	four := int32(4)
	p, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &four})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&ops.Executor{LockID: "test"}).Run(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
	if f.members[3].learner {
		t.Error("the learner was not promoted")
	}
	for _, x := range f.execs {
		if slices.Contains(x.argv, "--cluster") && x.stdin != "" {
			t.Errorf("authenticated --cluster call %q", x.argv)
		}
	}
}
