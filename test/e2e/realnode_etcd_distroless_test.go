//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// TestRealNodeEtcdDistrolessAuth: an auth-enabled cluster on an image without shell and stty
// (testbed.ImageEtcdDistroless, like the official distroless etcd image), where etcdctl cannot
// take the password on stdin. With only --etcd-auth-secret, status, scale 3→4→3 and a rolling
// restart work through etcd's v3 gateway over a port-forward; writes continue and none is
// lost; the password appears in no audit record, exec argument, output or event.
func TestRealNodeEtcdDistrolessAuth(t *testing.T) {
	needRealNodes(t)
	x := newRealEtcdIn(t, newNamespace(t))
	objs := testbed.RealEtcdObjects(x.ns, x.name, 3)
	objs.StatefulSet.Spec.Template.Spec.Containers[0].Image = testbed.ImageEtcdDistroless
	x.deploy(objs, 3)
	ctx := t.Context()
	pods := x.waitReady(3)
	// The image really has neither a shell nor stty.
	for _, argv := range [][]string{{"sh", "-c", "true"}, {"stty", "-a"}, {"/bin/stty", "-a"}} {
		if _, _, err := kube.Exec(ctx, bed.RESTConfig, bed.Client, x.ns, pods[0].Name, "etcd", argv, nil); err == nil {
			t.Fatalf("exec %q in the distroless image succeeded", argv)
		}
	}

	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	pw := "pw-" + hex.EncodeToString(b)
	for _, args := range [][]string{{"user", "add", "root", "--new-user-password=" + pw}, {"auth", "enable"}} {
		if out, err := x.ctl(ctx, args...); err != nil {
			t.Fatalf("etcdctl %v: %v: %s", args[:2], err, out)
		}
	}
	x.flags = []string{"--user=root:" + pw}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "etcd-root", Namespace: x.ns}, Type: corev1.SecretTypeBasicAuth,
		StringData: map[string]string{"username": "root", "password": pw}}
	if _, err := bed.Client.CoreV1().Secrets(x.ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// etcdctl itself cannot take the password on stdin here: its prompt fails for want of stty.
	_, stderr, err := kube.Exec(ctx, bed.RESTConfig, bed.Client, x.ns, pods[0].Name, "etcd",
		[]string{"etcdctl", "--user=root", "user", "list"}, strings.NewReader(pw+"\n"))
	var xe *kube.ExitError
	if errors.As(err, &xe) && len(stderr) == 0 {
		stderr = xe.Stderr
	}
	if err == nil || !strings.Contains(string(stderr), "stty") && !strings.Contains(string(stderr), "failed turning off console echo") {
		t.Fatalf("etcdctl --user=root with the password on stdin: want the stty failure, got %v: %s", err, stderr)
	}
	t.Logf("etcdctl's prompt without stty: %s", strings.Join(strings.Fields(string(stderr)), " "))
	probes := 4 // the test's own execs above

	env := cliEnv(t)
	ns := []string{"-n", x.ns}
	auth := []string{"--etcd-auth-secret", "etcd-root"}

	// The plan says what serves the commands, without the password.
	res := runCLI(t, env, append(append([]string{"scale", x.name, "--replicas", "4", "--dry-run"}, ns...), auth...)...)
	if res.Code != 0 || !strings.Contains(res.Stdout, "etcd API (http over a port-forward") || strings.Contains(res.Stdout+res.Stderr, pw) {
		t.Fatalf("dry-run scale: want the etcd API path named and no password: %s", res)
	}

	w := x.startWriter()
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

	res = runCLI(t, env, append(append([]string{"status", x.name, "-o", "json"}, ns...), auth...)...)
	if res.Code != 0 || strings.Contains(res.Stdout+res.Stderr, pw) {
		t.Fatalf("status -o json: %s", res)
	}
	assertSecretsNotAudited(t, pw)
	execs := auditedExecs(t, x.ns)
	if len(execs) < probes {
		t.Fatalf("%d execs audited, fewer than the test's own %d", len(execs), probes)
	}
	for _, argv := range execs[probes:] {
		if len(argv) == 0 || argv[0] != "etcdctl" {
			t.Errorf("exec in %s ran %q, want etcdctl itself (no shell)", x.ns, argv)
		}
		for _, a := range argv {
			if strings.Contains(a, pw) {
				t.Errorf("exec argument %q holds the password", a)
			}
		}
	}
	if n := auditedPortForwards(t, x.ns); n == 0 {
		t.Fatal("no port-forward into the etcd pods: the etcd API path was not exercised")
	} else {
		t.Logf("%d port-forwards into the etcd pods", n)
	}
	evs, err := bed.Client.CoreV1().Events(x.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, pw) || strings.Contains(e.Reason, pw) {
			t.Errorf("event %s/%s holds the password", e.Namespace, e.Name)
		}
	}
}

// auditedPortForwards counts the audit records of port-forward requests into pods of ns (each
// request is recorded once per audit stage).
func auditedPortForwards(t *testing.T, ns string) int {
	t.Helper()
	events, err := bed.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if e.ObjectRef != nil && e.ObjectRef.Subresource == "portforward" && e.ObjectRef.Namespace == ns {
			n++
		}
	}
	return n
}

