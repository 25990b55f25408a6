//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/testbed"
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
