//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// runEtcdSteps runs the CLI commands one after the other, each to convergence at want members.
func (x *realEtcd) runSteps(env []string, w *writer, steps []etcdStep) {
	x.t.Helper()
	for _, s := range steps {
		began := time.Now()
		res := runCLI(x.t, env, s.args...)
		x.t.Logf("%s: exit %d in %s", s.args[0], res.Code, time.Since(began).Round(time.Millisecond))
		if res.Code != 0 {
			w.stop()
			x.t.Fatalf("%v: %s", s.args, res)
		}
		if s.want > 0 {
			x.checkConverged(s.want)
		}
		for _, out := range s.out {
			if !strings.Contains(res.Stdout, out) {
				w.stop()
				x.t.Fatalf("%v: output lacks %q:\n%s", s.args, out, res.Stdout)
			}
		}
	}
}

type etcdStep struct {
	args []string
	want int      // members after the step (0: no check)
	out  []string // in stdout
}

// TestRealNodeEtcdTLS: a cluster serving clients and peers over TLS, requiring client
// certificates, listening for clients on its pod IP only, with its certificates mounted from a
// Secret. status, scale 3→4→3 and a rolling restart work with no etcd flag at all (the engine
// reads the member's own flags: advertised URL, --trusted-ca-file, --cert-file/--key-file, not
// the peer files), and status also with --etcd-cert/--etcd-key naming the client certificate.
func TestRealNodeEtcdTLS(t *testing.T) {
	needRealNodes(t)
	x := newRealEtcdIn(t, newNamespace(t))
	pki, err := testbed.NewEtcdPKI(x.ns, x.name, x.name+"-headless", 6)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bed.Client.CoreV1().Secrets(x.ns).Create(t.Context(), pki.Secret(x.ns, "etcd-tls"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"ca.crt": pki.CA, "client.crt": pki.ClientCert, "client.key": pki.ClientKey} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The test's own etcdctl dials pod IPs, which the certificates do not name.
	x.scheme = "https"
	x.flags = []string{"--cacert=" + filepath.Join(dir, "ca.crt"), "--cert=" + filepath.Join(dir, "client.crt"),
		"--key=" + filepath.Join(dir, "client.key"), "--insecure-skip-tls-verify"}
	x.deploy(testbed.RealEtcdTLSObjects(x.ns, x.name, 3, "etcd-tls"), 3)
	// Client certificates are really required: without one the member refuses.
	if out, err := (&realEtcd{t: t, ns: x.ns, name: x.name, etcdctl: x.etcdctl, scheme: "https",
		flags: []string{"--insecure-skip-tls-verify"}}).ctl(t.Context(), "member", "list"); err == nil {
		t.Fatalf("member list without a client certificate succeeded: %s", out)
	}
	w := x.startWriter()
	env := cliEnv(t)
	ns := []string{"-n", x.ns}
	x.runSteps(env, w, []etcdStep{
		{args: append([]string{"status", x.name}, ns...), out: []string{"healthyVoters: 3"}},
		{args: append([]string{"status", x.name, "--etcd-cert", testbed.EtcdTLSMountPath + "/client.crt", "--etcd-key", testbed.EtcdTLSMountPath + "/client.key"}, ns...),
			out: []string{"healthyVoters: 3"}},
		{args: append([]string{"scale", x.name, "--replicas", "4", "--yes", "--timeout", "170s"}, ns...), want: 4},
		{args: append([]string{"scale", x.name, "--replicas", "3", "--yes", "--timeout", "170s"}, ns...), want: 3},
		{args: append([]string{"restart", x.name, "--rolling", "--yes", "--timeout", "170s"}, ns...), want: 3},
	})
	acked, failed := w.stop()
	t.Logf("writes: %d acknowledged, %d failed", len(acked), failed)
	if len(acked) < 20 {
		t.Fatalf("only %d writes acknowledged: the load did not run", len(acked))
	}
	x.verify(acked)
}

// TestRealNodeEtcdAuth: a cluster with authentication enabled (root user with a password,
// `etcdctl auth enable`). status and scale without credentials say which flag is missing (scale
// exits 5 before any write); with --etcd-auth-secret naming a Secret, status, scale 3→4→3 and a rolling restart
// work. The password never appears in an exec argument nor in the API server's audit log, and
// every exec runs etcdctl itself, never a shell.
func TestRealNodeEtcdAuth(t *testing.T) {
	needRealNodes(t)
	x := newRealEtcd(t, 3)
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	pw := "pw-" + hex.EncodeToString(b)
	for _, args := range [][]string{{"user", "add", "root", "--new-user-password=" + pw}, {"auth", "enable"}} {
		if out, err := x.ctl(t.Context(), args...); err != nil {
			t.Fatalf("etcdctl %v: %v: %s", args[:2], err, out)
		}
	}
	x.flags = []string{"--user=root:" + pw}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "etcd-root", Namespace: x.ns}, Type: corev1.SecretTypeBasicAuth,
		StringData: map[string]string{"username": "root", "password": pw}}
	if _, err := bed.Client.CoreV1().Secrets(x.ns).Create(t.Context(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env := cliEnv(t)
	ns := []string{"-n", x.ns}

	res := runCLI(t, env, append([]string{"scale", x.name, "--replicas", "4", "--yes", "--timeout", "60s"}, ns...)...)
	if res.Code != 5 || !strings.Contains(res.Stderr, "--etcd-auth-secret") || strings.Count(strings.TrimSpace(res.Stderr), "\n") != 0 {
		t.Fatalf("scale without credentials: want exit 5 with one line naming --etcd-auth-secret, got %s", res)
	}
	if sts, err := bed.Client.AppsV1().StatefulSets(x.ns).Get(t.Context(), x.name, metav1.GetOptions{}); err != nil || *sts.Spec.Replicas != 3 {
		t.Fatalf("the refused scale changed the StatefulSet: %v", err)
	}
	if voters, learners := x.members(); len(voters) != 3 || len(learners) != 0 {
		t.Fatalf("the refused scale changed membership: %v %v", voters, learners)
	}

	res = runCLI(t, env, append([]string{"status", x.name}, ns...)...)
	if !strings.Contains(res.Stdout+res.Stderr, "--etcd-auth-secret") || strings.Contains(res.Stdout, "no-quorum") {
		t.Fatalf("status without credentials: want the missing --etcd-auth-secret named, not a quorum verdict: %s", res)
	}

	w := x.startWriter()
	auth := []string{"--etcd-auth-secret", "etcd-root"}
	x.runSteps(env, w, []etcdStep{
		{args: append(append([]string{"status", x.name}, ns...), auth...), out: []string{"healthyVoters: 3"}},
		{args: append(append([]string{"scale", x.name, "--replicas", "4", "--yes", "--timeout", "170s"}, ns...), auth...), want: 4},
		{args: append(append([]string{"scale", x.name, "--replicas", "3", "--yes", "--timeout", "170s"}, ns...), auth...), want: 3},
		{args: append(append([]string{"restart", x.name, "--rolling", "--yes", "--timeout", "170s"}, ns...), auth...), want: 3},
	})
	acked, failed := w.stop()
	t.Logf("writes: %d acknowledged, %d failed", len(acked), failed)
	if len(acked) < 20 {
		t.Fatalf("only %d writes acknowledged: the load did not run", len(acked))
	}
	x.verify(acked)

	assertSecretsNotAudited(t, pw)
	execs := auditedExecs(t, x.ns)
	withUser := 0
	for _, argv := range execs {
		if len(argv) == 0 || argv[0] != "etcdctl" {
			t.Errorf("exec in %s ran %q, want etcdctl itself (no shell)", x.ns, argv)
		}
		if slices.Contains(argv, "--user=root") {
			withUser++
		}
		for _, a := range argv {
			if strings.Contains(a, pw) {
				t.Errorf("exec argument %q holds the password", a)
			}
		}
	}
	if len(execs) == 0 || withUser == 0 {
		t.Fatalf("%d execs in %s, %d authenticated: the auth path was not exercised", len(execs), x.ns, withUser)
	}
	t.Logf("%d distinct exec commands in the audit log, %d with --user=root (password on stdin)", len(execs), withUser)
}

// auditedExecs returns the distinct commands of the execs into pods of ns the audit log recorded
// (one request appears once per audit stage).
func auditedExecs(t *testing.T, ns string) [][]string {
	t.Helper()
	events, err := bed.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	seen := map[string]bool{}
	for _, e := range events {
		if e.ObjectRef == nil || e.ObjectRef.Subresource != "exec" || e.ObjectRef.Namespace != ns || seen[e.RequestURI] {
			continue
		}
		seen[e.RequestURI] = true
		u, err := url.Parse(e.RequestURI)
		if err != nil {
			t.Fatalf("audit request URI %q: %v", e.RequestURI, err)
		}
		out = append(out, u.Query()["command"])
	}
	return out
}