// TestRealNodeEtcdDistrolessTLSAuth: TestRealNodeEtcdTLS's layout (https for clients and peers,
// client certificates required, certificates from a Secret volume) on the image without stty,
// with auth enabled and the password from --etcd-auth-secret. While the member listens for
// clients only on its pod IP, the etcd API path cannot be reached and the tool refuses in one
// line before any write; once the members also listen on 127.0.0.1, the member's own client
// certificate (which has a Common Name, refused by etcd's gateway with --client-cert-auth and
// auth on) is refused in one line, and with --etcd-cert/--etcd-key naming a certificate without
// one, status, scale 3→4→3 and a rolling restart work over https port-forwards: the server
// verified with the CA read from the Secret and the advertised DNS name, the client certificate
// read from the Secret and presented.
func TestRealNodeEtcdDistrolessTLSAuth(t *testing.T) {
	needRealNodes(t)
	x := newRealEtcdIn(t, newNamespace(t))
	ctx := t.Context()
	pki, err := testbed.NewEtcdPKI(x.ns, x.name, x.name+"-headless", 6)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bed.Client.CoreV1().Secrets(x.ns).Create(ctx, pki.Secret(x.ns, "etcd-tls"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"ca.crt": pki.CA, "client.crt": pki.ClientCert, "client.key": pki.ClientKey} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	x.scheme = "https"
	x.flags = []string{"--cacert=" + filepath.Join(dir, "ca.crt"), "--cert=" + filepath.Join(dir, "client.crt"),
		"--key=" + filepath.Join(dir, "client.key"), "--insecure-skip-tls-verify"}
	objs := testbed.RealEtcdTLSObjects(x.ns, x.name, 3, "etcd-tls")
	objs.StatefulSet.Spec.Template.Spec.Containers[0].Image = testbed.ImageEtcdDistroless
	x.deploy(objs, 3)

	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	pw := "pw-" + hex.EncodeToString(b)
	for _, args := range [][]string{{"user", "add", "root", "--new-user-password=" + pw}, {"auth", "enable"}} {
		if out, err := x.ctl(ctx, args...); err != nil {
			t.Fatalf("etcdctl %v: %v: %s", args[:2], err, out)
		}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "etcd-root", Namespace: x.ns}, Type: corev1.SecretTypeBasicAuth,
		StringData: map[string]string{"username": "root", "password": pw}}
	if _, err := bed.Client.CoreV1().Secrets(x.ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env := cliEnv(t)
	ns := []string{"-n", x.ns}
	auth := []string{"--etcd-auth-secret", "etcd-root"}

	res := runCLI(t, env, append(append([]string{"scale", x.name, "--replicas", "4", "--yes", "--timeout", "60s"}, ns...), auth...)...)
	if res.Code != 5 || !strings.Contains(res.Stderr, "port-forward cannot reach") || strings.Count(strings.TrimSpace(res.Stderr), "\n") != 0 {
		t.Fatalf("scale of a member listening only on its pod IP: want exit 5 with one line saying a port-forward cannot reach it, got %s", res)
	}
	if sts, err := bed.Client.AppsV1().StatefulSets(x.ns).Get(ctx, x.name, metav1.GetOptions{}); err != nil || *sts.Spec.Replicas != 3 {
		t.Fatalf("the refused scale changed the StatefulSet: %v", err)
	}
	if voters, learners := x.members(); len(voters) != 3 || len(learners) != 0 {
		t.Fatalf("the refused scale changed membership: %v %v", voters, learners)
	}

	// Listen on the loopback too; the StatefulSet controller rolls the pods.
	sts, err := bed.Client.AppsV1().StatefulSets(x.ns).Get(ctx, x.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := &sts.Spec.Template.Spec.Containers[0]
	for i, a := range c.Args {
		if strings.HasPrefix(a, "--listen-client-urls=") {
			c.Args[i] = a + ",https://127.0.0.1:2379"
		}
	}
	if _, err := bed.Client.AppsV1().StatefulSets(x.ns).Update(ctx, sts, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods(t, x.ns, x.selector(), 3, func(p *corev1.Pod) bool {
		return testbed.PodReady(p) && p.DeletionTimestamp == nil && strings.Contains(strings.Join(p.Spec.Containers[0].Args, " "), "https://127.0.0.1:2379")
	})

	// The member's own client certificate (--cert-file) has a Common Name, which etcd's gateway
	// refuses with --client-cert-auth and auth on: one line saying what to use instead.
	res = runCLI(t, env, append(append([]string{"scale", x.name, "--replicas", "4", "--yes", "--timeout", "60s"}, ns...), auth...)...)
	if res.Code != 5 || !strings.Contains(res.Stderr, "Common Name") || strings.Count(strings.TrimSpace(res.Stderr), "\n") != 0 {
		t.Fatalf("scale with the member's own certificate over the gateway: want exit 5 with one line about the Common Name, got %s", res)
	}
	if voters, learners := x.members(); len(voters) != 3 || len(learners) != 0 {
		t.Fatalf("the refused scale changed membership: %v %v", voters, learners)
	}

	// A client certificate without a Common Name, from the Secret the pods mount.
	auth = append(auth, "--etcd-cert", testbed.EtcdTLSMountPath+"/client-nocn.crt", "--etcd-key", testbed.EtcdTLSMountPath+"/client-nocn.key")
	w := x.startWriter()
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
	res = runCLI(t, env, append(append([]string{"scale", x.name, "--replicas", "4", "--dry-run"}, ns...), auth...)...)
	if res.Code != 0 || !strings.Contains(res.Stdout, "etcd API (https over a port-forward") || strings.Contains(res.Stdout+res.Stderr, pw) {
		t.Fatalf("dry-run scale: want the etcd API path over https named and no password: %s", res)
	}
	assertSecretsNotAudited(t, pw)
	if n := auditedPortForwards(t, x.ns); n == 0 {
		t.Fatal("no port-forward into the etcd pods: the etcd API path was not exercised")
	}
}
